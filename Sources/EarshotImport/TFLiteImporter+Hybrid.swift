import EarshotGraph
import EarshotModel
import EarshotTFLite

/// TFLite's hybrid operators (dynamic-range quantization: int8 weights, float activations), as
/// TFLite's kernels run them: the float input quantized to int8 each step (`TFLiteHybridQuantize`,
/// a scale per row or per batch item), the products of the integers summed exactly (a Gemm or
/// Conv on whole numbers), then scaled back to float and the float bias added, each float
/// operation in TFLite's order (ref: tensorflow/lite/kernels fully_connected.cc EvalHybrid,
/// conv.cc EvalHybrid and EvalHybridPerChannel, depthwise_conv.cc EvalHybridPerChannel;
/// reference_ops::HybridConvPerChannel, reference_integer_ops::DepthwiseConvHybridPerChannel).
extension TFLiteImporter {
    /// The operators TFLite runs as hybrids, which the importer takes.
    static let hybridOperators: Set<String> = ["FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D"]

    /// Whether `op` is a hybrid: a float input and output and constant 8-bit weights (input 1).
    func isHybrid(_ op: TFLiteOperator, _ graph: TFLiteSubgraph) -> Bool {
        guard op.inputs.count >= 2, op.inputs[0] >= 0, op.inputs[1] >= 0, let out = op.outputs.first, out >= 0 else { return false }
        let x = graph.tensors[op.inputs[0]], w = graph.tensors[op.inputs[1]]
        return x.type == .float32 && graph.tensors[out].type == .float32 && [.int8, .uint8].contains(w.type) && w.data != nil
    }

    /// A hybrid operator on `x` with the 8-bit weights `weights` and the float `bias`.
    mutating func hybrid(_ op: TFLiteOperator, x: Value, weights t: TFLiteTensor, bias: Value?, label: String,
                         fail: (String, String) -> ImportError) throws(ImportError) -> Value {
        let name = op.name
        guard Self.hybridOperators.contains(name) else {
            throw fail("a hybrid operator (int8 weights '\(t.name)', float input)",
                       "the importer takes hybrid FULLY_CONNECTED, CONV_2D and DEPTHWISE_CONV_2D: see docs/models.md")
        }
        guard t.type == .int8, let integers = t.integers, integers.count == t.count, let q = t.quantization, !q.scales.isEmpty,
              q.scales.allSatisfy({ $0 > 0 && $0.isFinite }), q.zeroPoints.allSatisfy({ $0 == 0 }) else {
            throw fail("weights '\(t.name)' are not int8 with positive scales and zero points of 0", "TFLite's hybrid weights are symmetric int8")
        }
        if let bias, bias.tensor.dtype != .float32 { throw fail("bias of type \(bias.tensor.dtype)", "a hybrid operator's bias is float") }
        let w = literal("\(t.name) (integers)", GraphTensor(shape: t.shape, floats: integers.map(Float.init)))
        let scales = q.scales
        switch name {
        case "FULLY_CONNECTED":
            let (activation, keepDims, asymmetric) = try Self.fullyConnectedOptions(op, fail)
            guard t.shape.count == 2, scales.count == 1 || scales.count == t.shape[0] else {
                throw fail("weights of shape \(t.shape) with \(scales.count) scales", "FULLY_CONNECTED takes [outputs, inputs] weights, a scale per tensor or per output")
            }
            let (outputs, depth) = (t.shape[0], t.shape[1])
            guard depth > 0, x.tensor.count % depth == 0 else { throw fail("an input of \(x.tensor.shape) for \(depth) weights a row", "the file is damaged") }
            let rows = x.tensor.count / depth
            let flat = try reshaped(x, [rows, depth], "\(label) (rows)", op: name)
            // ref: EvalHybrid: each row quantized; output = bias + dotprod * (row scale * weights' scale).
            let (integerRows, rowScales) = try quantizedInput(flat, axis: 1, asymmetric: asymmetric, label, op: name)
            let sums = try node("Gemm", "\(label) (integer sums)", [integerRows, w], attributes: ["transB": .int(1)], op: name)[0]
            let weightScales = literal("\(label) weight scales", scales.count == 1 ? GraphTensor(scalar: scales[0]) : GraphTensor(shape: [outputs], floats: scales))
            let factors = try node("Mul", "\(label) (scales)", [rowScales, weightScales], op: name)[0]
            var v = try node("Mul", "\(label) (scaled)", [sums, factors], op: name)[0]
            if let bias { v = try node("Add", label, [v, bias], op: name)[0] }
            if keepDims { v = try reshaped(v, Array(x.tensor.shape.dropLast()) + [outputs], "\(label) (kept dims)", op: name) }
            return try activated(v, activation, label, op: name, fail: fail)
        default:
            guard case let .convolution(_, _, _, _, _, activation, _) = op.options else { throw fail("no options", "the file is damaged") }
            guard t.shape.count == 4, x.tensor.rank == 4 else { throw fail("filter of shape \(t.shape) for input \(x.tensor.shape)", "a convolution takes NHWC input and a 4-D filter") }
            let depthwise = name == "DEPTHWISE_CONV_2D"
            let channels = depthwise ? t.shape[3] : t.shape[0]
            guard scales.count == 1 || scales.count == channels else {
                throw fail("\(scales.count) filter scales for \(channels) output channels", "the filter is quantized per tensor or per output channel")
            }
            // CONV_2D: per channel (asymmetric input) when the scales differ, else per tensor
            // (symmetric input); DEPTHWISE_CONV_2D: per channel, asymmetric input.
            let perChannel = depthwise || scales.contains { $0 != scales[0] }
            let (integers, itemScales) = try quantizedItems(x, asymmetric: perChannel, label, op: name)
            let sums = try convolutionNCHW(op, x: integers, filter: w, bias: nil, label: "\(label) (integer sums)", fail: fail)
            let items = x.tensor.shape[0]
            let perItem = try reshaped(itemScales, [items, 1, 1, 1], "\(label) (item scales)", op: name)
            let channelScales = literal("\(label) filter scales",
                                        GraphTensor(shape: [1, channels, 1, 1], floats: scales.count == 1 ? [Float](repeating: scales[0], count: channels) : scales))
            var v: Value
            if !perChannel {
                // ref: EvalHybrid: dotprod * (item scale * filter scale), then the bias.
                let factor = try node("Mul", "\(label) (scales)", [perItem, literal("\(label) filter scale", GraphTensor(scalar: scales[0]))], op: name)[0]
                v = try node("Mul", "\(label) (scaled)", [sums, factor], op: name)[0]
            } else if depthwise {
                // ref: DepthwiseConvHybridPerChannel: acc * (channel scale * item scale).
                let factors = try node("Mul", "\(label) (scales)", [channelScales, perItem], op: name)[0]
                v = try node("Mul", "\(label) (scaled)", [sums, factors], op: name)[0]
            } else {
                // ref: HybridConvPerChannel: acc * channel scale * item scale.
                let perChannelSums = try node("Mul", "\(label) (channel scaled)", [sums, channelScales], op: name)[0]
                v = try node("Mul", "\(label) (scaled)", [perChannelSums, perItem], op: name)[0]
            }
            if let bias {
                guard bias.tensor.count == channels else { throw fail("a bias of \(bias.tensor.count) values for \(channels) channels", "the file is damaged") }
                v = try node("Add", label, [v, try reshaped(bias, [1, channels, 1, 1], "\(label) bias (channels first)", op: name)], op: name)[0]
            }
            return try fromNCHW(try activated(v, activation, label, op: name, fail: fail), label, op: name)
        }
    }

    /// `x` (NHWC) quantized a scale per batch item, as a hybrid convolution quantizes its input.
    /// Where `x` is a convolution's output taken back to NHWC, its channels-first twin is
    /// quantized instead: an item's values in another order give the same range, so the same
    /// scale, zero point and integers (a block holding a NaN aside), and the transposes to NHWC
    /// and back are not run. The integers' NHWC form is given, the twin kept for `toNCHW`.
    mutating func quantizedItems(_ x: Value, asymmetric: Bool, _ label: String, op: String) throws(ImportError) -> (Value, Value) {
        guard let twin = channelsFirst[x.name], twin.tensor.rank == 4, twin.tensor.shape[0] == x.tensor.shape[0] else {
            return try quantizedInput(x, axis: 1, asymmetric: asymmetric, label, op: op)
        }
        let (integers, scales) = try quantizedInput(twin, axis: 1, asymmetric: asymmetric, label, op: op)
        return (try fromNCHW(integers, "\(label) (input quantized)", op: op), scales)
    }

    /// `x` quantized as TFLite's hybrid kernels quantize their input, a scale per block of the
    /// axes from `axis` on: the integers (less the zero point, as floats) and the scales.
    mutating func quantizedInput(_ x: Value, axis: Int, asymmetric: Bool, _ label: String, op: String) throws(ImportError) -> (Value, Value) {
        let outs = try node("TFLiteHybridQuantize", "\(label) (input quantized)", [x],
                            attributes: ["axis": .int(Int64(axis)), "asymmetric": .int(asymmetric ? 1 : 0)], outputs: 2, op: op)
        return (outs[0], outs[1])
    }
}
