/// Streaming feature extraction: hand it samples in chunks of any size and it yields the
/// feature frames that the whole signal would give, the same count and the same values.
///
/// Frames are emitted as soon as every sample they cover has arrived; `finish()` emits the
/// frames that reach past the end (right padding) and starts a new stream. A copy of an
/// extractor is a snapshot: it continues independently from where the original was.
/// ref: librosa.stft framing (center, pad_mode), librosa.feature.melspectrogram, librosa.feature.mfcc
public struct FeatureExtractor: Sendable {
    /// Its front end.
    public let config: FeatureConfig
    /// Shared by copies until one of them runs (then it takes a copy of its own).
    private var pipeline: PipelineBox
    /// Samples of the signal from absolute index `pendingStart` on.
    private var pending: [Float] = []
    private var pendingStart = 0
    /// Samples received since the stream started.
    public private(set) var sampleCount = 0
    /// Index of the next frame to emit.
    public private(set) var frameIndex = 0
    /// Running maximum of log values (topDB clipping).
    private var peak = -Float.infinity
    /// [nFFT] frame assembly scratch for frames that touch padding.
    private var frameScratch: [Float]

    /// A streaming extractor.
    /// - Throws: `FeatureError` for an invalid configuration.
    public init(config: FeatureConfig) throws(FeatureError) {
        self.config = config
        pipeline = PipelineBox(try FeaturePipeline(config: config))
        frameScratch = [Float](repeating: 0, count: config.stft.nFFT)
    }

    /// Values per frame.
    public var featureCount: Int { config.featureCount }

    /// Adds samples; returns the feature frames that became complete.
    public mutating func process(_ samples: [Float]) throws(FeatureError) -> FeatureMatrix {
        try samples.withUnsafeBufferPointer { (s) throws(FeatureError) in try process(s) }
    }

    public mutating func process(_ samples: UnsafeBufferPointer<Float>) throws(FeatureError) -> FeatureMatrix {
        if let bad = firstNonFinite(samples) { throw .nonFiniteInput(sampleIndex: sampleCount + bad) }
        pending.append(contentsOf: samples)
        sampleCount += samples.count
        let stft = config.stft
        // A frame is ready when its last sample has arrived and, for a frame that starts before
        // the signal with reflect padding, the sample its first value mirrors (index -start).
        var ready = frameIndex
        while true {
            let start = ready * stft.hopLength - stft.centerPadding
            guard start + stft.nFFT <= sampleCount else { break }
            if start < 0, stft.padMode == .reflect, -start >= sampleCount { break }
            ready += 1
        }
        return emitFrames(upTo: ready, signalLength: nil)
    }

    /// Ends the stream: emits the frames that need padding past the last sample and returns them.
    /// The extractor is then fresh, ready for a new stream.
    public mutating func finish() -> FeatureMatrix {
        let total = config.stft.frameCount(forSamples: sampleCount)
        let tail = emitFrames(upTo: total, signalLength: sampleCount)
        reset()
        return tail
    }

    /// Discards everything received: the extractor starts a new stream.
    public mutating func reset() {
        pending.removeAll(keepingCapacity: true)
        pendingStart = 0
        sampleCount = 0
        frameIndex = 0
        peak = -.infinity
    }

    /// Whole signal at once (for offline use and as the reference for streaming).
    public static func features(of samples: [Float], config: FeatureConfig) throws(FeatureError) -> FeatureMatrix {
        var extractor = try FeatureExtractor(config: config)
        var out = try extractor.process(samples)
        out.append(extractor.finish())
        return out
    }

    private mutating func emitFrames(upTo end: Int, signalLength: Int?) -> FeatureMatrix {
        let count = end - frameIndex
        var out = FeatureMatrix(featureCount: featureCount)
        guard count > 0 else { return out }
        if !isKnownUniquelyReferenced(&pipeline) { pipeline = PipelineBox(pipeline.value.copy()) }
        let stft = config.stft
        let n = stft.nFFT
        out.values = [Float](repeating: 0, count: count * featureCount)
        let pipe = pipeline.value
        var peak = self.peak
        let pendingStart = self.pendingStart, padMode = stft.padMode
        let firstFrame = frameIndex, featureCount = self.featureCount
        out.values.withUnsafeMutableBufferPointer { outBuf in
            pending.withUnsafeBufferPointer { buf in
                frameScratch.withUnsafeMutableBufferPointer { scratch in
                    for j in 0..<count {
                        let start = (firstFrame + j) * stft.hopLength - stft.centerPadding
                        let frame: UnsafeBufferPointer<Float>
                        if start >= pendingStart, start + n <= pendingStart + buf.count,
                           signalLength.map({ start + n <= $0 }) ?? true {
                            frame = UnsafeBufferPointer(rebasing: buf[(start - pendingStart)..<(start - pendingStart + n)])
                        } else {
                            for i in 0..<n {
                                scratch[i] = Self.sample(
                                    at: start + i, in: buf, from: pendingStart, signalLength: signalLength, padMode: padMode)
                            }
                            frame = UnsafeBufferPointer(scratch)
                        }
                        let row = UnsafeMutableBufferPointer(rebasing: outBuf[(j * featureCount)..<((j + 1) * featureCount)])
                        pipe.features(frame: frame, into: row, peak: &peak)
                    }
                }
            }
        }
        self.peak = peak
        frameIndex = end
        // Keep samples from the next frame's first sample on.
        let keepFrom = max(0, frameIndex * stft.hopLength - stft.centerPadding)
        if keepFrom > self.pendingStart {
            pending.removeFirst(min(keepFrom - self.pendingStart, pending.count))
            self.pendingStart = keepFrom
        }
        return out
    }

    /// Sample at signal index `i`, padded outside the signal: mirrored (numpy `reflect`) or zero.
    private static func sample(
        at i: Int, in buf: UnsafeBufferPointer<Float>, from pendingStart: Int, signalLength: Int?,
        padMode: STFTConfig.PadMode
    ) -> Float {
        var index = i
        let length = signalLength ?? Int.max
        if index < 0 || index >= length {
            guard padMode == .reflect else { return 0 }
            if let signalLength {
                guard signalLength > 1 else { return signalLength == 1 ? buf[0 - pendingStart] : 0 }
                let period = 2 * (signalLength - 1)
                var m = index % period
                if m < 0 { m += period }
                index = m >= signalLength ? period - m : m
            } else {
                index = -index  // left edge while streaming: the frame's rule guarantees it has arrived
            }
        }
        return buf[index - pendingStart]
    }
}

/// Reference wrapper so that copies of an extractor can share one pipeline until one runs
/// (copy on write through `isKnownUniquelyReferenced`).
private final class PipelineBox: @unchecked Sendable {
    // Safe: `value` is only used inside a mutating method of the FeatureExtractor that owns the
    // box uniquely (checked with isKnownUniquelyReferenced first), so no two threads touch it.
    let value: FeaturePipeline
    init(_ value: FeaturePipeline) { self.value = value }
}

/// Index of the first NaN or infinite sample, if any.
func firstNonFinite(_ samples: UnsafeBufferPointer<Float>) -> Int? {
    var acc = SIMD8<Float>()
    var i = 0
    let base = samples.baseAddress
    while i + 8 <= samples.count {
        acc += UnsafeRawPointer(base! + i).loadUnaligned(as: SIMD8<Float>.self) * 0
        i += 8
    }
    var clean = acc.sum() == 0
    while i < samples.count {
        if !samples[i].isFinite { clean = false }
        i += 1
    }
    return clean ? nil : samples.firstIndex { !$0.isFinite }
}
