import EarshotGraph
import EarshotTestSupport
import Testing

/// A plan that keeps TFLite's int8 tensors as int8 codes (a byte a value) gives the bits of the
/// plan that keeps them as floats, through every kind of step that meets codes: Quantize, int8
/// products (on the VNNI path, four taps an instruction, padding included), moves of codes (a Pad's fill among them), a Where that keeps or resets a state
/// against int8 first values, a float op reading codes, and an output asked for as codes that
/// float ops compute.
@Suite("Int8 tensors held as codes")
struct CodedPlanTests {
    static let requantization: [String: GraphAttribute] = [
        "input_offset": .int(3), "output_offset": .int(-5), "multipliers": .ints([1_500_000_000]), "shifts": .ints([-6]),
        "activation": .ints([-128, 127]), "strides": .ints([1, 1]), "dilations": .ints([1, 1]), "pads": .ints([0, 0, 0, 0]),
    ]

    static func ints(_ shape: [Int], seed: Int) -> GraphTensor {
        var random = SeededRandom(seed: UInt64(seed))
        return GraphTensor(shape: shape, floats: (0..<shape.reduce(1, *)).map { _ in Float(Int.random(in: -127...127, using: &random)) })
    }

    /// A streaming window as a microWakeWord model holds one, around two int8 products.
    static func graph() -> (nodes: [GraphNode], constants: [String: GraphTensor]) {
        let nodes = [
            GraphNode(op: .quantize, name: "quantize", inputs: ["features"], outputs: ["frame"],
                      attributes: ["scale": .float(0.05), "zero_point": .int(-3), "min": .int(-128), "max": .int(127)]),
            GraphNode(op: .concat, name: "window", inputs: ["state", "frame"], outputs: ["window"], attributes: ["axis": .int(1)]),
            GraphNode(op: .pad, name: "pad", inputs: ["window", "pads", "fill"], outputs: ["padded"]),
            GraphNode(op: .tfliteDepthwiseConv2D, name: "depthwise", inputs: ["padded", "wd", "bd"], outputs: ["taps"],
                      attributes: requantization.merging(["depth_multiplier": .int(1)]) { $1 }),
            GraphNode(op: .tfliteConv2D, name: "conv", inputs: ["taps", "wc", "bc"], outputs: ["conv"], attributes: requantization),
            // With padding (the padding's byte), and a dense layer, on codes.
            GraphNode(op: .tfliteConv2D, name: "padded conv", inputs: ["taps", "wp", "bp"], outputs: ["padded conv"],
                      attributes: requantization.merging(["pads": .ints([1, 0, 1, 0])]) { $1 }),
            GraphNode(op: .tfliteFullyConnected, name: "dense", inputs: ["conv", "wf", "bf"], outputs: ["dense"],
                      attributes: requantization.filter { !["strides", "dilations", "pads"].contains($0.key) }
                          .merging(["weights_offset": .int(0)]) { $1 }),
            GraphNode(op: .relu, name: "relu", inputs: ["conv"], outputs: ["relu"]),
            GraphNode(op: .tfliteLookup, name: "lookup", inputs: ["conv"], outputs: ["lookup"],
                      attributes: ["table": .ints((0..<256).map { Int64($0 / 3) - 40 }), "low": .int(-128)]),
            GraphNode(op: .slice, name: "next", inputs: ["window", "starts", "ends", "axes"], outputs: ["next"]),
            GraphNode(op: .greater, name: "has started", inputs: ["started", "zero"], outputs: ["has started"]),
            GraphNode(op: .where, name: "gate", inputs: ["has started", "next", "first"], outputs: ["gated"]),
        ]
        let constants: [String: GraphTensor] = [
            "pads": GraphTensor(shape: [8], integers: [0, 0, 0, 1, 0, 0, 0, 1]), "fill": GraphTensor(scalar: Float(7)),
            "wd": ints([1, 3, 1, 6], seed: 1), "bd": ints([6], seed: 2),
            "wc": ints([3, 1, 1, 6], seed: 3), "bc": ints([3], seed: 4),
            "wp": ints([5, 3, 1, 6], seed: 6), "bp": ints([5], seed: 7),
            "wf": ints([4, 6], seed: 8), "bf": ints([4], seed: 9),
            "starts": GraphTensor(shape: [1], integers: [2]), "ends": GraphTensor(shape: [1], integers: [4]),
            "axes": GraphTensor(shape: [1], integers: [1]), "zero": GraphTensor(shape: [1], floats: [0]),
            "first": ints([1, 2, 1, 4], seed: 5),
        ]
        return (nodes, constants)
    }

    static let inputs: [(name: String, shape: [Int])] = [("features", [1, 2, 1, 4]), ("state", [1, 2, 1, 4]), ("started", [1, 1])]
    static let outputs = ["gated", "relu", "lookup", "conv", "padded conv", "dense"]
    static let codes: Set<String> = ["state", "gated", "relu"]

    static func plan(codes: Set<String>) throws -> GraphPlan {
        let g = graph()
        return try GraphPlan(nodes: g.nodes, constants: g.constants, inputs: inputs, outputs: outputs, opset: 13, codes: codes)
    }

    /// Stream s's inputs: features, an int8 state, and whether the front end has started (odd streams not).
    static func given(_ s: Int) -> [[Float]] {
        [(0..<8).map { Float($0 * 7 + s * 13 % 11) * 0.21 - 3 }, ints([8], seed: 10 + s).floats, [Float(s % 2 == 0 ? 1 : 0)]]
    }

    static func runFloats(_ plan: GraphPlan, streams: Int) throws -> [[[Float]]] {
        var ws = GraphWorkspace()
        var got = [[[Float]]](repeating: Array(repeating: [], count: outputs.count), count: streams)
        try plan.run(streams: streams, workspace: &ws, load: { s, i, buffer in
            for (k, v) in given(s)[i].enumerated() { buffer[k] = v }
        }, store: { s, j, values in got[s][j] = Array(values) })
        return got
    }

    @Test("Inputs and outputs named as codes are given and read a byte a value; the others as floats")
    func forms() throws {
        let plan = try Self.plan(codes: Self.codes)
        #expect(plan.inputCoded == [false, true, false])
        #expect(plan.outputCoded == [true, true, false, false, false, false])
        let floats = try Self.plan(codes: [])
        #expect(floats.inputCoded == [false, false, false])
        #expect(floats.outputCoded == [false, false, false, false, false, false])
    }

    @Test("Codes in and out give the bits of the plan of floats (which the reference kernels check at build), batched and alone")
    func equalsFloats() throws {
        let coded = try Self.plan(codes: Self.codes), floats = try Self.plan(codes: [])
        let expected = try Self.runFloats(floats, streams: 4)
        // The float form of run converts the codes.
        #expect(try Self.runFloats(coded, streams: 4) == expected)
        // The byte form: codes where the plan keeps codes.
        func runBytes(streams: Int) throws -> [[[Float]]] {
            var ws = GraphWorkspace()
            var got = [[[Float]]](repeating: Array(repeating: [], count: Self.outputs.count), count: streams)
            try coded.run(streams: streams, workspace: &ws, fill: { s, i, bytes in
                let values = Self.given(s)[i]
                if coded.inputCoded[i] {
                    for (k, v) in values.enumerated() { bytes[k] = UInt8(bitPattern: Int8(v)) }
                } else {
                    bytes.withMemoryRebound(to: Float.self) { for (k, v) in values.enumerated() { $0[k] = v } }
                }
            }, read: { s, j, bytes in
                got[s][j] = coded.outputCoded[j] ? bytes.map { Float(Int8(bitPattern: $0)) } : Array(bytes.assumingMemoryBound(to: Float.self))
            })
            return got
        }
        let batch = try runBytes(streams: 4)
        #expect(batch == expected)
        for s in 0..<4 { #expect(try runBytes(streams: s + 1)[s] == expected[s], "stream \(s) alone") }
        // Started streams keep the window's last rows; the others reset to the first values.
        #expect(expected[1][0] == Self.graph().constants["first"]?.floats)
        #expect(expected[0][0] != expected[1][0])
    }
}
