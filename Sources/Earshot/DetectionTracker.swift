/// Turns one label's per-step scores into detections, online, as microWakeWord decides a wake
/// word: the mean of the latest `window` scores (once that many have come) above `threshold`
/// (strictly: `probability <= cutoff` is no detection) detects; then the label rests for
/// `refractorySteps` steps.
struct DetectionTracker: Sendable {
    let window: Int
    let threshold: Double
    let refractorySteps: Int
    private var recent: [Double]
    private var next = 0
    private var filled = 0
    private var step = 0
    private var quietUntil = 0

    init(options: LabelOptions, sampleRate: Int, stepSamples: Int) {
        window = options.detectionWindow ?? 1
        threshold = options.threshold
        refractorySteps = Int((options.refractoryMs / 1000 * Double(sampleRate) / Double(max(stepSamples, 1))).rounded(.up))
        recent = [Double](repeating: 0, count: window)
    }

    /// Adds the next step's score; the mean that detected, or nil.
    mutating func add(_ score: Double) -> Double? {
        recent[next] = score
        next = (next + 1) % window
        filled = min(filled + 1, window)
        defer { step += 1 }
        guard filled == window, step >= quietUntil else { return nil }
        let mean = recent.reduce(0, +) / Double(window)
        guard mean > threshold else { return nil }
        quietUntil = step + 1 + refractorySteps
        return mean
    }

    // MARK: Snapshots

    /// The tracker's progress: the recent scores and the refractory timer.
    func save(to w: inout SnapshotWriter) {
        w.doubles(recent); w.int(next); w.int(filled); w.int(step); w.int(quietUntil)
    }

    mutating func load(from r: inout SnapshotReader) throws(StreamError) {
        let scores = try r.doubles()
        guard scores.count == window else { throw .snapshot(reason: "\(scores.count) recent scores for a window of \(window)") }
        recent = scores
        next = try r.int(in: 0...(window - 1), "window position"); filled = try r.int(in: 0...window, "window fill")
        step = try r.int(in: 0...(1 << 48), "detection step"); quietUntil = try r.int(in: 0...(1 << 48), "refractory end")
    }
}
