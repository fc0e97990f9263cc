/// The protobuf wire format, read in one pass over the file's bytes: a message is a range of
/// the buffer, read field by field by a cursor; nested messages are sub-ranges, never copies.
/// ref: protobuf encoding (varints, wire types 0 varint, 1 fixed64, 2 length-delimited,
/// 3/4 groups, 5 fixed32; packed repeated scalars are one length-delimited field).

/// A decoding failure, with its location in the model built up as it unwinds (innermost
/// first); `onnxError(path:)` turns it into the public error naming the file.
struct DecodeFailure: Error {
    enum Kind {
        case truncated(offset: Int, reading: String)
        case malformed(String)
        case unsupportedDataType(Int)
        case externalData
        case unsupported(String)
        case limit(what: String, limit: Int)
        case tooManyNodes(count: Int, limit: Int)
    }

    var kind: Kind
    /// Where the failure is, innermost component first.
    var location: [String] = []

    init(_ kind: Kind) { self.kind = kind }

    static func malformed(_ reason: String) -> DecodeFailure { DecodeFailure(.malformed(reason)) }

    var context: String { location.isEmpty ? "model" : location.reversed().joined(separator: " > ") }

    func onnxError(path: String) -> OnnxError {
        switch kind {
        case let .truncated(offset, reading): return .truncated(path: path, offset: offset, reading: "\(reading) in \(context)")
        case let .malformed(reason): return .malformed(path: path, context: context, reason: reason)
        case let .unsupportedDataType(type): return .unsupportedDataType(path: path, tensor: context, type: type)
        case .externalData: return .externalData(path: path, tensor: context)
        case let .unsupported(feature): return .unsupported(path: path, context: context, feature: feature)
        case let .limit(what, limit): return .limit(path: path, what: what, limit: limit)
        case let .tooManyNodes(count, limit): return .tooManyNodes(path: path, count: count, limit: limit)
        }
    }
}

/// Runs `body`, adding `label()` to the location of any failure it throws (the label is only
/// made on failure).
@inline(__always)
func within<T>(_ label: () -> String, _ body: () throws(DecodeFailure) -> T) throws(DecodeFailure) -> T {
    do throws(DecodeFailure) {
        return try body()
    } catch {
        var failure = error
        failure.location.append(label())
        throw failure
    }
}

/// The ONNX messages read, for naming fields in errors.
enum MessageKind {
    case model, opset, entry, graph, node, attribute, tensor, valueInfo, type, tensorType, shape, dimension

    func fieldName(_ field: Int) -> String? {
        switch (self, field) {
        case (.model, 1): return "ir_version"
        case (.model, 2): return "producer_name"
        case (.model, 3): return "producer_version"
        case (.model, 7): return "graph"
        case (.model, 8): return "opset_import"
        case (.model, 14): return "metadata_props"
        case (.opset, 1): return "domain"
        case (.opset, 2): return "version"
        case (.entry, 1): return "key"
        case (.entry, 2): return "value"
        case (.graph, 1): return "node"
        case (.graph, 2): return "name"
        case (.graph, 5): return "initializer"
        case (.graph, 11): return "input"
        case (.graph, 12): return "output"
        case (.graph, 13): return "value_info"
        case (.node, 1): return "input"
        case (.node, 2): return "output"
        case (.node, 3): return "name"
        case (.node, 4): return "op_type"
        case (.node, 5): return "attribute"
        case (.node, 7): return "domain"
        case (.attribute, 1): return "name"
        case (.attribute, 2): return "f"
        case (.attribute, 3): return "i"
        case (.attribute, 4): return "s"
        case (.attribute, 5): return "t"
        case (.attribute, 6): return "g"
        case (.attribute, 7): return "floats"
        case (.attribute, 8): return "ints"
        case (.attribute, 9): return "strings"
        case (.attribute, 10): return "tensors"
        case (.attribute, 11): return "graphs"
        case (.attribute, 20): return "type"
        case (.tensor, 1): return "dims"
        case (.tensor, 2): return "data_type"
        case (.tensor, 4): return "float_data"
        case (.tensor, 5): return "int32_data"
        case (.tensor, 6): return "string_data"
        case (.tensor, 7): return "int64_data"
        case (.tensor, 8): return "name"
        case (.tensor, 9): return "raw_data"
        case (.tensor, 10): return "double_data"
        case (.tensor, 11): return "uint64_data"
        case (.tensor, 13): return "external_data"
        case (.tensor, 14): return "data_location"
        case (.valueInfo, 1): return "name"
        case (.valueInfo, 2): return "type"
        case (.type, 1): return "tensor_type"
        case (.tensorType, 1): return "elem_type"
        case (.tensorType, 2): return "shape"
        case (.shape, 1): return "dim"
        case (.dimension, 1): return "dim_value"
        case (.dimension, 2): return "dim_param"
        default: return nil
        }
    }

    /// "raw_data (field 9)", or "field 42" for fields the reader does not know.
    func describe(_ field: Int) -> String {
        fieldName(field).map { "\($0) (field \(field))" } ?? "field \(field)"
    }
}

/// Reads one message (or one packed field) from `bytes[position..<end]`. Every read checks
/// the bytes that remain first; `end` never exceeds the buffer.
struct Cursor {
    let bytes: UnsafeRawBufferPointer
    private(set) var position: Int
    let end: Int
    let kind: MessageKind
    /// The field being read (its key was the last read), for errors.
    private(set) var field = 0

    static let maximumFieldNumber: UInt64 = (1 << 29) - 1

    init(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ kind: MessageKind) {
        self.bytes = bytes
        position = range.lowerBound
        end = range.upperBound
        self.kind = kind
    }

    var atEnd: Bool { position >= end }

    /// A cursor over the elements of a packed repeated field of this message.
    func packed(_ range: Range<Int>) -> Cursor {
        var cursor = Cursor(bytes, range, kind)
        cursor.field = field
        return cursor
    }

    /// The next field's number and wire type, or nil at the end of the message.
    mutating func next() throws(DecodeFailure) -> (field: Int, wire: UInt8)? {
        guard position < end else { return nil }
        let start = position
        let key: UInt64
        if bytes[position] < 0x80 {  // one-byte keys: fields 1...15, nearly all of ONNX's
            key = UInt64(bytes[position])
            position += 1
        } else {
            key = try readVarint(isKey: true)
        }
        let number = key >> 3
        guard number >= 1, number <= Self.maximumFieldNumber else {
            throw .malformed("field number \(number) at byte \(start) is outside protobuf's 1...\(Self.maximumFieldNumber)")
        }
        field = Int(number)
        return (field, UInt8(truncatingIfNeeded: key & 7))
    }

    @inline(__always)
    mutating func varint() throws(DecodeFailure) -> UInt64 {
        if position < end, bytes[position] < 0x80 {
            position += 1
            return UInt64(bytes[position - 1])
        }
        return try readVarint(isKey: false)
    }

    private mutating func readVarint(isKey: Bool) throws(DecodeFailure) -> UInt64 {
        let start = position
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while position < end {
            let byte = bytes[position]
            position += 1
            result |= UInt64(byte & 0x7F) << shift  // bits past 64 in a tenth byte are dropped, as protobuf does
            if byte < 0x80 { return result }
            shift += 7
            if shift == 70 {
                throw .malformed("a varint longer than 10 bytes at byte \(start) (\(isKey ? "a field key" : kind.describe(field)))")
            }
        }
        throw DecodeFailure(.truncated(offset: start, reading: isKey ? "a field key" : "the varint of \(kind.describe(field))"))
    }

    mutating func fixed32() throws(DecodeFailure) -> UInt32 {
        guard end - position >= 4 else {
            throw DecodeFailure(.truncated(offset: position, reading: "the 4-byte value of \(kind.describe(field))"))
        }
        let value = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self))
        position += 4
        return value
    }

    mutating func fixed64() throws(DecodeFailure) -> UInt64 {
        guard end - position >= 8 else {
            throw DecodeFailure(.truncated(offset: position, reading: "the 8-byte value of \(kind.describe(field))"))
        }
        let value = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self))
        position += 8
        return value
    }

    /// A length-delimited field's payload, as a range of the buffer.
    mutating func lengthDelimited() throws(DecodeFailure) -> Range<Int> {
        let length = try varint()
        let remaining = end - position
        guard length <= UInt64(remaining) else {
            throw DecodeFailure(.truncated(offset: position, reading: "\(kind.describe(field)) (\(length) bytes; \(remaining) remain)"))
        }
        let start = position
        position += Int(length)
        return start..<position
    }

    mutating func string() throws(DecodeFailure) -> String {
        decodeString(bytes, try lengthDelimited())
    }

    /// Skips a field's value by its wire type.
    mutating func skip(_ wire: UInt8) throws(DecodeFailure) {
        switch wire {
        case 0: _ = try varint()
        case 1: _ = try fixed64()
        case 2: _ = try lengthDelimited()
        case 5: _ = try fixed32()
        case 3, 4:
            throw .malformed("\(kind.describe(field)) uses the group wire type \(wire) at byte \(position), which ONNX never writes")
        default:
            throw .malformed("\(kind.describe(field)) has the invalid wire type \(wire) at byte \(position)")
        }
    }

    /// The number of varints in a packed field, checked to end on a whole varint of at most
    /// 10 bytes (so that the values can be read without further checks' failing).
    func countVarints() throws(DecodeFailure) -> Int {
        var count = 0
        var run = 0
        var index = position
        while index < end {
            if bytes[index] & 0x80 != 0 {
                run += 1
                if run == 10 { throw .malformed("a varint longer than 10 bytes in \(kind.describe(field))") }
            } else {
                count += 1
                run = 0
            }
            index += 1
        }
        guard run == 0 else { throw DecodeFailure(.truncated(offset: end - run, reading: "the last varint of \(kind.describe(field))")) }
        return count
    }
}

/// Bytes as UTF-8, invalid sequences replaced by U+FFFD.
@inline(__always)
func decodeString(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> String {
    String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
}

/// A name for error locations: quoted, and shortened when a file gives a very long one.
func quoted(_ name: String) -> String {
    name.count > 80 ? "'\(name.prefix(80))…'" : "'\(name)'"
}
