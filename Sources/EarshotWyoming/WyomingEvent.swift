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
    case tooLarge(field: String, length: Int, limit: Int)
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
                guard let n = v.integer, n >= 0 else { throw .badLength(field: name, value: v.serialized) }
                guard n <= limit else { throw .tooLarge(field: name, length: n, limit: limit) }
                return n
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

    /// The members of the JSON object in `range` of the buffer (nil: JSON, but not an object).
    private func members(_ range: Range<Int>) -> Result<[(key: String, value: JSONValue)]?, JSONError> {
        buffer.withUnsafeBytes { raw in
            Result { () throws(JSONError) -> [(key: String, value: JSONValue)]? in
                try JSONValue.parseMembers(UnsafeRawBufferPointer(rebasing: raw[range]))
            }
        }
    }
}
