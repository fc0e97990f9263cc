import CSoxr

/// Streaming sample-rate conversion on libsoxr (high quality: 20-bit, linear phase).
/// Feed chunks of any size with `process`, then `finish` to flush the filter's tail: the
/// concatenated output equals resampling the whole signal at once (within float rounding;
/// see the tests for the tolerance held). Interleaved when there is more than one channel.
/// Equal rates pass samples through untouched.
public final class Resampler {
    /// The rate of the samples given (Hz).
    public let inputRate: Double
    /// The rate of the samples returned (Hz).
    public let outputRate: Double
    /// Interleaved channels.
    public let channelCount: Int
    private var soxr: soxr_t?
    /// Output scratch, interleaved.
    private var scratch: [Float] = []

    /// The rates a resampler takes.
    public static let supportedRates: ClosedRange<Double> = 1000...384_000

    /// A streaming resampler (libsoxr, high quality).
    /// - Throws: `AudioError.unsupportedSampleRate` or `.resampler`.
    public init(inputRate: Double, outputRate: Double, channelCount: Int = 1) throws(AudioError) {
        for rate in [inputRate, outputRate] where !Self.supportedRates.contains(rate) {
            throw .unsupportedSampleRate(rate)
        }
        guard channelCount >= 1 else { throw .resampler(reason: "channel count \(channelCount): expected >= 1") }
        self.inputRate = inputRate
        self.outputRate = outputRate
        self.channelCount = channelCount
        if inputRate != outputRate {
            var error: soxr_error_t?
            var io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I)
            var quality = soxr_quality_spec(UInt(SOXR_HQ), 0)
            let handle = soxr_create(inputRate, outputRate, UInt32(channelCount), &error, &io, &quality, nil)
            if let error { throw .resampler(reason: String(cString: error)) }
            soxr = handle
        }
    }

    deinit { soxr_delete(soxr) }

    /// Output frames per input frame.
    public var ratio: Double { outputRate / inputRate }

    /// Resamples a chunk; returns what the filter has ready (it keeps a short history).
    public func process(_ input: [Float]) throws(AudioError) -> [Float] {
        try input.withUnsafeBufferPointer { (buf) throws(AudioError) in try process(buf) }
    }

    /// Resamples the next samples; any chunking gives the same output as the whole.
    public func process(_ input: UnsafeBufferPointer<Float>) throws(AudioError) -> [Float] {
        guard let soxr else { return Array(input) }
        guard !input.isEmpty else { return [] }  // (an empty buffer may have no address: not the end of the stream)
        return try run(soxr, input: input)
    }

    /// Flushes the filter's tail and makes the resampler ready for a new stream.
    public func finish() throws(AudioError) -> [Float] {
        guard let soxr else { return [] }
        let tail = try run(soxr, input: nil)
        soxr_clear(soxr)
        return tail
    }

    /// Drops everything buffered: a new stream starts.
    public func reset() {
        if let soxr { soxr_clear(soxr) }
    }

    private func run(_ soxr: soxr_t, input: UnsafeBufferPointer<Float>?) throws(AudioError) -> [Float] {
        let c = channelCount
        let inFrames = (input?.count ?? 0) / c
        var consumed = 0
        var out: [Float] = []
        let capacity = Int((Double(inFrames) * ratio).rounded(.up)) + 1024
        if scratch.count < capacity * c { scratch = [Float](repeating: 0, count: capacity * c) }
        while true {
            var inDone = 0, outDone = 0
            let error: soxr_error_t? = scratch.withUnsafeMutableBufferPointer { outBuf in
                if let base = input?.baseAddress {
                    return soxr_process(soxr, base + consumed * c, inFrames - consumed, &inDone,
                                        outBuf.baseAddress, capacity, &outDone)
                }
                // A null input tells soxr that the stream has ended: it flushes.
                return soxr_process(soxr, nil, 0, nil, outBuf.baseAddress, capacity, &outDone)
            }
            if let error { throw .resampler(reason: String(cString: error)) }
            consumed += inDone
            out.append(contentsOf: scratch[0..<(outDone * c)])
            let moreInput = input != nil && consumed < inFrames
            if !moreInput && outDone < capacity { break }
        }
        return out
    }
}
