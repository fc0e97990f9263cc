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
        /// Set: the model's scores are logits, and a window's confidence in a label is
        /// 1 / (1 + exp(-(2 - sensitivity) * clip(x, -15, 15))), BirdNET's sigmoid (a sensitivity
        /// above 1 raises low confidences); 0.5...1.5. Nil: the scores are confidences.
        public var sensitivity: Double?
        /// true: windows are cut from the stream's start as BirdNET-Analyzer cuts a file: the
        /// first starts at 0 (a window that would reach before the start is not one), each is
        /// reported whole (its end a window after its start, past the audio's end at the end).
        public var alignedWindows: Bool?
        /// At the end of the audio, windows go on over zeros while they hold at least this much
        /// audio (seconds; BirdNET: 1.5), and one with less is not one. Nil: the last window is
        /// the one holding the last samples.
        public var minWindowAudioSeconds: Double?
        /// Labels a model of their own says may occur (BirdNET's location/week model): run once
        /// per stream on the run's values, it keeps the labels it scores at least `threshold`.
        public var labelFilter: LabelFilter?
        /// The highest frequency the model hears (Hz; BirdNET: 15,000): a Raven table's selection
        /// box stops there, or at the audio's Nyquist frequency when that is lower. Nil: the Nyquist.
        public var highFrequency: Int?

        /// A rule (nil: the defaults).
        public init(topK: Int? = nil, labelThresholds: [String: Double]? = nil, mergeGapSeconds: Double? = nil, merge: Bool? = nil,
                    minDurationSeconds: Double? = nil, windowSamples: Int? = nil, sensitivity: Double? = nil, alignedWindows: Bool? = nil,
                    minWindowAudioSeconds: Double? = nil, labelFilter: LabelFilter? = nil, highFrequency: Int? = nil) {
            self.topK = topK
            self.labelThresholds = labelThresholds
            self.mergeGapSeconds = mergeGapSeconds
            self.merge = merge
            self.minDurationSeconds = minDurationSeconds
            self.windowSamples = windowSamples
            self.sensitivity = sensitivity
            self.alignedWindows = alignedWindows
            self.minWindowAudioSeconds = minWindowAudioSeconds
            self.labelFilter = labelFilter
            self.highFrequency = highFrequency
        }

        /// A model in the package (a folder in it) that tells which labels may occur: its input
        /// is the run's values named by `inputs` (e.g. latitude, longitude and week of the year),
        /// its scores one per label of the main model.
        public struct LabelFilter: Codable, Sendable, Equatable {
            /// The filter model's folder, inside the package (default "label-filter").
            public var model: String?
            /// The values its input takes, in order: "lat" (degrees north, -90...90), "lon"
            /// (degrees east, -180...180), "week" (of a 48-week year, 1...48; -1 the whole year).
            public var inputs: [String]
            /// A label scored at least this may occur.
            public var threshold: Double

            /// A filter.
            public init(model: String? = nil, inputs: [String], threshold: Double) {
                self.model = model
                self.inputs = inputs
                self.threshold = threshold
            }

            /// The folder a package's filter model is imported to when the rule names none.
            public static let defaultFolder = "label-filter"
            /// The values a filter's input may name.
            public static let knownInputs = ["lat", "lon", "week"]
        }

        /// BirdNET's sensitivities.
        public static let sensitivityRange: ClosedRange<Double> = 0.5...1.5

        /// Labels a window may hold.
        public static let topKRange: ClosedRange<Int> = 1...100_000
        /// Gaps and durations in seconds: up to a day.
        public static let secondsRange: ClosedRange<Double> = 0...86_400
        /// A selection box's top: up to 1 MHz.
        public static let frequencyRange: ClosedRange<Int> = 1...1_000_000
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
            if let f = highFrequency, !Self.frequencyRange.contains(f) {
                return ("events.highFrequency", "\(f)", "\(Self.frequencyRange.lowerBound)...\(Self.frequencyRange.upperBound) Hz")
            }
            if let w = windowSamples, !Self.windowRange.contains(w) {
                return ("events.windowSamples", "\(w)", "\(Self.windowRange.lowerBound)...\(Self.windowRange.upperBound)")
            }
            if let v = sensitivity, !Self.sensitivityRange.contains(v) { return ("events.sensitivity", "\(v)", "0.5...1.5") }
            if let v = minWindowAudioSeconds, !(v > 0 && v <= Self.secondsRange.upperBound) {
                return ("events.minWindowAudioSeconds", "\(v)", "above 0, up to \(Int(Self.secondsRange.upperBound)) s")
            }
            if let f = labelFilter {
                if !Decision.scoreRange.contains(f.threshold) { return ("events.labelFilter.threshold", "\(f.threshold)", "0...1") }
                if let bad = f.inputs.first(where: { !LabelFilter.knownInputs.contains($0) }) {
                    return ("events.labelFilter.inputs", bad, LabelFilter.knownInputs.joined(separator: ", "))
                }
                if let m = f.model, m.isEmpty || m.hasPrefix("/") || m.split(separator: "/").contains("..") {
                    return ("events.labelFilter.model", m, "a folder inside the package")
                }
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
