import Earshot
import EarshotTestSupport
import Foundation
import Testing

/// A package people install: PyPI EfficientWord-Net 1.0.5's three models (Tests/.models/efficientword-net,
/// fetched by scripts/fetch-test-models.sh), imported with no flags and run against the goldens
/// tools/conformance_efficientword.py wrote from TFLite and onnxruntime on real audio.
@Suite("EfficientWord-Net's models (a log-mel TFLite, an embedding TFLite, a ResNet-50 ONNX) equal their runtimes")
struct ConformanceEfficientWordTests {
    static let goldens = "Tests/EarshotTests/Goldens/conformance/efficientword-net"

    @Test("logmelcalc.tflite (as imported), baseModel.tflite (L2_NORMALIZATION: it was refused) and the ResNet-50 ONNX (GlobalAveragePool: it was refused) on 1 s and 1.5 s of real speech")
    func threeModels() throws {
        let mel = try ConformanceTFLiteTests.floats(Self.goldens + "/logmel.f32")
        let base = try ConformanceTFLiteTests.floats(Self.goldens + "/base.f32")
        let resnet = try ConformanceTFLiteTests.floats(Self.goldens + "/resnet.f32")
        let meta = try Reference.json(Repo.path(Self.goldens + "/meta.json"))
        let offsets = meta["offsets"] as? [Int] ?? []
        #expect(offsets.count == 3 && mel.count == 6 * 98 * 64 && base.count == 3 * 128 && resnet.count == 3 * 2048)
        let (audio, rate) = try AudioFile.readMono(path: Repo.path(meta["audio"] as? String ?? ""))
        #expect(rate == 16000)

        let logmel = try ConformanceTFLiteTests.imported([try ConformanceTFLiteTests.model("efficientword-net", "logmelcalc.tflite")], "logmel")
        let embedding = try ConformanceTFLiteTests.imported([try ConformanceTFLiteTests.model("efficientword-net", "baseModel.tflite")], "embedding")
        let large = try ConformanceTFLiteTests.imported([try ConformanceTFLiteTests.model("efficientword-net", "slim_93%_accuracy_72.7390%.onnx")], "resnet")
        for m in [logmel, embedding, large] { #expect(m.description.execution?.hasPrefix("compiled") == true) }
        #expect(embedding.chunkSamples == 98 * 64 && large.chunkSamples == 149 * 64)

        var worst: (mel: Float, base: Float, resnet: Float) = (0, 0, 0)
        for (k, offset) in offsets.enumerated() {
            // The log-mel of the 1 s windows at the offset and a second later.
            for w in 0..<2 {
                var state = logmel.makeState()
                let start = offset + w * 16000
                let got = try logmel.prediction(from: Array(audio[start..<(start + 16000)]), using: &state)
                worst.mel = max(worst.mel, maxAbsDifference(got, mel[((2 * k + w) * 6272)..<((2 * k + w + 1) * 6272)]))
            }
            // The embeddings of TFLite's log-mel: the first window's, then 1.5 s (98 frames and 51 more).
            let first = Array(mel[(2 * k * 6272)..<((2 * k + 1) * 6272)]), second = Array(mel[((2 * k + 1) * 6272)..<((2 * k + 2) * 6272)])
            var state = embedding.makeState()
            worst.base = max(worst.base, maxAbsDifference(try embedding.prediction(from: first, using: &state), base[(k * 128)..<((k + 1) * 128)]))
            state = large.makeState()
            let features = first + second[..<(51 * 64)]
            worst.resnet = max(worst.resnet, maxAbsDifference(try large.prediction(from: features, using: &state), resnet[(k * 2048)..<((k + 1) * 2048)]))
        }
        print("EfficientWord-Net: logmel max |diff| \(worst.mel) (values to \(mel.map(abs).max() ?? 0)), embedding \(worst.base), ResNet-50 \(worst.resnet)")
        #expect(worst.mel <= 1e-4 && worst.base <= 1e-5 && worst.resnet <= 1e-5)
    }
}
