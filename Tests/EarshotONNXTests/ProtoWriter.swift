/// Protobuf messages written by hand, for tests that need bytes no ONNX writer makes: every
/// method returns the message with one more field.
struct Proto {
    var bytes: [UInt8] = []

    static func varint(_ value: UInt64) -> [UInt8] {
        var value = value
        var out: [UInt8] = []
        while value >= 0x80 {
            out.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        out.append(UInt8(value))
        return out
    }

    static func key(_ field: Int, _ wire: UInt64) -> [UInt8] { varint(UInt64(field) << 3 | wire) }

    func raw(_ more: [UInt8]) -> Proto { Proto(bytes: bytes + more) }
    func varint(_ field: Int, _ value: UInt64) -> Proto { raw(Self.key(field, 0) + Self.varint(value)) }
    func int(_ field: Int, _ value: Int64) -> Proto { varint(field, UInt64(bitPattern: value)) }
    func fixed32(_ field: Int, _ value: UInt32) -> Proto { raw(Self.key(field, 5) + littleEndian(value)) }
    func fixed64(_ field: Int, _ value: UInt64) -> Proto { raw(Self.key(field, 1) + littleEndian(value)) }
    func bytes(_ field: Int, _ payload: [UInt8]) -> Proto { raw(Self.key(field, 2) + Self.varint(UInt64(payload.count)) + payload) }
    func string(_ field: Int, _ text: String) -> Proto { bytes(field, Array(text.utf8)) }
    func message(_ field: Int, _ message: Proto) -> Proto { bytes(field, message.bytes) }
    func messages(_ field: Int, _ messages: [Proto]) -> Proto { messages.reduce(self) { $0.message(field, $1) } }
    /// Varints packed into one length-delimited field.
    func packed(_ field: Int, _ values: [UInt64]) -> Proto { bytes(field, values.flatMap(Self.varint)) }
    /// Fields of every wire type ONNX does not define here, which a reader must skip.
    func unknownFields() -> Proto { varint(1000, 300).fixed64(1001, 7).string(1002, "skip").fixed32(1003, 9) }
}

func littleEndian<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }

/// ONNX messages built from `Proto`, with onnx.proto's field numbers.
enum Onnx {
    static func model(_ graph: Proto?, irVersion: UInt64 = 8) -> [UInt8] {
        var model = Proto().varint(1, irVersion).string(2, "hand-made")
        if let graph { model = model.message(7, graph) }
        return model.message(8, Proto().varint(2, 17)).bytes
    }

    static func graph(_ name: String, nodes: [Proto] = [], initializers: [Proto] = []) -> Proto {
        Proto().messages(1, nodes).string(2, name).messages(5, initializers)
    }

    static func node(_ name: String, _ opType: String, inputs: [String] = [], outputs: [String] = [], attributes: [Proto] = []) -> Proto {
        var node = Proto()
        for input in inputs { node = node.string(1, input) }
        for output in outputs { node = node.string(2, output) }
        return node.string(3, name).string(4, opType).messages(5, attributes)
    }

    /// A tensor: name first (as onnx writes it after the values, a reader must not depend on
    /// the order), dims unpacked, the type, then the given value fields.
    static func tensor(_ name: String, type: Int, dims: [Int64], _ values: (Proto) -> Proto = { $0 }) -> Proto {
        var tensor = Proto().string(8, name)
        for dim in dims { tensor = tensor.int(1, dim) }
        return values(tensor.varint(2, UInt64(type)))
    }

    static func floatTensor(_ name: String, _ values: [Float], dims: [Int64]? = nil) -> Proto {
        tensor(name, type: 1, dims: dims ?? [Int64(values.count)]) { $0.bytes(9, values.flatMap { littleEndian($0.bitPattern) }) }
    }

    static func graphAttribute(_ name: String, _ graph: Proto) -> Proto { Proto().string(1, name).varint(20, 5).message(6, graph) }
}
