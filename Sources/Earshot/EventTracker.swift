/// Turns a many-label window classifier's scores into events, online, by `LabelOptions.Events`:
/// each step is a window of the audio (the `windowSamples` before the step's end, from the
/// stream's start on); a label is on in it when it is among the window's k best and at least
/// its threshold; a label's on-windows join into one event while each starts at most the merge
/// gap after the event's end so far. An event is released once the next window could no longer
/// join it (at once when windows do not merge), or at the end: the same events whatever the
/// chunks. Positions are in samples of the model's rate; all labels are tracked by one tracker,
/// whose open events are few however many labels the model has.
struct EventTracker: Sendable {
    /// An event not yet released: its label, bounds, and its windows' best, sum and count.
    struct Open: Sendable, Equatable {
        var label: Int
        var start: Int
        var end: Int
        var best: Float
        var sum: Double
        var windows: Int
        /// Whether its start was reported (once it is long enough to be kept).
        var announced = false

        /// The mean of its windows' scores.
        var mean: Float { Float(sum / Double(max(windows, 1))) }
    }

    enum Output: Sendable, Equatable {
        /// An event long enough to be kept has begun (its values so far).
        case started(Open)
        /// An event is complete.
        case ended(Open)
    }

    let stepSamples: Int
    let windowSamples: Int
    /// Per label; infinity for a label that is never an event (the background).
    let thresholds: [Double]
    /// The labels that can be events, in order.
    let eventLabels: [Int]
    let topK: Int?
    /// In samples; nil: every window is an event of its own.
    let mergeGap: Double?
    let minDuration: Double
    /// Windows cut from the start and reported whole; the least audio a window holds (samples).
    let aligned: Bool
    let minWindowAudio: Int?

    private var step = 0
    /// Open events by label order.
    private var open: [Open] = []
    private var ranked: [Int] = []

    /// A tracker of `model`'s labels (all but `background`) by `rule`, whose default threshold is
    /// `threshold`.
    /// - Throws: `StreamError.invalidOption` for a label threshold of a label the model lacks.
    init(rule: LabelOptions.Events, threshold: Double, labels: [String], background: String?, sampleRate: Int,
         stepSamples: Int, blockSamples: Int) throws(StreamError) {
        self.stepSamples = stepSamples
        windowSamples = rule.windowSamples ?? blockSamples
        var thresholds = [Double](repeating: threshold, count: labels.count)
        let index = Dictionary(labels.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        for (label, v) in rule.labelThresholds.sorted(by: { $0.key < $1.key }) {
            guard let i = index[label] else {
                throw .invalidOption(name: "threshold", value: label, expected: "a label of the model")
            }
            thresholds[i] = v
        }
        let only = rule.onlyLabels
        func never(_ label: String) -> Bool { label == background || only.map { !$0.contains(label) } ?? false }
        eventLabels = labels.indices.filter { !never(labels[$0]) }
        for i in labels.indices where never(labels[i]) { thresholds[i] = .infinity }
        self.thresholds = thresholds
        topK = rule.topK
        mergeGap = rule.mergeGapSeconds.map { $0 * Double(sampleRate) }
        minDuration = rule.minDurationSeconds * Double(sampleRate)
        aligned = rule.alignedWindows
        minWindowAudio = rule.minWindowAudioSeconds.map { Int(($0 * Double(sampleRate)).rounded(.up)) }
    }

    /// The start of step `k`'s window.
    private func windowStart(_ k: Int) -> Int { max(0, (k + 1) * stepSamples - windowSamples) }

    /// Adds the next step's scores, whose window's audio ends at `end` (before any zeros after
    /// the audio's end); returns the events that began, then those that became final: each in
    /// order of start, then label.
    mutating func add(_ scores: [Float], end audioEnd: Int) -> [Output] {
        let k = step
        step += 1
        let start = windowStart(k)
        // A window that reaches before the start (aligned) or holds too little audio is none.
        let reachesBefore = aligned && (k + 1) * stepSamples < windowSamples
        let end = aligned ? start + windowSamples : audioEnd
        ranked.removeAll(keepingCapacity: true)
        if reachesBefore || minWindowAudio.map({ audioEnd - start < $0 }) ?? false {
            let next = windowStart(k + 1), gap = mergeGap
            return close { o in gap.map { Double(next - o.end) > $0 } ?? true }
        }
        if let topK, topK < eventLabels.count {
            TopLabels.best(topK, of: scores, among: eventLabels, into: &ranked)
            ranked.sort()
        } else {
            ranked.append(contentsOf: eventLabels)
        }
        var started: [Open] = []
        for i in ranked where i < scores.count && Double(scores[i]) >= thresholds[i] {
            let score = scores[i]
            if let o = open.firstIndex(where: { $0.label == i }) {
                open[o].end = max(open[o].end, end)
                open[o].best = max(open[o].best, score)
                open[o].sum += Double(score)
                open[o].windows += 1
            } else {
                let at = open.firstIndex(where: { $0.label > i }) ?? open.count
                open.insert(Open(label: i, start: start, end: end, best: score, sum: Double(score), windows: 1), at: at)
            }
        }
        // Announced once it can no longer be dropped as too short.
        for o in open.indices where !open[o].announced && Double(open[o].end - open[o].start) >= minDuration {
            open[o].announced = true
            started.append(open[o])
        }
        // Closed when the next window could not join: it starts more than the gap after the end.
        let next = windowStart(k + 1)
        let gap = mergeGap
        return started.sorted(by: Self.order).map { .started($0) } + close { o in gap.map { Double(next - o.end) > $0 } ?? true }
    }

    /// Ends the stream: every open event is released.
    mutating func finish() -> [Output] {
        let out = close { _ in true }
        self = EventTracker(settingsOf: self)
        return out
    }

    /// Releases the open events `closes` picks: those long enough end, the others are dropped.
    private mutating func close(_ closes: (Open) -> Bool) -> [Output] {
        var ended: [Open] = []
        open.removeAll { o in
            guard closes(o) else { return false }
            if Double(o.end - o.start) >= minDuration { ended.append(o) }
            return true
        }
        return ended.sorted(by: Self.order).map { .ended($0) }
    }

    private static func order(_ a: Open, _ b: Open) -> Bool { (a.start, a.label) < (b.start, b.label) }

    private init(settingsOf o: EventTracker) {
        stepSamples = o.stepSamples; windowSamples = o.windowSamples; thresholds = o.thresholds
        eventLabels = o.eventLabels; topK = o.topK; mergeGap = o.mergeGap; minDuration = o.minDuration
        aligned = o.aligned; minWindowAudio = o.minWindowAudio
    }

    // MARK: Snapshots

    /// The tracker's progress: the step and the open events (its settings come from the options).
    func save(to w: inout SnapshotWriter) {
        w.int(step)
        w.int(open.count)
        for o in open {
            w.int(o.label); w.int(o.start); w.int(o.end); w.u32(o.best.bitPattern); w.double(o.sum); w.int(o.windows); w.bool(o.announced)
        }
    }

    mutating func load(from r: inout SnapshotReader) throws(StreamError) {
        let samples = 0...StreamSnapshot.maxSamples
        step = try r.int(in: 0...StreamSnapshot.maxSteps(of: stepSamples), "event step")
        open = []
        for _ in 0..<(try r.int(in: 0...eventLabels.count, "open events")) {
            let label = try r.int(in: 0...max(0, thresholds.count - 1), "event label")
            guard thresholds[label].isFinite, open.last.map({ $0.label < label }) ?? true else {
                throw .snapshot(reason: "open events out of label order, or of a label that is never an event")
            }
            let start = try r.int(in: samples, "event start"), end = try r.int(in: samples, "event end")
            let best = Float(bitPattern: try r.u32())
            let sum = try r.double("event score sum")
            let windows = try r.int(in: 1...StreamSnapshot.maxSteps(of: stepSamples), "event windows")
            guard start <= end, best.isFinite else { throw .snapshot(reason: "an open event from \(start) to \(end), best \(best)") }
            open.append(Open(label: label, start: start, end: end, best: best, sum: sum, windows: windows, announced: try r.bool()))
        }
    }
}

/// The best labels of a step's scores: scores descending, then label order; NaN never counts.
/// One ranking for the events rule, the `--scores` table, the live view and the picture.
public enum TopLabels {
    /// The `k` best of `scores` among `labels` (indices in ascending order), best first, into `into`.
    static func best(_ k: Int, of scores: [Float], among labels: [Int], into best: inout [Int]) {
        best.removeAll(keepingCapacity: true)
        guard k > 0 else { return }
        for i in labels where i < scores.count && !scores[i].isNaN {
            let s = scores[i]
            if best.count == k {
                guard let last = best.last, s > scores[last] else { continue }
                best.removeLast()
            }
            // After every equal score (those of earlier labels) and before the first lower one.
            var at = best.count
            while at > 0 && scores[best[at - 1]] < s { at -= 1 }
            best.insert(i, at: at)
        }
    }

    /// The `k` best labels of `scores` (indices), best first, leaving out `excluding`.
    public static func best(_ k: Int, of scores: [Float], excluding: Int? = nil) -> [Int] {
        var out: [Int] = []
        best(k, of: scores, among: scores.indices.filter { $0 != excluding }, into: &out)
        return out
    }
}
