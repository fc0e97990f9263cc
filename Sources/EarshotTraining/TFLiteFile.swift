/// A TFLite model as the exporter writes it: subgraphs of tensors and operators, laid out by
/// `bytes()` as TFLite's schema says. ref: tensorflow/lite/schema/schema.fbs (Model,
/// OperatorCode, SubGraph, Tensor, QuantizationParameters, Operator, Buffer).
struct TFLiteFile {
    /// schema.fbs TensorType.
    enum TensorType: Int8 { case int32 = 2, uint8 = 3, int8 = 9, resource = 13 }

    struct Tensor {
        var name: String
        var shape: [Int]
        var type: TensorType
        /// Per tensor (one scale) or per channel along `dimension`.
        var scales: [Float] = []
        var zeroPoints: [Int64] = []
        var dimension = 0
        /// A constant's bytes (little-endian).
        var data: [UInt8]?
    }

    struct Operator {
        /// schema.fbs BuiltinOperator and the op's version.
        var code: Int32
        var version: Int32
        var inputs: [Int]
        var outputs: [Int]
        /// schema.fbs BuiltinOptions: the union's type and its table.
        var options: (type: UInt8, table: FlatBufferWriter.Table)?
    }

    struct Subgraph {
        var name: String
        var tensors: [Tensor] = []
        var inputs: [Int] = []
        var outputs: [Int] = []
        var operators: [Operator] = []

        /// Adds a tensor; its index.
        mutating func add(_ t: Tensor) -> Int {
            tensors.append(t)
            return tensors.count - 1
        }
    }

    var subgraphs: [Subgraph]
    var description: String

    /// The FlatBuffer (schema version 3, file identifier TFL3). Buffer 0 is the empty buffer
    /// every tensor without data points to; each constant has a buffer of its own.
    func bytes() -> [UInt8] {
        typealias T = FlatBufferWriter.Table
        var codes: [(code: Int32, version: Int32)] = []
        var buffers: [T] = [T([])]
        var graphs: [T] = []
        for g in subgraphs {
            var tensors: [T] = []
            for t in g.tensors {
                var buffer: UInt32 = 0
                if let data = t.data {
                    buffers.append(T([(0, .bytes(data, aligned16: true))]))
                    buffer = UInt32(buffers.count - 1)
                }
                let quantization: FlatBufferWriter.Field? = t.scales.isEmpty ? nil
                    : .table(T([(2, .f32s(t.scales)), (3, .i64s(t.zeroPoints)), (6, t.dimension == 0 ? nil : .i32(Int32(t.dimension)))]))
                tensors.append(T([(0, .i32s(t.shape.map { Int32($0) })), (1, .i8(t.type.rawValue)), (2, .u32(buffer)), (3, .string(t.name)),
                                  (4, quantization)]))
            }
            var operators: [T] = []
            for op in g.operators {
                let index: Int
                if let i = codes.firstIndex(where: { $0.code == op.code && $0.version == op.version }) { index = i } else {
                    codes.append((op.code, op.version))
                    index = codes.count - 1
                }
                operators.append(T([(0, .u32(UInt32(index))), (1, .i32s(op.inputs.map { Int32($0) })), (2, .i32s(op.outputs.map { Int32($0) })),
                                    (3, op.options.map { .u8($0.type) }), (4, op.options.map { .table($0.table) })]))
            }
            graphs.append(T([(0, .tables(tensors)), (1, .i32s(g.inputs.map { Int32($0) })), (2, .i32s(g.outputs.map { Int32($0) })),
                             (3, .tables(operators)), (4, .string(g.name))]))
        }
        // deprecated_builtin_code holds codes below 127; past it, 127 (PLACEHOLDER_FOR_GREATER_OP_CODES).
        let operatorCodes = codes.map { T([(0, .i8(Int8(min($0.code, 127)))), (2, .i32($0.version)), (3, .i32($0.code))]) }
        let model = T([(0, .u32(3)), (1, .tables(operatorCodes)), (2, .tables(graphs)), (3, .string(description)), (4, .tables(buffers))])
        return FlatBufferWriter.write(root: model, identifier: "TFL3")
    }
}
