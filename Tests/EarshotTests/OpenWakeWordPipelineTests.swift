import Earshot
import EarshotTestSupport
import Foundation
import Testing

/// openWakeWord's melspectrogram, embedding and head composed into one package that takes audio,
/// against openWakeWord's own Model on onnxruntime over the same recording in 1280-sample chunks
/// (tools/openwakeword_pipeline_reference.py). openWakeWord starts its embedding window from the
/// embeddings of random noise and its first step from fewer frames, so the two agree from the
/// 26th step on (when both windows hold only the audio's own values); the first five scores are
/// 0 in both.
@Suite("openWakeWord over time: the composed package against openWakeWord's Model")
struct OpenWakeWordPipelineTests {
    @Test("Every step's score within 1e-4 of openWakeWord's", arguments: ["alexa_v0.1", "hey_mycroft_v0.1"])
    func scores(_ head: String) throws {
        let path = OpenWakeWordImportTests.folder + "/\(head).onnx"
        guard FileManager.default.fileExists(atPath: path) else { throw OpenWakeWordImportTests.Missing(path: path) }
        var options = OnnxImporter.Options()
        options.name = head
        let (manifest, tensors) = try OpenWakeWordImporter.importModel(head: path, options: options)
        let model = try Model(manifest: manifest, tensors: tensors, name: head)
        #expect(model.chunkSamples == 1280 && model.description.execution == "compiled")
        // The embedding model runs on each step's new rows: a state tensor per time-convolution's carried rows.
        #expect((manifest.graph?.states.count ?? 0) > 10, "the embedding runs incrementally")
        let golden = try Reference.json(Repo.path("Tests/EarshotTests/Goldens/openwakeword-pipeline.json"))
        let expected = ((golden["heads"] as? [String: Any])?[head] as? [Double] ?? []).map(Float.init)
        let (audio, _) = try AudioFile.readMono(path: Repo.path("Tests/EarshotTests/Goldens/microwakeword/wake-words.wav"))
        var state = model.makeState()
        var got: [Float] = []
        for at in stride(from: 0, to: audio.count - 1279, by: 1280) {
            got.append(try model.prediction(from: Array(audio[at..<(at + 1280)]), using: &state)[0])
        }
        #expect(got.count == expected.count && expected.count > 200)
        #expect(got.prefix(5).allSatisfy { $0 == 0 } && expected.prefix(5).allSatisfy { $0 == 0 })
        let worst = zip(got, expected).dropFirst(25).map { abs($0 - $1) }.max() ?? .infinity
        print("openWakeWord \(head) over time: \(got.count) steps, max |diff| \(worst) from step 26 on; peak \(got.max() ?? 0)")
        #expect(worst <= 1e-4)
    }
}
