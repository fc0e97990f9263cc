/// Reference kernels of ONNX ops on `GraphTensor`s, with the semantics of the ONNX opsets in
/// `supportedOpsets` and the results onnxruntime gives (its CPU kernels) to within float rounding.
///
/// Every kernel checks its inputs and attributes and answers a `GraphError` naming the node and
/// the op for anything it cannot run; none traps, whatever the inputs hold.
public enum GraphOps {
    /// The ONNX opsets (of the default domain) whose semantics the kernels follow.
    public static let supportedOpsets: ClosedRange<Int> = 13...21

    /// The largest number of values a kernel takes in one input or makes in one output (an
    /// empty axis counting as one, so that no axis is larger either).
    public static let maxElementCount = 1 << 26

    /// The most outputs a node may declare.
    public static let maxOutputCount = 1 << 16

    /// The ops `run` knows: ONNX's, and Earshot's integer ops and front end.
    public static let supportedOps: Set<String> = onnxOps.union(integerOps)

    /// TFLite's integer kernels (Quantized.swift) and TFLite Micro's audio front end
    /// (MicroFrontendOp.swift): ops of Earshot's own, which only `TFLiteImporter` emits.
    public static let integerOps: Set<String> = [
        "Quantize", "TFLiteConv2D", "TFLiteDepthwiseConv2D", "TFLiteFullyConnected", "TFLiteLookup", "MicroFrontend",
    ]

    /// The ONNX ops `run` knows, with ONNX's semantics.
    public static let onnxOps: Set<String> = [
        "Abs", "Add", "And", "AveragePool", "BatchNormalization", "Cast", "Clip", "Concat", "ConstantOfShape", "Conv",
        "Div", "Equal", "Erf", "Exp", "Expand", "Flatten", "GRU", "Gather", "Gemm", "Greater", "GreaterOrEqual",
        "Identity", "LSTM", "LayerNormalization", "LeakyRelu", "Less", "LessOrEqual", "Log", "MatMul", "Max",
        "MaxPool", "Min", "Mul", "Neg", "Not", "Or", "Pad", "Pow", "Range", "ReduceMax", "ReduceMean", "ReduceMin",
        "ReduceSum", "Relu", "Reshape", "Shape", "Sigmoid", "Size", "Slice", "Softmax", "Softplus", "Split", "Sqrt",
        "Squeeze", "Sub", "Tanh", "Tile", "Transpose", "Unsqueeze", "Where",
    ]

    /// Runs one ONNX op.
    ///
    /// - Parameters:
    ///   - op: the op type, as in ONNX (`"Conv"`, `"LSTM"`, ...), of the default domain.
    ///   - node: the node's name, for errors.
    ///   - inputs: the inputs in ONNX order; nil for an omitted optional input.
    ///   - attributes: the node's attributes; absent ones take ONNX's defaults.
    ///   - opset: the model's opset of the default domain.
    ///   - outputCount: how many outputs the node declares. nil gives every output the op
    ///     defines; a number (at most `maxOutputCount`) gives that many (the first ones). Split
    ///     with neither a `split` input nor `num_outputs` needs it: it splits into that many
    ///     equal parts.
    /// - Returns: the outputs in ONNX order.
    public static func run(_ op: String, node: String, inputs: [GraphTensor?], attributes: [String: GraphAttribute] = [:],
                           opset: Int, outputCount: Int? = nil) throws(GraphError) -> [GraphTensor] {
        let n = Node(name: node, op: op, opset: opset, inputs: inputs, attributes: attributes, outputCount: outputCount)
        guard supportedOpsets.contains(opset) else {
            throw n.unsupported("opset \(opset) (these kernels follow opsets \(supportedOpsets.lowerBound)...\(supportedOpsets.upperBound))")
        }
        guard supportedOps.contains(op) else { throw n.unsupported("no kernel for op type '\(op)'") }
        for (index, tensor) in inputs.enumerated() {
            if let tensor { try n.validate(tensor, index: index) }
        }
        if let outputCount, outputCount < 1 || outputCount > maxOutputCount {
            throw n.error("the node has \(outputCount) outputs; expected 1...\(maxOutputCount)")
        }
        let outputs = try dispatch(n)
        guard let outputCount else { return outputs }
        guard outputCount <= outputs.count else {
            throw n.error("the node has \(outputCount) outputs; \(op) makes at most \(outputs.count) here")
        }
        return Array(outputs.prefix(outputCount))
    }

    private static func dispatch(_ n: Node) throws(GraphError) -> [GraphTensor] {
        switch n.op {
        case "Add", "Sub", "Mul", "Div": return try Elementwise.arithmetic(n)
        case "Pow": return try Elementwise.pow(n)
        case "Max", "Min": return try Elementwise.maxMin(n)
        case "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual": return try Elementwise.compare(n)
        case "And", "Or": return try Elementwise.logical(n)
        case "Not": return try Elementwise.not(n)
        case "Where": return try Elementwise.where(n)
        case "Clip": return try Elementwise.clip(n)
        case "Sqrt", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Log", "Exp", "Neg", "Abs", "Erf", "Softplus":
            return try Elementwise.unary(n)
        case "Softmax": return try Normalization.softmax(n)
        case "ReduceMean", "ReduceMax", "ReduceSum", "ReduceMin": return try Reductions.reduce(n)
        case "LayerNormalization": return try Normalization.layerNorm(n)
        case "BatchNormalization": return try Normalization.batchNorm(n)
        case "Transpose": return try ShapeOps.transpose(n)
        case "Reshape": return try ShapeOps.reshape(n)
        case "Flatten": return try ShapeOps.flatten(n)
        case "Squeeze": return try ShapeOps.squeeze(n)
        case "Unsqueeze": return try ShapeOps.unsqueeze(n)
        case "Concat": return try ShapeOps.concat(n)
        case "Slice": return try ShapeOps.slice(n)
        case "Split": return try ShapeOps.split(n)
        case "Gather": return try ShapeOps.gather(n)
        case "Pad": return try ShapeOps.pad(n)
        case "Expand": return try ShapeOps.expand(n)
        case "Tile": return try ShapeOps.tile(n)
        case "Cast": return try Generators.cast(n)
        case "Identity": return try Generators.identity(n)
        case "Shape": return try Generators.shape(n)
        case "Size": return try Generators.size(n)
        case "ConstantOfShape": return try Generators.constantOfShape(n)
        case "Range": return try Generators.range(n)
        case "Conv": return try Convolution.conv(n)
        case "MaxPool", "AveragePool": return try Pooling.pool(n)
        case "Gemm": return try MatrixOps.gemm(n)
        case "MatMul": return try MatrixOps.matMul(n)
        case "LSTM": return try Recurrent.lstm(n)
        case "GRU": return try Recurrent.gru(n)
        case "TFLiteConv2D", "TFLiteDepthwiseConv2D": return try Quantized.conv(n)
        case "TFLiteFullyConnected": return try Quantized.fullyConnected(n)
        case "TFLiteLookup": return try Quantized.lookup(n)
        case "Quantize": return try Quantized.quantize(n)
        case "MicroFrontend": return try MicroFrontendOp.run(n)
        default: throw n.unsupported("no kernel for op type '\(n.op)'")
        }
    }
}
