import EarshotGraph
import Testing

/// Which state tensors a stream may keep as int8 codes: only those that provably hold int8 values
/// at every step. A wrong "yes" would round a stream's state, so each way the proof must fail is a
/// case here.
@Suite("Int8 states: the proof that a state only ever holds int8 values")
struct IntegerRangesTests {
    static func conv(_ name: String, _ input: String, _ output: String, activation: [Int64]) -> GraphNode {
        GraphNode(op: .tfliteConv2D, name: name, inputs: [input, "w", "b"], outputs: [output],
                  attributes: ["activation": .ints(activation)])
    }

    /// A streaming window as microWakeWord's models hold one: the state and the new frame
    /// concatenated, the state's next value the window's last rows, gated on a start flag
    /// against a constant of first values. The new frame is `frame`, made by `producer`.
    static func window(producer: GraphNode, first: [Float] = [0, 0, 0, 0]) -> (nodes: [GraphNode], constants: [String: GraphTensor]) {
        let nodes = [
            producer,
            GraphNode(op: .concat, name: "concat", inputs: ["state", "frame"], outputs: ["window"], attributes: ["axis": .int(1)]),
            GraphNode(op: .slice, name: "slice", inputs: ["window", "starts", "ends", "axes"], outputs: ["next"]),
            GraphNode(op: .where, name: "gate", inputs: ["started", "next", "first"], outputs: ["gated"]),
        ]
        let constants: [String: GraphTensor] = [
            "first": GraphTensor(shape: [1, 2, 2], floats: first),
            "starts": GraphTensor(shape: [1], integers: [1]), "ends": GraphTensor(shape: [1], integers: [3]),
            "axes": GraphTensor(shape: [1], integers: [1]),
        ]
        return (nodes, constants)
    }

    static func proof(_ graph: (nodes: [GraphNode], constants: [String: GraphTensor]), initial: [Float] = [0, 0, 0, 0]) -> [Bool] {
        IntegerRanges.int8States(nodes: graph.nodes, constants: graph.constants, states: [("state", "gated", initial)])
    }

    @Test("A window of int8 frames (an int8 convolution's, or Quantize's) gated against int8 first values is int8")
    func int8Window() {
        #expect(Self.proof(Self.window(producer: Self.conv("conv", "x", "frame", activation: [-128, 127]))) == [true])
        #expect(Self.proof(Self.window(producer: Self.conv("conv", "x", "frame", activation: [0, 127]))) == [true])
        let quantize = GraphNode(op: .quantize, name: "q", inputs: ["x"], outputs: ["frame"],
                                 attributes: ["scale": .float(0.1), "zero_point": .int(-128), "min": .int(-128), "max": .int(127)])
        #expect(Self.proof(Self.window(producer: quantize)) == [true])
        let unbounded = GraphNode(op: .quantize, name: "q", inputs: ["x"], outputs: ["frame"], attributes: ["scale": .float(0.1)])
        #expect(Self.proof(Self.window(producer: unbounded)) == [true])  // Quantize's range is -128...127 by default
    }

    @Test("Not int8: a frame of 16-bit range, a float op, first values past int8 or fractional, a gate against a fraction")
    func notInt8() {
        // An activation range past int8 (int16 activations).
        #expect(Self.proof(Self.window(producer: Self.conv("conv", "x", "frame", activation: [-32768, 32767]))) == [false])
        // A float op makes the frame.
        #expect(Self.proof(Self.window(producer: GraphNode(op: .relu, name: "relu", inputs: ["x"], outputs: ["frame"]))) == [false])
        // A Quantize to a wider range.
        let wide = GraphNode(op: .quantize, name: "q", inputs: ["x"], outputs: ["frame"],
                             attributes: ["scale": .float(0.1), "min": .int(-1000), "max": .int(1000)])
        #expect(Self.proof(Self.window(producer: wide)) == [false])
        let int8Frame = Self.conv("conv", "x", "frame", activation: [-128, 127])
        // First values that are not int8.
        #expect(Self.proof(Self.window(producer: int8Frame), initial: [0, 0, 200, 0]) == [false])
        #expect(Self.proof(Self.window(producer: int8Frame), initial: [0, 0.5, 0, 0]) == [false])
        // A gate that may pick a fractional or out-of-range constant.
        #expect(Self.proof(Self.window(producer: int8Frame, first: [0, 0.25, 0, 0])) == [false])
        #expect(Self.proof(Self.window(producer: int8Frame, first: [0, 0, -129, 0])) == [false])
    }

    @Test("A state that feeds itself through a float op is not int8, nor is one whose next value comes from it")
    func throughTheState() {
        // next = state * 2: int8 in, not int8 out.
        let doubling = [GraphNode(op: .mul, name: "mul", inputs: ["state", "two"], outputs: ["gated"])]
        #expect(IntegerRanges.int8States(nodes: doubling, constants: ["two": GraphTensor(shape: [1], floats: [2])],
                                         states: [("state", "gated", [0])]) == [false])
        // Two states: b's next value is a's (int8 only if a is); a's next value is a float op's.
        let nodes = [
            GraphNode(op: .relu, name: "relu", inputs: ["x"], outputs: ["aNext"]),
            GraphNode(op: .reshape, name: "reshape", inputs: ["a", "shape"], outputs: ["bNext"]),
        ]
        let constants = ["shape": GraphTensor(shape: [1], integers: [4])]
        #expect(IntegerRanges.int8States(nodes: nodes, constants: constants,
                                         states: [("a", "aNext", [0, 0, 0, 0]), ("b", "bNext", [0, 0, 0, 0])]) == [false, false])
        // When a's next value is an int8 convolution's, both are int8.
        var int8Nodes = nodes
        int8Nodes[0] = Self.conv("conv", "x", "aNext", activation: [-128, 127])
        #expect(IntegerRanges.int8States(nodes: int8Nodes, constants: constants,
                                         states: [("a", "aNext", [0, 0, 0, 0]), ("b", "bNext", [0, 0, 0, 0])]) == [true, true])
    }
}
