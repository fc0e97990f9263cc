import Earshot
import EarshotCommandTestSupport
import EarshotImport
import EarshotTestSupport
import Foundation
import Testing

/// Float TFLite models imported by Earshot against TFLite itself (ai-edge-litert's Interpreter):
/// one-operator graphs of every builtin op the importer takes, with each fused activation
/// (tools/make_tflite_op_corpus.py), and the published models of the conformance set.
@Suite("TFLite import: float models against TFLite")
struct ConformanceTFLiteTests {
    static let corpus = Repo.path("Tests/EarshotTests/Goldens/conformance/tflite-ops")

    struct Case {
        let name: String, file: String, input: [Float], output: [Float]
    }

    static func cases() throws -> [Case] {
        let golden = try Reference.json(corpus + "/ops.json")
        return (golden["cases"] as? [[String: Any]] ?? []).map {
            Case(name: $0["name"] as? String ?? "", file: $0["file"] as? String ?? "", input: ($0["input"] as? [Double] ?? []).map(Float.init),
                 output: ($0["output"] as? [Double] ?? []).map(Float.init))
        }
    }

    @Test("every one-op graph of the corpus imports and equals TFLite (max |diff| <= 1e-5 relative to max(1, |value|))")
    func operators() throws {
        let cases = try Self.cases()
        #expect(cases.count >= 100)
        var failures: [String] = []
        for c in cases {
            var options = ImportOptions()
            options.frontEnd = "features"
            options.metadata.name = c.name
            do {
                let (manifest, tensors) = try TFLiteImporter.importModel(path: Self.corpus + "/" + c.file, options: options)
                let model = try Model(manifest: manifest, tensors: tensors, name: c.name)
                var state = model.makeState()
                let got = try model.prediction(from: c.input, using: &state)
                let worst = maxRelativeDifference(got, c.output)
                if got.count != c.output.count || !(worst <= 1e-5) { failures.append("\(c.name): \(got.count) values for \(c.output.count), worst \(worst)") }
            } catch {
                failures.append("\(c.name): \(error)")
            }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }

    @Test("a graph TFLite refuses (FULLY_CONNECTED with a fused TANH) is refused, naming the operator")
    func refusedAsTFLiteRefuses() throws {
        let golden = try Reference.json(Self.corpus + "/ops.json")
        let refused = (golden["refused"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        #expect(refused == ["fully-connected-tanh"])
        var options = ImportOptions()
        options.frontEnd = "features"
        #expect {
            _ = try TFLiteImporter.importModel(path: Self.corpus + "/fully-connected-tanh.tflite", options: options)
        } throws: { error in
            "\(error)".contains("FULLY_CONNECTED") && "\(error)".contains("TANH")
        }
    }

    // MARK: The conformance set's .tflite models (Tests/.models, fetched by scripts/fetch-test-models.sh)

    struct Missing: Error, CustomStringConvertible {
        let path: String
        var description: String { "\(path) is missing: run scripts/fetch-test-models.sh (the README's test command does)" }
    }

    static func model(_ set: String, _ file: String) throws -> String {
        let path = Repo.path("Tests/.models/\(set)/\(file)")
        guard FileManager.default.fileExists(atPath: path) else { throw Missing(path: path) }
        return path
    }

    /// `earshot import ARGUMENTS -o FOLDER`, loaded.
    static func imported(_ arguments: [String], _ name: String) throws -> Model {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let package = folder.appendingPathComponent(name).path
        let run = try runEarshot(["import"] + arguments + ["-o", package])
        #expect(run.status == 0, "\(run.err)")
        return try Model(contentsOf: URL(fileURLWithPath: package))
    }

    static let owwGolden = Repo.path("Tests/EarshotTests/Goldens/conformance/openwakeword-tflite/scores.json")
    static let heads = ["alexa_v0.1", "hey_jarvis_v0.1", "hey_mycroft_v0.1", "hey_rhasspy_v0.1", "ok_nabu_v0.1"]

    @Test("openWakeWord's .tflite heads with --front-end openwakeword: every step's score within 1e-4 of openWakeWord's TFLite pipeline, from step 0",
          arguments: heads)
    func openWakeWordPipeline(_ head: String) throws {
        let model = try Self.imported([try Self.model("openwakeword-tflite", head + ".tflite"), "--front-end", "openwakeword"], head)
        #expect(model.chunkSamples == 1280 && model.description.execution == "compiled")
        // Compiled as the .onnx files are: the embedding runs on each step's new rows, a state tensor per time-convolution's carried rows.
        #expect((model.manifest.graph?.states.count ?? 0) > 10, "the embedding runs incrementally")
        let golden = try Reference.json(Self.owwGolden)
        let expected = ((golden["heads"] as? [String: Any])?[head] as? [Double] ?? []).map(Float.init)
        let (audio, _) = try AudioFile.readMono(path: Repo.path("Tests/EarshotTests/Goldens/microwakeword/wake-words.wav"))
        var state = model.makeState()
        let got = try stride(from: 0, to: audio.count - 1279, by: 1280).map { try model.prediction(from: Array(audio[$0..<($0 + 1280)]), using: &state)[0] }
        #expect(got.count == expected.count && expected.count > 200)
        let worst = maxAbsDifference(got, expected)
        print("openWakeWord \(head).tflite over time: \(got.count) steps, max |diff| \(worst) from step 0; peak \(got.max() ?? 0) "
              + "(TFLite \(expected.max() ?? 0)); \(model.description.execution ?? "")")
        #expect(worst <= 1e-4)
    }

    @Test("each openWakeWord .tflite head alone takes [1, 16, 96] embeddings as features and equals TFLite", arguments: heads)
    func openWakeWordHead(_ head: String) throws {
        let model = try Self.imported([try Self.model("openwakeword-tflite", head + ".tflite")], head)
        let cases = (try Reference.json(Self.owwGolden)["alone"] as? [String: Any])?[head] as? [[String: Any]] ?? []
        #expect(cases.count == 3 && model.manifest.frontEnd.type == .features && model.chunkSamples == 16 * 96)
        for c in cases {
            var state = model.makeState()
            let got = try model.prediction(from: (c["input"] as? [Double] ?? []).map(Float.init), using: &state)
            let expected = (c["output"] as? [Double] ?? []).map(Float.init)
            #expect(got.count == 1 && maxRelativeDifference(got, expected) <= 1e-5, "\(got) against \(expected)")
        }
    }

    /// A golden of float32 little-endian values.
    static func floats(_ path: String) throws -> [Float] {
        let data = try Data(contentsOf: URL(fileURLWithPath: Repo.path(path)))
        return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
    }

    @Test("BirdNET V2.4's FP32 classifier ([1, 144000] at 48 kHz to 6522 scores, RFFT2D within) equals TFLite on each 3 s window of real audio")
    func birdnet() throws {
        // The catalog's package (earshot import of the .tflite with --rate 48000 --hop 144000), fetched once for the tests.
        let model = try Model(contentsOf: URL(fileURLWithPath: try BirdNETTests.package()))
        let expected = try Self.floats("Tests/EarshotTests/Goldens/conformance/birdnet/scores.f32")
        let (audio, rate) = try AudioFile.readMono(path: Repo.path("Tests/EarshotTests/Goldens/conformance/birdnet/audio-48k.wav"))
        #expect(rate == 48000 && model.chunkSamples == 144_000 && expected.count == 3 * 6522)
        var worst: Float = 0
        for w in 0..<3 {
            var state = model.makeState()
            let got = try model.prediction(from: Array(audio[(w * 144_000)..<((w + 1) * 144_000)]), using: &state)
            #expect(got.count == 6522)
            worst = max(worst, maxAbsDifference(got, expected[(w * 6522)..<((w + 1) * 6522)]))
        }
        print("BirdNET V2.4 FP32: 3 windows of 6522 scores, max |diff| \(worst) against TFLite; \(model.description.execution ?? "")")
        #expect(worst <= 1e-4)
    }

    @Test("BirdNET V2.4's FP16 location/week model ([latitude, longitude, week] to 6522 scores, DEQUANTIZE of float16 weights) imports as a model of features and equals TFLite")
    func birdnetLocation() throws {
        let model = try Self.imported([try Self.model("birdnet", "BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16.tflite")], "birdnet-location")
        let expected = try Self.floats("Tests/EarshotTests/Goldens/conformance/birdnet/location.f32")
        let meta = try Reference.json(Repo.path("Tests/EarshotTests/Goldens/conformance/birdnet/meta.json"))
        let inputs = (meta["locations"] as? [[Double]] ?? []).map { $0.map(Float.init) }
        #expect(inputs.count == 5 && expected.count == 5 * 6522 && model.manifest.frontEnd.type == .features && model.chunkSamples == 3)
        var worst: Float = 0
        for (k, x) in inputs.enumerated() {
            var state = model.makeState()
            let got = try model.prediction(from: x, using: &state)
            #expect(got.count == 6522)
            worst = max(worst, maxAbsDifference(got, expected[(k * 6522)..<((k + 1) * 6522)]))
        }
        print("BirdNET V2.4 location/week (FP16): 5 places, max |diff| \(worst) against TFLite")
        #expect(worst <= 1e-4)
    }
}

