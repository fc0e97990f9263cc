import CEarshotKernels
import EarshotFeatures
import EarshotGraph
import Foundation

/// A chain of layers' forward pass: the front end, the layers, the outputs, in a pooled workspace.
extension Model {
    /// Runs `body` with a workspace no other step is using: one from the model's pool, or a new
    /// one when every pooled one is busy. The pool keeps as many as ran at once.
    func withWorkspace<R>(_ body: (inout Workspace) throws(ModelError) -> R) throws(ModelError) -> R {
        let box: WorkspaceBox
        if let pooled = workspaces.withLock({ $0.popLast() }) {
            box = pooled
        } else {
            // A graph takes raw samples: no spectrum analyzer.
            box = WorkspaceBox(Workspace(analyzer: graph == nil ? try makeAnalyzer() : nil, layers: layers.count))
        }
        defer { workspaces.withLock { $0.append(box) } }
        return try body(&box.workspace)
    }

    func makeAnalyzer() throws(ModelError) -> SpectrumAnalyzer {
        do {
            return try SpectrumAnalyzer(config: frontEnd, paddedWindow: window, planning: fftPlanning)
        } catch {
            throw .layer(path: path, layer: "frontEnd", reason: "\(error)")
        }
    }

    /// The network on `streams` streams, one step each: stream b's new samples are `block(b)`,
    /// its context `context(b)`, its carry at `carries + b * stateCount`, its scores go to
    /// `scores + b * labels.count`. Works in `ws` only: no allocation once it has run this many.
    func forward(streams: Int, block: (Int) -> [Float], context: (Int) -> [Float], carries: UnsafeMutablePointer<Float>,
                 scores: UnsafeMutablePointer<Float>, workspace ws: inout Workspace) {
        guard let analyzer = ws.analyzer else { preconditionFailure("a layer network's workspace always has its analyzer") }
        frontEnd(streams: streams, block: block, context: context, into: &ws.buffers[0], padded: &ws.padded, analyzer: analyzer)
        output(&ws.buffers[runLayers(layers.indices, carries: carries, workspace: &ws)], into: scores)
    }

    /// Layers `range` on the activations in `ws.buffers[range.lowerBound]`; returns the index of
    /// the buffer holding the result. Layer i writes buffer i + 1; activations work in place.
    /// `carries` as for `forward` (nil: the layers have no state).
    func runLayers(_ range: Range<Int>, carries: UnsafeMutablePointer<Float>?, workspace ws: inout Workspace) -> Int {
        var source = range.lowerBound
        for i in range {
            let layer = layers[i]
            if case let .activation(activation) = layer {
                activation.apply(&ws.buffers[source])  // in place
                continue
            }
            let states = layer.stateCount > 0 ? StateRows(base: carries.map { $0 + stateOffsets[i] }, stride: stateCount) : .none
            layer.run(ws.buffers[source], into: &ws.buffers[i + 1], states: states, scratch: &ws.scratch[i])
            source = i + 1
        }
        return source
    }

    /// Where each position of a padded block (padLeft + context + block + padRight) reads from in
    /// context + block; -1 for a zero.
    static func padSource(contextAndBlock L: Int, padLeft: Int, padRight: Int, reflect: Bool) -> [Int] {
        (0..<(padLeft + L + padRight)).map { i in
            var j = i - padLeft
            if j < 0 || j >= L {
                guard reflect, L > 1 else { return -1 }
                let period = 2 * (L - 1)
                j %= period
                if j < 0 { j += period }
                if j >= L { j = period - j }
            }
            return j
        }
    }

    /// The front end for `streams` blocks (each after its context, padded): the spectra of their
    /// frames, column by column ([streams][frames][bins]), into `out`.
    func frontEnd(streams: Int, block: (Int) -> [Float], context: (Int) -> [Float], into out: inout Activations,
                  padded: inout [Float], analyzer: SpectrumAnalyzer) {
        let c = manifest.audio.contextSamples, total = padSource.count
        let frames = frontEnd.frameCount(forSamples: total), bins = frontEnd.binCount, hop = frontEnd.hopLength, nFFT = frontEnd.nFFT
        out.reshape(channels: bins, time: frames, batch: streams)
        padded.setCount(total)
        out.values.withUnsafeMutableBufferPointer { o in
            padded.withUnsafeMutableBufferPointer { p in
                padSource.withUnsafeBufferPointer { source in
                    let L = total - padLeft - padRight, middle = p.baseAddress! + padLeft
                    for n in 0..<streams {
                        // Context then block in the middle, then the padding from the middle.
                        context(n).withUnsafeBufferPointer { middle.update(from: $0.baseAddress!, count: c) }
                        block(n).withUnsafeBufferPointer { (middle + c).update(from: $0.baseAddress!, count: L - c) }
                        for i in 0..<padLeft { p[i] = source[i] < 0 ? 0 : middle[source[i]] }
                        for i in (padLeft + L)..<total { p[i] = source[i] < 0 ? 0 : middle[source[i]] }
                        for t in 0..<frames {
                            let frame = UnsafeBufferPointer(rebasing: p[(t * hop)..<(t * hop + nFFT)])
                            analyzer.analyze(frame: frame, into: UnsafeMutableBufferPointer(rebasing: o[((n * frames + t) * bins)..<((n * frames + t + 1) * bins)]))
                        }
                    }
                }
            }
        }
    }

    /// Scores from the last layer's output: the output activation in place, then each stream's
    /// time reduced; stream b's scores to `scores + b * channels`.
    func output(_ y: inout Activations, into scores: UnsafeMutablePointer<Float>) {
        switch manifest.outputs.activation {
        case .sigmoid: Layer.Activation.sigmoid.apply(&y)
        case .softmax: Layer.Activation.softmax.apply(&y)
        case .none: break
        }
        let C = y.channels, T = y.time, last = manifest.outputs.reduceTime == .last
        y.values.withUnsafeBufferPointer { v in
            for b in 0..<y.batch {
                for c in 0..<C {
                    if last {
                        scores[b * C + c] = T > 0 ? v[(b * T + T - 1) * C + c] : 0
                    } else {
                        var sum: Float = 0
                        for t in 0..<T { sum += v[(b * T + t) * C + c] }
                        scores[b * C + c] = sum / Float(max(T, 1))
                    }
                }
            }
        }
    }
}

/// Working memory for steps of one model: the front end's arrays and every layer's output and
/// scratch, reused from step to step.
struct Workspace {
    /// The front end's FFT (nil for a graph, which takes raw samples).
    let analyzer: SpectrumAnalyzer?
    var padded: [Float] = []
    /// The front end's output, then each layer's.
    var buffers: [Activations]
    var scratch: [LayerScratch]
    /// A batch tile's carries side by side.
    var carries: [Float] = []
    /// A graph's arena and scratch.
    var graph = GraphWorkspace()

    init(analyzer: SpectrumAnalyzer?, layers: Int) {
        self.analyzer = analyzer
        buffers = Array(repeating: .empty, count: layers + 1)
        scratch = Array(repeating: LayerScratch(), count: layers)
    }
}

/// A pooled workspace. `@unchecked Sendable`: it moves between threads only through the model's
/// pool (behind a lock), and the one step that took it out is the only code touching it until it is
/// put back.
final class WorkspaceBox: @unchecked Sendable {
    var workspace: Workspace
    init(_ workspace: Workspace) { self.workspace = workspace }
}
