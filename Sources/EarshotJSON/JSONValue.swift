/// A JSON value, read and written by hand: a Wyoming service parses a header for every audio
/// chunk of every client (tens of thousands a second), so the parser is a single pass over the
/// bytes with a depth limit, and every malformed input is a typed error, never a trap.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// An object's member (nil for other values).
    public subscript(key: String) -> JSONValue? {
        if case let .object(o) = self { return o[key] }
        return nil
    }

    /// The string, if it is one.
    public var string: String? { if case let .string(s) = self { return s } else { return nil } }
    /// The number, if it is one.
    public var number: Double? { if case let .number(n) = self { return n } else { return nil } }
    /// The object's members, if it is one.
    public var object: [String: JSONValue]? { if case let .object(o) = self { return o } else { return nil } }
    /// The elements, if it is an array.
    public var array: [JSONValue]? { if case let .array(a) = self { return a } else { return nil } }

    /// The number as an integer, when it is one exactly (and within ±2^53).
    public var integer: Int? {
        guard case let .number(n) = self, n.rounded() == n, abs(n) <= 9_007_199_254_740_992 else { return nil }
        return Int(n)
    }

    /// The greatest nesting the parser accepts.
    public static let maxDepth = 64

    /// Parses one JSON value filling `bytes` (surrounding white space allowed).
    public static func parse(_ bytes: UnsafeRawBufferPointer) throws(JSONError) -> JSONValue {
        var p = JSONParser(bytes: bytes)
        p.skipSpace()
        let v = try p.value(depth: 0)
        p.skipSpace()
        guard p.at == bytes.count else { throw p.error("text after the value") }
        return v
    }

    /// Parses one JSON value filling `bytes` and, when it is an object, gives its members in the
    /// order written, without building a dictionary (nil when the value is not an object). Look a
    /// key up from the end: a later duplicate wins, as it does in `.object`.
    public static func parseMembers(_ bytes: UnsafeRawBufferPointer) throws(JSONError) -> [(key: String, value: JSONValue)]? {
        var p = JSONParser(bytes: bytes)
        p.skipSpace()
        guard p.peek == UInt8(ascii: "{") else {
            _ = try parse(bytes)
            return nil
        }
        var members: [(key: String, value: JSONValue)] = []
        members.reserveCapacity(8)
        try p.members(depth: 0) { members.append(($0, $1)) }
        p.skipSpace()
        guard p.at == bytes.count else { throw p.error("text after the value") }
        return members
    }

    /// Parses one JSON value filling `bytes`.
    public static func parse(_ bytes: [UInt8]) throws(JSONError) -> JSONValue {
        try bytes.withUnsafeBytes { raw in Result { () throws(JSONError) -> JSONValue in try parse(raw) } }.get()
    }

    /// Parses one JSON value filling `text`.
    public static func parse(_ text: String) throws(JSONError) -> JSONValue { try parse(Array(text.utf8)) }

    /// Compact JSON text; object keys sorted, so the same value always gives the same bytes.
    public var serialized: String {
        var out = ""
        write(to: &out)
        return out
    }

    /// Appends the value's compact JSON text.
    public func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case let .bool(b): out += b ? "true" : "false"
        case let .number(n): Self.writeNumber(n, to: &out)
        case let .string(s): Self.writeString(s, to: &out)
        case let .array(a):
            out += "["
            for (i, v) in a.enumerated() {
                if i > 0 { out += "," }
                v.write(to: &out)
            }
            out += "]"
        case let .object(o):
            out += "{"
            for (i, key) in o.keys.sorted().enumerated() {
                if i > 0 { out += "," }
                Self.writeString(key, to: &out)
                out += ":"
                o[key]?.write(to: &out)
            }
            out += "}"
        }
    }

    /// Integers without a fraction; NaN and infinities (which JSON cannot hold) as null.
    static func writeNumber(_ n: Double, to out: inout String) {
        if !n.isFinite {
            out += "null"
        } else if n.rounded() == n, abs(n) < 1e15 {
            out += String(Int64(n))
        } else {
            out += "\(n)"
        }
    }

    static func writeString(_ s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}

/// Where and why a JSON text is malformed.
public struct JSONError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Byte offset of the problem.
    public var offset: Int
    /// What is wrong.
    public var reason: String

    /// An error at `offset`.
    public init(offset: Int, reason: String) {
        self.offset = offset
        self.reason = reason
    }

    public var description: String { "\(reason) at byte \(offset)" }
}

private struct JSONParser {
    let bytes: UnsafeRawBufferPointer
    var at = 0

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    func error(_ reason: String) -> JSONError { JSONError(offset: at, reason: reason) }

    var peek: UInt8? { at < bytes.count ? bytes[at] : nil }

    mutating func skipSpace() {
        while at < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[at]) { at += 1 }
    }

    mutating func value(depth: Int) throws(JSONError) -> JSONValue {
        guard depth < JSONValue.maxDepth else { throw error("nested deeper than \(JSONValue.maxDepth)") }
        guard let c = peek else { throw error("the text ends where a value should be") }
        switch c {
        case UInt8(ascii: "{"): return try object(depth: depth)
        case UInt8(ascii: "["): return try array(depth: depth)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw error("unexpected character '\(Character(Unicode.Scalar(c)))'")
        }
    }

    mutating func literal(_ word: StaticString) throws(JSONError) {
        let n = word.utf8CodeUnitCount
        guard at + n <= bytes.count else { throw error("the text ends inside a literal") }
        for i in 0..<n where bytes[at + i] != word.utf8Start[i] { throw error("unknown literal") }
        at += n
    }

    mutating func object(depth: Int) throws(JSONError) -> JSONValue {
        var o = [String: JSONValue](minimumCapacity: 8)
        try members(depth: depth) { o[$0] = $1 }
        return .object(o)
    }

    /// An object's members, each handed to `add` as it is read.
    mutating func members(depth: Int, _ add: (String, JSONValue) -> Void) throws(JSONError) {
        at += 1
        skipSpace()
        if peek == UInt8(ascii: "}") { at += 1; return }
        while true {
            skipSpace()
            guard peek == UInt8(ascii: "\"") else { throw error("an object key must be a string") }
            let key = try string()
            skipSpace()
            guard peek == UInt8(ascii: ":") else { throw error("':' expected after an object key") }
            at += 1
            skipSpace()
            add(key, try value(depth: depth + 1))
            skipSpace()
            switch peek {
            case UInt8(ascii: ","): at += 1
            case UInt8(ascii: "}"): at += 1; return
            default: throw error("',' or '}' expected in an object")
            }
        }
    }

    mutating func array(depth: Int) throws(JSONError) -> JSONValue {
        at += 1
        var a: [JSONValue] = []
        skipSpace()
        if peek == UInt8(ascii: "]") { at += 1; return .array(a) }
        while true {
            skipSpace()
            a.append(try value(depth: depth + 1))
            skipSpace()
            switch peek {
            case UInt8(ascii: ","): at += 1
            case UInt8(ascii: "]"): at += 1; return .array(a)
            default: throw error("',' or ']' expected in an array")
            }
        }
    }

    mutating func number() throws(JSONError) -> Double {
        let start = at
        // The common case: a whole number of at most 15 digits, read without text or strtod.
        var i = at, negative = false, value: Int64 = 0
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") { negative = true; i += 1 }
        let first = i
        while i < bytes.count, i - first < 16, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) {
            value = value * 10 + Int64(bytes[i] - UInt8(ascii: "0"))
            i += 1
        }
        let count = i - first
        let ends = i == bytes.count || ![UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[i])
        if count >= 1, count <= 15, ends, count == 1 || bytes[first] != UInt8(ascii: "0"),
           i == bytes.count || !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) {
            at = i
            return negative ? -Double(value) : Double(value)
        }
        func digits() -> Int {
            let from = at
            while let c = peek, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c) { at += 1 }
            return at - from
        }
        if peek == UInt8(ascii: "-") { at += 1 }
        if peek == UInt8(ascii: "0") {
            at += 1
        } else if digits() == 0 {
            throw error("a number needs digits")
        }
        if peek == UInt8(ascii: ".") {
            at += 1
            guard digits() > 0 else { throw error("digits expected after '.'") }
        }
        if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
            at += 1
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { at += 1 }
            guard digits() > 0 else { throw error("digits expected in an exponent") }
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self)
        guard let v = Double(text) else { throw JSONError(offset: start, reason: "not a number") }
        // A number beyond a double (1e400) would be infinity, which JSON cannot hold and whose
        // text would be lost: refused, quoted as sent (RFC 8259 lets a reader bound the range).
        guard v.isFinite else {
            let shown = text.count > 40 ? String(text.prefix(40)) + "… (\(text.count) characters)" : text
            throw JSONError(offset: start, reason: "the number \(shown) is out of range (beyond ±1.8e308)")
        }
        return v
    }

    mutating func hex4() throws(JSONError) -> UInt32 {
        guard at + 4 <= bytes.count else { throw error("the text ends inside a \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[at]
            let d: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw error("a \\u escape needs four hex digits")
            }
            v = v << 4 | d
            at += 1
        }
        return v
    }

    mutating func string() throws(JSONError) -> String {
        at += 1
        let start = at
        // The common case: no escapes; the bytes are checked as UTF-8 in one go (ASCII needs no check).
        var ascii = true
        while let c = peek, c != UInt8(ascii: "\""), c != UInt8(ascii: "\\"), c >= 0x20 {
            ascii = ascii && c < 0x80
            at += 1
        }
        if peek == UInt8(ascii: "\"") {
            let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<at])
            at += 1
            if ascii { return String(decoding: raw, as: UTF8.self) }
            guard let s = String(validating: raw, as: UTF8.self) else { throw JSONError(offset: start, reason: "a string is not valid UTF-8") }
            return s
        }
        var out = [UInt8](UnsafeRawBufferPointer(rebasing: bytes[start..<at]))
        while true {
            guard let c = peek else { throw error("the text ends inside a string") }
            switch c {
            case UInt8(ascii: "\""):
                at += 1
                guard let s = String(validating: out, as: UTF8.self) else { throw JSONError(offset: start, reason: "a string is not valid UTF-8") }
                return s
            case UInt8(ascii: "\\"):
                at += 1
                guard let e = peek else { throw error("the text ends inside an escape") }
                at += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try hex4()
                    if (0xD800..<0xDC00).contains(code) {
                        // A high surrogate must be followed by an escaped low one.
                        guard at + 2 <= bytes.count, bytes[at] == UInt8(ascii: "\\"), bytes[at + 1] == UInt8(ascii: "u") else {
                            throw error("a lone surrogate in a \\u escape")
                        }
                        at += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw error("a lone surrogate in a \\u escape") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw error("a lone surrogate in a \\u escape") }
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                default: throw error("unknown escape")
                }
            case 0..<0x20: throw error("a control character inside a string")
            default:
                out.append(c)
                at += 1
            }
        }
    }
}
