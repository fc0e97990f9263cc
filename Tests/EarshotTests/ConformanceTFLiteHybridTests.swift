import Earshot
import EarshotAudio
import EarshotImport
import EarshotTestSupport
import Foundation
import Testing

/// Hybrid TFLite models (dynamic-range quantization: int8 weights, float activations) imported by
/// Earshot against TFLite itself: one-operator graphs of FULLY_CONNECTED, CONV_2D and
/// DEPTHWISE_CONV_2D (per-tensor and per-channel weights, symmetric and asymmetric input
/// quantization) and a small audio classifier on real audio (tools/make_tflite_hybrid_corpus.py).
/// Earshot follows TFLite's reference kernels (OpResolverType.BUILTIN_REF); the default resolver
/// (XNNPACK) quantizes every input asymmetrically, so it is only compared where it does too.
@Suite("TFLite import: hybrid models against TFLite")
struct ConformanceTFLiteHybridTests {
    static let corpus = Repo.path("Tests/EarshotTests/Goldens/conformance/tflite-hybrid")

    struct Run {
        let name: String, file: String, window: Int, input: [Float], reference: [Float], xnnpack: [Float]
    }

    static func runs() throws -> [Run] {
        let golden = try Reference.json(corpus + "/hybrid.json")
        func floats(_ c: [String: Any], _ key: String) -> [Float] { (c[key] as? [Double] ?? []).map(Float.init) }
        return (golden["cases"] as? [[String: Any]] ?? []).map {
            Run(name: $0["name"] as? String ?? "", file: $0["file"] as? String ?? "", window: $0["window"] as? Int ?? 0,
                input: floats($0, "input"), reference: floats($0, "reference"), xnnpack: floats($0, "default"))
        }
    }

    static func imported(_ file: String, frontEnd: String? = "features", rate: Int? = nil) throws -> Model {
        var options = ImportOptions()
        options.frontEnd = frontEnd
        if let rate { options.sampleRate = rate }
        options.metadata.name = file
        let (manifest, tensors) = try TFLiteImporter.importModel(path: corpus + "/" + file, options: options)
        return try Model(manifest: manifest, tensors: tensors, name: file)
    }

    @Test("every hybrid one-op graph imports and equals TFLite's reference kernels bit for bit")
    func operators() throws {
        let runs = try Self.runs().filter { $0.name != "audio-classifier" }
        #expect(runs.count == 24)
        var failures: [String] = [], worstXNNPACK: Float = 0, exact = 0
        for r in runs {
            do {
                let model = try Self.imported(r.file)
                #expect(model.description.execution == "compiled", "\(r.name)")
                var state = model.makeState()
                let got = try model.prediction(from: r.input, using: &state)
                // The integer sums are exact, the input's scale is TFLite's (its asymmetric range a
                // float difference) and the scales multiply in TFLite's order: every value equal.
                let worst = maxAbsDifference(got, r.reference)
                if worst == 0 { exact += 1 } else { failures.append("\(r.name): worst \(worst) of \(got.count) values (\(r.reference.count) expected)") }
                if !r.name.contains("symmetric") || r.name.contains("asymmetric"), !r.name.contains("conv-2d-per-tensor") {
                    worstXNNPACK = max(worstXNNPACK, maxAbsDifference(got, r.xnnpack))
                }
            } catch {
                failures.append("\(r.name): \(error)")
            }
        }
        print("hybrid one-op graphs: \(runs.count), \(exact) bit-exact against TFLite's reference kernels, "
              + "\(worstXNNPACK) against XNNPACK where it quantizes as the file says (asymmetric input)")
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    @Test("a small hybrid audio classifier ([1, 16000] at 16 kHz: CONV_2D per channel and per tensor, DEPTHWISE_CONV_2D, FULLY_CONNECTED) equals TFLite's reference kernels (within 1e-7) on each 1 s window of real audio")
    func audioClassifier() throws {
        let runs = try Self.runs().filter { $0.name == "audio-classifier" }
        #expect(runs.count == 4)
        let model = try Self.imported("audio-classifier.tflite", frontEnd: nil, rate: 16000)
        #expect(model.chunkSamples == 16000 && model.description.execution == "compiled")
        // Its two CONV_2D products run on integers (the filterbank's 100 fields of 160 taps, the
        // 3-tap mix), its depthwise convolution on its planes.
        let kernels = model.description.layers.compactMap(\.kernel)
        #expect(kernels.filter { $0 == "hybrid integer product" }.count == 2, "\(kernels)")
        // Each convolution's input is quantized channels first where the one before left it: the
        // one transpose left is the last convolution's output to NHWC, which FULLY_CONNECTED reads as rows.
        let transposes = model.description.layers.filter { $0.type == "Transpose" }.map(\.name)
        #expect(transposes.count == 1, "\(transposes)")
        let (audio, rate) = try AudioFile.readMono(path: Repo.path("Tests/EarshotTests/Goldens/microwakeword/wake-words.wav"))
        #expect(rate == 16000)
        var worst: Float = 0, worstXNNPACK: Float = 0
        for r in runs {
            var state = model.makeState()
            let got = try model.prediction(from: Array(audio[(r.window * 16000)..<((r.window + 1) * 16000)]), using: &state)
            #expect(got.count == 4 && got.allSatisfy { $0 > 0 && $0 < 1 })
            worst = max(worst, maxAbsDifference(got, r.reference))
            worstXNNPACK = max(worstXNNPACK, maxAbsDifference(got, r.xnnpack))
        }
        print("hybrid audio classifier: 4 windows, max |diff| \(worst) against TFLite's reference kernels, \(worstXNNPACK) against XNNPACK")
        // Its per-channel CONV_2D and asymmetric FULLY_CONNECTED are within a rounding of TFLite's
        // (see above); the scores are within 1e-7 of values below 1.
        #expect(worst <= 1e-7)
    }

    @Test("a hybrid operator the importer does not take (BATCH_MATMUL with int8 weights) is refused naming the operator, its node and docs/models.md")
    func unsupportedHybrid() throws {
        var options = ImportOptions()
        options.frontEnd = "features"
        #expect {
            _ = try TFLiteImporter.importModel(path: Self.corpus + "/batch-matmul-hybrid.tflite", options: options)
        } throws: { error in
            let text = "\(error)"
            return text.contains("BATCH_MATMUL") && text.contains("operator 0") && text.contains("a hybrid operator (int8 weights") && text.contains("docs/models.md")
        }
    }
}
