import EarshotModel

/// How scores become labelled segments: thresholds and durations, per silero-vad's
/// `get_speech_timestamps`. Defaults come from the model's manifest; every one can be overridden.
public struct LabelOptions: Sendable, Equatable {
    /// A step at or above this score starts (or continues) a segment. Softmax models: a label's
    /// score is its probability where it wins the step (else 0), so this is the least
    /// confidence a winner needs.
    public var threshold: Double = 0.5
    /// A step below this score counts as silence inside a segment; nil means threshold - 0.15
    /// (at least 0.01).
    public var negativeThreshold: Double?
    /// Segments this short or shorter are dropped (ms).
    public var minSegmentMs: Double = 250
    /// Silence this long ends a segment (ms).
    public var minSilenceMs: Double = 100
    /// Added before and after each segment (ms); neighbours closer than twice this share the gap.
    public var padMs: Double = 30
    /// Longer segments are split (seconds); nil means never.
    public var maxSegmentSeconds: Double?
    /// Only silences longer than this (ms) are split points for long segments.
    public var minSilenceAtMaxSegmentMs: Double = 98
    /// Split long segments at the longest silence inside them (true) or at the last (false).
    public var splitAtLongestSilence = true
    /// Softmax models: a label that produces no segments (e.g. "_silence_" or "background").
    public var backgroundLabel: String?
    /// Emit every step's scores as events as well.
    public var includeScores = false
    /// Detections instead of segments: a label is detected when the mean of its latest
    /// `detectionWindow` scores is above `threshold` (nil: segments).
    public var detectionWindow: Int?
    /// After a detection, the same label waits this long before it can be detected again (ms).
    public var refractoryMs: Double = 2000
    /// Many labels at once (a window classifier: sound events, birds): events over consecutive
    /// windows of each label instead of segments (nil: segments, or detections). `threshold` is
    /// every label's but those `events.labelThresholds` names.
    public var events: Events?

    /// silero-vad's defaults.
    public init() {}

    /// The model's defaults (its manifest's `decision`), else silero-vad's.
    public init(model: Model) {
        self.init()
        guard let d = model.manifest.decision else { return }
        if let v = d.threshold { threshold = v }
        negativeThreshold = d.negativeThreshold
        if let v = d.minSegmentMs { minSegmentMs = v }
        if let v = d.minSilenceMs { minSilenceMs = v }
        if let v = d.padMs { padMs = v }
        maxSegmentSeconds = d.maxSegmentSeconds
        if let v = d.minSilenceAtMaxSegmentMs { minSilenceAtMaxSegmentMs = v }
        if let v = d.splitAtLongestSilence { splitAtLongestSilence = v }
        backgroundLabel = d.backgroundLabel
        detectionWindow = d.detectionWindow
        if let v = d.refractoryMs { refractoryMs = v }
        events = d.events.map(Events.init)
    }

    /// The negative threshold in force: the one given, else threshold - 0.15 (at least 0.01).
    public var effectiveNegativeThreshold: Double { negativeThreshold ?? max(threshold - 0.15, 0.01) }

    /// Checks every option against its range.
    /// - Throws: `StreamError.invalidOption` naming the option, its value and what it may be.
    public func validate() throws(StreamError) {
        typealias Limits = ModelManifest.Decision
        guard Limits.scoreRange.contains(threshold) else { throw .invalidOption(name: "threshold", value: "\(threshold)", expected: "0...1") }
        guard (0...threshold).contains(effectiveNegativeThreshold) else {
            throw .invalidOption(name: "negativeThreshold", value: "\(effectiveNegativeThreshold)", expected: "0...threshold (\(threshold))")
        }
        for (name, v) in [("minSegmentMs", minSegmentMs), ("minSilenceMs", minSilenceMs), ("padMs", padMs),
                          ("minSilenceAtMaxSegmentMs", minSilenceAtMaxSegmentMs)] where !Limits.durationRangeMs.contains(v) {
            throw .invalidOption(name: name, value: "\(v)", expected: "\(Int(Limits.durationRangeMs.lowerBound))...\(Int(Limits.durationRangeMs.upperBound)) ms")
        }
        if let w = detectionWindow, !Limits.detectionWindowRange.contains(w) {
            throw .invalidOption(name: "detectionWindow", value: "\(w)", expected: "\(Limits.detectionWindowRange.lowerBound)...\(Limits.detectionWindowRange.upperBound) steps")
        }
        guard Limits.durationRangeMs.contains(refractoryMs) else {
            throw .invalidOption(name: "refractoryMs", value: "\(refractoryMs)", expected: "\(Int(Limits.durationRangeMs.lowerBound))...\(Int(Limits.durationRangeMs.upperBound)) ms")
        }
        if let events {
            guard detectionWindow == nil else {
                throw .invalidOption(name: "detectionWindow", value: "\(detectionWindow ?? 0)", expected: "none with events (a model gives events or detections)")
            }
            try events.validate()
        }
        if let m = maxSegmentSeconds, !Limits.maxSegmentRangeSeconds.contains(m) {
            throw .invalidOption(name: "maxSegmentSeconds", value: "\(m)",
                                 expected: "\(Limits.maxSegmentRangeSeconds.lowerBound)...\(Int(Limits.maxSegmentRangeSeconds.upperBound)) s")
        }
    }
}
