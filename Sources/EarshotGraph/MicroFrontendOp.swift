import CEarshotKernels
import EarshotFeatures

/// `MicroFrontend` (samples, noise, pending, started) → (features, noise, pending, started):
/// TensorFlow Lite Micro's audio front end as a graph op, its state in state tensors, grouping
/// frames as pymicro-wakeword groups them for a model that takes `stride` frames per step.
///
/// A step's samples are 320 of context then 160 × stride new ones (audio in [-1, 1], taken as
/// int16); frame j reads the 480 from 160 j. pymicro-wakeword's first frame is the stream's first
/// 480 samples and its model steps on frames [stride g, stride (g + 1)), so the frames of a step
/// are its group's last two and the next group's first stride - 2 (kept in `pending` [stride - 2,
/// 40]). The features of step s are group s - 1: the first step (started 0) has no group, only
/// real frames (from the third on) update the noise estimates, and its features are zeros (the
/// importer holds the model's state at its first values on that step). `noise` keeps each
/// channel's 32-bit estimate as two 16-bit halves [80].
enum MicroFrontendOp {
    static func strides(samples: Int) -> Int? {
        let extra = samples - (MicroFrontend.windowSamples - MicroFrontend.stepSamples)
        guard extra > 0, extra % MicroFrontend.stepSamples == 0, extra / MicroFrontend.stepSamples >= MicroFrontend.contextFrames else { return nil }
        return extra / MicroFrontend.stepSamples
    }

    /// One stream's step, on raw pointers (the reference kernel and the compiled step share it).
    static func step(samples: UnsafePointer<Float>, count: Int, noise: UnsafePointer<Float>, pending: UnsafePointer<Float>, started: Float,
                     features: UnsafeMutablePointer<Float>, noiseOut: UnsafeMutablePointer<Float>, pendingOut: UnsafeMutablePointer<Float>,
                     startedOut: UnsafeMutablePointer<Float>) {
        guard let stride = strides(samples: count) else { return }
        let channels = MicroFrontend.channels
        withUnsafeTemporaryAllocation(of: Int16.self, capacity: count) { pcm in
            earshot_pcm16(samples, count, pcm.baseAddress!)
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: channels) { estimate in
                earshot_microfrontend_estimates(noise, 1, 0, estimate.baseAddress!)
                withUnsafeTemporaryAllocation(of: UInt16.self, capacity: channels * stride) { frames in
                    let first = started != 0 ? 0 : MicroFrontend.contextFrames  // before the stream's third frame, the context is not audio
                    for j in first..<stride {
                        MicroFrontend.frame(pcm.baseAddress! + j * MicroFrontend.stepSamples, noise: estimate.baseAddress!,
                                            into: frames.baseAddress! + j * channels)
                    }
                    earshot_microfrontend_finish(frames.baseAddress!, estimate.baseAddress!, stride, 1, 0, started != 0 ? 1 : 0,
                                                 MicroFrontend.featureScale, pending, features, pendingOut, noiseOut)
                }
            }
        }
        startedOut.pointee = 1
    }

    static let lanes = MicroFrontend.lanes

    /// Bytes of scratch that `steps` needs for steps of `count` samples.
    static func lanesScratch(count: Int) -> Int {
        let stride = strides(samples: count) ?? 0, channels = MicroFrontend.channels
        return MicroFrontend.lanesScratchBytes + 64 + lanes * (2 * count + 4 * channels + 2 * stride * channels)
    }

    /// The steps of `streams.count` streams that have all started, `lanes` at a time, each
    /// exactly as `step` computes it alone. `streams[l]`: stream l's places.
    static func steps(count: Int, scratch: UnsafeMutableRawPointer, streams: Int,
                      _ places: (Int) -> (samples: UnsafePointer<Float>, noise: UnsafePointer<Float>, pending: UnsafePointer<Float>,
                                          features: UnsafeMutablePointer<Float>, noiseOut: UnsafeMutablePointer<Float>,
                                          pendingOut: UnsafeMutablePointer<Float>, startedOut: UnsafeMutablePointer<Float>)) {
        guard let stride = strides(samples: count), streams > 0 else { return }
        let channels = MicroFrontend.channels
        let base = scratch + (64 - Int(bitPattern: scratch) % 64) % 64
        let work = base, rest = base + MicroFrontend.lanesScratchBytes
        let pcm = rest.bindMemory(to: Int16.self, capacity: lanes * count)
        let estimates = (rest + 2 * lanes * count).bindMemory(to: UInt32.self, capacity: lanes * channels)
        // A block's frames [stride][channels][lanes], as the lanes kernel gives them.
        let frames = (rest + 2 * lanes * count + 4 * lanes * channels).bindMemory(to: UInt16.self, capacity: lanes * stride * channels)
        withUnsafeTemporaryAllocation(of: UnsafePointer<Int16>?.self, capacity: lanes) { pointers in
            for first in Swift.stride(from: 0, to: streams, by: lanes) {
                let members = Swift.min(lanes, streams - first)
                for l in 0..<lanes {
                    // Lanes past the last stream repeat it; their results are not kept.
                    let p = places(first + Swift.min(l, members - 1))
                    earshot_pcm16(p.samples, count, pcm + l * count)
                    earshot_microfrontend_estimates(p.noise, lanes, l, estimates)
                }
                for j in 0..<stride {
                    for l in 0..<lanes { pointers[l] = UnsafePointer(pcm + l * count + j * MicroFrontend.stepSamples) }
                    MicroFrontend.frames(lanes: pointers.baseAddress!, noise: estimates, into: frames + j * channels * lanes, scratch: work)
                }
                for l in 0..<members {
                    let p = places(first + l)
                    earshot_microfrontend_finish(frames, estimates, stride, lanes, l, 1, MicroFrontend.featureScale, p.pending, p.features,
                                                 p.pendingOut, p.noiseOut)
                    p.startedOut.pointee = 1
                }
            }
        }
    }

    /// The reference kernel.
    static func run(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["samples", "noise", "pending", "started"], required: 4, attributes: [])
        let x = try n.input(0, "samples", [.float32]), noise = try n.input(1, "noise", [.float32])
        let pending = try n.input(2, "pending", [.float32]), started = try n.input(3, "started", [.float32])
        guard let stride = strides(samples: x.count) else {
            let context = MicroFrontend.windowSamples - MicroFrontend.stepSamples
            throw n.error("samples hold \(x.count) values; the front end takes \(context) of context and \(MicroFrontend.stepSamples) × stride "
                          + "(\(MicroFrontend.contextFrames) or more) new ones")
        }
        let channels = MicroFrontend.channels
        guard noise.count == 2 * channels, pending.count == (stride - MicroFrontend.contextFrames) * channels, started.count == 1 else {
            throw n.error("noise \(noise.shape), pending \(pending.shape) and started \(started.shape) must hold \(2 * channels), "
                          + "\((stride - MicroFrontend.contextFrames) * channels) and 1 values")
        }
        var features = [Float](repeating: 0, count: stride * channels)
        var noiseOut = [Float](repeating: 0, count: 2 * channels), pendingOut = [Float](repeating: 0, count: pending.count)
        var startedOut: Float = 0
        x.floats.withUnsafeBufferPointer { s in
            noise.floats.withUnsafeBufferPointer { nz in
                pending.floats.withUnsafeBufferPointer { p in
                    step(samples: s.baseAddress!, count: s.count, noise: nz.baseAddress!, pending: p.baseAddress ?? nz.baseAddress!,
                         started: started.floats[0], features: &features, noiseOut: &noiseOut, pendingOut: &pendingOut, startedOut: &startedOut)
                }
            }
        }
        return [GraphTensor(shape: [1, stride, channels], floats: features), GraphTensor(shape: noise.shape, floats: noiseOut),
                GraphTensor(shape: pending.shape, floats: pendingOut), GraphTensor(shape: started.shape, floats: [startedOut])]
    }
}
