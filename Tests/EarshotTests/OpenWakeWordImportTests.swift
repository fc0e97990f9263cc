import Earshot
import EarshotImport
import EarshotTestSupport
import Foundation
import Testing

/// openWakeWord's ONNX models, imported and run by Earshot, against onnxruntime's outputs on the
/// same inputs (tools/openwakeword_reference.py, from real audio). The models are not part of
/// the repository (their licence does not allow it): scripts/fetch-test-models.sh fetches them,
/// and the README's test command runs it.
@Suite("ONNX import: openWakeWord's models against onnxruntime")
struct OpenWakeWordImportTests {
    static let folder = Repo.path("Tests/.models/openwakeword")

    struct Missing: Error, CustomStringConvertible {
        let path: String
        var description: String { "\(path) is missing: run scripts/fetch-test-models.sh (the README's test command does)" }
    }

    static func importModel(_ name: String, features: Bool, chunk: Int? = nil) throws -> Model {
        let path = folder + "/\(name).onnx"
        guard FileManager.default.fileExists(atPath: path) else { throw Missing(path: path) }
        var options = ImportOptions()
        options.frontEnd = features ? "features" : "samples"
        options.chunkSamples = chunk
        options.metadata.name = name
        let (manifest, tensors) = try OnnxImporter.importModel(path: path, options: options)
        return try Model(manifest: manifest, tensors: tensors, name: name)
    }

    static func cases(_ golden: [String: Any]) -> [(input: [Float], output: [Float])] {
        (golden["cases"] as? [[String: Any]] ?? []).map {
            (($0["input"] as? [Double] ?? []).map(Float.init), ($0["output"] as? [Double] ?? []).map(Float.init))
        }
    }

    /// Runs each case from a fresh state; returns the largest difference relative to max(1, |reference|).
    static func worst(_ model: Model, _ cases: [(input: [Float], output: [Float])]) throws -> Float {
        var worst: Float = 0
        for c in cases {
            var state = model.makeState()
            let got = try model.prediction(from: c.input, using: &state)
            #expect(got.count == c.output.count)
            for (a, b) in zip(got, c.output) { worst = max(worst, abs(a - b) / max(1, abs(b))) }
        }
        return worst
    }

    static func golden() throws -> [String: Any] { try Reference.json(Repo.path("Tests/EarshotTests/Goldens/openwakeword.json")) }

    @Test("melspectrogram.onnx: 1760 samples to 8 frames of 32 log-mel values, compiled")
    func melspectrogram() throws {
        let model = try Self.importModel("melspectrogram", features: false, chunk: 1760)
        let cases = Self.cases(try Self.golden()["melspectrogram"] as? [String: Any] ?? [:])
        #expect(cases.count == 3)
        #expect(model.description.execution?.hasPrefix("compiled") == true, "\(model.description.execution ?? "")")
        let worst = try Self.worst(model, cases)
        print("openWakeWord melspectrogram: max relative |diff| \(worst) against onnxruntime; \(model.description.execution ?? "")")
        #expect(worst <= 1e-4)
    }

    @Test("embedding_model.onnx: a 76x32 window to 96 values, compiled")
    func embedding() throws {
        let model = try Self.importModel("embedding_model", features: true)
        #expect(model.chunkSamples == 76 * 32)
        let cases = Self.cases(try Self.golden()["embedding_model"] as? [String: Any] ?? [:])
        #expect(cases.count == 3)
        #expect(model.description.execution?.hasPrefix("compiled") == true, "\(model.description.execution ?? "")")
        let worst = try Self.worst(model, cases)
        print("openWakeWord embedding: max relative |diff| \(worst) against onnxruntime; \(model.description.execution ?? "")")
        #expect(worst <= 1e-4)
    }

    @Test("Wake-word heads: a plain Gemm head (alexa) and one with a decomposed layer norm (hey_mycroft)",
          arguments: ["alexa_v0.1", "hey_mycroft_v0.1"])
    func head(_ name: String) throws {
        let model = try Self.importModel(name, features: true)
        #expect(model.chunkSamples == 16 * 96)
        let heads = try Self.golden()["heads"] as? [String: Any] ?? [:]
        let cases = Self.cases(heads[name] as? [String: Any] ?? [:])
        #expect(cases.count == 2)
        #expect(model.description.execution == "compiled", "\(model.description.execution ?? "")")
        let worst = try Self.worst(model, cases)
        print("openWakeWord \(name): max relative |diff| \(worst) against onnxruntime")
        #expect(worst <= 1e-4)
    }

    @Test("A composed import is labelled with its phrase; a released head says it is openWakeWord's, by David Scripka, CC BY-NC-SA 4.0",
          arguments: [("alexa_v0.1", "alexa"), ("hey_mycroft_v0.1", "hey mycroft")])
    func phraseAndSource(_ head: String, _ phrase: String) throws {
        let path = Self.folder + "/\(head).onnx"
        guard FileManager.default.fileExists(atPath: path) else { throw Missing(path: path) }
        var options = ImportOptions()
        options.metadata.name = "\(head)-package"
        let manifest = try OpenWakeWordImporter.importModel(head: path, options: options).manifest
        #expect(manifest.outputs.labels == [phrase] && manifest.phrase == phrase && manifest.name == "\(head)-package")
        #expect(manifest.author == "David Scripka (openWakeWord)" && manifest.license == "CC-BY-NC-SA-4.0")
        #expect(manifest.url == "https://github.com/dscripka/openWakeWord")
        #expect(manifest.source == "openWakeWord's \(head).onnx, as released (openwakeword 0.5.1), with melspectrogram.onnx and embedding_model.onnx")
        #expect(manifest.description == "openWakeWord model for the wake phrase '\(phrase)'")
        // What the user gives stays.
        options.metadata.author = "Someone"
        options.metadata.license = "MIT"
        options.metadata.labels = ["wake"]
        options.metadata.source = "my copy"
        let given = try OpenWakeWordImporter.importModel(head: path, options: options).manifest
        #expect(given.author == "Someone" && given.license == "MIT" && given.outputs.labels == ["wake"] && given.source == "my copy" && given.phrase == phrase)
    }

    @Test("A head that is not one of openWakeWord's releases: its phrase from its file name, no author or licence guessed")
    func unknownHead() throws {
        let path = Self.folder + "/alexa_v0.1.onnx"
        guard FileManager.default.fileExists(atPath: path) else { throw Missing(path: path) }
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // The same graph with one more (unknown, so skipped) field: other bytes, another hash.
        let copy = folder.appendingPathComponent("hey_computer_v2.1.onnx")
        try (try Data(contentsOf: URL(fileURLWithPath: path)) + Data([0x98, 0x06, 0x01])).write(to: copy)
        let manifest = try OpenWakeWordImporter.importModel(head: copy.path, melspectrogram: Self.folder + "/melspectrogram.onnx",
                                                            embedding: Self.folder + "/embedding_model.onnx", options: ImportOptions()).manifest
        #expect(manifest.outputs.labels == ["hey computer"] && manifest.phrase == "hey computer")
        #expect(manifest.author == nil && manifest.license == nil && manifest.url == nil)
        #expect(manifest.source == "openWakeWord head hey_computer_v2.1.onnx with melspectrogram.onnx and embedding_model.onnx")
        for (file, phrase) in [("hey_mycroft_v0.1.onnx", "hey mycroft"), ("/models/ok-nabu.onnx", "ok nabu"), ("alexa.onnx", "alexa"),
                               ("v2.onnx", "v2"), ("timer_v0.1.onnx", "timer")] {
            #expect(OpenWakeWordImporter.phrase(fileName: file) == phrase, "\(file)")
        }
    }

    @Test("hey_jarvis_v0.1: its If on a computed condition (it was refused) runs both branches, each stream of a batch taking its own")
    func dataDependentIf() throws {
        let path = Self.folder + "/hey_jarvis_v0.1.onnx"
        guard FileManager.default.fileExists(atPath: path) else { throw Missing(path: path) }
        let model = try OpenWakeWordPipelineTests.importHead("hey_jarvis_v0.1")
        #expect(model.manifest.graph?.nodes.contains { $0.op == "Where" && $0.name.hasPrefix("head/If_32") } == true)
        // Two streams in one batch: a take of the phrase (its verifier branch runs where the first score is 0.5 or more) and silence.
        let corpus = Repo.path("Tests/EarshotTests/Goldens/openwakeword-start")
        let jarvis = try AudioFile.readMono(path: corpus + "/hey_jarvis-0.flac").samples
        let silence = [Float](repeating: 0, count: jarvis.count)
        let steps = jarvis.count / 1280
        var states = [model.makeState(), model.makeState()]
        var batched: [[Float]] = [[], []]
        for s in 0..<steps {
            let out = try model.predictions(from: [Array(jarvis[(s * 1280)..<((s + 1) * 1280)]), Array(silence[(s * 1280)..<((s + 1) * 1280)])], using: &states)
            batched[0] += out[0]
            batched[1] += out[1]
        }
        let alone = [try OpenWakeWordPipelineTests.scores(model, Array(jarvis.prefix(steps * 1280))),
                     try OpenWakeWordPipelineTests.scores(model, Array(silence.prefix(steps * 1280)))]
        #expect(batched == alone)
        #expect((batched[0].max() ?? 0) > 0.9 && (batched[1].max() ?? 1) < 0.1, "\(batched)")
    }
}
