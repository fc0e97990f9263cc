/// The ops a graph is made of: ONNX's (of the default domain, with the semantics of the opsets in
/// `GraphOps.supportedOpsets`) and Earshot's own, TFLite's integer kernels (Quantized.swift), the run-time quantization of
/// TFLite's hybrid ops (HybridQuantize.swift) and TFLite Micro's audio front end (MicroFrontendOp.swift) and TFLite's real FFT (`RFFT`, Spectral.swift),
/// which only `TFLiteImporter` emits.
///
/// A package names an op by its raw value, ONNX's op type; the name is read into a `GraphOp` once,
/// where the graph is loaded (`GraphOp(named:node:)`), and everything after switches over the
/// enum: the reference kernels' dispatch (`GraphOps`) and the plan's lowering (`Builder.compile`)
/// name every op, so the compiler knows the op set.
public enum GraphOp: String, CaseIterable, Sendable, CustomStringConvertible {
    case abs = "Abs", add = "Add", and = "And", averagePool = "AveragePool", batchNormalization = "BatchNormalization", cast = "Cast"
    case clip = "Clip", concat = "Concat", constantOfShape = "ConstantOfShape", conv = "Conv", div = "Div", equal = "Equal"
    case erf = "Erf", exp = "Exp", expand = "Expand", flatten = "Flatten", gru = "GRU", gather = "Gather", gemm = "Gemm"
    case greater = "Greater", greaterOrEqual = "GreaterOrEqual", identity = "Identity", lstm = "LSTM"
    case layerNormalization = "LayerNormalization", leakyRelu = "LeakyRelu", less = "Less", lessOrEqual = "LessOrEqual", log = "Log"
    case matMul = "MatMul", max = "Max", maxPool = "MaxPool", min = "Min", mul = "Mul", neg = "Neg", not = "Not", or = "Or"
    case pad = "Pad", pow = "Pow", range = "Range", reduceMax = "ReduceMax", reduceMean = "ReduceMean", reduceMin = "ReduceMin"
    case reduceSum = "ReduceSum", relu = "Relu", reshape = "Reshape", shape = "Shape", sigmoid = "Sigmoid", sin = "Sin", size = "Size"
    case slice = "Slice", softmax = "Softmax", softplus = "Softplus", split = "Split", sqrt = "Sqrt", squeeze = "Squeeze", sub = "Sub"
    case tanh = "Tanh", tile = "Tile", transpose = "Transpose", unsqueeze = "Unsqueeze", `where` = "Where"
    // Earshot's own.
    case quantize = "Quantize", tfliteConv2D = "TFLiteConv2D", tfliteDepthwiseConv2D = "TFLiteDepthwiseConv2D"
    case tfliteFullyConnected = "TFLiteFullyConnected", tfliteLookup = "TFLiteLookup", microFrontend = "MicroFrontend"
    case rfft = "RFFT", tfliteHybridQuantize = "TFLiteHybridQuantize"

    /// The op's name, as a package (and ONNX) writes it.
    public var description: String { rawValue }

    /// Whether ONNX defines the op; the others are Earshot's own.
    public var isONNX: Bool {
        switch self {
        case .quantize, .tfliteConv2D, .tfliteDepthwiseConv2D, .tfliteFullyConnected, .tfliteLookup, .microFrontend, .rfft, .tfliteHybridQuantize:
            return false
        case .abs, .add, .and, .averagePool, .batchNormalization, .cast, .clip, .concat, .constantOfShape, .conv, .div, .equal, .erf,
             .exp, .expand, .flatten, .gru, .gather, .gemm, .greater, .greaterOrEqual, .identity, .lstm, .layerNormalization,
             .leakyRelu, .less, .lessOrEqual, .log, .matMul, .max, .maxPool, .min, .mul, .neg, .not, .or, .pad, .pow, .range,
             .reduceMax, .reduceMean, .reduceMin, .reduceSum, .relu, .reshape, .shape, .sigmoid, .sin, .size, .slice, .softmax, .softplus,
             .split, .sqrt, .squeeze, .sub, .tanh, .tile, .transpose, .unsqueeze, .where:
            return true
        }
    }

    /// The op a package names `name` (at node `node`); a name no kernel knows is refused as the
    /// kernels refuse it (`GraphError.unsupported`, naming the node and the op).
    public init(named name: String, node: String) throws(GraphError) {
        guard let op = GraphOp(rawValue: name) else { throw Self.unknown(name, node: node) }
        self = op
    }

    /// The error for an op name no kernel knows.
    static func unknown(_ name: String, node: String) -> GraphError {
        .unsupported(node: node, op: name, reason: "no kernel for op type '\(name)'")
    }
}
