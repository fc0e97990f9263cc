import Earshot
import EarshotRedis

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
