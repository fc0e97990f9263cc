import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot

/// A tiny softmax model made here: 16-sample blocks at 8 kHz, a 16-point magnitude spectrum,
/// mean over its one frame, and a linear layer that scores "low" on bin 2 (1 kHz), "high" on
/// bin 6 (3 kHz) and "quiet" by a constant.
func tinySoftmaxModel() throws -> Model {
    let folder = try Repo.temporaryFolder().appendingPathComponent("tones")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let manifest = """
        {"format": "earshot-model", "formatVersion": 1, "name": "tones",
         "audio": {"sampleRate": 8000, "chunkSamples": 16, "contextSamples": 0},
         "frontEnd": {"type": "stft", "nFFT": 16, "hopLength": 16, "window": "hann", "periodic": true, "spectrum": "magnitude"},
         "network": [{"type": "meanPool"},
                     {"type": "linear", "name": "out", "inFeatures": 9, "outFeatures": 3, "weight": "out.weight", "bias": "out.bias"}],
         "outputs": {"activation": "softmax", "labels": ["low", "high", "quiet"]},
         "decision": {"threshold": 0.5, "minSegmentMs": 50, "minSilenceMs": 20, "padMs": 0}}
        """
    try Data(manifest.utf8).write(to: folder.appendingPathComponent("model.json"))
    var weight = [Float](repeating: 0, count: 27)
    weight[2] = 4  // low <- bin 2
    weight[9 + 6] = 4  // high <- bin 6
    let bias: [Float] = [0, 0, 2]
    let data = safetensorsData([("out.weight", "F32", [3, 9], littleEndianBytes(weight.map(\.bitPattern))),
                                ("out.bias", "F32", [3], littleEndianBytes(bias.map(\.bitPattern)))])
    try data.write(to: folder.appendingPathComponent("weights.safetensors"))
    return try Model(contentsOf: folder)
}

@Suite("Softmax models")
struct SoftmaxTests {
    @Test("The winning label per step makes the segments; the background label makes none")
    func winners() async throws {
        let model = try tinySoftmaxModel()
        // 0.5 s silence, 0.5 s of 1 kHz, 0.25 s silence, 0.5 s of 3 kHz, 0.25 s silence (8 kHz).
        let silence = { (n: Int) in [Float](repeating: 0, count: n) }
        let audio = silence(4000) + sine(frequency: 1000, sampleRate: 8000, count: 4000) + silence(2000)
            + sine(frequency: 3000, sampleRate: 8000, count: 4000) + silence(2000)
        var options = LabelOptions(model: model)
        options.backgroundLabel = "quiet"
        let stream = try StreamClassifier(model: model, options: options)
        let events = try await stream.process(audio) + stream.finish()
        let segs = segments(events)
        #expect(segs.map(\.label) == ["low", "high"])
        // Steps of 16 samples (2 ms): the tones' bounds to within a step.
        #expect(abs(segs[0].startSeconds - 0.5) <= 0.002 && abs(segs[0].endSeconds - 1.0) <= 0.002, "\(segs[0])")
        #expect(abs(segs[1].startSeconds - 1.25) <= 0.002 && abs(segs[1].endSeconds - 1.75) <= 0.002, "\(segs[1])")
        #expect(segs.allSatisfy { $0.confidence > 0.9 })

        // Without a background label, the quiet stretches are segments too.
        let all = try StreamClassifier(model: model)
        let labels = segments(try await all.process(audio) + all.finish()).map(\.label)
        #expect(labels.filter { $0 == "quiet" }.count == 3)
    }
}
