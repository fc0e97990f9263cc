import EarshotGraph
import Testing

/// Behaviour the onnxruntime reference file cannot show: what onnxruntime lacks, the output
/// count, integer edges, and windows far larger than their input.
@Suite("Semantics beyond the reference file")
struct SemanticsTests {
    private func run(_ op: String, _ inputs: [GraphTensor?], _ attributes: [String: GraphAttribute] = [:], opset: Int = 17,
                     outputCount: Int? = nil) throws -> [GraphTensor] {
        try GraphOps.run(op, node: "n", inputs: inputs, attributes: attributes, opset: opset, outputCount: outputCount)
    }

    @Test("Relu takes int64 from opset 14 (onnxruntime's CPU kernels lack it)")
    func integerRelu() throws {
        let x = GraphTensor(shape: [4], integers: [-3, 0, 2, .min])
        #expect(try run("Relu", [x], opset: 14) == [GraphTensor(shape: [4], integers: [0, 0, 2, 0])])
        #expect(throws: GraphError.self) { try run("Relu", [x], opset: 13) }
    }

    @Test("Integer arithmetic wraps and converts like onnxruntime on x86-64")
    func integerEdges() throws {
        let big = GraphTensor(shape: [2], integers: [.max, .min])
        #expect(try run("Add", [big, GraphTensor(scalar: Int64(1))])[0].integers == [.min, .min + 1])
        #expect(try run("Abs", [big])[0].integers == [.max, .min])
        #expect(try run("Neg", [big])[0].integers == [.min + 1, .min])
        #expect(try run("Div", [big, GraphTensor(scalar: Int64(-1))])[0].integers == [.min + 1, .min])
        #expect(try run("Pow", [GraphTensor(shape: [2], integers: [10, 0]), GraphTensor(shape: [2], integers: [30, -1])])[0].integers
            == [.min, .min])
        #expect(try run("Cast", [GraphTensor(shape: [3], floats: [.nan, -.infinity, -1.9])], ["to": .int(7)])[0].integers
            == [.min, .min, -1])
        // To int32 (held as int64): a float out of range gives Int32.min (cvttss2si), an integer keeps its low 32 bits.
        #expect(try run("Cast", [GraphTensor(shape: [4], floats: [.nan, 3e9, -1.9, 2.5])], ["to": .int(6)])[0].integers
            == [Int64(Int32.min), Int64(Int32.min), -1, 2])
        #expect(try run("Cast", [GraphTensor(shape: [2], integers: [(1 << 32) + 5, -1])], ["to": .int(6)])[0].integers == [5, -1])
    }

    @Test("The output count picks the first outputs")
    func outputCount() throws {
        let x = GraphTensor(shape: [3, 2, 1], floats: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
        let w = GraphTensor(shape: [1, 8, 1], floats: [Float](repeating: 0.5, count: 8))
        let r = GraphTensor(shape: [1, 8, 2], floats: [Float](repeating: -0.25, count: 16))
        #expect(try run("LSTM", [x, w, r]).map(\.shape) == [[3, 1, 2, 2], [1, 2, 2], [1, 2, 2]])
        #expect(try run("LSTM", [x, w, r], outputCount: 2).map(\.shape) == [[3, 1, 2, 2], [1, 2, 2]])
        let pooled = GraphTensor(shape: [1, 1, 4], floats: [1, 3, 2, 4])
        #expect(try run("MaxPool", [pooled], ["kernel_shape": .ints([2])]).map(\.dtype) == [.float32, .int64])
        #expect(try run("MaxPool", [pooled], ["kernel_shape": .ints([2])], outputCount: 1).count == 1)
        #expect(try run("Split", [pooled, GraphTensor(shape: [2], integers: [1, 3])], ["axis": .int(-1)]).map(\.shape)
            == [[1, 1, 1], [1, 1, 3]])
    }

    @Test("A window far larger than its input visits only the input")
    func hugeWindow() throws {
        let x = GraphTensor(shape: [1, 1, 3], floats: [1, 5, 2])
        let k = Int64(1 << 30)
        let attributes: [String: GraphAttribute] = ["kernel_shape": .ints([k]), "pads": .ints([k - 1, k - 1]), "strides": .ints([k])]
        let maximum = try run("MaxPool", [x], attributes)
        #expect(maximum[0].floats == [1, 5])
        let mean = try run("AveragePool", [x], attributes.merging(["count_include_pad": .int(1)]) { $1 })
        #expect(mean[0].shape == [1, 1, 2])
        #expect(mean[0].floats.allSatisfy { $0 > 0 && $0 < 1e-8 })
    }

    @Test("Tensors and errors read well")
    func descriptions() {
        #expect(GraphTensor(scalar: Float(2.5)).scalarFloat == 2.5)
        #expect(GraphTensor(scalar: Int64(7)).scalarInteger == 7)
        #expect(GraphTensor(scalar: true).bools == [true])
        #expect(GraphTensor(shape: [2], bools: [true, false]).description == "bool[2] [true, false]")
        let error = GraphError.op(node: "conv_3", op: "Conv", reason: "input W is missing")
        #expect(error.description == "node 'conv_3' (Conv): input W is missing")
    }
}
