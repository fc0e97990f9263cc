import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotModel

/// One case of Goldens/layers.json (tools/make_layer_goldens.py: PyTorch-equivalent numpy in float64).
struct LayerCase: CustomTestStringConvertible, Sendable {
    struct Block: Sendable {
        let input: Activations
        let stateIn: [Float]
        let output: Activations
        let stateOut: [Float]
    }

    let name: String
    /// One layer, or a layer and the batchNorm folded into it.
    let specs: [LayerSpec]
    let tensors: [String: [Float]]
    let shapes: [String: [Int]]
    /// Consecutive steps of one stream (one for most cases; two for causal convolutions).
    let blocks: [Block]
    var input: Activations { blocks[0].input }
    var testDescription: String { name }

    static let all: [LayerCase] = {
        guard let root = try? Reference.json(Repo.path("Tests/EarshotModelTests/Goldens/layers.json")),
              let cases = root["cases"] as? [[String: Any]] else { return [] }
        func floats(_ any: Any?) -> [Float] { ((any as? [Double]) ?? []).map(Float.init) }
        func activations(_ any: Any?) -> Activations {
            let d = any as? [String: Any] ?? [:]
            // The reference stores [channels][time].
            return Activations(channelMajor: floats(d["values"]), channels: d["channels"] as? Int ?? 0, time: d["time"] as? Int ?? 0)
        }
        func spec(_ any: Any?) -> LayerSpec? {
            guard let any, let data = try? JSONSerialization.data(withJSONObject: any) else { return nil }
            return try? JSONDecoder().decode(LayerSpec.self, from: data)
        }
        return cases.compactMap { c in
            let specs = (c["sequence"] as? [Any]).map { $0.compactMap(spec) } ?? [spec(c["spec"])].compactMap { $0 }
            let tensorObjects = c["tensors"] as? [String: [String: Any]] ?? [:]
            let blockObjects = (c["blocks"] as? [[String: Any]]) ?? [c]
            let blocks = blockObjects.map {
                Block(input: activations($0["input"]), stateIn: floats($0["stateIn"]), output: activations($0["output"]),
                      stateOut: floats($0["stateOut"]))
            }
            return LayerCase(name: c["name"] as? String ?? "?", specs: specs, tensors: tensorObjects.mapValues { floats($0["values"]) },
                             shapes: tensorObjects.mapValues { ($0["shape"] as? [Int]) ?? [] }, blocks: blocks)
        }
    }()

    /// The layers, built by the loader the runtime uses (a batchNorm folded into a conv1d or
    /// linear layer before it).
    func layers() throws -> [Layer] {
        var withShapes: [String: Tensor] = [:]
        for (name, values) in tensors { withShapes[name] = Tensor(shape: shapes[name] ?? [], dtype: "F32", values: values) }
        var loader = LayerLoader(path: "layers.json", tensors: withShapes)
        let layers = try loader.network(specs, channels: input.channels, time: input.time).map(\.layer)
        #expect(loader.used == Set(tensors.keys))
        return layers
    }
}

@Suite("Layers against PyTorch-equivalent numpy")
struct LayerTests {
    @Test("The reference file holds every layer kind")
    func coverage() {
        let kinds = Set(LayerCase.all.flatMap { $0.specs.map(\.type) })
        #expect(kinds == ["conv1d", "linear", "lstm", "gru", "relu", "sigmoid", "tanh", "silu", "gelu", "softmax",
                          "layerNorm", "batchNorm", "meanPool", "maxPool", "log"])
        #expect(LayerCase.all.count == 29)
        #expect(LayerCase.all.contains { $0.specs.first?.causal == true && $0.blocks.count == 2 })
    }

    // Tolerance 1e-5 absolute: float32 sums of at most 30 products of N(0, 1) inputs and
    // N(0, 0.5) weights (values of order 1-5) round to a few 1e-7; the recurrent cases feed
    // rounding through up to 4 steps of sigmoid/tanh, which do not amplify it.
    @Test("Output and carried state equal the reference", arguments: LayerCase.all)
    func layer(_ c: LayerCase) throws {
        let layers = try c.layers()
        #expect(!layers.isEmpty)
        var state = c.blocks[0].stateIn
        #expect(state.count == layers.reduce(0) { $0 + $1.stateCount })
        for (step, block) in c.blocks.enumerated() {
            #expect(maxAbsDifference(state, block.stateIn) <= 1e-5, "\(c.name) step \(step): state in")
            var y = block.input
            state.withUnsafeMutableBufferPointer { s in
                var offset = 0
                for layer in layers {
                    let slice = UnsafeMutableBufferPointer(rebasing: s[offset..<(offset + layer.stateCount)])
                    y = layer.run(y, state: slice)
                    offset += layer.stateCount
                }
            }
            #expect(y.channels == block.output.channels && y.time == block.output.time, "\(c.name) step \(step): shape")
            let error = maxAbsDifference(y.values, block.output.values)
            #expect(error <= 1e-5, "\(c.name) step \(step): max |diff| = \(error)")
            #expect(maxAbsDifference(state, block.stateOut) <= 1e-5, "\(c.name) step \(step): state out")
        }
    }
}
