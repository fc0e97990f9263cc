import EarshotModel
import Foundation

/// Many-label events in every format, and the formats of bioacoustics: a Raven selection table
/// and BirdNET-Analyzer's CSV (their columns as BirdNET-Analyzer writes them,
/// birdnet_analyzer/analyze/utils.py), and the `--scores` table of a window's best labels.
extension SegmentFormat {
    /// BirdNET-Analyzer's Raven selection table header (RAVEN_TABLE_HEADER).
    static let ravenHeader = "Selection\tView\tChannel\tBegin Time (s)\tEnd Time (s)\tLow Freq (Hz)\tHigh Freq (Hz)\tCommon Name\tSpecies Code\tConfidence\tBegin Path\tFile Offset (s)"
    /// BirdNET-Analyzer's CSV header (CSV_HEADER).
    static let birdnetHeader = "Start (s),End (s),Scientific name,Common name,Confidence,File"

    /// Seconds as BirdNET-Analyzer prints its timestamps (Python's str of a rounded float), to
    /// the millisecond: 0.0, 1.5, 12.062.
    public static func decimal(_ seconds: Double) -> String {
        var text = String(format: "%.3f", seconds)
        while text.hasSuffix("0") && !text.hasSuffix(".0") { text.removeLast() }
        return text
    }

    /// An event (or, in a Raven table and BirdNET's CSV, a segment or detection) as a line. In
    /// the tables of bioacoustics (Raven, BirdNET's CSV, Audacity) an event's confidence is its
    /// best window's score, as BirdNET-Analyzer lists a window's; text, JSON lines and CSV give
    /// the mean, the best and the window count.
    func eventLine(_ s: Segment, file: String, multiChannel: Bool, context: LineContext) -> String {
        let names = context.labelForm.names(s.label)
        let confidence = String(format: "%.4f", s.best ?? s.confidence)
        let start = Self.decimal(s.startSeconds), end = Self.decimal(s.endSeconds)
        let mean = String(format: "%.4f", s.confidence), windows = s.windows ?? 1
        switch self {
        case .raven:
            let fields = [String(context.selection), "Spectrogram 1", String(s.channel + 1), Self.decimal(context.timeOffset + s.startSeconds),
                          Self.decimal(context.timeOffset + s.endSeconds), "0", String(context.highFrequency), Self.field(names.common),
                          Self.field(context.labelCodes[s.label] ?? s.label), confidence, Self.field(file), start]
            return fields.joined(separator: "\t")
        case .birdnet:
            let fields = [start, end, Self.csvField(names.scientific), Self.csvField(names.common), confidence, Self.csvField(file)]
            return (fields + (context.channelColumn ? [String(s.channel + 1)] : [])).joined(separator: ",")
        case .audacity:
            // BirdNET-Analyzer's labels: underscores as ", " ("Scientific, Common"), then the confidence.
            let label = context.labelForm == .scientificCommon ? s.label.replacingOccurrences(of: "_", with: ", ") : s.label
            return "\(start)\t\(end)\t\(Self.field(context.labelPrefix + label))\t\(confidence)"
        case .text:
            let shown = context.labelForm == .scientificCommon && names.common != names.scientific ? "\(names.common) (\(names.scientific))" : s.label
            return "\(multiChannel ? "ch\(s.channel)  " : "")\(Self.clock(s.startSeconds))  \(Self.clock(s.endSeconds))  \(shown)  "
                + "\(String(format: "%.2f", s.confidence))  best \(String(format: "%.2f", s.best ?? s.confidence)), \(windows) window\(windows == 1 ? "" : "s")"
        case .jsonl:
            let both = context.labelForm == .scientificCommon ? ",\"scientific\":\(Self.quoted(names.scientific)),\"common\":\(Self.quoted(names.common))" : ""
            return "{\"file\":\(Self.quoted(file)),\"channel\":\(s.channel),\"label\":\(Self.quoted(s.label))\(both),"
                + "\"start\":\(String(format: "%.3f", s.startSeconds)),\"end\":\(String(format: "%.3f", s.endSeconds)),\"score\":\(mean),\"best\":\(confidence),\"windows\":\(windows)}"
        case .csv:
            // The best and window count where the header has their columns (`eventColumns`).
            return "\(Self.csvField(file)),\(s.channel),\(Self.csvField(s.label)),\(String(format: "%.3f", s.startSeconds)),\(String(format: "%.3f", s.endSeconds)),"
                + mean + (context.eventColumns ? ",\(confidence),\(windows)" : "")
        case .rttm:
            return line(s, file: file, multiChannel: multiChannel, context: context)  // an event is a segment there
        }
    }

    /// A field of a tab-separated line: tabs and line breaks in it as spaces.
    static func field(_ s: String) -> String {
        s.contains(where: { $0 == "\t" || $0.isNewline }) ? String(s.map { $0 == "\t" || $0.isNewline ? " " : $0 }) : s
    }

    // MARK: The k best labels of each window (--scores of a many-label model)

    /// The header of the CSV table of each step's best labels: file,channel,start,end, then
    /// label1,score1 ... labelk,scorek.
    public static func topScoresHeader(k: Int) -> String {
        "file,channel,start,end," + (1...max(k, 1)).map { "label\($0),score\($0)" }.joined(separator: ",")
    }

    /// One step's best labels (`top`, best first) in a format: a CSV row, a JSON line
    /// {"file","channel","start","end","top":[{"label","score"},...]}, or a text line.
    public func topScores(_ s: StepScores, labels: [String], top: [Int], file: String) -> String {
        let start = String(format: "%.3f", Double(s.start) / Double(s.sampleRate)), end = String(format: "%.3f", Double(s.end) / Double(s.sampleRate))
        switch self {
        case .csv:
            return "\(Self.csvField(file)),\(s.channel),\(start),\(end)," + top.map { "\(Self.csvField(labels[$0])),\(String(format: "%.4f", s.scores[$0]))" }.joined(separator: ",")
        case .jsonl:
            let pairs = top.map { "{\"label\":\(Self.quoted(labels[$0])),\"score\":\(String(format: "%.4f", s.scores[$0]))}" }.joined(separator: ",")
            return "{\"file\":\(Self.quoted(file)),\"channel\":\(s.channel),\"start\":\(start),\"end\":\(end),\"top\":[\(pairs)]}"
        default:
            return "\(Self.clock(Double(s.start) / Double(s.sampleRate)))  " + top.map { "\(labels[$0]) \(String(format: "%.3f", s.scores[$0]))" }.joined(separator: "  ")
        }
    }
}
