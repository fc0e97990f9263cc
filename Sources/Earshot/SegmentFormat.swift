import EarshotJSON
import EarshotModel
import Foundation

/// Text forms of labelled segments, detections and many-label events, as the command-line tool
/// writes them.
public enum SegmentFormat: String, Sendable, CaseIterable {
    /// `00:00:01.230  00:00:04.560  speech  0.97` (with the channel when there are several)
    case text
    /// One JSON object per line: {"file","channel","label","start","end","score"} (seconds)
    case jsonl
    /// file,channel,label,start,end,score with a header line
    case csv
    /// Audacity label track: start<TAB>end<TAB>label (seconds)
    case audacity
    /// RTTM: SPEAKER <file> <channel> <start> <duration> <NA> <NA> <label> <NA> <NA>
    case rttm
    /// A Raven selection table, as BirdNET-Analyzer writes it: Selection, View, Channel, Begin
    /// Time (s), End Time (s), Low Freq (Hz), High Freq (Hz), Common Name, Species Code,
    /// Confidence, Begin Path, File Offset (s) (tab-separated)
    case raven
    /// BirdNET-Analyzer's CSV: Start (s),End (s),Scientific name,Common name,Confidence,File
    case birdnet

    /// The line before the events (CSV's column names, a Raven table's), if the format has one.
    public var header: String? { header(LineContext()) }

    /// The line before the events of a run: CSV's columns (with `eventColumns`, an event's best
    /// score and window count), a Raven table's, BirdNET-Analyzer's (and a channel column when
    /// `channelColumn`).
    public func header(_ context: LineContext) -> String? {
        switch self {
        case .csv: return "file,channel,label,start,end,score" + (context.eventColumns ? ",best,windows" : "")
        case .raven: return Self.ravenHeader
        case .birdnet: return Self.birdnetHeader + (context.channelColumn ? ",Channel" : "")
        case .text, .jsonl, .audacity, .rttm: return nil
        }
    }

    /// What a line may need beside its event: how the model writes its labels, text put before
    /// a label (an Audacity track's `file:channel`), the Raven table's running selection number,
    /// the time its file starts at in a table of several files and the top of its frequency box,
    /// and which columns the run's header has.
    public struct LineContext: Sendable, Equatable {
        /// How labels are written: "Scientific_Common" labels are split in the formats that show both.
        public var labelForm: ModelManifest.LabelForm = .plain
        /// Put before the label (Audacity with several files or channels: "file:channel ").
        public var labelPrefix = ""
        /// Raven: this row's selection number (from 1, running over the whole table).
        public var selection = 1
        /// Raven: where the file starts in a table of several (seconds: the lengths of those before it).
        public var timeOffset = 0.0
        /// Raven: the selection's top frequency (Hz): the file's Nyquist frequency, at most the model's.
        public var highFrequency = 0
        /// Raven: labels' Species Codes (the model's `labelCodes`); a label without one is written whole.
        public var labelCodes: [String: String] = [:]
        /// CSV: the run has many-label events, whose rows add their best score and window count
        /// (other rows leave them empty).
        public var eventColumns = false
        /// BirdNET's CSV: channels labelled each (a Channel column after BirdNET-Analyzer's, from 1).
        public var channelColumn = false

        /// Plain labels, the first selection, one file, the base columns.
        public init() {}
    }

    /// A segment (or a many-label model's event) as a line of this format.
    public func line(_ s: Segment, file: String, multiChannel: Bool, context: LineContext = LineContext()) -> String {
        if s.isEvent && self != .rttm { return eventLine(s, file: file, multiChannel: multiChannel, context: context) }
        let start = String(format: "%.3f", s.startSeconds), end = String(format: "%.3f", s.endSeconds)
        let score = String(format: "%.2f", s.confidence)
        let label = context.labelPrefix + s.label
        switch self {
        case .text:
            let channel = multiChannel ? "ch\(s.channel)  " : ""
            return "\(channel)\(Self.clock(s.startSeconds))  \(Self.clock(s.endSeconds))  \(label)  \(score)"
        case .jsonl:
            return "{\"file\":\(Self.quoted(file)),\"channel\":\(s.channel),\"label\":\(Self.quoted(label)),\"start\":\(start),\"end\":\(end),\"score\":\(String(format: "%.4f", s.confidence))}"
        case .csv:
            return "\(Self.csvField(file)),\(s.channel),\(Self.csvField(label)),\(start),\(end),\(String(format: "%.4f", s.confidence))"
                + (context.eventColumns ? ",," : "")
        case .audacity:
            return "\(String(format: "%.6f", s.startSeconds))\t\(String(format: "%.6f", s.endSeconds))\t\(label)"
        case .rttm:
            return "SPEAKER \(Self.rttmName(file)) \(s.channel + 1) \(start) \(String(format: "%.3f", s.endSeconds - s.startSeconds)) <NA> <NA> \(label) <NA> <NA>"
        case .raven, .birdnet:
            return eventLine(s, file: file, multiChannel: multiChannel, context: context)
        }
    }

    /// A detection as a line: text `00:00:05.310  Okay Nabu  0.97`, jsonl {"file","channel",
    /// "label","time","score"}, csv, audacity, Raven and BirdNET's CSV with start = end, rttm with
    /// no duration.
    public func line(_ d: Detection, file: String, multiChannel: Bool, context: LineContext = LineContext()) -> String {
        let time = String(format: "%.3f", d.seconds), score = String(format: "%.4f", d.score)
        let label = context.labelPrefix + d.label
        switch self {
        case .text:
            return "\(multiChannel ? "ch\(d.channel)  " : "")\(Self.clock(d.seconds))  \(label)  \(String(format: "%.2f", d.score))"
        case .jsonl:
            return "{\"file\":\(Self.quoted(file)),\"channel\":\(d.channel),\"label\":\(Self.quoted(label)),\"time\":\(time),\"score\":\(score)}"
        case .csv:
            return "\(Self.csvField(file)),\(d.channel),\(Self.csvField(label)),\(time),\(time),\(score)" + (context.eventColumns ? ",," : "")
        case .audacity:
            return "\(String(format: "%.6f", d.seconds))\t\(String(format: "%.6f", d.seconds))\t\(label)"
        case .rttm:
            return "SPEAKER \(Self.rttmName(file)) \(d.channel + 1) \(time) 0.000 <NA> <NA> \(label) <NA> <NA>"
        case .raven, .birdnet:
            let point = Segment(channel: d.channel, label: d.label, start: d.sample, end: d.sample, sampleRate: d.sampleRate, confidence: d.score)
            return eventLine(point, file: file, multiChannel: multiChannel, context: context)
        }
    }

    /// An RTTM file id as a field: white space as underscores. (For rttm, `line`'s `file` is the
    /// id: see `rttmIDs`.)
    static func rttmName(_ id: String) -> String {
        id.replacingOccurrences(of: " ", with: "_").replacingOccurrences(of: "\t", with: "_")
    }

    /// The RTTM file id of each input of a run: its name without extension, unless another input
    /// has the same one (x.wav and x.flac): then its name with the extension, as x.wav.
    public static func rttmIDs(_ files: [String]) -> [String: String] {
        let bare = files.map { URL(fileURLWithPath: $0).deletingPathExtension().lastPathComponent }
        let uses = Dictionary(bare.map { ($0, 1) }, uniquingKeysWith: +)
        var ids: [String: String] = [:]
        for (file, name) in zip(files, bare) {
            ids[file] = uses[name, default: 0] > 1 ? URL(fileURLWithPath: file).lastPathComponent.replacingOccurrences(of: ".", with: "_") : name
        }
        return ids
    }

    /// One step's scores as a CSV row (with `--scores`, csv is the table of step scores):
    /// file,channel,start,end, then one column per label.
    public static func scoresRow(_ s: StepScores, file: String) -> String {
        "\(csvField(file)),\(s.channel),\(String(format: "%.3f", Double(s.start) / Double(s.sampleRate))),"
            + "\(String(format: "%.3f", Double(s.end) / Double(s.sampleRate))),"
            + s.scores.map { String(format: "%.4f", $0) }.joined(separator: ",")
    }

    /// The header of the CSV table of step scores.
    public static func scoresHeader(labels: [String]) -> String {
        "file,channel,start,end," + labels.map(csvField).joined(separator: ",")
    }

    /// A label as a JSON string.
    public static func quotedLabel(_ s: String) -> String { quoted(s) }

    /// One step's scores as a JSON line (jsonl with --scores).
    public static func scoresLine(_ s: StepScores, labels: [String], file: String) -> String {
        let pairs = zip(labels, s.scores).map { "\(quoted($0)):\(String(format: "%.4f", $1))" }.joined(separator: ",")
        return "{\"file\":\(quoted(file)),\"channel\":\(s.channel),\"start\":\(String(format: "%.3f", Double(s.start) / Double(s.sampleRate))),\"end\":\(String(format: "%.3f", Double(s.end) / Double(s.sampleRate))),\"scores\":{\(pairs)}}"
    }

    /// The most labels a text line of step scores (`label --scores`) lists every one of; a model
    /// with more (BirdNET's 6,522) lists its `textTopScores` highest, so a line stays readable.
    public static let textAllScores = 12
    public static let textTopScores = 5

    /// One step's scores as a text line: its time, then each label and score (with more than
    /// `textAllScores` labels, the `textTopScores` highest, highest first, and of how many).
    public static func scoresText(_ s: StepScores, labels: [String]) -> String {
        let time = clock(Double(s.start) / Double(s.sampleRate))
        func pair(_ i: Int) -> String { "\(labels[i]) \(String(format: "%.3f", s.scores[i]))" }
        let count = min(labels.count, s.scores.count)
        guard count > textAllScores else { return "\(time)  " + (0..<count).map(pair).joined(separator: "  ") }
        // The highest few in one pass (no sort of every score), ties in label order.
        var top: [Int] = []
        for i in 0..<count {
            let at = top.firstIndex { s.scores[i] > s.scores[$0] } ?? top.count
            if at < textTopScores { top.insert(i, at: at); if top.count > textTopScores { top.removeLast() } }
        }
        return "\(time)  top \(top.count) of \(count): " + top.map(pair).joined(separator: "  ")
    }

    /// hh:mm:ss.mmm
    public static func clock(_ seconds: Double) -> String {
        let ms = Int((seconds * 1000).rounded())
        return String(format: "%02d:%02d:%02d.%03d", ms / 3_600_000, ms / 60000 % 60, ms / 1000 % 60, ms % 1000)
    }

    static func quoted(_ s: String) -> String { JSONText.quoted(s) }

    static func csvField(_ s: String) -> String {
        s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" }) ? "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : s
    }
}
