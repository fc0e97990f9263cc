/// Reference kernels of the ops (`GraphOp`: ONNX's, and Earshot's own) on `GraphTensor`s, with the
/// semantics of the ONNX opsets in `supportedOpsets` and the results onnxruntime gives (its CPU
/// kernels) to within float rounding.
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

    /// The ops `run` knows by name: ONNX's, and Earshot's integer ops and front end (`GraphOp`).
    public static let supportedOps: Set<String> = Set(GraphOp.allCases.map(\.rawValue))

    /// TFLite's integer kernels (Quantized.swift) and TFLite Micro's audio front end
    /// (MicroFrontendOp.swift): ops of Earshot's own, which only `TFLiteImporter` emits.
    public static let integerOps: Set<String> = Set(GraphOp.allCases.filter { !$0.isONNX }.map(\.rawValue))

    /// The ONNX ops `run` knows, with ONNX's semantics.
    public static let onnxOps: Set<String> = Set(GraphOp.allCases.filter(\.isONNX).map(\.rawValue))

    /// Runs one op named as a package names it (ONNX's op type, `GraphOp`'s raw values); a name
    /// no kernel knows is refused (after the opset, as any op).
    public static func run(_ op: String, node: String, inputs: [GraphTensor?], attributes: [String: GraphAttribute] = [:],
                           opset: Int, outputCount: Int? = nil) throws(GraphError) -> [GraphTensor] {
        guard let known = GraphOp(rawValue: op) else {
            try checkOpset(opset, node: node, op: op)
            throw GraphOp.unknown(op, node: node)
        }
        return try run(known, node: node, inputs: inputs, attributes: attributes, opset: opset, outputCount: outputCount)
    }

    /// Runs one op.
    ///
    /// - Parameters:
    ///   - op: the op (ONNX's `Conv`, `LSTM`, ..., of the default domain, or one of Earshot's own).
    ///   - node: the node's name, for errors.
    ///   - inputs: the inputs in ONNX order; nil for an omitted optional input.
    ///   - attributes: the node's attributes; absent ones take ONNX's defaults.
    ///   - opset: the model's opset of the default domain.
    ///   - outputCount: how many outputs the node declares. nil gives every output the op
    ///     defines; a number (at most `maxOutputCount`) gives that many (the first ones). Split
    ///     with neither a `split` input nor `num_outputs` needs it: it splits into that many
    ///     equal parts.
    /// - Returns: the outputs in ONNX order.
    public static func run(_ op: GraphOp, node: String, inputs: [GraphTensor?], attributes: [String: GraphAttribute] = [:],
                           opset: Int, outputCount: Int? = nil) throws(GraphError) -> [GraphTensor] {
        let n = Node(name: node, op: op, opset: opset, inputs: inputs, attributes: attributes, outputCount: outputCount)
        try checkOpset(opset, node: node, op: op.rawValue)
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

    /// Refuses an opset the kernels do not follow.
    private static func checkOpset(_ opset: Int, node: String, op: String) throws(GraphError) {
        guard supportedOpsets.contains(opset) else {
            throw .unsupported(node: node, op: op,
                               reason: "opset \(opset) (these kernels follow opsets \(supportedOpsets.lowerBound)...\(supportedOpsets.upperBound))")
        }
    }

    private static func dispatch(_ n: Node) throws(GraphError) -> [GraphTensor] {
        switch n.op {
        case .add, .sub, .mul, .div: return try Elementwise.arithmetic(n)
        case .pow: return try Elementwise.pow(n)
        case .max, .min: return try Elementwise.maxMin(n)
        case .equal, .greater, .greaterOrEqual, .less, .lessOrEqual: return try Elementwise.compare(n)
        case .and, .or: return try Elementwise.logical(n)
        case .not: return try Elementwise.not(n)
        case .where: return try Elementwise.where(n)
        case .clip: return try Elementwise.clip(n)
        case .sqrt, .relu, .leakyRelu, .sigmoid, .tanh, .log, .exp, .neg, .abs, .erf, .softplus, .sin:
            return try Elementwise.unary(n)
        case .softmax: return try Normalization.softmax(n)
        case .reduceMean, .reduceMax, .reduceSum, .reduceMin: return try Reductions.reduce(n)
        case .layerNormalization: return try Normalization.layerNorm(n)
        case .batchNormalization: return try Normalization.batchNorm(n)
        case .transpose: return try ShapeOps.transpose(n)
        case .reshape: return try ShapeOps.reshape(n)
        case .flatten: return try ShapeOps.flatten(n)
        case .squeeze: return try ShapeOps.squeeze(n)
        case .unsqueeze: return try ShapeOps.unsqueeze(n)
        case .concat: return try ShapeOps.concat(n)
        case .slice: return try ShapeOps.slice(n)
        case .split: return try ShapeOps.split(n)
        case .gather: return try ShapeOps.gather(n)
        case .pad: return try ShapeOps.pad(n)
        case .expand: return try ShapeOps.expand(n)
        case .tile: return try ShapeOps.tile(n)
        case .cast: return try Generators.cast(n)
        case .identity: return try Generators.identity(n)
        case .shape: return try Generators.shape(n)
        case .size: return try Generators.size(n)
        case .constantOfShape: return try Generators.constantOfShape(n)
        case .range: return try Generators.range(n)
        case .conv: return try Convolution.conv(n)
        case .maxPool, .averagePool: return try Pooling.pool(n)
        case .gemm: return try MatrixOps.gemm(n)
        case .matMul: return try MatrixOps.matMul(n)
        case .lstm: return try Recurrent.lstm(n)
        case .gru: return try Recurrent.gru(n)
        case .tfliteConv2D, .tfliteDepthwiseConv2D: return try Quantized.conv(n)
        case .tfliteFullyConnected: return try Quantized.fullyConnected(n)
        case .tfliteLookup: return try Quantized.lookup(n)
        case .quantize: return try Quantized.quantize(n)
        case .microFrontend: return try MicroFrontendOp.run(n)
        case .rfft: return try Spectral.rfft(n)
        case .tfliteHybridQuantize: return try HybridQuantize.run(n)
        }
    }
}
