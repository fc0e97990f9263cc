import Foundation

/// A TFLite model file (TFLite's `schema.fbs`) read into values: its operator codes, subgraphs
/// with their tensors (shape, type, quantization, constant bytes) and operators (inputs, outputs,
/// the builtin options the runtime needs). Metadata, signatures, sparsity and custom options are
/// not kept.
public struct TFLiteModel: Sendable, Equatable {
    /// The schema version.
    public let version: UInt32
    /// The converter's description.
    public let description: String
    /// Its subgraphs (the first is the model).
    public let subgraphs: [TFLiteSubgraph]
    /// Per operator code: the builtin operator's number (`TFLiteOperator.code`).
    public let operatorCodes: [Int32]

    /// The most subgraphs, tensors per subgraph, operators per subgraph and dimensions per tensor.
    public static let maxSubgraphs = 1024
    /// The most tensors a file may hold.
    public static let maxTensors = 1 << 20
    /// The most dimensions a tensor may have.
    public static let maxDimensions = 16

    /// Reads the TFLite model at `path`.
    public static func read(path: String) throws(TFLiteError) -> TFLiteModel {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { throw .fileNotFound(path: path) }
        guard !isFolder.boolValue else { throw .cannotRead(path: path, reason: "it is a folder") }
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw .cannotRead(path: path, reason: error.localizedDescription)
        }
        return try TFLiteModel(bytes: [UInt8](data), name: path)
    }

    /// Decodes a model from its bytes; `name` stands for the file in errors.
    public init(bytes: [UInt8], name: String) throws(TFLiteError) {
        let fb = FlatBuffer(bytes: bytes, path: name)
        guard bytes.count >= 8 else { throw fb.fail("file", 0, "\(bytes.count) bytes is too short for a FlatBuffer") }
        // The file identifier "TFL3" follows the root offset.
        guard bytes[4..<8].elementsEqual("TFL3".utf8) else {
            throw fb.fail("file", 4, "no TFLite identifier \"TFL3\" (is it a .tflite file?)")
        }
        let model = try fb.root("model")
        version = try model.u32(0)
        description = try model.string(3, "description") ?? ""
        var codes: [Int32] = []
        for code in try model.tables(1, "operator code") {
            // builtin_code (field 3) supersedes deprecated_builtin_code (field 0) past 127.
            codes.append(max(Int32(try code.i8(0)), try code.i32(3)))
        }
        operatorCodes = codes
        let buffers = try model.tables(4, "buffer")
        let graphs = try model.tables(2, "subgraph")
        guard !graphs.isEmpty else { throw fb.fail("model", model.position, "no subgraphs") }
        guard graphs.count <= Self.maxSubgraphs else { throw .limit(path: name, what: "\(graphs.count) subgraphs", limit: Self.maxSubgraphs) }
        var subgraphs: [TFLiteSubgraph] = []
        for (index, graph) in graphs.enumerated() {
            subgraphs.append(try TFLiteSubgraph(graph, index: index, buffers: buffers, codes: codes, fb: fb))
        }
        self.subgraphs = subgraphs
    }
}

/// The element types of TFLite tensors (TFLite's `TensorType`).
public enum TFLiteType: Int, Sendable, Equatable {
    case float32 = 0, float16 = 1, int32 = 2, uint8 = 3, int64 = 4, string = 5, bool = 6, int16 = 7, complex64 = 8,
         int8 = 9, float64 = 10, complex128 = 11, uint64 = 12, resource = 13, variant = 14, uint32 = 15, uint16 = 16,
         int4 = 17, bfloat16 = 18

    /// Bytes per element (0 for types without a fixed size).
    public var size: Int {
        switch self {
        case .int8, .uint8, .bool: return 1
        case .int16, .uint16, .float16, .bfloat16: return 2
        case .int32, .uint32, .float32: return 4
        case .int64, .uint64, .float64, .complex64: return 8
        case .complex128: return 16
        case .string, .resource, .variant, .int4: return 0
        }
    }
}

/// A tensor's affine quantization: real = scale * (q - zeroPoint), per tensor (one scale) or
/// per channel along `dimension`.
public struct TFLiteQuantization: Sendable, Equatable {
    /// Scales: one, or one per channel.
    public let scales: [Float]
    /// Zero points, as the scales.
    public let zeroPoints: [Int64]
    /// The per-channel dimension.
    public let dimension: Int
}

/// A tensor: name, shape, type, quantization.
public struct TFLiteTensor: Sendable, Equatable {
    /// Its name.
    public let name: String
    /// Its shape.
    public let shape: [Int]
    /// Its element type.
    public let type: TFLiteType
    /// Its quantization (int8 tensors).
    public let quantization: TFLiteQuantization?
    /// The constant bytes (little-endian), nil for a tensor computed at run time.
    public let data: [UInt8]?
    /// Whether it is a variable.
    public let isVariable: Bool
    /// Its shape with -1 where the axis is dynamic (empty when the file does not say).
    public var signature: [Int] = []

    /// The element count of the shape.
    public var count: Int { shape.reduce(1, *) }

    /// A constant's values as integers (int8, uint8, int16, int32, int64), nil otherwise.
    public var integers: [Int64]? {
        guard let data, type.size > 0, data.count == count * type.size else { return nil }
        var out = [Int64]()
        out.reserveCapacity(count)
        for i in 0..<count {
            let at = i * type.size
            var raw: UInt64 = 0
            for b in 0..<type.size { raw |= UInt64(data[at + b]) << (8 * b) }
            switch type {
            case .int8: out.append(Int64(Int8(truncatingIfNeeded: raw)))
            case .uint8: out.append(Int64(raw))
            case .int16: out.append(Int64(Int16(truncatingIfNeeded: raw)))
            case .uint16: out.append(Int64(raw))
            case .int32: out.append(Int64(Int32(truncatingIfNeeded: raw)))
            case .uint32: out.append(Int64(raw))
            case .int64: out.append(Int64(bitPattern: raw))
            default: return nil
            }
        }
        return out
    }

    /// A float16 constant's values as float32, nil otherwise.
    public var halves: [Float]? {
        guard let data, type == .float16, data.count == count * 2 else { return nil }
        return (0..<count).map { i in Float(Float16(bitPattern: UInt16(data[2 * i]) | UInt16(data[2 * i + 1]) << 8)) }
    }

    /// A float32 constant's values, nil otherwise.
    public var floats: [Float]? {
        guard let data, type == .float32, data.count == count * 4 else { return nil }
        return (0..<count).map { i in
            var raw: UInt32 = 0
            for b in 0..<4 { raw |= UInt32(data[4 * i + b]) << (8 * b) }
            return Float(bitPattern: raw)
        }
    }
}

/// An operator: its builtin code, inputs and outputs (tensor indices, -1 for an omitted
/// optional input) and its options.
public struct TFLiteOperator: Sendable, Equatable {
    /// The builtin operator code.
    public let code: Int32
    /// Input tensor indices (-1: none).
    public let inputs: [Int]
    /// Output tensor indices.
    public let outputs: [Int]
    /// Its options.
    public let options: TFLiteOptions

    /// The builtin operators the importer knows, by TFLite's numbers.
    public static let names: [Int32: String] = [
        0: "ADD", 1: "AVERAGE_POOL_2D", 2: "CONCATENATION", 3: "CONV_2D", 4: "DEPTHWISE_CONV_2D", 6: "DEQUANTIZE", 8: "FLOOR",
        9: "FULLY_CONNECTED", 11: "L2_NORMALIZATION", 14: "LOGISTIC", 17: "MAX_POOL_2D", 18: "MUL", 19: "RELU", 20: "RELU_N1_TO_1", 21: "RELU6", 22: "RESHAPE",
        25: "SOFTMAX", 28: "TANH", 34: "PAD", 36: "GATHER", 39: "TRANSPOSE", 40: "MEAN", 41: "SUB", 42: "DIV", 43: "SQUEEZE", 45: "STRIDED_SLICE",
        47: "EXP", 49: "SPLIT", 53: "CAST", 55: "MAXIMUM", 57: "MINIMUM", 58: "LESS", 59: "NEG", 60: "PADV2", 61: "GREATER", 62: "GREATER_EQUAL",
        63: "LESS_EQUAL", 65: "SLICE", 66: "SIN", 70: "EXPAND_DIMS", 73: "LOG", 74: "SUM", 75: "SQRT", 76: "RSQRT", 77: "SHAPE", 78: "POW",
        81: "REDUCE_PROD", 82: "REDUCE_MAX", 83: "PACK", 89: "REDUCE_MIN", 90: "FLOOR_DIV", 92: "SQUARE", 96: "RANGE", 98: "LEAKY_RELU", 99: "SQUARED_DIFFERENCE",
        101: "ABS", 102: "SPLIT_V", 105: "REVERSE_V2", 108: "COS", 114: "QUANTIZE", 118: "IF", 123: "SELECT_V2", 126: "BATCH_MATMUL",
        129: "CALL_ONCE", 131: "RFFT2D", 135: "COMPLEX_ABS", 142: "VAR_HANDLE", 143: "READ_VARIABLE", 144: "ASSIGN_VARIABLE",
    ]

    /// The operator's name ("CONV_2D"), or "builtin N" for one this table does not name.
    public var name: String { Self.names[code] ?? "builtin \(code)" }
}

/// The builtin options of the operators the importer takes (TFLite's `*Options` tables).
public enum TFLiteOptions: Sendable, Equatable {
    case none
    /// CONV_2D and DEPTHWISE_CONV_2D: padding (0 SAME, 1 VALID), strides, dilations, the fused
    /// activation (0 none, 1 relu, 2 relu_n1_to_1, 3 relu6) and, for depthwise, the multiplier.
    case convolution(padding: Int, strideH: Int, strideW: Int, dilationH: Int, dilationW: Int, activation: Int, depthMultiplier: Int)
    /// FULLY_CONNECTED: the fused activation, the weights' format (0 default), whether the input's
    /// leading axes are kept, and whether a hybrid op (int8 weights, float input) quantizes its
    /// input rows asymmetrically.
    case fullyConnected(activation: Int, weightsFormat: Int, keepNumDims: Bool, asymmetricInputs: Bool)
    case concatenation(axis: Int, activation: Int)
    case stridedSlice(beginMask: Int, endMask: Int, ellipsisMask: Int, newAxisMask: Int, shrinkAxisMask: Int, offset: Bool)
    case reshape(newShape: [Int])
    case splitV(numSplits: Int)
    case varHandle(container: String, sharedName: String)
    case callOnce(initSubgraph: Int)
    /// ADD, SUB, MUL, DIV: the fused activation (0 none, 1 relu, 2 relu_n1_to_1, 3 relu6, 4 tanh).
    case activation(Int)
    /// AVERAGE_POOL_2D and MAX_POOL_2D: padding (0 SAME, 1 VALID), strides, filter size, fused activation.
    case pool(padding: Int, strideH: Int, strideW: Int, filterH: Int, filterW: Int, activation: Int)
    /// MEAN, SUM and the REDUCE_ ops: whether the reduced axes are kept.
    case reducer(keepDims: Bool)
    case leakyRelu(alpha: Float)
    case squeeze(dims: [Int])
    case gather(axis: Int, batchDims: Int)
    case pack(count: Int, axis: Int)
    case split(numSplits: Int)
    case batchMatMul(adjointX: Bool, adjointY: Bool)
    /// IF: the subgraphs of its two branches.
    case branches(then: Int, else: Int)
    /// Options of a type the importer does not read (TFLite's BuiltinOptions number).
    case other(type: Int)
}

/// A subgraph: tensors, inputs, outputs and operators.
public struct TFLiteSubgraph: Sendable, Equatable {
    /// Its name.
    public let name: String
    /// Its tensors.
    public let tensors: [TFLiteTensor]
    /// Input tensor indices (-1: none).
    public let inputs: [Int]
    /// Output tensor indices.
    public let outputs: [Int]
    /// Its operators, in order.
    public let operators: [TFLiteOperator]

    init(_ graph: Table, index: Int, buffers: [Table], codes: [Int32], fb: FlatBuffer) throws(TFLiteError) {
        let context = "subgraph \(index)"
        name = try graph.string(4, "name") ?? "subgraph \(index)"
        let tensorTables = try graph.tables(0, "tensor")
        guard tensorTables.count <= TFLiteModel.maxTensors else {
            throw .limit(path: fb.path, what: "\(context): \(tensorTables.count) tensors", limit: TFLiteModel.maxTensors)
        }
        var tensors: [TFLiteTensor] = []
        for (t, table) in tensorTables.enumerated() {
            let where_ = "\(context) > tensor \(t)"
            let dims = try table.i32s(0, "shape")
            guard dims.count <= TFLiteModel.maxDimensions else { throw .limit(path: fb.path, what: "\(where_): \(dims.count) dimensions", limit: TFLiteModel.maxDimensions) }
            guard dims.allSatisfy({ $0 >= 0 }) else { throw fb.fail(where_, table.position, "a negative dimension in \(dims)") }
            let shape = dims.map(Int.init)
            // Zeros counted as ones, and an overflow stays one: an empty tensor cannot hide a huge axis.
            guard shape.reduce(1, { acc, d in let (p, o) = acc.multipliedReportingOverflow(by: max(d, 1)); return o ? Int.max : p }) <= 1 << 24 else {
                throw .limit(path: fb.path, what: "\(where_): shape \(shape)", limit: 1 << 24)
            }
            let typeNumber = Int(try table.i8(1))
            guard let type = TFLiteType(rawValue: typeNumber) else { throw fb.fail(where_, table.position, "unknown tensor type \(typeNumber)") }
            let bufferIndex = Int(try table.u32(2))
            guard bufferIndex < max(buffers.count, 1) else {
                throw fb.fail(where_, table.position, "buffer \(bufferIndex) of \(buffers.count)")
            }
            var data: [UInt8]?
            if bufferIndex > 0 && bufferIndex < buffers.count {
                let buffer = buffers[bufferIndex]
                if let bytes = try buffer.bytes(0, "data"), !bytes.isEmpty {
                    data = Array(bytes)
                } else if try buffer.u64(1) > 1 {
                    // Data placed after the FlatBuffer (models over 2 GB): offset from the file's start.
                    let offset = try buffer.u64(1), size = try buffer.u64(2)
                    guard offset < UInt64(fb.bytes.count), size <= UInt64(fb.bytes.count) - offset else {
                        throw fb.fail("\(where_) > buffer \(bufferIndex)", buffer.position, "data at \(offset) of \(size) bytes lies outside the file")
                    }
                    data = Array(fb.bytes[Int(offset)..<Int(offset + size)])
                }
            }
            if let d = data, type.size > 0, d.count != shape.reduce(1, *) * type.size {
                throw fb.fail(where_, table.position, "\(d.count) bytes of data for \(type) \(shape), which needs \(shape.reduce(1, *) * type.size)")
            }
            var quantization: TFLiteQuantization?
            if let q = try table.table(4, "quantization") {
                let scales = try q.f32s(2, "scale"), zeros = try q.i64s(3, "zero_point")
                if !scales.isEmpty || !zeros.isEmpty {
                    quantization = TFLiteQuantization(scales: scales, zeroPoints: zeros, dimension: Int(try q.i32(6)))
                }
            }
            var tensor = TFLiteTensor(name: try table.string(3, "name") ?? "tensor \(t)", shape: shape, type: type,
                                      quantization: quantization, data: data, isVariable: try table.bool(5))
            tensor.signature = try table.i32s(7, "shape_signature").map(Int.init)
            tensors.append(tensor)
        }
        self.tensors = tensors
        func indices(_ values: [Int32], _ what: String, optional: Bool) throws(TFLiteError) -> [Int] {
            try values.map { (v: Int32) throws(TFLiteError) -> Int in
                guard (optional && v == -1) || (v >= 0 && Int(v) < tensors.count) else {
                    throw fb.fail("\(context) > \(what)", graph.position, "tensor index \(v) of \(tensors.count)")
                }
                return Int(v)
            }
        }
        inputs = try indices(try graph.i32s(1, "inputs"), "inputs", optional: false)
        outputs = try indices(try graph.i32s(2, "outputs"), "outputs", optional: false)
        var operators: [TFLiteOperator] = []
        for (o, op) in try graph.tables(3, "operator").enumerated() {
            let where_ = "\(context) > operator \(o)"
            let opcode = Int(try op.u32(0))
            guard opcode < codes.count else { throw fb.fail(where_, op.position, "operator code \(opcode) of \(codes.count)") }
            let code = codes[opcode]
            let optionsType = Int(try op.u8(3))
            let options = try Self.options(code: code, type: optionsType, table: try op.table(4, "options"), fb: fb, where_)
            operators.append(TFLiteOperator(code: code, inputs: try indices(try op.i32s(1, "inputs"), "operator \(o) inputs", optional: true),
                                            outputs: try indices(try op.i32s(2, "outputs"), "operator \(o) outputs", optional: false),
                                            options: options))
        }
        self.operators = operators
    }

    private static func options(code: Int32, type: Int, table: Table?, fb: FlatBuffer, _ context: String) throws(TFLiteError) -> TFLiteOptions {
        guard let t = table else { return type == 0 ? .none : .other(type: type) }
        func int(_ i: Int, _ d: Int32 = 0) throws(TFLiteError) -> Int { Int(try t.i32(i, default: d)) }
        func byte(_ i: Int) throws(TFLiteError) -> Int { Int(try t.i8(i)) }
        switch type {
        case 1:  // Conv2DOptions
            return .convolution(padding: try byte(0), strideH: try int(2), strideW: try int(1), dilationH: try int(5, 1), dilationW: try int(4, 1),
                                activation: try byte(3), depthMultiplier: 0)
        case 2:  // DepthwiseConv2DOptions
            return .convolution(padding: try byte(0), strideH: try int(2), strideW: try int(1), dilationH: try int(6, 1), dilationW: try int(5, 1),
                                activation: try byte(4), depthMultiplier: try int(3))
        case 8:  // FullyConnectedOptions
            return .fullyConnected(activation: try byte(0), weightsFormat: try byte(1), keepNumDims: try t.bool(2), asymmetricInputs: try t.bool(3))
        case 10:  // ConcatenationOptions
            return .concatenation(axis: try int(0), activation: try byte(1))
        case 17:  // ReshapeOptions
            return .reshape(newShape: try t.i32s(0, "new_shape").map(Int.init))
        case 32:  // StridedSliceOptions
            return .stridedSlice(beginMask: try int(0), endMask: try int(1), ellipsisMask: try int(2), newAxisMask: try int(3),
                                 shrinkAxisMask: try int(4), offset: try t.bool(5))
        case 79:  // SplitVOptions
            return .splitV(numSplits: try int(0))
        case 5:  // Pool2DOptions
            return .pool(padding: try byte(0), strideH: try int(2), strideW: try int(1), filterH: try int(4), filterW: try int(3), activation: try byte(5))
        case 11, 21, 28, 29:  // AddOptions, MulOptions, SubOptions, DivOptions
            return .activation(try byte(0))
        case 23:  // GatherOptions
            return .gather(axis: try int(0), batchDims: try int(1))
        case 27:  // ReducerOptions
            return .reducer(keepDims: try t.bool(0))
        case 30:  // SqueezeOptions
            return .squeeze(dims: try t.i32s(0, "squeeze_dims").map(Int.init))
        case 35:  // SplitOptions
            return .split(numSplits: try int(0))
        case 59:  // PackOptions
            return .pack(count: try int(0), axis: try int(1))
        case 75:  // LeakyReluOptions
            return .leakyRelu(alpha: Float(bitPattern: UInt32(bitPattern: try t.i32(0))))
        case 92:  // IfOptions
            return .branches(then: try int(0), else: try int(1))
        case 101:  // BatchMatMulOptions
            return .batchMatMul(adjointX: try t.bool(0), adjointY: try t.bool(1))
        case 103:  // CallOnceOptions
            return .callOnce(initSubgraph: try int(0))
        case 111:  // VarHandleOptions
            return .varHandle(container: try t.string(0, "container") ?? "", sharedName: try t.string(1, "shared_name") ?? "")
        default:
            return .other(type: type)
        }
    }
}
