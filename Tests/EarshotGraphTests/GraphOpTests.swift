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
        #expect(GraphOps.integerOps == ["Quantize", "TFLiteConv2D", "TFLiteDepthwiseConv2D", "TFLiteFullyConnected", "TFLiteLookup", "MicroFrontend", "RFFT"])
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
