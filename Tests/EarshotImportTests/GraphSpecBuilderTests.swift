import EarshotImport
import EarshotModel
import Testing

/// The one builder every importer and the trainer's head export write their graphs through.
@Suite("GraphSpecBuilder")
struct GraphSpecBuilderTests {
    @Test("unique gives a base once, then the base numbered from #2; an empty base is 'tensor'")
    func uniqueNames() {
        var b = GraphSpecBuilder()
        #expect(["w", "w", "x", "w", ""].map { b.unique($0) } == ["w", "w #2", "x", "w #3", "tensor"])
        // A constant under a unique name takes the next free one and is stored under it.
        #expect(b.weight(unique: "w", .init(shape: [2], floats: [1, 2])) == "w #4")
        #expect(b.integers(unique: "x", [7], shape: [1]) == "x #2")
        #expect(b.tensors == ["w #4": Tensor(shape: [2], values: [1, 2])])
        #expect(b.constants == ["x #2": .init(shape: [1], values: [7])])
    }

    @Test("reshape and slice write their constants and node under names made from the tensors'")
    func reshapeAndSlice() {
        var b = GraphSpecBuilder()
        #expect(b.reshape("x", [1, 4]) == "x [1, 4]")
        #expect(b.reshape("y", [2, 2], into: "row") == "row")
        b.slice("z", axis: 2, from: 3, to: 5, into: "recent")
        #expect(b.nodes == [
            .init(op: "Reshape", name: "x as [1, 4]", inputs: ["x", "x shape [1, 4]"], outputs: ["x [1, 4]"]),
            .init(op: "Reshape", name: "row", inputs: ["y", "row shape"], outputs: ["row"]),
            .init(op: "Slice", name: "recent", inputs: ["z", "recent starts", "recent ends", "recent axes"], outputs: ["recent"]),
        ])
        #expect(b.constants == [
            "x shape [1, 4]": .init(shape: [2], values: [1, 4]), "row shape": .init(shape: [2], values: [2, 2]),
            "recent starts": .init(shape: [1], values: [3]), "recent ends": .init(shape: [1], values: [5]),
            "recent axes": .init(shape: [1], values: [2]),
        ])
    }

    @Test("prune keeps, in order, the nodes the kept outputs read through, and no other")
    func prune() {
        var b = GraphSpecBuilder()
        b.node("Relu", "a", ["in"], ["a"])
        b.node("Neg", "unread", ["in"], ["unread"])
        b.node("Split", "optional output", ["in"], ["", "unread 2"])  // an output left out ("") is no reader's
        b.node("Clip", "b", ["a", "", "max"], ["b"])
        b.node("Exp", "after", ["b"], ["after"])
        b.node("Identity", "max", ["in"], ["max"])
        b.node("Sigmoid", "state", ["in"], ["state next"])
        b.prune(keeping: ["b", "state next"])
        // Back from the outputs, in order: "max" comes after the node that reads it (no graph has that), so it is not kept.
        #expect(b.nodes.map(\.name) == ["a", "b", "state"])
    }

    @Test("A graph appended under a prefix reads the caller's tensor reshaped to its input and runs as it ran alone")
    func append() throws {
        // The appended graph: x [1, 4] * w, then Relu.
        let inner = GraphSpec(opset: 17, audioInput: "x", audioShape: [1, 4], scoreOutput: "y", states: [], constants: [:], nodes: [
            .init(op: "Mul", name: "scale", inputs: ["x", "w"], outputs: ["scaled"]),
            .init(op: "Relu", name: "relu", inputs: ["scaled"], outputs: ["y"]),
        ])
        var b = GraphSpecBuilder()
        let flat = b.reshape("samples", [4])
        let score = b.append(inner, tensors: ["w": Tensor(shape: [4], values: [1, -2, 3, -4])], prefix: "inner/", input: flat)
        #expect(score == "inner/y")
        #expect(b.nodes.map(\.name) == ["samples as [4]", "samples [4] for inner/", "inner/scale", "inner/relu"])
        #expect(b.nodes[2].inputs == ["samples [4] for inner/", "inner/w"])
        #expect(b.constants["samples [4] for inner/ shape"] == .init(shape: [2], values: [1, 4]))
        var manifest = ModelManifest(name: "appended", audio: .init(sampleRate: 16000, chunkSamples: 4, contextSamples: 0),
                                     frontEnd: .init(type: .samples, nFFT: 0, hopLength: 0), network: [],
                                     outputs: .init(activation: .none, labels: ["a", "b", "c", "d"]))
        manifest.graph = b.spec(opset: 17, audioInput: "samples", audioShape: [1, 4], scoreOutput: score, states: [])
        let model = try Model(manifest: manifest, tensors: b.tensors)
        var state = model.makeState()
        #expect(try model.prediction(from: [0.5, 0.5, -1, -0.25], using: &state) == [0.5, 0, 0, 1])
    }
}
