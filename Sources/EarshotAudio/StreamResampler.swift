/// A stream's sample-rate conversion whose whole state is a small value: the source samples it
/// still needs and a few counters, so that a stream can be snapshotted and resumed in another
/// process with the same output, bit for bit.
///
/// libsoxr keeps its filter state inside its own memory, which cannot be saved. So the stream
/// is cut into epochs of about a quarter of a second of source audio, each resampled by a
/// fresh libsoxr resampler that starts a short warm-up before the epoch (the filter's reach,
/// whose output is discarded) and runs until it has produced its epoch's last sample; the next
/// epoch's resampler starts while the last one finishes. Epochs begin on whole periods of the
/// two rates (441 source samples for 44.1 to 16 kHz), so every epoch's output lands on the
/// stream's own output grid. Each output sample is then a function of the epoch's source
/// samples only, and a restore replays those into fresh resamplers (libsoxr's output does not
/// depend on how its input is cut, which the tests check). Against one resampler over the
/// whole signal, the output differs only by float rounding at the seams.
///
/// Equal rates pass samples through untouched. A class (it owns libsoxr resamplers): one
/// stream uses it at a time; its `snapshot` is the value to keep or move.
public final class StreamResampler {
    /// The rate of the samples given (Hz).
    public let inputRate: Int
    /// The rate of the samples returned (Hz).
    public let outputRate: Int
    /// Source samples per epoch and of warm-up (both whole periods of the two rates).
    public let epochSamples: Int, warmupSamples: Int
    private let periodIn: Int, periodOut: Int

    /// One epoch's resampler.
    private struct Segment {
        let epoch: Int
        /// The absolute source sample it started at, and its output there (on the stream's grid).
        let start: Int, outputBase: Int
        /// Absolute outputs it is responsible for: [from, to).
        let from: Int, to: Int
        var produced = 0
        var resampler: Resampler
    }

    private var segments: [Segment] = []
    /// Source samples given so far, and output samples returned so far.
    public private(set) var inputCount = 0
    public private(set) var outputCount = 0
    /// Source samples from the oldest live segment's start to `inputCount`: what a snapshot keeps.
    private var history: [Float] = []
    /// Outputs of a later segment that wait for the earlier one to finish.
    private var waiting: [Int: [Float]] = [:]
    /// Retired resamplers, cleared, to use again.
    private var spare: [Resampler] = []
    private let passthrough: Bool

    /// About a quarter of a second per epoch; 20 ms of warm-up (libsoxr's high-quality filters
    /// reach less than that).
    public init(inputRate: Int, outputRate: Int) throws(AudioError) {
        for rate in [inputRate, outputRate] where !Resampler.supportedRates.contains(Double(rate)) {
            throw .unsupportedSampleRate(Double(rate))
        }
        self.inputRate = inputRate
        self.outputRate = outputRate
        passthrough = inputRate == outputRate
        let g = Self.gcd(inputRate, outputRate)
        let periodIn = inputRate / g
        self.periodIn = periodIn
        periodOut = outputRate / g
        func wholePeriods(_ seconds: Double) -> Int {
            periodIn * max(1, Int((seconds * Double(inputRate) / Double(periodIn)).rounded(.up)))
        }
        warmupSamples = wholePeriods(0.02)
        epochSamples = max(wholePeriods(0.25), 2 * warmupSamples)
        if !passthrough { try startSegment(epoch: 0) }
    }

    private static func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }

    /// Outputs at a source position that is a whole number of periods.
    private func outputs(at source: Int) -> Int { source / periodIn * periodOut }

    private func startSegment(epoch e: Int) throws(AudioError) {
        let begin = e * epochSamples
        let start = max(0, begin - warmupSamples)
        let resampler: Resampler
        if let r = spare.popLast() { resampler = r } else {
            resampler = try Resampler(inputRate: Double(inputRate), outputRate: Double(outputRate))
        }
        segments.append(Segment(epoch: e, start: start, outputBase: outputs(at: start), from: outputs(at: begin),
                                to: outputs(at: begin + epochSamples), resampler: resampler))
    }

    /// Resamples a chunk; returns what is ready (the filters keep a short history).
    public func process(_ input: [Float]) throws(AudioError) -> [Float] {
        if passthrough {
            inputCount += input.count
            outputCount += input.count
            return input
        }
        var out: [Float] = []
        try feed(input[...], emittingFrom: 0, into: &out)
        return out
    }

    /// Feeds samples, cut where a new epoch's warm-up begins; outputs below `floor` (absolute)
    /// are not returned (a restore replays them).
    private func feed(_ input: ArraySlice<Float>, emittingFrom floor: Int, into out: inout [Float]) throws(AudioError) {
        history += input
        var rest = input
        while !rest.isEmpty {
            let nextEpoch = (segments.last?.epoch ?? -1) + 1
            let nextStart = nextEpoch * epochSamples - warmupSamples
            let n = min(rest.count, nextStart - inputCount)
            if n <= 0 {
                try startSegment(epoch: nextEpoch)
                continue
            }
            let piece = rest.prefix(n)
            rest = rest.dropFirst(n)
            inputCount += n
            for k in segments.indices {
                let produced = try piece.withUnsafeBufferPointer { (buf) throws(AudioError) in try segments[k].resampler.process(buf) }
                take(produced, segment: k)
            }
            try retireFinished(floor: floor, into: &out)
        }
        trimHistory()
    }

    /// A segment's new outputs: the part in its range waits in `waiting` by epoch.
    private func take(_ produced: [Float], segment k: Int) {
        let s = segments[k]
        let first = s.outputBase + s.produced
        segments[k].produced += produced.count
        let lo = max(first, s.from), hi = min(first + produced.count, s.to)
        guard hi > lo else { return }
        waiting[s.epoch, default: []] += produced[(lo - first)..<(hi - first)]
    }

    /// Returns the oldest segments' outputs in order, and retires each that has produced its range.
    private func retireFinished(floor: Int, into out: inout [Float]) throws(AudioError) {
        while let s = segments.first {
            if let ready = waiting.removeValue(forKey: s.epoch) { emit(ready, floor: floor, into: &out) }
            guard s.outputBase + s.produced >= s.to else { return }
            segments.removeFirst()
            s.resampler.reset()
            spare.append(s.resampler)
            if segments.isEmpty { try startSegment(epoch: s.epoch + 1) }
        }
    }

    private func emit(_ samples: [Float], floor: Int, into out: inout [Float]) {
        let skip = min(samples.count, max(0, floor - outputCount))
        outputCount += samples.count
        out += samples[skip...]
    }

    private func trimHistory() {
        let keepFrom = (segments.first?.start ?? inputCount) - (inputCount - history.count)
        if keepFrom >= 4096 || keepFrom * 2 >= history.count, keepFrom > 0 { history.removeFirst(keepFrom) }
    }

    /// No more input: flushes every live epoch and returns the stream's last samples.
    public func finish() throws(AudioError) -> [Float] {
        if passthrough { return [] }
        var out: [Float] = []
        for k in segments.indices { take(try segments[k].resampler.finish(), segment: k) }
        for s in segments {
            if let ready = waiting.removeValue(forKey: s.epoch) { emit(ready, floor: 0, into: &out) }
        }
        // The total is the whole signal's: round(inputCount * ratio), as libsoxr gives.
        let total = Int((Double(inputCount) * Double(outputRate) / Double(inputRate)).rounded())
        if outputCount > total { out.removeLast(min(out.count, outputCount - total)); outputCount = total }
        segments.removeAll()
        return out
    }

    // MARK: Snapshot

    /// Everything that decides the rest of the output: the counters and the source samples
    /// from the oldest live epoch's start on.
    public struct Snapshot: Sendable, Equatable {
        public var inputRate: Int, outputRate: Int
        public var inputCount: Int, outputCount: Int
        /// The first epoch that is still live.
        public var epoch: Int
        /// Source samples from that epoch's start (with its warm-up) to `inputCount`.
        public var samples: [Float]

        public init(inputRate: Int, outputRate: Int, inputCount: Int, outputCount: Int, epoch: Int, samples: [Float]) {
            self.inputRate = inputRate
            self.outputRate = outputRate
            self.inputCount = inputCount
            self.outputCount = outputCount
            self.epoch = epoch
            self.samples = samples
        }
    }

    /// A snapshot of the stream (a value: take it at any chunk boundary).
    public var snapshot: Snapshot {
        let epoch = segments.first?.epoch ?? 0
        let start = segments.first?.start ?? inputCount
        let kept = passthrough ? [] : Array(history.suffix(inputCount - start))
        return Snapshot(inputRate: inputRate, outputRate: outputRate, inputCount: inputCount, outputCount: outputCount,
                        epoch: epoch, samples: kept)
    }

    /// Resumes a stream from its snapshot: the output continues exactly as it would have.
    /// - Throws: `AudioError.resampler` when the snapshot does not fit these rates or is inconsistent.
    public convenience init(restoring s: Snapshot) throws(AudioError) {
        try self.init(inputRate: s.inputRate, outputRate: s.outputRate)
        func refuse(_ why: String) -> AudioError { .resampler(reason: "resampler snapshot: \(why)") }
        guard s.inputCount >= 0, s.outputCount >= 0 else { throw refuse("negative counters") }
        if passthrough {
            guard s.samples.isEmpty, s.outputCount == s.inputCount else { throw refuse("counters differ at equal rates") }
            inputCount = s.inputCount
            outputCount = s.outputCount
            return
        }
        guard s.epoch >= 0, s.epoch <= s.inputCount / epochSamples + 1 else { throw refuse("epoch \(s.epoch) is beyond the input") }
        let start = max(0, s.epoch * epochSamples - warmupSamples)
        guard s.inputCount - start == s.samples.count else {
            throw refuse("\(s.samples.count) samples kept, expected \(s.inputCount - start)")
        }
        guard s.outputCount <= outputs(at: s.epoch * epochSamples + 2 * epochSamples) else { throw refuse("output count \(s.outputCount) is beyond the kept samples") }
        segments.removeAll()
        spare.removeAll()
        inputCount = start
        outputCount = outputs(at: s.epoch * epochSamples)
        try startSegment(epoch: s.epoch)
        var discarded: [Float] = []
        try feed(s.samples[...], emittingFrom: s.outputCount, into: &discarded)
        // libsoxr's output after a given number of input samples does not depend on their cutting.
        guard discarded.isEmpty, outputCount == s.outputCount else {
            throw refuse("the kept samples give \(outputCount) outputs, the snapshot says \(s.outputCount)")
        }
    }
}
