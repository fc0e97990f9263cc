import EarshotModel
import Foundation

extension LabelOptions {
    /// The rule of a many-label window classifier (sound events, birds), after the manifest's
    /// `decision.events` and the run's overrides. A label is on in a window when it is among the
    /// window's `topK` best (scores descending, then label order; the background label is never
    /// one) and its score is at least its threshold (`labelThresholds`, else `threshold`). A
    /// label's on-windows form one event while each starts at most `mergeGapSeconds` after the
    /// event's end so far: the event runs from its first window's start to its last window's
    /// end, with the best and the mean of its windows' scores and their count. Events shorter
    /// than `minDurationSeconds` are dropped.
    public struct Events: Sendable, Equatable {
        /// A window holds at most its k best labels; nil: every label at or above its threshold.
        public var topK: Int?
        /// Thresholds of single labels (by label), over `LabelOptions.threshold`.
        public var labelThresholds: [String: Double] = [:]
        /// How long after an event's end a window of its label may start and still join it
        /// (seconds); nil: every window is an event of its own.
        public var mergeGapSeconds: Double? = 0
        /// Events shorter than this are dropped (seconds).
        public var minDurationSeconds: Double = 0
        /// The audio a window's scores describe, ending where its step ends; nil: the step's
        /// block (the model's context and chunk).
        public var windowSamples: Int?
        /// Set: the scores are logits, a window's confidences BirdNET's sigmoid of them
        /// (`ModelManifest.EventRule.sensitivity`), 0.5...1.5.
        public var sensitivity: Double?
        /// Windows cut from the stream's start and reported whole (`ModelManifest.EventRule.alignedWindows`).
        public var alignedWindows = false
        /// At the end, windows go on over zeros while they hold at least this much audio, and
        /// one with less is not one (seconds; `ModelManifest.EventRule.minWindowAudioSeconds`).
        public var minWindowAudioSeconds: Double?
        /// Only these labels can be events (a species list, or what a label filter model keeps);
        /// nil: every label.
        public var onlyLabels: Set<String>?

        /// The defaults: every label at or above the threshold, consecutive windows joined.
        public init() {}

        /// The manifest's rule.
        public init(_ rule: ModelManifest.EventRule) {
            topK = rule.topK
            labelThresholds = rule.labelThresholds ?? [:]
            mergeGapSeconds = rule.merge == false ? nil : rule.mergeGapSeconds ?? 0
            minDurationSeconds = rule.minDurationSeconds ?? 0
            windowSamples = rule.windowSamples
            sensitivity = rule.sensitivity
            alignedWindows = rule.alignedWindows ?? false
            minWindowAudioSeconds = rule.minWindowAudioSeconds
        }

        /// The rule as a manifest says it.
        public var rule: ModelManifest.EventRule {
            ModelManifest.EventRule(topK: topK, labelThresholds: labelThresholds.isEmpty ? nil : labelThresholds,
                                    mergeGapSeconds: mergeGapSeconds ?? 0, merge: mergeGapSeconds == nil ? false : nil,
                                    minDurationSeconds: minDurationSeconds, windowSamples: windowSamples, sensitivity: sensitivity,
                                    alignedWindows: alignedWindows ? true : nil, minWindowAudioSeconds: minWindowAudioSeconds)
        }

        /// Checks every setting against its range (the manifest's).
        /// - Throws: `StreamError.invalidOption` naming the setting, its value and what it may be.
        public func validate() throws(StreamError) {
            if let bad = rule.firstInvalid() { throw .invalidOption(name: bad.field, value: bad.value, expected: bad.expected) }
            if let bad = labelThresholds.first(where: { !$0.value.isFinite }) {
                throw .invalidOption(name: "events.labelThresholds[\(bad.key)]", value: "\(bad.value)", expected: "0...1")
            }
        }

        /// A step's scores as confidences, in place: BirdNET's sigmoid of logits when
        /// `sensitivity` is set, computed in Float as birdnetlib's numpy does
        /// (ref: birdnetlib analyzer.flat_sigmoid: 1 / (1 + exp(-s * clip(x, -15, 15)))).
        public func confidences(_ scores: inout [Float]) {
            guard let sensitivity else { return }
            let slope = Float(2 - sensitivity)
            for i in scores.indices { scores[i] = 1 / (1 + exp(-slope * min(max(scores[i], -15), 15))) }
        }
    }
}

// MARK: Labels from a file or a filter model

extension LabelOptions.Events {
    /// Which of a model's labels can be events, as a run chooses them (`label`, `listen`,
    /// `serve` and `worker` take the same options).
    public enum LabelChoice: Sendable, Equatable {
        /// Every label.
        case all
        /// The labels a file lists, a label a line (`labelList(file:labels:)`).
        case list(path: String)
        /// The labels the model's label filter (BirdNET's location/week model) keeps for a place
        /// and a week: latitude -90...90 (degrees north), longitude -180...180 (degrees east),
        /// week 1...48 of a 48-week year (4 a month), or -1 for the whole year.
        case place(latitude: Double, longitude: Double, week: Int)

        /// A place's latitudes (degrees north), longitudes (degrees east) and weeks (of a 48-week
        /// year, 4 a month; `wholeYear` for all of it): what `.place` takes and the CLI offers.
        public static let latitudes: ClosedRange<Double> = -90...90
        public static let longitudes: ClosedRange<Double> = -180...180
        public static let weeks: ClosedRange<Int> = 1...48
        public static let wholeYear = -1
    }

    /// The labels of `model` that `choice` keeps: nil for `.all`; a list's labels; or those the
    /// package's label filter model scores at least its rule's threshold for the place, run once
    /// on the rule's inputs in order (ref: birdnetlib species.SpeciesList.return_list).
    /// - Throws: `StreamError.data` for a list (its path and line: an unknown label with the
    ///   nearest, an unreadable file, no labels); `StreamError.invalidOption` naming `lat`, `lon`
    ///   or `week` out of range, or `labelFilter` when the model has none; `StreamError.model`
    ///   when the filter model cannot be loaded or run.
    public static func labels(kept choice: LabelChoice, by model: Model) throws(StreamError) -> Set<String>? {
        switch choice {
        case .all:
            return nil
        case let .list(path):
            return try labelList(file: path, labels: model.labels)
        case let .place(latitude, longitude, week):
            if !LabelChoice.latitudes.contains(latitude) {
                throw .invalidOption(name: "lat", value: "\(latitude)", expected: "\(degrees(LabelChoice.latitudes)) (degrees north)")
            }
            if !LabelChoice.longitudes.contains(longitude) {
                throw .invalidOption(name: "lon", value: "\(longitude)", expected: "\(degrees(LabelChoice.longitudes)) (degrees east)")
            }
            if week != LabelChoice.wholeYear && !LabelChoice.weeks.contains(week) {
                throw .invalidOption(name: "week", value: "\(week)",
                                     expected: "\(LabelChoice.weeks) (a 48-week year, 4 a month), or \(LabelChoice.wholeYear) for the whole year")
            }
            guard let rule = model.manifest.decision?.events?.labelFilter else {
                throw .invalidOption(name: "labelFilter", value: "none in \(model.name)",
                                     expected: "a package with a label filter model (BirdNET's location model; import --label-filter), or a species list")
            }
            let folder = URL(fileURLWithPath: model.path).appendingPathComponent(rule.model ?? ModelManifest.EventRule.LabelFilter.defaultFolder)
            let filter: Model
            do { filter = try Model(contentsOf: folder) } catch { throw .model(error) }
            let values: [String: Double] = ["lat": latitude, "lon": longitude, "week": Double(week)]
            return try filtered(labels: model.labels, by: filter, values: rule.inputs.map { Float(values[$0] ?? 0) }, threshold: rule.threshold)
        }
    }

    /// A range of whole degrees as users type it ("-90...90").
    private static func degrees(_ range: ClosedRange<Double>) -> String { "\(Int(range.lowerBound))...\(Int(range.upperBound))" }

    /// The labels a file lists (`--species-list`: BirdNET's species list, a label a line as the
    /// model names it, "Scientific name_Common name"); blank lines and lines starting with '#'
    /// are skipped.
    /// - Throws: `StreamError.data` naming the file and the line: a label none of `labels` (with
    ///   the nearest), a file that cannot be read, is larger than `maxThresholdsFileBytes`, or
    ///   lists no label.
    public static func labelList(file path: String, labels: [String]) throws(StreamError) -> Set<String> {
        let lines = try readLines(path)
        let known = Set(labels)
        var out: Set<String> = []
        for (n, raw) in lines.enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            guard known.contains(line) else {
                let guess = Spelling.closest(line, in: labels).map { " (did you mean '\($0)'?)" } ?? ""
                throw .data(path: path, reason: "line \(n + 1): '\(line)' is not a label of the model\(guess)")
            }
            out.insert(line)
        }
        guard !out.isEmpty else { throw .data(path: path, reason: "no labels (one a line, as the model names them)") }
        return out
    }

    /// The lines of a small text file (at most `maxThresholdsFileBytes`).
    static func readLines(_ path: String) throws(StreamError) -> [Substring] {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw .data(path: path, reason: "cannot read the file (no such file, or not allowed)") }
        defer { try? handle.close() }
        let bytes: Data
        do { bytes = try handle.read(upToCount: maxThresholdsFileBytes + 1) ?? Data() } catch {
            throw .data(path: path, reason: "cannot read the file: \(error.localizedDescription)")
        }
        guard bytes.count <= maxThresholdsFileBytes else { throw .data(path: path, reason: "larger than \(maxThresholdsFileBytes >> 20) MiB") }
        // "\r\n" is one Character: lines end at any line break.
        return String(decoding: bytes, as: UTF8.self).split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
    }

    /// The labels a label filter model keeps: `filter` run once on `values` (its inputs in
    /// order), each of `labels` whose score is at least `threshold` (ref: birdnetlib
    /// species.SpeciesList.return_list, BirdNET's location/week model).
    /// - Throws: `StreamError.invalidOption` when the filter's scores are not one per label;
    ///   `StreamError.model` when it fails.
    public static func filtered(labels: [String], by filter: Model, values: [Float], threshold: Double) throws(StreamError) -> Set<String> {
        var state = filter.makeState()
        let scores: [Float]
        do { scores = try filter.prediction(from: values, using: &state) } catch { throw .model(error) }
        guard scores.count == labels.count else {
            throw .invalidOption(name: "label filter \(filter.path)", value: "\(scores.count) scores", expected: "one per label (\(labels.count))")
        }
        return Set(labels.indices.filter { Double(scores[$0]) >= threshold }.map { labels[$0] })
    }
}

// MARK: Thresholds from a file

extension LabelOptions.Events {
    /// The most bytes a thresholds file may hold (a line for each of a hundred thousand labels).
    public static let maxThresholdsFileBytes = 16 << 20

    /// Per-label thresholds from a file, for models of thousands of labels: a line per label,
    /// `LABEL,X` or `LABEL<TAB>X`, split at the line's last comma or tab (so a label may hold
    /// commas); blank lines, lines starting with '#', and a first line whose value is not a number
    /// (a header: `label,threshold`) are skipped. A later line for the same label wins.
    /// - Parameter labels: the labels the file may name.
    /// - Throws: `StreamError.data` naming the file and the line: a label none of `labels`
    ///   (with the nearest), a value outside 0...1, a line without a value, a file that cannot be
    ///   read or is larger than `maxThresholdsFileBytes`.
    public static func thresholds(file path: String, labels: [String]) throws(StreamError) -> [String: Double] {
        let known = Set(labels)
        var out: [String: Double] = [:]
        let lines = try readLines(path)
        var first = true
        for (n, line) in lines.enumerated() {
            guard !line.allSatisfy(\.isWhitespace), !line.hasPrefix("#") else { continue }
            defer { first = false }
            guard let cut = line.lastIndex(where: { $0 == "," || $0 == "\t" }) else {
                throw .data(path: path, reason: "line \(n + 1): expected LABEL,THRESHOLD (or LABEL<TAB>THRESHOLD)")
            }
            let label = line[..<cut].trimmingCharacters(in: .whitespaces)
            let text = line[line.index(after: cut)...].trimmingCharacters(in: .whitespaces)
            guard let value = Double(text) else {
                if first { continue }  // a header
                throw .data(path: path, reason: "line \(n + 1): '\(text)' is not a number")
            }
            guard value.isFinite, ModelManifest.Decision.scoreRange.contains(value) else {
                throw .data(path: path, reason: "line \(n + 1): threshold \(text) of '\(label)': expected 0...1")
            }
            guard known.contains(label) else {
                let guess = Spelling.closest(label, in: labels).map { " (did you mean '\($0)'?)" } ?? ""
                throw .data(path: path, reason: "line \(n + 1): '\(label)' is not a label of the model\(guess)")
            }
            out[label] = value
        }
        return out
    }
}

// MARK: Snapshots

extension LabelOptions.Events {
    /// The rule in a snapshot (format 2): top k, the label thresholds in label order, the gap,
    /// the minimum duration and the window; from format 3 on, the sensitivity, aligned windows,
    /// the least audio of a window, and the labels kept.
    func save(to w: inout SnapshotWriter, version: UInt32) {
        w.optionalInt(topK)
        w.int(labelThresholds.count)
        for (label, v) in labelThresholds.sorted(by: { $0.key < $1.key }) { w.string(label); w.double(v) }
        w.optionalDouble(mergeGapSeconds)
        w.double(minDurationSeconds)
        w.optionalInt(windowSamples)
        guard version >= 3 else { return }
        w.optionalDouble(sensitivity)
        w.bool(alignedWindows)
        w.optionalDouble(minWindowAudioSeconds)
        w.bool(onlyLabels != nil)
        let only = (onlyLabels ?? []).sorted()
        w.int(only.count)
        for label in only { w.string(label) }
    }

    init(from r: inout SnapshotReader, version: UInt32) throws(StreamError) {
        self.init()
        topK = try r.optionalInt(in: ModelManifest.EventRule.topKRange, "top k")
        for _ in 0..<(try r.int(in: 0...(1 << 20), "label thresholds")) {
            let label = try r.string()
            labelThresholds[label] = try r.double("a label's threshold")
        }
        mergeGapSeconds = try r.optionalDouble("merge gap")
        minDurationSeconds = try r.double("minimum duration")
        windowSamples = try r.optionalInt(in: ModelManifest.EventRule.windowRange, "window samples")
        guard version >= 3 else { return }
        sensitivity = try r.optionalDouble("sensitivity")
        alignedWindows = try r.bool()
        minWindowAudioSeconds = try r.optionalDouble("least window audio")
        let hasOnly = try r.bool()
        var only: Set<String> = []
        for _ in 0..<(try r.int(in: 0...(1 << 20), "labels kept")) { only.insert(try r.string()) }
        onlyLabels = hasOnly ? only : nil
    }
}
