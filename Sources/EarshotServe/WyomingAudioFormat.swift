import EarshotAudio
import EarshotWyoming

/// The audio format a Wyoming client declares: a rate of 1000 to 768000 Hz, a sample width of 1
/// to 4 bytes (signed little-endian integers, as the protocol's audio is) and 1 to 64
/// interleaved channels, mixed to one for the models.
struct WyomingAudioFormat: Sendable, Equatable {
    var rate: Int
    var width: Int
    var channels: Int

    static let rates = 1000...768_000
    static let widths = 1...4
    static let channelCounts = 1...64

    /// The format in an event's data (`rate`, `width`, `channels`), or why it is not one.
    init(_ message: WyomingMessage) throws(FormatError) {
        func field(_ name: String, _ range: ClosedRange<Int>) throws(FormatError) -> Int {
            guard let v = message[name] else { throw FormatError("no '\(name)'") }
            return try Self.checked(name, v.integer, shown: v.serialized, range)
        }
        rate = try field("rate", Self.rates)
        width = try field("width", Self.widths)
        channels = try field("channels", Self.channelCounts)
    }

    init(rate: Int, width: Int, channels: Int) {
        self.rate = rate
        self.width = width
        self.channels = channels
    }

    /// The format of these fields, or why it is not one (as for an event's data).
    init(validating rate: Int, width: Int, channels: Int) throws(FormatError) {
        self.init(rate: try Self.checked("rate", rate, shown: "\(rate)", Self.rates),
                  width: try Self.checked("width", width, shown: "\(width)", Self.widths),
                  channels: try Self.checked("channels", channels, shown: "\(channels)", Self.channelCounts))
    }

    /// `value` when it is an integer in `range`; else why not (the value as the client wrote it).
    private static func checked(_ name: String, _ value: Int?, shown: String, _ range: ClosedRange<Int>) throws(FormatError) -> Int {
        guard let value, range.contains(value) else {
            throw FormatError("\(name) \(shown) is not an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    struct FormatError: Error { var reason: String; init(_ r: String) { reason = r } }

    var frameBytes: Int { width * channels }

    /// How its bytes decode (`PCMFormat`: signed little-endian integers of `width` bytes).
    var pcm: PCMFormat { PCMFormat(encoding: .integer(bytes: width), channels: channels) }

    /// Whole frames of `bytes` (after `carry`, the partial frame of the last chunk) as mono
    /// samples in -1...1, appended to `out` (which keeps its capacity from chunk to chunk); the
    /// bytes of a partial last frame are left in `carry` for the next.
    func decode(_ bytes: [UInt8], carry: inout [UInt8], appendingTo out: inout [Float]) {
        bytes.withUnsafeBytes { decode($0, carry: &carry, appendingTo: &out) }
    }

    /// `decode` of bytes in place.
    func decode(_ bytes: UnsafeRawBufferPointer, carry: inout [UInt8], appendingTo out: inout [Float]) {
        pcm.appendMono(bytes, carry: &carry, to: &out)
    }
}
