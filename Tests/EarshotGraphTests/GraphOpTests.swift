import EarshotGraph
import Testing

@Suite("Ops as an enum: names read once, as packages write them")
struct GraphOpTests {
    @Test("Every op reads back from its name, and is written by it in messages")
    func names() {
        for op in GraphOp.allCases {
            #expect(GraphOp(rawValue: op.rawValue) == op)
            #expect("\(op)" == op.rawValue)
        }
        #expect(GraphOp.tfliteDepthwiseConv2D.rawValue == "TFLiteDepthwiseConv2D")
        #expect(GraphOp.where.rawValue == "Where")
        #expect(GraphOps.supportedOps == Set(GraphOp.allCases.map(\.rawValue)))
        #expect(GraphOps.integerOps == ["Quantize", "TFLiteConv2D", "TFLiteDepthwiseConv2D", "TFLiteFullyConnected", "TFLiteLookup", "MicroFrontend", "RFFT",
                                        "TFLiteHybridQuantize"])
        #expect(GraphOps.onnxOps.count == 61 && GraphOps.onnxOps.isDisjoint(with: GraphOps.integerOps))
        #expect(GraphOps.onnxOps.union(GraphOps.integerOps) == GraphOps.supportedOps)
    }

    @Test("An unknown name is refused as the kernels refuse it, naming the node and the op")
    func unknown() {
        #expect(throws: GraphError.unsupported(node: "n", op: "Frobnicate", reason: "no kernel for op type 'Frobnicate'")) {
            try GraphOp(named: "Frobnicate", node: "n")
        }
        #expect(throws: GraphError.unsupported(node: "f", op: "relu", reason: "no kernel for op type 'relu'")) {
            try GraphNode(op: "relu", name: "f", inputs: ["x"], outputs: ["y"])
        }
        #expect(throws: GraphError.unsupported(node: "f", op: "Frobnicate", reason: "no kernel for op type 'Frobnicate'")) {
            try GraphOps.run("Frobnicate", node: "f", inputs: [GraphTensor(scalar: Float(1))], opset: 17)
        }
        #expect((try? GraphNode(op: "LeakyRelu", name: "l", inputs: ["x"], outputs: ["y"]))?.op == .leakyRelu)
    }

    @Test("A kernel's message names its op as the package does")
    func messages() {
        let x = GraphTensor(shape: [2], floats: [1, 2])
        #expect(throws: GraphError.op(node: "r", op: "Relu", reason: "has 2 inputs; Relu takes at most 1 (X)")) {
            try GraphOps.run(.relu, node: "r", inputs: [x, x], opset: 17)
        }
        #expect(throws: GraphError.op(node: "m", op: "MaxPool", reason: "the node has 3 outputs; MaxPool makes at most 2 here")) {
            try GraphOps.run(.maxPool, node: "m", inputs: [GraphTensor(shape: [1, 1, 2], floats: [1, 2])],
                             attributes: ["kernel_shape": .ints([1])], opset: 17, outputCount: 3)
        }
    }
}

@Suite("TFLiteHybridQuantize: a hybrid op's input quantized as TFLite's kernels do")
struct HybridQuantizeTests {
    @Test("symmetric blocks round half away from zero (TfLiteRound), a block of zeros has scale 1, NaN gives 0, a bad axis is refused")
    func symmetric() throws {
        let x = GraphTensor(shape: [3, 4], floats: [127, 62.5, -62.5, 0, 0, 0, 0, 0, 2, .nan, -1, 0.5])
        let out = try GraphOps.run(.tfliteHybridQuantize, node: "q", inputs: [x], attributes: ["axis": .int(1), "asymmetric": .int(0)], opset: 17)
        #expect(out[0].shape == [3, 4] && out[1].shape == [3, 1])
        // Half away from zero: 62.5 is 63, where half to even would give 62.
        #expect(Array(out[0].floats[0..<8]) == [127, 63, -63, 0, 0, 0, 0, 0])
        #expect(Array(out[0].floats[8...]) == [127, 0, -64, 32])
        #expect(out[1].floats == [1, 1, Float(2) / 127])
        #expect(throws: GraphError.self) {
            try GraphOps.run(.tfliteHybridQuantize, node: "q", inputs: [x], attributes: ["axis": .int(3)], opset: 17)
        }
    }

    @Test("asymmetric blocks take TFLite's nudged zero point over [min(x, 0), max(x, 0)]: the integers less it, and the scale")
    func asymmetric() throws {
        // rmin -0.5, rmax 1.5: scale 2/255, zero point -64; 0.5 * 127.5 - 64 = -0.25 is 0, less -64: 64.
        let x = GraphTensor(shape: [1, 3], floats: [0.5, 1.5, -0.5])
        let out = try GraphOps.run(.tfliteHybridQuantize, node: "q", inputs: [x], attributes: ["axis": .int(1), "asymmetric": .int(1)], opset: 17)
        #expect(out[0].floats == [64, 191, -64])
        #expect(out[1].floats == [Float(2.0 / 255.0)])
    }

    @Test("the asymmetric range is max - min in float, divided in double, as TFLite's kernels take it: [2.5, -1.596, 0.7] has scale 0.016062744, not the double range's 0.016062746")
    func asymmetricFloatRange() throws {
        let x = GraphTensor(shape: [1, 3], floats: [2.5, -1.596, 0.7])
        let out = try GraphOps.run(.tfliteHybridQuantize, node: "q", inputs: [x], attributes: ["axis": .int(1), "asymmetric": .int(1)], opset: 17)
        #expect(out[1].floats == [0.016062744])
        #expect(out[1].floats != [0.016062746])
        #expect(out[0].floats == [156, -99, 44])
    }
}
