import EarshotJSON
import EarshotModel
import Foundation

/// Text forms of labelled segments, as the command-line tool writes them.
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

    /// The line before the events (CSV's column names), if the format has one.
    public var header: String? { self == .csv ? "file,channel,label,start,end,score" : nil }

    /// A segment as a line of this format.
    public func line(_ s: Segment, file: String, multiChannel: Bool) -> String {
        let start = String(format: "%.3f", s.startSeconds), end = String(format: "%.3f", s.endSeconds)
        let score = String(format: "%.2f", s.confidence)
        switch self {
        case .text:
            let channel = multiChannel ? "ch\(s.channel)  " : ""
            return "\(channel)\(Self.clock(s.startSeconds))  \(Self.clock(s.endSeconds))  \(s.label)  \(score)"
        case .jsonl:
            return "{\"file\":\(Self.quoted(file)),\"channel\":\(s.channel),\"label\":\(Self.quoted(s.label)),\"start\":\(start),\"end\":\(end),\"score\":\(String(format: "%.4f", s.confidence))}"
        case .csv:
            return "\(Self.csvField(file)),\(s.channel),\(Self.csvField(s.label)),\(start),\(end),\(String(format: "%.4f", s.confidence))"
        case .audacity:
            return "\(String(format: "%.6f", s.startSeconds))\t\(String(format: "%.6f", s.endSeconds))\t\(s.label)"
        case .rttm:
            return "SPEAKER \(Self.rttmName(file)) \(s.channel + 1) \(start) \(String(format: "%.3f", s.endSeconds - s.startSeconds)) <NA> <NA> \(s.label) <NA> <NA>"
        }
    }

    /// A detection as a line: text `00:00:05.310  Okay Nabu  0.97`, jsonl {"file","channel",
    /// "label","time","score"}, csv and audacity with start = end, rttm with no duration.
    public func line(_ d: Detection, file: String, multiChannel: Bool) -> String {
        let time = String(format: "%.3f", d.seconds), score = String(format: "%.4f", d.score)
        switch self {
        case .text:
            return "\(multiChannel ? "ch\(d.channel)  " : "")\(Self.clock(d.seconds))  \(d.label)  \(String(format: "%.2f", d.score))"
        case .jsonl:
            return "{\"file\":\(Self.quoted(file)),\"channel\":\(d.channel),\"label\":\(Self.quoted(d.label)),\"time\":\(time),\"score\":\(score)}"
        case .csv:
            return "\(Self.csvField(file)),\(d.channel),\(Self.csvField(d.label)),\(time),\(time),\(score)"
        case .audacity:
            return "\(String(format: "%.6f", d.seconds))\t\(String(format: "%.6f", d.seconds))\t\(d.label)"
        case .rttm:
            return "SPEAKER \(Self.rttmName(file)) \(d.channel + 1) \(time) 0.000 <NA> <NA> \(d.label) <NA> <NA>"
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
