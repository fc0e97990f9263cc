/// TensorProto: dims, element type, and values from raw_data (little-endian, fixed width) or
/// from the typed field of the element type (float_data, int32_data, int64_data, double_data,
/// uint64_data; packed or not). A first pass reads the header and counts the values each field
/// holds without decoding them; only when the count matches the dims is anything allocated, and
/// then exactly, and the values are decoded in bulk.

/// How a readable element type is stored, and what it is read into.
enum ElementStorage {
    case float32, float16, bfloat16, float64, int8, uint8, int16, uint16, int32, uint32, int64, uint64, bool

    init?(_ type: OnnxDataType) {
        switch type {
        case .float: self = .float32
        case .float16: self = .float16
        case .bfloat16: self = .bfloat16
        case .double: self = .float64
        case .int8: self = .int8
        case .uint8: self = .uint8
        case .int16: self = .int16
        case .uint16: self = .uint16
        case .int32: self = .int32
        case .uint32: self = .uint32
        case .int64: self = .int64
        case .uint64: self = .uint64
        case .bool: self = .bool
        default: return nil
        }
    }

    /// Bytes per element in raw_data.
    var size: Int {
        switch self {
        case .int8, .uint8, .bool: return 1
        case .float16, .bfloat16, .int16, .uint16: return 2
        case .float32, .int32, .uint32: return 4
        case .float64, .int64, .uint64: return 8
        }
    }

    var isFloat: Bool {
        switch self {
        case .float32, .float16, .bfloat16, .float64: return true
        default: return false
        }
    }

    /// The typed field holding this type's values when raw_data is not used (onnx.proto).
    var typedField: Int {
        switch self {
        case .float32: return 4
        case .float64: return 10
        case .int64: return 7
        case .uint32, .uint64: return 11
        case .float16, .bfloat16, .int8, .uint8, .int16, .uint16, .int32, .bool: return 5
        }
    }

    /// A typed field's element widened to Float (the field's bits, as the field stores them).
    @inline(__always)
    func float(_ bits: UInt64) -> Float {
        switch self {
        case .float32: return Float(bitPattern: UInt32(truncatingIfNeeded: bits))
        case .float64: return Float(Double(bitPattern: bits))
        case .float16: return Float(Float16(bitPattern: UInt16(truncatingIfNeeded: bits)))
        case .bfloat16: return Float(bitPattern: UInt32(UInt16(truncatingIfNeeded: bits)) << 16)
        default: return 0
        }
    }

    /// A typed field's element as the integer type holds it (int32_data entries narrowed to
    /// the type, as ONNX's readers cast them; BOOL as 0 or 1). UINT64 keeps its bit pattern
    /// here and is checked by the caller.
    @inline(__always)
    func integer(_ bits: UInt64) -> Int64 {
        switch self {
        case .int8: return Int64(Int8(truncatingIfNeeded: bits))
        case .uint8: return Int64(UInt8(truncatingIfNeeded: bits))
        case .int16: return Int64(Int16(truncatingIfNeeded: bits))
        case .uint16: return Int64(UInt16(truncatingIfNeeded: bits))
        case .int32: return Int64(Int32(truncatingIfNeeded: bits))
        case .uint32: return Int64(UInt32(truncatingIfNeeded: bits))
        case .bool: return UInt32(truncatingIfNeeded: bits) != 0 ? 1 : 0
        case .int64, .uint64: return Int64(bitPattern: bits)
        default: return 0
        }
    }
}

/// Decoded values: floats or integers.
private enum Values {
    case floats([Float])
    case integers([Int64])
}

/// How many values each typed field of a tensor holds (nil: the field is absent).
private struct TypedCounts {
    var float: Int?, int32: Int?, string: Int?, int64: Int?, double: Int?, uint64: Int?

    mutating func add(_ field: Int, _ count: Int) {
        switch field {
        case 4: float = (float ?? 0) + count
        case 5: int32 = (int32 ?? 0) + count
        case 6: string = (string ?? 0) + count
        case 7: int64 = (int64 ?? 0) + count
        case 10: double = (double ?? 0) + count
        default: uint64 = (uint64 ?? 0) + count
        }
    }

    /// The fields holding at least one value, with their counts.
    var nonEmpty: [(field: Int, count: Int)] {
        [(4, float), (5, int32), (6, string), (7, int64), (10, double), (11, uint64)]
            .compactMap { field, count in count.flatMap { $0 > 0 ? (field, $0) : nil } }
    }
}

/// Dims for messages, shortened when a file gives very many.
private func describeDims<T>(_ dims: [T]) -> String {
    dims.count <= 16 ? "\(dims)" : "[" + dims.prefix(16).map { "\($0)" }.joined(separator: ", ") + ", … (\(dims.count) dims)]"
}

extension Cursor {
    /// One element of a typed field by its element wire type, zero-extended to 64 bits.
    @inline(__always)
    mutating func element(_ wire: UInt8) throws(DecodeFailure) -> UInt64 {
        switch wire {
        case 5: return UInt64(try fixed32())
        case 1: return try fixed64()
        default: return try varint()
        }
    }
}

extension ModelDecoder {
    func tensor(_ range: Range<Int>) throws(DecodeFailure) -> OnnxTensor {
        var cursor = Cursor(bytes, range, .tensor)
        var name = ""
        var rawDims: [Int64] = []
        var typeNumber: Int32 = 0
        var raw: Range<Int>?
        var external = false
        var segmented = false
        var counts = TypedCounts()
        while let (field, wire) = try cursor.next() {
            switch (field, wire) {
            case (1, 0): rawDims.append(Int64(bitPattern: try cursor.varint()))
            case (1, 2):
                var packed = cursor.packed(try cursor.lengthDelimited())
                rawDims.reserveCapacity(rawDims.count + (try packed.countVarints()))
                while !packed.atEnd { rawDims.append(Int64(bitPattern: try packed.varint())) }
            case (2, 0): typeNumber = Int32(truncatingIfNeeded: try cursor.varint())
            case (3, 2):
                segmented = true
                try cursor.skip(wire)
            case (4, 2), (10, 2):
                let width = field == 4 ? 4 : 8
                let payload = try cursor.lengthDelimited()
                guard payload.count % width == 0 else {
                    throw .malformed("\(MessageKind.tensor.describe(field)) is \(payload.count) bytes, not a whole number of \(width)-byte values")
                }
                counts.add(field, payload.count / width)
            case (4, 5), (10, 1):
                _ = try cursor.element(wire)
                counts.add(field, 1)
            case (5, 2), (7, 2), (11, 2):
                counts.add(field, try cursor.packed(try cursor.lengthDelimited()).countVarints())
            case (5, 0), (7, 0), (11, 0):
                _ = try cursor.varint()
                counts.add(field, 1)
            case (6, 2):
                _ = try cursor.lengthDelimited()
                counts.add(field, 1)
            case (8, 2): name = try cursor.string()
            case (9, 2): raw = try cursor.lengthDelimited()
            case (13, 2):
                external = true
                try cursor.skip(wire)
            case (14, 0):
                let location = try cursor.varint()
                guard location <= 1 else { throw .malformed("unknown data_location \(Int64(bitPattern: location)) (0 inside, 1 external)") }
                if location == 1 { external = true }
            default: try cursor.skip(wire)
            }
        }

        if external { throw DecodeFailure(.externalData) }
        if segmented { throw DecodeFailure(.unsupported("a segmented tensor (TensorProto.segment, field 3)")) }
        guard let type = OnnxDataType(rawValue: Int(typeNumber)), let storage = ElementStorage(type) else {
            throw DecodeFailure(.unsupportedDataType(Int(typeNumber)))
        }

        var dims: [Int] = []
        dims.reserveCapacity(rawDims.count)
        for dim in rawDims {
            guard dim >= 0, let size = Int(exactly: dim) else {
                throw .malformed("negative dimension \(dim) in dims \(describeDims(rawDims))")
            }
            dims.append(size)
        }
        var count = 1
        if dims.contains(0) {
            count = 0
        } else {
            for dim in dims {
                let (product, overflow) = count.multipliedReportingOverflow(by: dim)
                guard !overflow else { throw .malformed("dims \(describeDims(dims)) hold more elements than an Int can count") }
                count = product
            }
        }

        let typed = counts.nonEmpty
        let values: Values
        if let raw {
            if let other = typed.first {
                throw .malformed("values in both raw_data (field 9) and \(MessageKind.tensor.describe(other.field))")
            }
            let (needed, overflow) = count.multipliedReportingOverflow(by: storage.size)
            guard !overflow, needed == raw.count else {
                throw .malformed("raw_data holds \(raw.count) byte\(raw.count == 1 ? "" : "s"); dims \(describeDims(dims)) of \(type.onnxName) need "
                                 + (overflow ? "more than Int.max" : "\(needed)"))
            }
            values = try decodeRaw(raw, storage, count: count)
        } else if typed.count > 1 {
            throw .malformed("values in several fields: " + typed.map { MessageKind.tensor.describe($0.field) }.joined(separator: ", "))
        } else if let (field, found) = typed.first {
            guard field == storage.typedField else {
                throw .malformed("\(type.onnxName) values in \(MessageKind.tensor.describe(field)); "
                                 + "they belong in raw_data or \(MessageKind.tensor.describe(storage.typedField))")
            }
            guard found == count else {
                throw .malformed("\(MessageKind.tensor.describe(field)) holds \(found) value\(found == 1 ? "" : "s"); "
                                 + "dims \(describeDims(dims)) need \(count)")
            }
            values = try decodeTyped(range, field: field, storage, count: count)
        } else {
            guard count == 0 else {
                throw .malformed("no values (neither raw_data nor \(MessageKind.tensor.describe(storage.typedField))); "
                                 + "dims \(describeDims(dims)) need \(count)")
            }
            values = storage.isFloat ? .floats([]) : .integers([])
        }

        switch values {
        case let .floats(floats):
            return OnnxTensor(name: name, dataType: type, dims: dims, floats: floats, integers: nil, count: count)
        case let .integers(integers):
            if storage == .uint64, let index = integers.firstIndex(where: { $0 < 0 }) {
                throw .malformed("value #\(index) (\(UInt64(bitPattern: integers[index]))) of this UINT64 tensor is above "
                                 + "Int64.max, the largest integer the reader holds")
            }
            return OnnxTensor(name: name, dataType: type, dims: dims, floats: nil, integers: integers, count: count)
        }
    }

    /// raw_data decoded in bulk; its length was checked to be `count` elements.
    private func decodeRaw(_ range: Range<Int>, _ storage: ElementStorage, count: Int) throws(DecodeFailure) -> Values {
        let raw = UnsafeRawBufferPointer(rebasing: bytes[range])
        guard raw.count % storage.size == 0, raw.count / storage.size == count else { throw .malformed("raw_data does not hold \(count) values") }
        @inline(__always) func u16(_ index: Int) -> UInt16 {
            UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: index &* 2, as: UInt16.self))
        }
        @inline(__always) func u32(_ index: Int) -> UInt32 {
            UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: index &* 4, as: UInt32.self))
        }
        @inline(__always) func u64(_ index: Int) -> UInt64 {
            UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index &* 8, as: UInt64.self))
        }
        switch storage {
        case .float32:
            #if _endian(little)
            return .floats([Float](unsafeUninitializedCapacity: count) { buffer, initialized in
                UnsafeMutableRawBufferPointer(buffer).copyMemory(from: raw)
                initialized = count
            })
            #else
            return .floats(makeFloats(count) { Float(bitPattern: u32($0)) })
            #endif
        case .float16: return .floats(makeFloats(count) { Float(Float16(bitPattern: u16($0))) })
        case .bfloat16: return .floats(makeFloats(count) { Float(bitPattern: UInt32(u16($0)) << 16) })
        case .float64: return .floats(makeFloats(count) { Float(Double(bitPattern: u64($0))) })
        case .int8: return .integers(makeIntegers(count) { Int64(Int8(bitPattern: raw[$0])) })
        case .uint8: return .integers(makeIntegers(count) { Int64(raw[$0]) })
        case .bool: return .integers(makeIntegers(count) { raw[$0] != 0 ? 1 : 0 })
        case .int16: return .integers(makeIntegers(count) { Int64(Int16(bitPattern: u16($0))) })
        case .uint16: return .integers(makeIntegers(count) { Int64(u16($0)) })
        case .int32: return .integers(makeIntegers(count) { Int64(Int32(bitPattern: u32($0))) })
        case .uint32: return .integers(makeIntegers(count) { Int64(u32($0)) })
        case .int64, .uint64:
            #if _endian(little)
            return .integers([Int64](unsafeUninitializedCapacity: count) { buffer, initialized in
                UnsafeMutableRawBufferPointer(buffer).copyMemory(from: raw)
                initialized = count
            })
            #else
            return .integers(makeIntegers(count) { Int64(bitPattern: u64($0)) })
            #endif
        }
    }

    /// A typed field's values, read in a second pass over the tensor's message; the first
    /// pass counted exactly `count` of them.
    private func decodeTyped(_ range: Range<Int>, field: Int, _ storage: ElementStorage, count: Int) throws(DecodeFailure) -> Values {
        let elementWire: UInt8 = field == 4 ? 5 : field == 10 ? 1 : 0
        var cursor = Cursor(bytes, range, .tensor)
        var floats: [Float] = []
        var integers: [Int64] = []
        if storage.isFloat { floats.reserveCapacity(count) } else { integers.reserveCapacity(count) }
        func append(_ bits: UInt64) {
            if storage.isFloat { floats.append(storage.float(bits)) } else { integers.append(storage.integer(bits)) }
        }
        while let (number, wire) = try cursor.next() {
            if number == field, wire == 2 {
                var packed = cursor.packed(try cursor.lengthDelimited())
                while !packed.atEnd { append(try packed.element(elementWire)) }
            } else if number == field, wire == elementWire {
                append(try cursor.element(elementWire))
            } else {
                try cursor.skip(wire)
            }
        }
        guard floats.count + integers.count == count else {
            throw .malformed("\(MessageKind.tensor.describe(field)) holds \(floats.count + integers.count) values; \(count) expected")
        }
        return storage.isFloat ? .floats(floats) : .integers(integers)
    }
}

@inline(__always)
private func makeFloats(_ count: Int, _ element: (Int) -> Float) -> [Float] {
    [Float](unsafeUninitializedCapacity: count) { buffer, initialized in
        for index in 0..<count { buffer.initializeElement(at: index, to: element(index)) }
        initialized = count
    }
}

@inline(__always)
private func makeIntegers(_ count: Int, _ element: (Int) -> Int64) -> [Int64] {
    [Int64](unsafeUninitializedCapacity: count) { buffer, initialized in
        for index in 0..<count { buffer.initializeElement(at: index, to: element(index)) }
        initialized = count
    }
}
