import EarshotAudio
import EarshotModel
import Foundation

/// A classifier run over a long stream as `earshot listen` runs it (small chunks through a
/// `StreamClassifier`), its segments scored against the truth: which words it found, what it
/// reported where there was none, and how long after each word it said so.
public struct DetectionEvaluation: Sendable {
    /// A word in the stream, in seconds.
    public struct Word: Sendable, Equatable {
        /// Its start (seconds).
        public var start: Double
        /// Its end (seconds).
        public var end: Double
        /// Its label.
        public var label: String

        /// A true word.
        public init(start: Double, end: Double, label: String) {
            self.start = start
            self.end = end
            self.label = label
        }
    }

    /// A segment as it was announced: `announced` is how far into the stream (seconds of audio
    /// pushed) its `.started` event came.
    public struct Detection: Sendable, Equatable {
        /// The segment the detection came from.
        public var segment: Segment
        /// When listen would have announced it (seconds).
        public var announced: Double

        /// A detection announced at `announced`.
        public init(segment: Segment, announced: Double) {
            self.segment = segment
            self.announced = announced
        }
    }

    /// The true words.
    public let words: [Word]
    /// Detections of the labels that count (not ignored).
    public let detections: [Detection]
    /// The stream's length (seconds).
    public let seconds: Double
    /// A detection of a word's label announced from its start to this long after its end finds it.
    public let window: Double
    /// Labels whose words and detections do not count (the background, unknown words).
    public let ignored: Set<String>

    /// Matches each word with the first detection of its label within `window` seconds after it.
    public init(words: [Word], detections: [Detection], seconds: Double, window: Double, ignored: Set<String>) {
        self.words = words
        self.detections = detections
        self.seconds = seconds
        self.window = window
        self.ignored = ignored
        var used = Set<Int>()
        matches = words.filter { !ignored.contains($0.label) }.map { word in
            let found = detections.indices.first { i in
                !used.contains(i) && detections[i].segment.label == word.label
                    && detections[i].announced >= word.start && detections[i].announced <= word.end + window
            }
            if let found { used.insert(found) }
            return (word, found.map { detections[$0] })
        }
        matchedDetections = used
    }

    /// The indices of the detections that found a word (the others are false alarms).
    public let matchedDetections: Set<Int>

    /// How long after a word's end a detection of its label still finds it (seconds), unless
    /// a run says otherwise.
    public static let defaultWindow = 1.0

    /// Each counted word with the detection that found it (nil: missed); each detection finds one word at most.
    public let matches: [(word: Word, detection: Detection?)]

    /// Words counted (not ignored).
    public var keywordCount: Int { words.filter { !ignored.contains($0.label) }.count }
    /// Words found.
    public var hits: Int { matches.filter { $0.detection != nil }.count }
    /// Found over counted.
    public var hitRate: Double { Double(hits) / Double(max(1, keywordCount)) }
    /// Detections that found no word of their label.
    public var falseAlarms: Int { detections.count - hits }
    /// Detections that matched no word, per hour of audio.
    public var falseAlarmsPerHour: Double { seconds > 0 ? Double(falseAlarms) / (seconds / 3600) : 0 }
    /// Where a false alarm fell: what a user tunes against differs for each.
    public enum FalseAlarmKind: String, Sendable, CaseIterable {
        /// On a word of its own label that another detection had already found: a second report.
        case repeated
        /// On a counted word of another label: the word taken for another.
        case otherWord
        /// On a word that is not counted (an unknown word, a distractor): a word taken for a keyword.
        case uncountedWord
        /// On no word: noise or silence taken for a keyword.
        case betweenWords
    }

    /// Each false alarm's kind, in the detections' order: by the word whose span (from its start
    /// to `window` after its end) holds the announcement, a word of the detection's own label
    /// first, then a counted word, then any other.
    public var falseAlarmKinds: [FalseAlarmKind] {
        detections.indices.filter { !matchedDetections.contains($0) }.map { i in
            let d = detections[i]
            let near = words.filter { d.announced >= $0.start && d.announced <= $0.end + window }
            if near.contains(where: { $0.label == d.segment.label }) { return .repeated }
            if near.contains(where: { !ignored.contains($0.label) }) { return .otherWord }
            return near.isEmpty ? .betweenWords : .uncountedWord
        }
    }

    /// Seconds from each found word's end to its announcement, in order.
    public var delays: [Double] { matches.compactMap { m in m.detection.map { $0.announced - m.word.end } }.sorted() }

    /// Runs `model` over `audio` in `chunkSeconds` pieces and scores its segments.
    public static func run(model: Model, audio: [Float], sampleRate: Int, words: [Word], ignoring: Set<String>,
                           options: LabelOptions? = nil, chunkSeconds: Double = 0.02, window: Double = defaultWindow) async throws -> DetectionEvaluation {
        try evaluate(model: model, audio: audio, sampleRate: sampleRate, words: words, ignoring: ignoring, options: options,
                     chunkSeconds: chunkSeconds, window: window)
    }

    /// As `run`, on the caller's thread: one stream's pipeline (what a `StreamClassifier` runs),
    /// `chunkSeconds` at a time, each detection announced when the chunk that completed it is in.
    public static func evaluate(model: Model, audio: [Float], sampleRate: Int, words: [Word], ignoring: Set<String>,
                                options: LabelOptions? = nil, chunkSeconds: Double = 0.02, window: Double = defaultWindow) throws(StreamError) -> DetectionEvaluation {
        var pipeline = try ChannelPipeline(channel: 0, model: model, sourceRate: sampleRate, options: options ?? LabelOptions(model: model))
        let chunk = max(1, Int(chunkSeconds * Double(sampleRate)))
        var detections: [Detection] = []
        var pushed = 0
        func note(_ events: [ClassifierEvent]) {
            for event in events {
                // A segment's start, or a wake-word model's detection (a segment of no length).
                let segment: Segment
                switch event {
                case let .started(s): segment = s
                case let .detected(d): segment = Segment(channel: d.channel, label: d.label, start: d.sample, end: d.sample, sampleRate: d.sampleRate, confidence: d.score)
                default: continue
                }
                guard !ignoring.contains(segment.label) else { continue }
                detections.append(Detection(segment: segment, announced: Double(pushed) / Double(sampleRate)))
            }
        }
        for start in stride(from: 0, to: audio.count, by: chunk) {
            let piece = Array(audio[start..<min(start + chunk, audio.count)])
            pushed += piece.count
            try pipeline.push(piece)
            note(try pipeline.stepReady())
        }
        try pipeline.endInput()
        note(try pipeline.stepReady() + pipeline.finishSegments())
        return DetectionEvaluation(words: words, detections: detections, seconds: Double(audio.count) / Double(sampleRate),
                                   window: window, ignored: ignoring)
    }

    /// start,end,label lines (seconds; a header line is allowed).
    public static func words(csv path: String) throws(StreamError) -> [Word] {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw .data(path: path, reason: error.localizedDescription)
        }
        var words: [Word] = []
        for (n, line) in text.split(whereSeparator: \.isNewline).enumerated() {
            let f = line.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            if n == 0, f.first == "start" { continue }
            guard f.count == 3, let s = Double(f[0]), let e = Double(f[1]), s.isFinite, e.isFinite, e >= s else {
                throw .data(path: path, reason: "line \(n + 1): expected start,end,label in seconds")
            }
            words.append(Word(start: s, end: e, label: f[2]))
        }
        return words
    }
}
