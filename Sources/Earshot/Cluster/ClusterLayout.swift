import EarshotRedis
import EarshotAudio
import Glibc

/// Where a cluster keeps its streams in Redis, all under one prefix (default `earshot`):
///
/// - `P:sources`: the registry, one entry `{source}` per source to run. Workers read it in
///   their consumer group; an entry stays pending with the worker that owns the source until
///   the source ends, so a dead worker's sources are claimed (XAUTOCLAIM) by another.
/// - `P:audio:{source}`: the source's audio, entries `{seq, rate, channels, format, audio[, t]}`
///   (seq 1, 2, 3, ...; format `s16` or `f32`, little-endian, interleaved), and last `{seq, end}`.
/// - `P:events:{source}`: the events, entry id `{seq}-{k}`: the k-th event the audio of entry
///   seq completed. A replay writes the same ids, which Redis refuses as not new: a reader
///   sees each event once.
/// - `P:checkpoint:{source}`: a hash `{seq, entry, model, snapshot, done}`, written with the
///   acknowledgement of the audio it covers in one script.
/// - `P:active`: the set of sources not yet ended; `P:workers`: live workers by heartbeat;
///   `P:stats`: each worker's figures every second.
/// - `P:idle`: a hash of the sources set aside for sending nothing (`WorkerOptions.idleAfter`),
///   each with the id of the last audio entry read; a worker puts one back on the registry
///   when its audio stream has an entry after that.
public struct ClusterKeys: Sendable, Equatable {
    public var prefix: String
    public init(prefix: String = "earshot") { self.prefix = prefix }
    public var sources: String { "\(prefix):sources" }
    public var active: String { "\(prefix):active" }
    public var workers: String { "\(prefix):workers" }
    public var stats: String { "\(prefix):stats" }
    public var idle: String { "\(prefix):idle" }
    public func audio(_ source: String) -> String { "\(prefix):audio:\(source)" }
    public func events(_ source: String) -> String { "\(prefix):events:\(source)" }
    public func checkpoint(_ source: String) -> String { "\(prefix):checkpoint:\(source)" }

    /// A source id: 1-200 bytes of printable ASCII without spaces.
    public static func validate(source: String) throws(ClusterError) {
        let bytes = Array(source.utf8)
        guard (1...200).contains(bytes.count), bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw .badSource(source: source, reason: "a source id is 1 to 200 printable ASCII characters without spaces")
        }
    }
}

/// Errors of publishers, workers and event readers.
public enum ClusterError: Error, Sendable, Equatable, CustomStringConvertible {
    case redis(RedisError)
    case badSource(source: String, reason: String)
    /// An audio entry that cannot be used; the source fails alone.
    case malformedEntry(source: String, entry: String, reason: String)
    /// An audio entry whose audio is over the limit (`WorkerOptions.maxEntryBytes`); the source
    /// fails alone, and the bytes are never held.
    case entryTooLarge(source: String, entry: String, bytes: Int, limit: Int)
    case stream(StreamError)

    public var description: String {
        switch self {
        case let .redis(e): return e.description
        case let .badSource(source, reason): return "source \(source): \(reason)"
        case let .malformedEntry(source, entry, reason): return "source \(source), entry \(entry): \(reason)"
        case let .entryTooLarge(source, entry, bytes, limit):
            return "source \(source), entry \(entry): \(bytes) bytes of audio, over the limit of \(limit) bytes an entry (--max-entry-bytes)"
        case let .stream(e): return e.description
        }
    }
}

/// Bounds every publisher and worker keeps unless told otherwise.
public enum ClusterLimits {
    /// The most bytes of audio in one entry: 1 MiB (32 s of 16 kHz mono s16; 100 ms entries
    /// of 48 kHz stereo f32 are 38 KB).
    public static let maxEntryBytes = 1 << 20
}

/// Samples in an audio entry.
public enum ClusterSampleFormat: String, Sendable, CaseIterable {
    /// 16-bit signed integers, little-endian.
    case s16
    /// 32-bit floats, little-endian.
    case f32

    var bytesPerSample: Int { self == .s16 ? 2 : 4 }

    /// Frames of `channels` samples in this format, as `PCMFormat` decodes them.
    func pcm(channels: Int) -> PCMFormat { PCMFormat(encoding: self == .s16 ? .integer(bytes: 2) : .float32, channels: channels) }
}

/// One entry of a source's audio stream.
struct AudioEntry {
    var id: String
    var seq: Int
    var end: Bool
    var rate: Int
    var channels: Int
    /// Mono samples (channels mixed).
    var samples: [Float]
    /// When the publisher wrote it (microseconds since 1970), for latency figures.
    var publishedMicros: Int?

    /// The largest entry number: far beyond any stream's life (2^53 entries of 1 ms is 285,000
    /// years), and the next one's number never overflows.
    static let maxSeq = 1 << 53

    /// Reads the fields of an XREADGROUP / XRANGE entry; audio over `maxBytes` is refused
    /// (a connection that skipped it gives its length alone).
    init(id: String, fields: [RedisReply], source: String, maxBytes: Int = ClusterLimits.maxEntryBytes) throws(ClusterError) {
        func bad(_ why: String) -> ClusterError { .malformedEntry(source: source, entry: id, reason: why) }
        let all = StreamReplies.fields(fields)
        switch all["audio"] {
        case let .oversized(n): throw .entryTooLarge(source: source, entry: id, bytes: n, limit: maxBytes)
        case let audio?: if let n = audio.bytes?.count, n > maxBytes { throw .entryTooLarge(source: source, entry: id, bytes: n, limit: maxBytes) }
        case nil: break
        }
        let map = all.compactMapValues(\.bytes)
        func int(_ key: String) -> Int? { map[key].flatMap { Int(String(decoding: $0, as: UTF8.self)) } }
        self.id = id
        self.seq = try Self.seq(map["seq"], bad: bad)
        // A time no publisher could have written is no latency figure.
        publishedMicros = int("t").flatMap { (0...(1 << 60)).contains($0) ? $0 : nil }
        if map["end"] != nil {
            end = true; rate = 0; channels = 0; samples = []
            return
        }
        end = false
        guard let rate = int("rate"), (1000...384_000).contains(rate) else { throw bad("rate must be 1000...384000 Hz") }
        guard let channels = int("channels"), (1...64).contains(channels) else { throw bad("channels must be 1...64") }
        guard let name = map["format"].map({ String(decoding: $0, as: UTF8.self) }), let format = ClusterSampleFormat(rawValue: name) else {
            throw bad("format must be s16 or f32")
        }
        guard let audio = map["audio"] else { throw bad("no audio field") }
        let frameBytes = format.bytesPerSample * channels
        guard audio.count % frameBytes == 0 else { throw bad("\(audio.count) audio bytes are not whole frames of \(frameBytes) bytes") }
        self.rate = rate
        self.channels = channels
        samples = Self.decode(audio, format: format, channels: channels)
        if let k = samples.firstIndex(where: { !$0.isFinite }) { throw bad("sample \(k) is \(samples[k])") }
    }

    /// An entry's seq: a whole number in 1...2^53; what is wrong with it otherwise.
    static func seq(_ field: [UInt8]?, bad: (String) -> ClusterError) throws(ClusterError) -> Int {
        guard let field else { throw bad("no seq field (a whole number in 1...2^53)") }
        let text = String(decoding: field.prefix(40), as: UTF8.self) + (field.count > 40 ? "..." : "")
        let digits = field.first == UInt8(ascii: "-") ? field.dropFirst() : field[...]
        guard !digits.isEmpty, digits.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw bad("seq '\(text)' is not a whole number (expected 1...2^53)")
        }
        guard let seq = Int(text), (1...maxSeq).contains(seq) else {
            throw bad("seq \(text) is out of range: expected 1...2^53 (\(maxSeq))")
        }
        return seq
    }

    /// Whole frames of `audio` mixed to mono (`PCMFormat`).
    static func decode(_ audio: [UInt8], format: ClusterSampleFormat, channels c: Int) -> [Float] {
        let pcm = format.pcm(channels: c)
        var out: [Float] = []
        out.reserveCapacity(audio.count / max(1, pcm.frameBytes))
        audio.withUnsafeBytes { pcm.appendMono($0, to: &out) }
        return out
    }

    static func encode(_ samples: [Float], format: ClusterSampleFormat) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(samples.count * format.bytesPerSample)
        for v in samples {
            switch format {
            case .s16:
                let i = Int16(max(-32768, min(32767, (v * 32768).rounded())))
                withUnsafeBytes(of: i.littleEndian) { out += $0 }
            case .f32: withUnsafeBytes(of: v.bitPattern.littleEndian) { out += $0 }
            }
        }
        return out
    }
}

/// An event as a cluster stores it in `P:events:{source}`.
public struct ClusterEvent: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
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
            return ["type", "segment", "label", RedisArgument(s.label), "start", RedisArgument(s.start), "end", RedisArgument(s.end),
                    "rate", RedisArgument(s.sampleRate), "score", RedisArgument(Self.text(s.confidence))]
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
        case "segment":
            guard let label = map["label"], let start = map["start"].flatMap(Int.init), let end = map["end"].flatMap(Int.init),
                  let rate = map["rate"].flatMap(Int.init), let score = map["score"].flatMap(Float.init) else { return nil }
            kind = .segment(Segment(channel: 0, label: label, start: start, end: end, sampleRate: rate, confidence: score))
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

/// Redis replies in the shapes the stream commands give.
package enum StreamReplies {
    /// `[[id, [field, value, ...]], ...]`: entries (a deleted entry's fields are nil).
    static func entries(_ reply: RedisReply) -> [(id: String, fields: [RedisReply]?)] {
        (reply.elements ?? []).compactMap { e in
            guard let pair = e.elements, pair.count == 2, let id = pair[0].text else { return nil }
            return (id, pair[1].elements)
        }
    }

    /// XREADGROUP / XREAD: `[[key, entries], ...]` (nil when nothing came).
    static func streams(_ reply: RedisReply) -> [(key: String, entries: [(id: String, fields: [RedisReply]?)])] {
        (reply.elements ?? []).compactMap { s in
            guard let pair = s.elements, pair.count == 2, let key = pair[0].text else { return nil }
            return (key, entries(pair[1]))
        }
    }

    /// XRANGE entries as dictionaries of text.
    package static func entriesOf(_ reply: RedisReply) -> [[String: String]] {
        entries(reply).map { e in pairs(e.fields ?? []).mapValues { String(decoding: $0, as: UTF8.self) } }
    }

    /// HGETALL as a dictionary of bytes.
    static func hash(_ reply: RedisReply) -> [String: [UInt8]] { pairs(reply.elements ?? []) }

    /// `[field, value, field, value, ...]` (an entry's fields, a hash) as a dictionary of bytes.
    static func pairs(_ items: [RedisReply]) -> [String: [UInt8]] { fields(items).compactMapValues(\.bytes) }

    /// `[field, value, field, value, ...]` as a dictionary of replies (values of any kind: a
    /// number, nil, a string not read for its length).
    static func fields(_ items: [RedisReply]) -> [String: RedisReply] {
        var map: [String: RedisReply] = [:]
        var i = 0
        while i + 1 < items.count {
            if let k = items[i].text { map[k] = items[i + 1] }
            i += 2
        }
        return map
    }
}

/// Wall-clock time (for heartbeats and latency figures shared between machines).
package enum WallClock {
    package static func micros() -> Int {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return ts.tv_sec * 1_000_000 + ts.tv_nsec / 1000
    }
    package static func millis() -> Int { micros() / 1000 }

    /// Milliseconds on the monotonic clock (for how long something lasted on this machine).
    package static func monotonicMillis() -> Int {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
    }
}
