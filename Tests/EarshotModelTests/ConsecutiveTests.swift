import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotModel

/// A small stateful model made here with seeded random weights: a causal convolution and a GRU
/// (both carrying state), LayerNorm, ReLU, a linear layer and softmax.
func makeStatefulModel(seed: UInt64) throws -> Model {
    var random = SeededRandom(seed: seed)
    func values(_ n: Int) -> [Float] { random.gaussian(count: n, deviation: 0.4) }
    let tensors: [(String, [Int])] = [
        ("conv.weight", [8, 17, 3]), ("conv.bias", [8]), ("norm.weight", [8]), ("norm.bias", [8]),
        ("gru.weight_ih", [18, 8]), ("gru.weight_hh", [18, 6]), ("gru.bias_ih", [18]), ("gru.bias_hh", [18]),
        ("out.weight", [3, 6]), ("out.bias", [3]),
    ]
    let data = safetensorsData(tensors.map { name, shape in
        (name, "F32", shape, littleEndianBytes(values(shape.reduce(1, *)).map(\.bitPattern)))
    })
    let manifest = """
        {"format": "earshot-model", "formatVersion": 1, "name": "stateful-test",
         "audio": {"sampleRate": 8000, "chunkSamples": 64, "contextSamples": 16},
         "frontEnd": {"type": "stft", "nFFT": 32, "hopLength": 16, "window": "hann", "spectrum": "magnitude"},
         "network": [
           {"type": "conv1d", "name": "conv", "inChannels": 17, "outChannels": 8, "kernelSize": 3, "causal": true,
            "weight": "conv.weight", "bias": "conv.bias"},
           {"type": "layerNorm", "name": "norm", "normalizedShape": 8, "weight": "norm.weight", "bias": "norm.bias"},
           {"type": "relu"},
           {"type": "gru", "name": "gru", "inputSize": 8, "hiddenSize": 6, "weightIH": "gru.weight_ih",
            "weightHH": "gru.weight_hh", "biasIH": "gru.bias_ih", "biasHH": "gru.bias_hh"},
           {"type": "linear", "name": "out", "inFeatures": 6, "outFeatures": 3, "weight": "out.weight", "bias": "out.bias"}],
         "outputs": {"activation": "softmax", "reduceTime": "last", "labels": ["a", "b", "c"]}}
        """
    let folder = try Repo.temporaryFolder().appendingPathComponent("stateful")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    try Data(manifest.utf8).write(to: folder.appendingPathComponent("model.json"))
    try data.write(to: folder.appendingPathComponent("weights.safetensors"))
    return try Model(contentsOf: folder)
}

@Suite("One stream's consecutive blocks and many streams' blocks, on a model with state in several layers")
struct ConsecutiveTests {
    @Test("Consecutive blocks in one call, and a batch of streams, equal one block at a time, bit for bit")
    func equalities() throws {
        let model = try makeStatefulModel(seed: 21)
        var random = SeededRandom.fromEnvironment()
        let blocks = (0..<300).map { _ in random.gaussian(count: 64, deviation: 0.3) }
        var one = model.makeState()
        let sequential = try blocks.map { try model.prediction(from: $0, using: &one) }
        let first = sequential.map { $0[0] }
        #expect((first.max() ?? 0) - (first.min() ?? 0) > 0.01)  // the scores move from block to block

        var many = model.makeState()
        let together = try inRandomRuns(blocks, maxRun: 150, model: model, state: &many, random: &random)
        #expect(together == sequential, "seed \(random.seed)")
        #expect(many == one)
        // All at once: a long run goes through in windows prepared on other threads.
        var whole = model.makeState()
        #expect(try model.predictions(forConsecutive: blocks, using: &whole) == sequential)
        #expect(whole == one)

        // Three streams side by side, each with its own history.
        var states = [model.makeState(), model.makeState(), model.makeState()]
        var alone = [model.makeState(), model.makeState(), model.makeState()]
        for step in 0..<15 {
            let batch = (0..<3).map { blocks[($0 * 15 + step) % blocks.count] }
            let out = try model.predictions(from: batch, using: &states)
            for s in 0..<3 { #expect(out[s] == (try model.prediction(from: batch[s], using: &alone[s]))) }
        }
        #expect(states == alone)
    }
}
