import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotModel

/// Graph packages made by hand: the runtime checks them at load (every input produced before it
/// is read, nothing produced twice, every weight used, every shape proven by a step on silence)
/// and runs them with the stream's state tensors.
@Suite("Graph packages")
struct GraphPackageTests {
    /// block [1, 8] → Gemm with W [8, 2] → + state [1, 2] → scores; the sum is the next state.
    static func manifest(nodes: [GraphSpec.NodeSpec]? = nil, states: [GraphSpec.StateSpec]? = nil,
                         audioShape: [Int] = [1, 8], labels: [String] = ["a", "b"]) -> ModelManifest {
        var m = ModelManifest(name: "graph", audio: .init(sampleRate: 16000, chunkSamples: 6, contextSamples: 2),
                              frontEnd: .init(type: .samples, nFFT: 0, hopLength: 0), network: [],
                              outputs: .init(activation: .none, labels: labels))
        m.graph = GraphSpec(
            opset: 17, audioInput: "audio", audioShape: audioShape, scoreOutput: "scores",
            states: states ?? [.init(input: "memory", output: "memory_next", shape: [1, 2])],
            constants: [:],
            nodes: nodes ?? [
                .init(op: "MatMul", name: "project", inputs: ["audio", "w"], outputs: ["projected"]),
                .init(op: "Add", name: "remember", inputs: ["projected", "memory"], outputs: ["memory_next"]),
                .init(op: "Sigmoid", name: "squash", inputs: ["memory_next"], outputs: ["scores"]),
            ])
        return m
    }

    static let weights: [String: Tensor] = ["w": Tensor(shape: [8, 2], values: (0..<16).map { Float($0 % 5) * 0.1 - 0.2 })]

    @Test("A graph's state carries from step to step, is restored exactly, and a batch equals its streams alone")
    func runs() throws {
        let model = try Model(manifest: Self.manifest(), tensors: Self.weights)
        #expect(model.makeState().byteCount == (2 + 2) * 4)
        var state = model.makeState()
        let block: [Float] = [1, 0, 0, 0, 0, 1]
        let first = try model.prediction(from: block, using: &state)
        let second = try model.prediction(from: block, using: &state)
        // By hand: audio [0, 0, 1, 0, 0, 0, 0, 1] (context zeros), then [0, 1, 1, 0, 0, 0, 0, 1].
        let w = Self.weights["w"]!.values  // the fixture above
        func project(_ x: [Float]) -> [Float] { (0..<2).map { j in (0..<8).reduce(Float(0)) { $0 + x[$1] * w[$1 * 2 + j] } } }
        let m1 = project([0, 0, 1, 0, 0, 0, 0, 1])
        let m2 = zip(project([0, 1, 1, 0, 0, 0, 0, 1]), m1).map { $0 + $1 }
        let sigmoid = { (v: Float) in 1 / (1 + exp(-v)) }
        #expect(maxAbsDifference(first, m1.map(sigmoid)) < 1e-6)
        #expect(maxAbsDifference(second, m2.map(sigmoid)) < 1e-6)
        let restored = try model.restoreState(state.serialized())
        #expect(restored == state)
        var states = [model.makeState(), state, model.makeState()]
        let batched = try model.predictions(from: [block, block, [0, 0, 0, 0, 0, 0]], using: &states)
        var alone = [model.makeState(), state, model.makeState()]
        let one = try [block, block, [Float](repeating: 0, count: 6)].indices.map { try model.prediction(from: [block, block, [0, 0, 0, 0, 0, 0]][$0], using: &alone[$0]) }
        #expect(batched == one && states == alone)
    }

    static func refusal(_ manifest: ModelManifest, _ tensors: [String: Tensor] = weights) -> String {
        do {
            _ = try Model(manifest: manifest, tensors: tensors)
            return "loaded"
        } catch {
            return "\(error)"
        }
    }

    @Test("A graph of more than GraphSpec.maxNodes nodes is refused before anything runs; one at the limit loads and runs")
    func nodeLimit() throws {
        func chain(_ n: Int) -> [GraphSpec.NodeSpec] {
            [.init(op: "MatMul", name: "project", inputs: ["audio", "w"], outputs: ["r0"])]
                + (1..<(n - 2)).map { .init(op: "Relu", name: "relu\($0)", inputs: ["r\($0 - 1)"], outputs: ["r\($0)"]) }
                + [.init(op: "Add", name: "remember", inputs: ["r\(n - 3)", "memory"], outputs: ["memory_next"]),
                   .init(op: "Sigmoid", name: "squash", inputs: ["memory_next"], outputs: ["scores"])]
        }
        #expect(Self.refusal(Self.manifest(nodes: chain(GraphSpec.maxNodes + 1)))
                == "(in memory): invalid manifest: graph: \(GraphSpec.maxNodes + 1) nodes, more than the limit of \(GraphSpec.maxNodes)")
        let model = try Model(manifest: Self.manifest(nodes: chain(GraphSpec.maxNodes)), tensors: Self.weights)
        #expect(model.manifest.graph?.nodes.count == GraphSpec.maxNodes)
        // By hand: the audio [0, 0, 1, -1, 0.5, 0, 0, 1] (context zeros) projected, the Relu of it, the sigmoid.
        var state = model.makeState()
        let scores = try model.prediction(from: [1, -1, 0.5, 0, 0, 1], using: &state)
        let w = Self.weights["w"]!.values, x: [Float] = [0, 0, 1, -1, 0.5, 0, 0, 1]
        var expected: [Float] = []
        for j in 0..<2 {
            var sum: Float = 0
            for k in 0..<8 { sum += x[k] * w[k * 2 + j] }
            expected.append(1 / (1 + exp(-max(0, sum))))
        }
        #expect(maxAbsDifference(scores, expected) < 1e-6)
    }

    @Test("Cycles, unknown tensors, tensors made twice, unused weights, bad shapes and unknown ops are refused, naming the node")
    func hostileGraphs() throws {
        let cycle = [GraphSpec.NodeSpec(op: "Add", name: "a", inputs: ["b_out", "memory"], outputs: ["a_out"]),
                     .init(op: "Relu", name: "b", inputs: ["a_out"], outputs: ["b_out"])]
        #expect(Self.refusal(Self.manifest(nodes: cycle)).contains("node 'a' (Add) reads 'b_out', which no earlier node, constant, state or the audio gives"))
        let twice = [GraphSpec.NodeSpec(op: "Relu", name: "a", inputs: ["audio"], outputs: ["x"]),
                     .init(op: "Relu", name: "b", inputs: ["audio"], outputs: ["x"])]
        #expect(Self.refusal(Self.manifest(nodes: twice)).contains("tensor 'x' is produced twice (node 'b')"))
        let shadow = [GraphSpec.NodeSpec(op: "Relu", name: "a", inputs: ["audio"], outputs: ["memory"])]
        #expect(Self.refusal(Self.manifest(nodes: shadow)).contains("tensor 'memory' is produced twice"))
        let unused = [GraphSpec.NodeSpec(op: "MatMul", name: "p", inputs: ["audio", "w"], outputs: ["scores"]),
                      .init(op: "Identity", name: "m", inputs: ["memory"], outputs: ["memory_next"])]
        var extra = Self.weights
        extra["spare"] = Tensor(shape: [1], values: [0])
        #expect(Self.refusal(Self.manifest(nodes: unused), extra).contains("tensors no layer uses: spare"))
        let badShape = [GraphSpec.NodeSpec(op: "Add", name: "mismatch", inputs: ["audio", "memory"], outputs: ["memory_next"]),
                        .init(op: "Relu", name: "s", inputs: ["memory_next"], outputs: ["scores"])]
        let shapeError = Self.refusal(Self.manifest(nodes: badShape), [:])
        #expect(shapeError.contains("layer mismatch") && shapeError.contains("Add"), "\(shapeError)")
        let unknown = [GraphSpec.NodeSpec(op: "FancyAttention", name: "f", inputs: ["audio"], outputs: ["memory_next"]),
                       .init(op: "Relu", name: "s", inputs: ["memory_next"], outputs: ["scores"])]
        #expect(Self.refusal(Self.manifest(nodes: unknown), [:]).contains("no kernel for op type 'FancyAttention'"))
        #expect(Self.refusal(Self.manifest(audioShape: [1, 9])).contains("audioShape [1, 9] does not hold a block of 8 samples"))
        // Dimensions whose product overflows are refused as such, not multiplied.
        #expect(Self.refusal(Self.manifest(audioShape: [1 << 32, 1 << 32])).contains("does not hold a block of 8 samples"))
        // So are an integer constant's: [2^32, 2^32] would multiply to 0, the count of no values.
        for shape in [[1 << 32, 1 << 32], [1 << 62, 4, 0], [-1, -1]] {
            var m = Self.manifest()
            m.graph?.constants["huge"] = .init(shape: shape, values: shape.contains(0) ? [] : [1])
            #expect(Self.refusal(m).contains("integer constant 'huge'"), "\(shape)")
        }
        #expect(Self.refusal(Self.manifest(labels: ["only"])).contains("the graph gives 2 scores for 1 labels"))
        let missingState = [GraphSpec.NodeSpec(op: "MatMul", name: "p", inputs: ["audio", "w"], outputs: ["scores"])]
        #expect(Self.refusal(Self.manifest(nodes: missingState)).contains("state 'memory': its output 'memory_next' is not produced"))
        var stft = Self.manifest()
        stft.frontEnd = .init(type: .stft, nFFT: 4, hopLength: 2)
        #expect(Self.refusal(stft).contains("a graph takes a block of samples ('samples') or of features ('features')"))
    }

    @Test("An unknown op, read at load, is refused after the graph's structure is checked: a later node's missing input or an unused weight is named first")
    func unknownOpAfterStructure() {
        let unknown = [GraphSpec.NodeSpec(op: "FancyAttention", name: "f", inputs: ["audio"], outputs: ["memory_next"]),
                       .init(op: "Relu", name: "s", inputs: ["nowhere"], outputs: ["scores"])]
        #expect(Self.refusal(Self.manifest(nodes: unknown), [:]).contains("node 's' (Relu) reads 'nowhere', which no earlier node"))
        let spare = [GraphSpec.NodeSpec(op: "FancyAttention", name: "f", inputs: ["audio"], outputs: ["memory_next"]),
                     .init(op: "Relu", name: "s", inputs: ["memory_next"], outputs: ["scores"])]
        #expect(Self.refusal(Self.manifest(nodes: spare)).contains("tensors no layer uses: w"))
        let error = Self.refusal(Self.manifest(nodes: spare), [:])
        #expect(error.contains("layer f") && error.contains("node 'f' (FancyAttention): not supported: no kernel for op type 'FancyAttention'"),
                "\(error)")
    }

    @Test("A graph package survives model.json's round trip: attributes keep their kinds")
    func manifestRoundTrip() throws {
        var m = Self.manifest()
        m.graph?.nodes[2].attributes = ["alpha": .float(1.0), "axes": .ints([0, -1]), "mode": .string("reflect"), "k": .int(3),
                                        "scales": .floats([0.5, 2]), "names": .strings(["a"])]
        let data = try JSONEncoder().encode(m)
        let back = try JSONDecoder().decode(ModelManifest.self, from: data)
        #expect(back == m)
        #expect(String(decoding: data, as: UTF8.self).contains(#""alpha":{"float":1}"#))
    }

    @Test("Integer constants of consecutive runs (a framing's indices) are written as runs and read back as the same values; others as values; runs that do not add up to the shape (more values or fewer), or that would expand past 2^24 values, are refused")
    func integerRuns() throws {
        var m = Self.manifest()
        let frames = (0..<7).flatMap { f in (0..<16).map { Int64(f * 5 + $0) } }
        m.graph?.constants = ["frames": .init(shape: [7, 16], values: frames),
                              "axes": .init(shape: [3], values: [0, 2, 1]),
                              "negative": .init(shape: [2, 4], values: [-3, -2, -1, 0, 9, 10, 11, 12])]
        let data = try JSONEncoder().encode(m)
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains(#""runs":[[0,16],[5,16],[10,16],[15,16],[20,16],[25,16],[30,16]]"#))
        #expect(text.contains(#""values":[0,2,1]"#) && text.contains(#""runs":[[-3,4],[9,4]]"#))
        let back = try JSONDecoder().decode(ModelManifest.self, from: data)
        #expect(back == m)
        #expect(back.graph?.constants["frames"]?.values == frames)
        for bad in [#"{"shape":[2,3],"dtype":"int64","runs":[[0,4],[9,4]]}"#, #"{"shape":[3],"dtype":"int64","runs":[[0,2,1]]}"#,
                    #"{"shape":[3],"dtype":"int64","runs":[[0,-1]]}"#, #"{"shape":[4096,8192],"dtype":"int64","runs":[[0,1]]}"#,
                    #"{"shape":[2,3],"dtype":"int64","runs":[[0,4]]}"#, #"{"shape":[2],"dtype":"int64","runs":[]}"#] {
            #expect(throws: DecodingError.self, "\(bad)") { try JSONDecoder().decode(GraphSpec.IntegerConstant.self, from: Data(bad.utf8)) }
        }
    }
}
