import Earshot
import EarshotRedis

/// An event as a cluster stores it in `P:events:{source}`.
public struct ClusterEvent: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// A segment, or a sound-events model's event (its `best` and `windows` set: stored as
        /// type `event`).
        case segment(Segment)
        case detection(Detection)
        /// The source failed (its error's text); nothing more comes from it.
        case error(String)
        /// The source's audio ended and every event is out.
        case end
    }

    public var source: String
    /// The audio entry whose samples completed it, and its place among that entry's events.
    public var seq: Int, index: Int
    public var kind: Kind

    public init(source: String, seq: Int, index: Int, kind: Kind) {
        self.source = source
        self.seq = seq
        self.index = index
        self.kind = kind
    }

    /// The stream entry id: `seq-index`.
    public var entryID: String { "\(seq)-\(index)" }

    var fields: [RedisArgument] {
        switch kind {
        case let .segment(s):
            let fields: [RedisArgument] = ["label", RedisArgument(s.label), "start", RedisArgument(s.start), "end", RedisArgument(s.end),
                                           "rate", RedisArgument(s.sampleRate), "score", RedisArgument(Self.text(s.confidence))]
            guard let windows = s.windows else { return ["type", "segment"] + fields }
            return ["type", "event"] + fields + ["best", RedisArgument(Self.text(s.best ?? s.confidence)), "windows", RedisArgument(windows)]
        case let .detection(d):
            return ["type", "detection", "label", RedisArgument(d.label), "sample", RedisArgument(d.sample),
                    "rate", RedisArgument(d.sampleRate), "score", RedisArgument(Self.text(d.score))]
        case let .error(text): return ["type", "error", "text", RedisArgument(text)]
        case .end: return ["type", "end"]
        }
    }

    /// Exact: the float's bit pattern round-trips through its shortest decimal.
    static func text(_ v: Float) -> String { "\(v)" }

    /// Reads an entry of an events stream; nil for one that is not an event.
    init?(source: String, id: String, fields: [RedisReply]) {
        let map = StreamReplies.pairs(fields).mapValues { String(decoding: $0, as: UTF8.self) }
        let parts = id.split(separator: "-")
        guard parts.count == 2, let seq = Int(parts[0]), let index = Int(parts[1]) else { return nil }
        self.source = source
        self.seq = seq
        self.index = index
        switch map["type"] {
        case "segment", "event":
            guard let label = map["label"], let start = map["start"].flatMap(Int.init), let end = map["end"].flatMap(Int.init),
                  let rate = map["rate"].flatMap(Int.init), let score = map["score"].flatMap(Float.init) else { return nil }
            var segment = Segment(channel: 0, label: label, start: start, end: end, sampleRate: rate, confidence: score)
            if map["type"] == "event" {
                guard let best = map["best"].flatMap(Float.init), let windows = map["windows"].flatMap(Int.init) else { return nil }
                segment.best = best
                segment.windows = windows
            }
            kind = .segment(segment)
        case "detection":
            guard let label = map["label"], let sample = map["sample"].flatMap(Int.init), let rate = map["rate"].flatMap(Int.init),
                  let score = map["score"].flatMap(Float.init) else { return nil }
            kind = .detection(Detection(channel: 0, label: label, sample: sample, sampleRate: rate, score: score))
        case "error": kind = .error(map["text"] ?? "")
        case "end": kind = .end
        default: return nil
        }
    }
}
