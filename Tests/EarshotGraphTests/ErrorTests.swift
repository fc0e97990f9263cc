import EarshotGraph
import Testing

/// A call that must fail with a GraphError naming its node and op.
struct BadCall: Sendable, CustomTestStringConvertible {
    enum Kind: Sendable { case invalid, unsupported }

    let what: String
    let op: String
    let inputs: [GraphTensor?]
    var attributes: [String: GraphAttribute] = [:]
    var opset = 17
    var outputCount: Int?
    var kind = Kind.invalid
    /// Words the reason must hold.
    var mentions: [String] = []

    var testDescription: String { "\(op): \(what)" }
    var node: String { "bad \(what)" }
}

private func floats(_ shape: [Int]) -> GraphTensor {
    GraphTensor(shape: shape, floats: (0..<shape.reduce(1, *)).map { Float($0) * 0.25 - 1 })
}

private func ints(_ values: [Int64]) -> GraphTensor { GraphTensor(shape: [values.count], integers: values) }

private let badCalls: [BadCall] = [
    // Inputs and attributes
    BadCall(what: "shapes that do not broadcast", op: "Add", inputs: [floats([2, 3]), floats([4])], mentions: ["[2, 3]", "[4]"]),
    BadCall(what: "a missing input", op: "Add", inputs: [floats([2])], mentions: ["missing", "'B'"]),
    BadCall(what: "a missing input in the middle", op: "Conv", inputs: [floats([1, 1, 4]), nil], mentions: ["'W'"]),
    BadCall(what: "too many inputs", op: "Relu", inputs: [floats([2]), floats([2])], mentions: ["at most 1"]),
    BadCall(what: "mixed types", op: "Mul", inputs: [floats([2]), ints([1, 2])], mentions: ["int64"]),
    BadCall(what: "an integer input to a float op", op: "Sigmoid", inputs: [ints([1])], mentions: ["float32"]),
    BadCall(what: "an unknown attribute", op: "Relu", inputs: [floats([2])], attributes: ["alpha": .float(1)], mentions: ["alpha"]),
    BadCall(what: "an attribute of the wrong kind", op: "LeakyRelu", inputs: [floats([2])], attributes: ["alpha": .int(1)],
            mentions: ["alpha", "float"]),
    BadCall(what: "more outputs than the op makes", op: "Relu", inputs: [floats([2])], outputCount: 2, mentions: ["at most 1"]),
    BadCall(what: "values that do not fill the shape", op: "Relu", inputs: [GraphTensor(shape: [2, 3], floats: [1, 2])],
            mentions: ["holds 2 values"]),
    BadCall(what: "a negative dimension", op: "Relu", inputs: [GraphTensor(shape: [-1], floats: [])], mentions: ["[-1]"]),
    BadCall(what: "a dimension product that overflows", op: "Identity",
            inputs: [GraphTensor(shape: [Int.max, Int.max], floats: [])], mentions: ["invalid shape"]),
    BadCall(what: "a bool holding 2", op: "Not", inputs: [GraphTensor(shape: [1], integers: [2], dtype: .bool)], mentions: ["bool"]),
    BadCall(what: "an unknown op", op: "Frobnicate", inputs: [floats([1])], kind: .unsupported, mentions: ["Frobnicate"]),
    BadCall(what: "an opset below 13", op: "Relu", inputs: [floats([1])], opset: 12, kind: .unsupported, mentions: ["opset 12"]),
    BadCall(what: "an opset above 21", op: "Relu", inputs: [floats([1])], opset: 40, kind: .unsupported, mentions: ["opset 40"]),

    // Axes
    BadCall(what: "an axis past the rank", op: "Softmax", inputs: [floats([2, 3])], attributes: ["axis": .int(2)],
            mentions: ["axis 2", "rank 2"]),
    BadCall(what: "a reduced axis past the rank", op: "ReduceSum", inputs: [floats([2, 3]), ints([-3])], mentions: ["-3"]),
    BadCall(what: "an axis twice", op: "ReduceMean", inputs: [floats([2, 3])], attributes: ["axes": .ints([1, -1])], opset: 13,
            mentions: ["twice"]),
    BadCall(what: "axes as an input before opset 18", op: "ReduceMean", inputs: [floats([2, 3]), ints([1])], opset: 17,
            mentions: ["at most 1"]),
    BadCall(what: "axes as an attribute from opset 18", op: "ReduceMax", inputs: [floats([2, 3])], attributes: ["axes": .ints([1])],
            opset: 18, mentions: ["axes"]),
    BadCall(what: "the int64 mean of nothing", op: "ReduceMean", inputs: [GraphTensor(shape: [2, 0], integers: [])],
            attributes: ["axes": .ints([1])], opset: 13, mentions: ["mean"]),
    BadCall(what: "a perm that repeats an axis", op: "Transpose", inputs: [floats([2, 3])], attributes: ["perm": .ints([0, 0])],
            mentions: ["permutation"]),
    BadCall(what: "a flatten axis past the rank", op: "Flatten", inputs: [floats([2, 3])], attributes: ["axis": .int(3)],
            mentions: ["axis 3"]),
    BadCall(what: "squeezing an axis of size 3", op: "Squeeze", inputs: [floats([1, 3]), ints([1])], mentions: ["size 3"]),
    BadCall(what: "unsqueezing one axis twice", op: "Unsqueeze", inputs: [floats([2]), ints([0, -3])], mentions: ["twice"]),

    // Shapes
    BadCall(what: "a shape that does not fit", op: "Reshape", inputs: [floats([2, 3]), ints([4])], mentions: ["does not fit"]),
    BadCall(what: "a -1 that does not divide", op: "Reshape", inputs: [floats([2, 3]), ints([4, -1])], mentions: ["does not fit"]),
    BadCall(what: "two -1", op: "Reshape", inputs: [floats([2, 3]), ints([-1, -1])], mentions: ["more than one -1"]),
    BadCall(what: "a dimension of -2", op: "Reshape", inputs: [floats([2, 3]), ints([-2, 3])], mentions: ["-2"]),
    BadCall(what: "copying a dimension the data lacks", op: "Reshape", inputs: [floats([6]), ints([3, 0])], mentions: ["rank 1"]),
    BadCall(what: "a 2-D shape input", op: "Reshape", inputs: [floats([6]), GraphTensor(shape: [1, 2], integers: [2, 3])],
            mentions: ["1-D"]),
    BadCall(what: "inputs that do not join", op: "Concat", inputs: [floats([2, 3]), floats([3, 3])], attributes: ["axis": .int(1)],
            mentions: ["[3, 3]"]),
    BadCall(what: "no axis", op: "Concat", inputs: [floats([2]), floats([2])], mentions: ["'axis'"]),
    BadCall(what: "sizes that do not add up", op: "Split", inputs: [floats([5]), ints([2, 2])], outputCount: 2, mentions: ["[2, 2]"]),
    BadCall(what: "no sizes and no output count", op: "Split", inputs: [floats([4])], mentions: ["number of outputs"]),
    BadCall(what: "an axis that does not divide", op: "Split", inputs: [floats([5])], outputCount: 2, mentions: ["2 equal parts"]),
    BadCall(what: "more outputs than parts", op: "Split", inputs: [floats([4]), ints([1, 3])], outputCount: 3, mentions: ["3 outputs"]),
    BadCall(what: "num_outputs before opset 18", op: "Split", inputs: [floats([4])], attributes: ["num_outputs": .int(2)], opset: 13,
            mentions: ["num_outputs"]),
    BadCall(what: "a step of 0", op: "Slice", inputs: [floats([4]), ints([0]), ints([4]), ints([0]), ints([0])], mentions: ["step 0"]),
    BadCall(what: "starts and ends of different lengths", op: "Slice", inputs: [floats([4, 4]), ints([0, 0]), ints([4])],
            mentions: ["starts"]),
    BadCall(what: "an index past the end", op: "Gather", inputs: [floats([3, 2]), ints([0, 3])], mentions: ["index 3", "size 3"]),
    BadCall(what: "a negative index past the start", op: "Gather", inputs: [floats([3]), ints([-4])], mentions: ["index -4"]),
    BadCall(what: "Int64.min as an index", op: "Gather", inputs: [floats([3]), ints([.min])], mentions: ["out of range"]),
    BadCall(what: "reflecting past the data", op: "Pad", inputs: [floats([3]), ints([3, 0])], attributes: ["mode": .string("reflect")],
            mentions: ["reflect"]),
    BadCall(what: "pads of the wrong length", op: "Pad", inputs: [floats([2, 2]), ints([1, 1])], mentions: ["pads has 2 values"]),
    BadCall(what: "wrap before opset 19", op: "Pad", inputs: [floats([3]), ints([1, 1])], attributes: ["mode": .string("wrap")],
            mentions: ["wrap"]),
    BadCall(what: "pads that crop everything and more", op: "Pad", inputs: [floats([3]), ints([-5, 4])], mentions: ["crop"]),
    BadCall(what: "a huge pad", op: "Pad", inputs: [floats([3]), ints([.max, 0])], mentions: ["invalid size"]),
    BadCall(what: "shapes that do not broadcast", op: "Expand", inputs: [floats([2, 3]), ints([4, 4])], mentions: ["broadcast"]),
    BadCall(what: "a negative repeat", op: "Tile", inputs: [floats([2]), ints([-1])], mentions: ["negative"]),
    BadCall(what: "repeats that overflow", op: "Tile", inputs: [floats([2, 2]), ints([.max, .max])], mentions: ["too large"]),
    BadCall(what: "repeats of the wrong length", op: "Tile", inputs: [floats([2, 2]), ints([2])], mentions: ["rank 2"]),
    BadCall(what: "a negative dimension", op: "ConstantOfShape", inputs: [ints([2, -1])], mentions: ["negative"]),
    BadCall(what: "an enormous shape", op: "ConstantOfShape", inputs: [ints([.max, .max])], mentions: ["too large"]),
    BadCall(what: "a shape past the size limit", op: "ConstantOfShape", inputs: [ints([1 << 20, 1 << 20])], mentions: ["too large"]),
    BadCall(what: "a delta of 0", op: "Range",
            inputs: [GraphTensor(scalar: Float(0)), GraphTensor(scalar: Float(1)), GraphTensor(scalar: Float(0))], mentions: ["delta"]),
    BadCall(what: "an enormous range", op: "Range",
            inputs: [GraphTensor(scalar: Int64(-(1 << 40))), GraphTensor(scalar: Int64(0)), GraphTensor(scalar: Int64(1))],
            mentions: ["more than"]),
    BadCall(what: "a limit - start that overflows", op: "Range",
            inputs: [GraphTensor(scalar: Int64.min), GraphTensor(scalar: Int64.max), GraphTensor(scalar: Int64(1))],
            mentions: ["overflows"]),
    BadCall(what: "a cast to int16", op: "Cast", inputs: [floats([2])], attributes: ["to": .int(5)], kind: .unsupported,
            mentions: ["5"]),
    BadCall(what: "integer division by zero", op: "Div", inputs: [ints([4, 5]), ints([2, 0])], mentions: ["division by zero"]),
    BadCall(what: "X and Y of different types", op: "Where",
            inputs: [GraphTensor(shape: [1], bools: [true]), floats([1]), ints([1])], mentions: ["must match"]),
    BadCall(what: "a min that is not a scalar", op: "Clip", inputs: [floats([3]), floats([2])], mentions: ["scalar"]),

    // Convolution, pooling, matrices
    BadCall(what: "channels that do not match", op: "Conv", inputs: [floats([1, 3, 8]), floats([2, 2, 3])], mentions: ["channels"]),
    BadCall(what: "a group that does not divide", op: "Conv", inputs: [floats([1, 3, 8]), floats([2, 1, 3])],
            attributes: ["group": .int(2)], mentions: ["group 2"]),
    BadCall(what: "a kernel larger than the input", op: "Conv", inputs: [floats([1, 1, 3]), floats([1, 1, 5])], mentions: ["larger"]),
    BadCall(what: "huge pads", op: "Conv", inputs: [floats([1, 1, 3]), floats([1, 1, 1])],
            attributes: ["pads": .ints([.max, .max])], mentions: ["pads"]),
    BadCall(what: "a huge dilation", op: "Conv", inputs: [floats([1, 1, 3]), floats([1, 1, 2])],
            attributes: ["dilations": .ints([1 << 40])], mentions: ["dilations"]),
    BadCall(what: "pads that make the output too large", op: "Conv", inputs: [floats([1, 1, 3, 3]), floats([1, 1, 1, 1])],
            attributes: ["pads": .ints([1 << 30, 1 << 30, 1 << 30, 1 << 30])], mentions: ["too large"]),
    BadCall(what: "a kernel_shape that differs from W", op: "Conv", inputs: [floats([1, 1, 8]), floats([1, 1, 3])],
            attributes: ["kernel_shape": .ints([2])], mentions: ["kernel_shape"]),
    BadCall(what: "a bias of the wrong size", op: "Conv", inputs: [floats([1, 1, 8]), floats([2, 1, 3]), floats([3])],
            mentions: ["input B"]),
    BadCall(what: "an unknown auto_pad", op: "Conv", inputs: [floats([1, 1, 8]), floats([1, 1, 3])],
            attributes: ["auto_pad": .string("SAME")], mentions: ["SAME"]),
    BadCall(what: "3-D convolution", op: "Conv", inputs: [floats([1, 1, 2, 2, 2]), floats([1, 1, 1, 1, 1])], kind: .unsupported,
            mentions: ["3-D"]),
    BadCall(what: "pads not smaller than the kernel", op: "MaxPool", inputs: [floats([1, 1, 8])],
            attributes: ["kernel_shape": .ints([2]), "pads": .ints([2, 0])], mentions: ["smaller"]),
    BadCall(what: "no kernel_shape", op: "AveragePool", inputs: [floats([1, 1, 8])], mentions: ["kernel_shape"]),
    BadCall(what: "dilations before opset 19", op: "AveragePool", inputs: [floats([1, 1, 8])],
            attributes: ["kernel_shape": .ints([2]), "dilations": .ints([2])], opset: 18, mentions: ["dilations"]),
    BadCall(what: "inner sizes that differ", op: "MatMul", inputs: [floats([2, 3]), floats([4, 2])], mentions: ["3 columns"]),
    BadCall(what: "batches that do not broadcast", op: "MatMul", inputs: [floats([2, 2, 3]), floats([3, 3, 2])],
            mentions: ["batch"]),
    BadCall(what: "a 3-D A", op: "Gemm", inputs: [floats([1, 2, 3]), floats([3, 2])], mentions: ["2-D"]),
    BadCall(what: "a C that does not broadcast", op: "Gemm", inputs: [floats([2, 3]), floats([3, 4]), floats([3])],
            mentions: ["input C"]),

    // Normalization
    BadCall(what: "a scale that does not fit", op: "LayerNormalization", inputs: [floats([2, 4]), floats([3])], mentions: ["Scale"]),
    BadCall(what: "an opset before the op existed", op: "LayerNormalization", inputs: [floats([2, 4]), floats([4])], opset: 16,
            mentions: ["opset 17"]),
    BadCall(what: "a mean of the wrong size", op: "BatchNormalization",
            inputs: [floats([1, 2, 3]), floats([2]), floats([2]), floats([3]), floats([2])], mentions: ["input_mean"]),
    BadCall(what: "training mode", op: "BatchNormalization",
            inputs: [floats([1, 2, 3]), floats([2]), floats([2]), floats([2]), floats([2])], attributes: ["training_mode": .int(1)],
            kind: .unsupported, mentions: ["training_mode"]),

    // Recurrent
    BadCall(what: "W of the wrong shape", op: "LSTM", inputs: [floats([3, 2, 3]), floats([1, 16, 2]), floats([1, 16, 4])],
            mentions: ["input W"]),
    BadCall(what: "R that is not [dirs, 4H, H]", op: "LSTM", inputs: [floats([3, 2, 3]), floats([1, 16, 3]), floats([1, 15, 4])],
            mentions: ["input R"]),
    BadCall(what: "a hidden_size that differs from R", op: "LSTM", inputs: [floats([3, 2, 3]), floats([1, 16, 3]), floats([1, 16, 4])],
            attributes: ["hidden_size": .int(5)], mentions: ["hidden_size 5"]),
    BadCall(what: "short sequences", op: "LSTM",
            inputs: [floats([3, 2, 3]), floats([1, 16, 3]), floats([1, 16, 4]), nil, ints([3, 2])], kind: .unsupported,
            mentions: ["sequence_lens"]),
    BadCall(what: "an activation it lacks", op: "LSTM", inputs: [floats([3, 2, 3]), floats([1, 16, 3]), floats([1, 16, 4])],
            attributes: ["activations": .strings(["HardSigmoid", "Tanh", "Tanh"])], kind: .unsupported, mentions: ["HardSigmoid"]),
    BadCall(what: "an unknown direction", op: "GRU", inputs: [floats([3, 2, 3]), floats([1, 12, 3]), floats([1, 12, 4])],
            attributes: ["direction": .string("sideways")], mentions: ["sideways"]),
    BadCall(what: "bidirectional weights for one direction", op: "GRU",
            inputs: [floats([3, 2, 3]), floats([1, 12, 3]), floats([1, 12, 4])], attributes: ["direction": .string("bidirectional")],
            mentions: ["input R"]),
    BadCall(what: "an initial_h of the wrong shape", op: "GRU",
            inputs: [floats([3, 2, 3]), floats([1, 12, 3]), floats([1, 12, 4]), nil, nil, floats([1, 1, 4])],
            mentions: ["initial_h"]),
]

@Suite("Bad inputs give typed errors")
struct ErrorTests {
    @Test("Each bad call fails with a GraphError naming its node and op", arguments: badCalls)
    func badCall(_ call: BadCall) {
        do {
            let outputs = try GraphOps.run(call.op, node: call.node, inputs: call.inputs, attributes: call.attributes,
                                           opset: call.opset, outputCount: call.outputCount)
            Issue.record("expected an error, got \(outputs)")
        } catch {
            #expect(error.node == call.node)
            #expect(error.op == call.op)
            switch (call.kind, error) {
            case (.invalid, .op), (.unsupported, .unsupported): break
            default: Issue.record("expected a \(call.kind) error, got \(error)")
            }
            for word in call.mentions {
                #expect(error.reason.contains(word), "'\(error.reason)' should mention \(word)")
            }
            #expect(error.description.contains(call.node))
        }
    }
}
