import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotModel

/// One case of Goldens/layers.json (tools/make_layer_goldens.py: PyTorch-equivalent numpy in float64).
struct LayerCase: CustomTestStringConvertible, Sendable {
    let name: String
    let spec: LayerSpec
    let tensors: [String: [Float]]
    let input: Activations
    let stateIn: [Float]
    let output: Activations
    let stateOut: [Float]
    var testDescription: String { name }

    static let all: [LayerCase] = {
        guard let root = try? Reference.json(Repo.path("Tests/EarshotModelTests/Goldens/layers.json")),
              let cases = root["cases"] as? [[String: Any]] else { return [] }
        func floats(_ any: Any?) -> [Float] { ((any as? [Double]) ?? []).map(Float.init) }
        func activations(_ any: Any?) -> Activations {
            let d = any as? [String: Any] ?? [:]
            return Activations(channels: d["channels"] as? Int ?? 0, time: d["time"] as? Int ?? 0, values: floats(d["values"]))
        }
        return cases.compactMap { c in
            guard let specObject = c["spec"], let specData = try? JSONSerialization.data(withJSONObject: specObject),
                  let spec = try? JSONDecoder().decode(LayerSpec.self, from: specData) else { return nil }
            let tensors = (c["tensors"] as? [String: [String: Any]] ?? [:]).mapValues { floats($0["values"]) }
            return LayerCase(name: c["name"] as? String ?? "?", spec: spec, tensors: tensors, input: activations(c["input"]),
                             stateIn: floats(c["stateIn"]), output: activations(c["output"]), stateOut: floats(c["stateOut"]))
        }
    }()

    func layer() throws -> Layer {
        let s = spec
        func t(_ name: String?, _ count: Int) -> [Float] { name.flatMap { tensors[$0] } ?? [Float](repeating: 0, count: count) }
        switch s.type {
        case "conv1d":
            let out = s.outChannels ?? 0
            return .conv1d(Conv1d(name: name, inChannels: s.inChannels ?? 0, outChannels: out, kernelSize: s.kernelSize ?? 0,
                                  stride: s.stride ?? 1, padding: s.padding ?? 0, dilation: s.dilation ?? 1, groups: s.groups ?? 1,
                                  weight: t(s.weight, 0), bias: t(s.bias, out)))
        case "linear":
            let out = s.outFeatures ?? 0
            return .linear(Linear(name: name, inFeatures: s.inFeatures ?? 0, outFeatures: out, weight: t(s.weight, 0), bias: t(s.bias, out)))
        case "lstm":
            let h4 = 4 * (s.hiddenSize ?? 0)
            return .lstm(LSTM(name: name, inputSize: s.inputSize ?? 0, hiddenSize: s.hiddenSize ?? 0, weightIH: t(s.weightIH, 0),
                              weightHH: t(s.weightHH, 0), bias: zip(t(s.biasIH, h4), t(s.biasHH, h4)).map(+)))
        case "gru":
            let h3 = 3 * (s.hiddenSize ?? 0)
            return .gru(GRU(name: name, inputSize: s.inputSize ?? 0, hiddenSize: s.hiddenSize ?? 0, weightIH: t(s.weightIH, 0),
                            weightHH: t(s.weightHH, 0), biasIH: t(s.biasIH, h3), biasHH: t(s.biasHH, h3)))
        default:
            return .activation(try #require(Layer.Activation(rawValue: s.type)))
        }
    }
}

@Suite("Layers against PyTorch-equivalent numpy")
struct LayerTests {
    @Test("The reference file holds every layer kind")
    func coverage() {
        let kinds = Set(LayerCase.all.map(\.spec.type))
        #expect(kinds == ["conv1d", "linear", "lstm", "gru", "relu", "sigmoid", "tanh", "silu", "gelu", "softmax"])
        #expect(LayerCase.all.count == 18)
    }

    // Tolerance 1e-5 absolute: float32 sums of at most 30 products of N(0, 1) inputs and
    // N(0, 0.5) weights (values of order 1-5) round to a few 1e-7; the recurrent cases feed
    // rounding through up to 4 steps of sigmoid/tanh, which do not amplify it.
    @Test("Output and carried state equal the reference", arguments: LayerCase.all)
    func layer(_ c: LayerCase) throws {
        let layer = try c.layer()
        var state = c.stateIn
        #expect(state.count == layer.stateCount)
        let y = state.withUnsafeMutableBufferPointer { layer.run(c.input, state: $0) }
        #expect(y.channels == c.output.channels && y.time == c.output.time)
        #expect(layer.outputTime(input: c.input.time) == c.output.time)
        let error = maxAbsDifference(y.values, c.output.values)
        #expect(error <= 1e-5, "\(c.name): max |diff| = \(error)")
        #expect(maxAbsDifference(state, c.stateOut) <= 1e-5, "\(c.name): state")
    }
}
