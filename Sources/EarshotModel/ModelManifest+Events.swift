extension ModelManifest {
    /// A many-label window classifier's decision (sound events, birds): which labels a window
    /// holds, and how windows of one label join into an event. Every field can be overridden per
    /// run; a label is on in a window when it is among the window's `topK` best and its score is
    /// at least its threshold (`labelThresholds`, else the decision's `threshold`).
    public struct EventRule: Codable, Sendable, Equatable {
        /// A window holds at most its k best labels (scores descending, then label order); nil:
        /// every label at or above its threshold.
        public var topK: Int?
        /// Thresholds of single labels, over the decision's `threshold` (which is every other
        /// label's).
        public var labelThresholds: [String: Double]?
        /// A label's next window joins its event when it starts at most this long after the
        /// event's end (default 0: consecutive and overlapping windows join).
        public var mergeGapSeconds: Double?
        /// false: every window is an event of its own (as BirdNET-Analyzer lists them); default true.
        public var merge: Bool?
        /// Events shorter than this are dropped (default 0).
        public var minDurationSeconds: Double?
        /// The audio a window's scores describe, ending where its step ends (default the step's
        /// block: context and chunk).
        public var windowSamples: Int?

        /// A rule (nil: the defaults).
        public init(topK: Int? = nil, labelThresholds: [String: Double]? = nil, mergeGapSeconds: Double? = nil, merge: Bool? = nil,
                    minDurationSeconds: Double? = nil, windowSamples: Int? = nil) {
            self.topK = topK
            self.labelThresholds = labelThresholds
            self.mergeGapSeconds = mergeGapSeconds
            self.merge = merge
            self.minDurationSeconds = minDurationSeconds
            self.windowSamples = windowSamples
        }

        /// Labels a window may hold.
        public static let topKRange: ClosedRange<Int> = 1...100_000
        /// Gaps and durations in seconds: up to a day.
        public static let secondsRange: ClosedRange<Double> = 0...86_400
        /// A window's samples: up to 2^30.
        public static let windowRange: ClosedRange<Int> = 1...(1 << 30)

        /// The first setting outside its range: (field, value, the range expected), or nil.
        public func firstInvalid() -> (field: String, value: String, expected: String)? {
            if let k = topK, !Self.topKRange.contains(k) { return ("events.topK", "\(k)", "\(Self.topKRange.lowerBound)...\(Self.topKRange.upperBound)") }
            for (label, v) in (labelThresholds ?? [:]).sorted(by: { $0.key < $1.key }) where !Decision.scoreRange.contains(v) {
                return ("events.labelThresholds[\(label)]", "\(v)", "0...1")
            }
            let seconds: [(String, Double?)] = [("events.mergeGapSeconds", mergeGapSeconds), ("events.minDurationSeconds", minDurationSeconds)]
            for case let (name, v?) in seconds where !Self.secondsRange.contains(v) {
                return (name, "\(v)", "0...\(Int(Self.secondsRange.upperBound)) s")
            }
            if let w = windowSamples, !Self.windowRange.contains(w) {
                return ("events.windowSamples", "\(w)", "\(Self.windowRange.lowerBound)...\(Self.windowRange.upperBound)")
            }
            return nil
        }
    }

    /// How a model's labels are written, so that formats can show their parts.
    public enum LabelForm: String, ManifestChoice {
        /// A label is one name.
        case plain
        /// "Scientific name_Common name" (BirdNET's labels): split at the first underscore.
        case scientificCommon = "scientific_common"
    }
}

extension ModelManifest.LabelForm {
    /// A label's scientific and common names: for `scientificCommon` the parts before and after
    /// its first underscore (both the label when it has none, as BirdNET-Analyzer splits it);
    /// for `plain` the label twice.
    public func names(_ label: String) -> (scientific: String, common: String) {
        guard self == .scientificCommon, let cut = label.firstIndex(of: "_") else { return (label, label) }
        return (String(label[..<cut]), String(label[label.index(after: cut)...]))
    }
}
