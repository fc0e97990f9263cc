#if canImport(Glibc)
import Glibc
#endif

/// One event of the Wyoming protocol: a JSON header line (`type`, `version`, and the lengths of
/// what follows), then `data_length` bytes of JSON data, then `payload_length` bytes of payload
/// (audio, for `audio-chunk`). Data in the header line itself is merged with the data that
/// follows it, as the protocol's own reader does.
public struct WyomingEvent: Sendable, Equatable {
    /// The event's type (`describe`, `audio-chunk`, `detection`, ...).
    public var type: String
    /// Its data (the header line's and the data segment's, merged).
    public var data: [String: JSONValue]
    /// Its payload (audio, for `audio-chunk`).
    public var payload: [UInt8]

    /// The protocol version written in every header.
    public static let protocolVersion = "1.10.2"

    /// An event to send.
    public init(type: String, data: [String: JSONValue] = [:], payload: [UInt8] = []) {
        self.type = type
        self.data = data
        self.payload = payload
    }

    /// The event as bytes on the wire.
    public var encoded: [UInt8] {
        var header: [String: JSONValue] = ["type": .string(type), "version": .string(Self.protocolVersion)]
        let dataBytes = data.isEmpty ? [] : Array(JSONValue.object(data).serialized.utf8)
        if !dataBytes.isEmpty { header["data_length"] = .number(Double(dataBytes.count)) }
        if !payload.isEmpty { header["payload_length"] = .number(Double(payload.count)) }
        var out = Array(JSONValue.object(header).serialized.utf8)
        out.append(0x0A)
        out += dataBytes
        out += payload
        return out
    }
}

/// An event as read, its data kept as members in the order they came (the header line's, then
/// the data segment's) rather than a dictionary: a service reads one per audio chunk of every
/// client and looks up a handful of keys, so no table is built and no key is hashed.
public struct WyomingMessage: Sendable {
    /// The event's type.
    public var type: String
    /// Its data's members; a later one overrides an earlier one with the same key.
    public var members: [(key: String, value: JSONValue)]
    /// Its payload.
    public var payload: [UInt8]

    /// The data's member named `key` (the last of that name).
    public subscript(key: String) -> JSONValue? { Self.member(key, in: members) }

    /// The last member named `key` (how an object's duplicate keys resolve).
    static func member(_ key: String, in members: [(key: String, value: JSONValue)]) -> JSONValue? {
        members.last { $0.key == key }?.value
    }

    /// The event, its data as a dictionary.
    public var event: WyomingEvent {
        WyomingEvent(type: type, data: Dictionary(members, uniquingKeysWith: { _, later in later }), payload: payload)
    }
}

/// Why a byte stream is not a Wyoming event stream. After one of these the stream cannot be
/// framed any more: the connection ends (with an `error` event that says this).
public enum WyomingError: Error, Sendable, Equatable, CustomStringConvertible {
    case headerTooLong(limit: Int)
    case malformedHeader(JSONError)
    case headerNotAnObject
    case missingType
    case badLength(field: String, value: String)
    /// A data or payload length over the reader's limit; `length` is the number's digits.
    case tooLarge(field: String, length: String, limit: Int)
    case malformedData(JSONError)
    case dataNotAnObject

    public var description: String {
        switch self {
        case let .headerTooLong(limit): return "an event header line is longer than \(limit) bytes"
        case let .malformedHeader(e): return "an event header is not JSON: \(e)"
        case .headerNotAnObject: return "an event header is not a JSON object"
        case .missingType: return "an event header has no 'type' string"
        case let .badLength(field, value): return "an event header's \(field) is \(value), not a non-negative integer"
        case let .tooLarge(field, length, limit): return "an event's \(field) is \(length) bytes, over the limit of \(limit)"
        case let .malformedData(e): return "an event's data is not JSON: \(e)"
        case .dataNotAnObject: return "an event's data is not a JSON object"
        }
    }
}

/// Frames Wyoming events out of bytes as they arrive, in bounded memory: a header line, data and
/// payload each have a limit, and bytes beyond one event are kept only until the next is read.
public struct WyomingReader: Sendable {
    /// The most bytes an event's parts may hold.
    public struct Limits: Sendable, Equatable {
        /// A header line.
        public var headerBytes: Int
        /// The data segment.
        public var dataBytes: Int
        /// The payload.
        public var payloadBytes: Int

        /// Limits (defaults: 16 KiB header lines, 1 MiB data and payloads).
        public init(headerBytes: Int = 16 * 1024, dataBytes: Int = 1 << 20, payloadBytes: Int = 1 << 20) {
            self.headerBytes = headerBytes
            self.dataBytes = dataBytes
            self.payloadBytes = payloadBytes
        }
    }

    /// The limits an event is held to.
    public let limits: Limits
    private var buffer: [UInt8] = []
    private var offset = 0
    /// The event whose header has been read, waiting for its data and payload.
    private var pending: (type: String, members: [(key: String, value: JSONValue)], dataLength: Int, payloadLength: Int)?
    /// How far the search for the end of a header line has got.
    private var scanned = 0

    /// A reader with these limits.
    public init(limits: Limits = Limits()) { self.limits = limits }

    /// Bytes received and not yet part of a returned event.
    public var bufferedBytes: Int { buffer.count - offset }

    /// Whether part of an event has arrived (a client that stops here is mid-event).
    public var isMidEvent: Bool { pending != nil || bufferedBytes > 0 }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if offset > 0 && offset == buffer.count {
            // All taken: a burst's large buffer is given back, a small one kept for the next read.
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 16)
            scanned = 0
            offset = 0
        } else if offset > 0 && offset * 2 >= buffer.count {
            buffer.removeFirst(offset)
            scanned -= offset
            offset = 0
        }
        buffer.append(contentsOf: bytes)
    }

    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// The next whole event, or nil until more bytes come.
    public mutating func next() throws(WyomingError) -> WyomingEvent? {
        try nextMessage()?.event
    }

    /// The next whole event with its data as members (no dictionary built), or nil until more
    /// bytes come.
    public mutating func nextMessage() throws(WyomingError) -> WyomingMessage? {
        if pending == nil {
            var end = max(scanned, offset)
            while end < buffer.count, buffer[end] != 0x0A { end += 1 }
            guard end < buffer.count else {
                scanned = end
                if buffer.count - offset > limits.headerBytes { throw .headerTooLong(limit: limits.headerBytes) }
                return nil
            }
            guard end - offset <= limits.headerBytes else { throw .headerTooLong(limit: limits.headerBytes) }
            let parsed = members(offset..<end)
            offset = end + 1
            scanned = offset
            let fields: [(key: String, value: JSONValue)]
            switch parsed {
            case let .success(m?): fields = m
            case .success(nil): throw .headerNotAnObject
            case let .failure(e): throw .malformedHeader(e)
            }
            func field(_ name: String) -> JSONValue? { WyomingMessage.member(name, in: fields) }
            guard let type = field("type")?.string else { throw .missingType }
            func length(_ name: String, limit: Int) throws(WyomingError) -> Int {
                guard let v = field(name), v != .null else { return 0 }
                guard let n = v.number, n >= 0, n.rounded() == n else { throw .badLength(field: name, value: v.serialized) }
                // A whole number past the limit, however large (2^62 too), is too large, not malformed.
                guard n <= Double(limit), let length = Int(exactly: n) else {
                    throw .tooLarge(field: name, length: n < 9e18 ? String(Int64(n)) : "\(n)", limit: limit)
                }
                return length
            }
            let dataLength = try length("data_length", limit: limits.dataBytes)
            let payloadLength = try length("payload_length", limit: limits.payloadBytes)
            var inline: [(key: String, value: JSONValue)] = []
            if let v = field("data"), v != .null {
                guard let o = v.object else { throw .dataNotAnObject }
                inline = o.map { ($0.key, $0.value) }
            }
            pending = (type, inline, dataLength, payloadLength)
        }
        guard let p = pending, buffer.count - offset >= p.dataLength + p.payloadLength else { return nil }
        var members = p.members
        if p.dataLength > 0 {
            switch self.members(offset..<(offset + p.dataLength)) {
            case let .success(m?): if members.isEmpty { members = m } else { members += m }
            case .success(nil): throw .dataNotAnObject
            case let .failure(e): throw .malformedData(e)
            }
        }
        let payloadStart = offset + p.dataLength
        let payload = Array(buffer[payloadStart..<(payloadStart + p.payloadLength)])
        offset = payloadStart + p.payloadLength
        scanned = offset
        pending = nil
        return WyomingMessage(type: p.type, members: members, payload: payload)
    }

    /// The next event when it is a whole `audio-chunk` in the form clients send it: header and data
    /// flat JSON objects (integers, strings without escapes, `true`, `false`, `null`), the data's
    /// `rate`, `width` and `channels` integers. It is read without building its JSON, and nothing
    /// is consumed: `consume(_:)` takes it, and its payload is `payload(of:)` until then. Nil for
    /// anything else (or an event not whole yet), which `nextMessage` reads as it reads every
    /// event, to the same values.
    public func peekAudioChunk() -> WyomingAudioChunk? {
        guard pending == nil, offset < buffer.count else { return nil }
        return buffer.withUnsafeBytes { raw -> WyomingAudioChunk? in
            guard let base = raw.baseAddress,
                  let newline = memchr(base + offset, 0x0A, min(raw.count - offset, limits.headerBytes + 1)) else { return nil }
            let lineEnd = base.distance(to: UnsafeRawPointer(newline))
            var isChunk = false
            var dataLength = 0, payloadLength = 0
            let header = FlatJSON.members(raw, offset..<lineEnd) { key, value in
                switch (FlatJSON.Key(raw, key), value) {
                case let (.type, .string(r)): isChunk = FlatJSON.equals(raw, r, "audio-chunk")
                case (.type, _): return false
                case (.dataLength, .null): dataLength = 0
                case let (.dataLength, .integer(n)) where n >= 0: dataLength = n
                case (.payloadLength, .null): payloadLength = 0
                case let (.payloadLength, .integer(n)) where n >= 0: payloadLength = n
                case (.dataLength, _), (.payloadLength, _): return false
                case (.data, .null): break
                case (.data, _): return false
                default: break
                }
                return true
            }
            guard header, isChunk, dataLength > 0, dataLength <= limits.dataBytes, payloadLength <= limits.payloadBytes,
                  raw.count - (lineEnd + 1) >= dataLength + payloadLength else { return nil }
            var rate: Int?, width: Int?, channels: Int?, timestamp: Int?
            let data = FlatJSON.members(raw, (lineEnd + 1)..<(lineEnd + 1 + dataLength)) { key, value in
                switch (FlatJSON.Key(raw, key), value) {
                case let (.rate, .integer(n)): rate = n
                case let (.width, .integer(n)): width = n
                case let (.channels, .integer(n)): channels = n
                case let (.timestamp, .integer(n)): timestamp = n
                // A timestamp that is not an integer reads as none, as `nextMessage`'s does.
                case (.timestamp, _): timestamp = nil
                case (.rate, _), (.width, _), (.channels, _): return false
                default: break
                }
                return true
            }
            guard data, let rate, let width, let channels else { return nil }
            let payloadStart = lineEnd + 1 + dataLength
            return WyomingAudioChunk(rate: rate, width: width, channels: channels, timestamp: timestamp,
                                     payload: payloadStart..<(payloadStart + payloadLength))
        }
    }

    /// The payload of the chunk `peekAudioChunk` found (valid until it is consumed).
    public func payload<R>(of chunk: WyomingAudioChunk, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try buffer.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[chunk.payload])) }
    }

    /// Takes the chunk `peekAudioChunk` found.
    public mutating func consume(_ chunk: WyomingAudioChunk) {
        offset = chunk.payload.upperBound
        scanned = offset
    }

    /// The members of the JSON object in `range` of the buffer (nil: JSON, but not an object).
    private func members(_ range: Range<Int>) -> Result<[(key: String, value: JSONValue)]?, JSONError> {
        buffer.withUnsafeBytes { raw in
            Result { () throws(JSONError) -> [(key: String, value: JSONValue)]? in
                try JSONValue.parseMembers(UnsafeRawBufferPointer(rebasing: raw[range]))
            }
        }
    }
}

/// An `audio-chunk` framed by `WyomingReader.peekAudioChunk`, its JSON not built.
public struct WyomingAudioChunk: Sendable, Equatable {
    /// Its data's `rate`, `width` and `channels`.
    public var rate: Int, width: Int, channels: Int
    /// Its data's `timestamp` (nil: none, or not an integer).
    public var timestamp: Int?
    /// Where its payload is in the reader's buffer.
    let payload: Range<Int>

    /// The payload's length in bytes.
    public var payloadCount: Int { payload.count }
}

/// The members of a flat JSON object read in place, for the one event a service reads per audio
/// chunk of every client. Anything it does not read exactly as `JSONValue` does (nesting, escapes,
/// bytes past ASCII in strings, fractions, exponents, integers past 15 digits, malformed text) makes
/// it give up, and the caller reads the event the general way.
enum FlatJSON {
    enum Value { case integer(Int), string(Range<Int>), null, boolean }

    /// Calls `member` for each member of the object in `range`, in order; false when the text is
    /// not such an object or `member` returned false.
    static func members(_ p: UnsafeRawBufferPointer, _ range: Range<Int>, _ member: (Range<Int>, Value) -> Bool) -> Bool {
        var i = range.lowerBound
        let end = range.upperBound
        func space() { while i < end, p[i] == 0x20 || p[i] == 0x09 || p[i] == 0x0D || p[i] == 0x0A { i += 1 } }
        func string() -> Range<Int>? {
            guard i < end, p[i] == 0x22 else { return nil }
            i += 1
            let start = i
            while i < end {
                let b = p[i]
                if b == 0x22 { i += 1; return start..<(i - 1) }
                if b == 0x5C || b < 0x20 || b >= 0x80 { return nil }
                i += 1
            }
            return nil
        }
        func literal(_ word: StaticString) -> Bool {
            let n = word.utf8CodeUnitCount
            guard end - i >= n, equals(p, i..<(i + n), word) else { return false }
            i += n
            return true
        }
        func integer() -> Int? {
            var negative = false
            if i < end, p[i] == 0x2D { negative = true; i += 1 }
            let start = i
            var n = 0
            while i < end, p[i] >= 0x30, p[i] <= 0x39 {
                if i - start < 15 { n = n * 10 + Int(p[i] - 0x30) }  // longer: refused below, never overflowed
                i += 1
            }
            let digits = i - start
            guard digits > 0, digits <= 15, !(digits > 1 && p[start] == 0x30) else { return nil }
            if i < end, p[i] == 0x2E || p[i] == 0x65 || p[i] == 0x45 { return nil }
            return negative ? -n : n
        }
        space()
        guard i < end, p[i] == 0x7B else { return false }
        i += 1
        space()
        if i < end, p[i] == 0x7D {
            i += 1
            space()
            return i == end
        }
        while true {
            guard let key = string() else { return false }
            space()
            guard i < end, p[i] == 0x3A else { return false }
            i += 1
            space()
            guard i < end else { return false }
            let value: Value
            switch p[i] {
            case 0x22:
                guard let r = string() else { return false }
                value = .string(r)
            case 0x2D, 0x30...0x39:
                guard let n = integer() else { return false }
                value = .integer(n)
            case 0x6E:
                guard literal("null") else { return false }
                value = .null
            case 0x74:
                guard literal("true") else { return false }
                value = .boolean
            case 0x66:
                guard literal("false") else { return false }
                value = .boolean
            default:
                return false
            }
            guard member(key, value) else { return false }
            space()
            guard i < end else { return false }
            if p[i] == 0x2C {
                i += 1
                space()
                continue
            }
            guard p[i] == 0x7D else { return false }
            i += 1
            space()
            return i == end
        }
    }

    /// Whether the bytes in `range` are `word`.
    static func equals(_ p: UnsafeRawBufferPointer, _ range: Range<Int>, _ word: StaticString) -> Bool {
        guard range.count == word.utf8CodeUnitCount else { return false }
        return memcmp(p.baseAddress! + range.lowerBound, word.utf8Start, range.count) == 0
    }

    /// The keys the fast path reads (no string is made for a key).
    enum Key {
        case type, dataLength, payloadLength, data, rate, width, channels, timestamp, other

        init(_ p: UnsafeRawBufferPointer, _ range: Range<Int>) {
            func match(_ word: StaticString, _ key: Key) -> Key? { equals(p, range, word) ? key : nil }
            switch range.count {
            case 4: self = match("type", .type) ?? match("data", .data) ?? match("rate", .rate) ?? .other
            case 5: self = match("width", .width) ?? .other
            case 8: self = match("channels", .channels) ?? .other
            case 9: self = match("timestamp", .timestamp) ?? .other
            case 11: self = match("data_length", .dataLength) ?? .other
            case 14: self = match("payload_length", .payloadLength) ?? .other
            default: self = .other
            }
        }
    }
}
