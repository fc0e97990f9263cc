/// Turns one label's per-step scores into segments, online, with exactly the rules of
/// silero-vad's `get_speech_timestamps_from_probs` (6.2.3): hysteresis (threshold / negative
/// threshold), minimum silence to end, minimum duration to keep, maximum duration split at the
/// longest (or last) silence inside, padding that neighbours closer than two pads share.
/// Positions are in samples of the model's rate. Segments are released as soon as no later
/// step can change them; `finish` releases the rest.
/// ref: silero_vad/utils_vad.py get_speech_timestamps_from_probs
struct SegmentTracker: Sendable {
    struct Raw: Sendable, Equatable {
        var start: Int
        var end: Int
    }

    /// A segment whose bounds are final (padded), or one just confirmed to have started.
    enum Output: Sendable, Equatable {
        case started(start: Int)
        case ended(start: Int, end: Int)
    }

    let stepSamples: Int
    let threshold: Double, negativeThreshold: Double
    let minSpeech: Double, pad: Double, maxSpeech: Double, minSilence: Double, minSilenceAtMax: Double
    let useLongestSilence: Bool

    private var step = 0
    private var triggered = false
    private var currentStart: Int?
    private var tempEnd = 0, prevEnd = 0, nextStart = 0
    private var possibleEnds: [(end: Int, duration: Int)] = []
    /// Raw segments not yet released, and the padded start of the first of them.
    private var pending: [Raw] = []
    private var pendingFirstStart: Int?
    private var announcedStart: Int?

    init(options: LabelOptions, sampleRate: Int, stepSamples: Int) {
        let rate = Double(sampleRate)
        self.stepSamples = stepSamples
        threshold = options.threshold
        negativeThreshold = options.effectiveNegativeThreshold
        minSpeech = rate * options.minSegmentMs / 1000
        let pad = rate * options.padMs / 1000
        self.pad = pad
        if let seconds = options.maxSegmentSeconds {
            maxSpeech = rate * seconds - Double(stepSamples) - 2 * pad
        } else {
            maxSpeech = .infinity
        }
        minSilence = rate * options.minSilenceMs / 1000
        minSilenceAtMax = rate * options.minSilenceAtMaxSegmentMs / 1000
        useLongestSilence = options.splitAtLongestSilence
    }

    /// The earliest sample a segment not yet released may still cover (nil: none is open).
    var oldestOpenSample: Int? {
        let starts = [pending.first?.start, currentStart].compactMap { $0 }
        return starts.min().map { max(0, $0 - Int(pad) - 1) }
    }

    /// Adds the next step's score; returns what became final.
    mutating func add(_ probability: Double) -> [Output] {
        let cur = stepSamples * step
        step += 1
        var out: [Output] = []
        process(probability, at: cur)
        // Announce a segment once it can no longer be dropped as too short.
        if triggered, let s = currentStart, announcedStart != s, tempEnd == 0, Double(cur - s) > minSpeech {
            announcedStart = s
            out.append(.started(start: max(0, s - Int(pad))))
        }
        out += release(audioLength: nil)
        return out
    }

    /// Ends the stream of `audioLength` samples: closes an open segment and releases all.
    mutating func finish(audioLength: Int) -> [Output] {
        if let s = currentStart, Double(audioLength - s) > minSpeech {
            pending.append(Raw(start: s, end: audioLength))
        }
        currentStart = nil
        let out = release(audioLength: audioLength)
        self = SegmentTracker(copyingSettingsOf: self)
        return out
    }

    private init(copyingSettingsOf o: SegmentTracker) {
        stepSamples = o.stepSamples
        threshold = o.threshold; negativeThreshold = o.negativeThreshold
        minSpeech = o.minSpeech; pad = o.pad; maxSpeech = o.maxSpeech; minSilence = o.minSilence
        minSilenceAtMax = o.minSilenceAtMax; useLongestSilence = o.useLongestSilence
    }

    private mutating func close(_ raw: Raw) { pending.append(raw) }

    /// The main loop of get_speech_timestamps_from_probs, one step.
    private mutating func process(_ p: Double, at cur: Int) {
        if p >= threshold && tempEnd != 0 {
            let silence = cur - tempEnd
            if Double(silence) > minSilenceAtMax { possibleEnds.append((tempEnd, silence)) }
            tempEnd = 0
            if nextStart < prevEnd { nextStart = cur }
        }
        if p >= threshold && !triggered {
            triggered = true
            currentStart = cur
            return
        }
        if triggered, let start = currentStart ?? Optional(0), Double(cur - start) > maxSpeech {
            if useLongestSilence && !possibleEnds.isEmpty {
                // The longest silence; the first of equals, as Python's max() takes.
                var best = possibleEnds[0]
                for e in possibleEnds.dropFirst() where e.duration > best.duration { best = e }
                prevEnd = best.end
                close(Raw(start: start, end: prevEnd))
                currentStart = nil
                nextStart = prevEnd + best.duration
                if nextStart < prevEnd + cur {
                    currentStart = nextStart
                } else {
                    triggered = false
                }
                prevEnd = 0; nextStart = 0; tempEnd = 0
                possibleEnds = []
            } else if prevEnd != 0 {
                close(Raw(start: start, end: prevEnd))
                currentStart = nil
                if nextStart < prevEnd {
                    triggered = false
                } else {
                    currentStart = nextStart
                }
                prevEnd = 0; nextStart = 0; tempEnd = 0
                possibleEnds = []
            } else {
                close(Raw(start: start, end: cur))
                currentStart = nil
                prevEnd = 0; nextStart = 0; tempEnd = 0
                triggered = false
                possibleEnds = []
                return
            }
        }
        if p < negativeThreshold && triggered {
            if tempEnd == 0 { tempEnd = cur }
            let silenceNow = cur - tempEnd
            if !useLongestSilence && Double(silenceNow) > minSilenceAtMax { prevEnd = tempEnd }
            if Double(silenceNow) < minSilence { return }
            if let start = currentStart, Double(tempEnd - start) > minSpeech {
                close(Raw(start: start, end: tempEnd))
            }
            currentStart = nil
            prevEnd = 0; nextStart = 0; tempEnd = 0
            triggered = false
            possibleEnds = []
        }
    }

    /// Releases pending segments whose padded bounds are final: those followed by another, and
    /// the last one once no later segment can start within two pads of its end (or at the end).
    private mutating func release(audioLength: Int?) -> [Output] {
        var out: [Output] = []
        // The earliest sample a segment not yet in `pending` could start at.
        let earliestNext = audioLength == nil ? min(currentStart ?? Int.max, stepSamples * step) : Int.max
        while let first = pending.first {
            // Its padded start: set when the segment before it was released, else start - pad.
            let start = pendingFirstStart ?? Int(max(0, Double(first.start) - pad))
            var end = first.end
            if pending.count >= 2 {
                let next = pending[1]
                let silence = next.start - first.end
                if Double(silence) < 2 * pad {
                    end += silence / 2
                    pendingFirstStart = max(0, next.start - silence / 2)
                } else {
                    end = Int(Double(first.end) + pad)  // below the audio's length: a later segment follows
                    pendingFirstStart = Int(max(0, Double(next.start) - pad))
                }
            } else if let length = audioLength {
                end = Int(min(Double(length), Double(first.end) + pad))
                pendingFirstStart = nil
            } else if Double(earliestNext - first.end) >= 2 * pad {
                end = Int(Double(first.end) + pad)
                pendingFirstStart = nil
            } else {
                return out  // a segment may yet start within two pads: its end waits
            }
            out.append(.ended(start: start, end: end))
            pending.removeFirst()
        }
        return out
    }

    // MARK: Snapshots

    /// The tracker's progress (its settings come from the options).
    func save(to w: inout SnapshotWriter) {
        w.int(step); w.bool(triggered); w.optionalInt(currentStart)
        w.int(tempEnd); w.int(prevEnd); w.int(nextStart)
        w.int(possibleEnds.count)
        for e in possibleEnds { w.int(e.end); w.int(e.duration) }
        w.int(pending.count)
        for p in pending { w.int(p.start); w.int(p.end) }
        w.optionalInt(pendingFirstStart); w.optionalInt(announcedStart)
    }

    mutating func load(from r: inout SnapshotReader) throws(StreamError) {
        let samples = 0...StreamSnapshot.maxSamples
        // No more steps than the most samples hold, so that a step's sample never overflows.
        step = try r.int(in: 0...StreamSnapshot.maxSteps(of: stepSamples), "tracker step"); triggered = try r.bool()
        currentStart = try r.optionalInt(in: samples, "segment start")
        tempEnd = try r.int(in: samples, "silence start"); prevEnd = try r.int(in: samples, "previous end")
        nextStart = try r.int(in: samples, "next start")
        possibleEnds = []
        for _ in 0..<(try r.int(in: 0...(1 << 24), "possible ends")) {
            possibleEnds.append((try r.int(in: samples, "possible end"), try r.int(in: samples, "silence length")))
        }
        pending = []
        for _ in 0..<(try r.int(in: 0...(1 << 24), "closed segments")) {
            pending.append(Raw(start: try r.int(in: samples, "segment start"), end: try r.int(in: samples, "segment end")))
        }
        pendingFirstStart = try r.optionalInt(in: samples, "padded start")
        announcedStart = try r.optionalInt(in: samples, "announced start")
    }
}
