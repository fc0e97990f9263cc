import EarshotImport
import EarshotModel
import EarshotTestSupport
import Foundation
import Testing
@testable import EarshotTraining

/// `--architecture microwakeword`: microWakeWord's streaming int8 network trained with
/// quantization-aware steps, written as the int8 package `earshot export --format
/// microwakeword` takes.
@Suite("microWakeWord's architecture, trained with quantization-aware steps")
struct MicroWakeWordTrainerTests {
    /// 16 kHz clips of 1 s: "word" a rising chirp (600 to 1800 Hz, 0.4 s) in faint noise, "other"
    /// faint noise or a steady tone.
    static func folder(files: Int = 12) throws -> String {
        let root = try Repo.temporaryFolder().path
        var random = SeededRandom(seed: 17)
        for label in ["word", "other"] {
            try FileManager.default.createDirectory(atPath: root + "/" + label, withIntermediateDirectories: true)
            for i in 0..<files {
                var clip = (0..<16000).map { _ in Float.random(in: -0.01...0.01, using: &random) }
                if label == "word" {
                    let start = Int.random(in: 2000...8000, using: &random)
                    for j in 0..<6400 { clip[start + j] += chirp(j) }
                } else if i % 2 == 1 {
                    let tone = sine(frequency: Double.random(in: 300...3000, using: &random), sampleRate: 16000, count: 16000, amplitude: 0.3)
                    for j in clip.indices { clip[j] += tone[j] }
                }
                try writeAudio("\(root)/\(label)/s\(i / 2)_\(label)_\(i).wav", samples: clip, channels: 1, sampleRate: 16000)
            }
        }
        return root
    }

    /// The chirp's sample j (0.4 s at 16 kHz, 600 to 1800 Hz).
    static func chirp(_ j: Int) -> Float {
        let t = Double(j) / 16000
        return Float(0.4 * sin(2 * Double.pi * (600 * t + 1500 * t * t)))
    }

    static func train(_ root: String, epochs: Int = 8) throws -> TrainedClassifier {
        var o = TrainingOptions()
        o.architecture = MicroWakeWordTrainer.architectureName
        o.epochs = epochs
        o.batchSize = 8
        o.learningRate = 0.01
        o.seed = 3
        o.background = "other"
        o.augment = [.gain, .noise]
        let (training, validation) = try Dataset.load(root, groupBy: "^(s[0-9]+)_").split(validationFraction: 0.25, seed: 3)
        return try Trainer.train(name: "word", training: training, validation: validation, options: o)
    }

    /// Noise, the chirp, noise: 2.4 s (a whole number of 30 ms steps).
    static func recording() -> [Float] {
        var random = SeededRandom(seed: 99)
        var audio = (0..<(80 * 480)).map { _ in Float.random(in: -0.01...0.01, using: &random) }
        for j in 0..<6400 { audio[16000 + j] += chirp(j) }
        return audio
    }

    /// The runtime's score at every step (the package as a stream, 480 samples a step).
    static func runtimeScores(_ model: Model, _ audio: [Float]) throws -> [Float] {
        var state = model.makeState()
        return try stride(from: 0, to: audio.count, by: 480).map { try model.prediction(from: Array(audio[$0..<($0 + 480)]), using: &state)[0] }
    }

    @Test("The int8 package computes the trainer's fake-quantized forward pass: at every step the logistic of its int8 logit code or of one next to it, mostly the same; it finds the chirp")
    func packageEqualsFakeQuant() throws {
        let root = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let trained = try Self.train(root)
        #expect(trained.manifest.phrase == "word" && trained.manifest.outputs.labels == ["word"])
        #expect(trained.manifest.decision?.detectionWindow == 5 && trained.manifest.decision?.threshold == 0.5)
        #expect(trained.manifest.training?.architecture == "microwakeword")
        let folder = URL(fileURLWithPath: root + "/model")
        try Model.write(manifest: trained.manifest, tensors: trained.tensors, to: folder)
        let model = try Model(contentsOf: folder)
        #expect(model.chunkSamples == 480 && model.sampleRate == 16000)

        let audio = Self.recording()
        let runtime = try Self.runtimeScores(model, audio)
        let x = try MicroWakeWordTrainer.features([audio])
        let (codes, q) = MicroWakeWordTrainer.logitCodes(trained.network, trained.parameters, x)
        let trainer = MicroWakeWordTrainer.scores(trained.network, trained.parameters, x)
        #expect(runtime.count == 80 && trainer.count == 79)
        #expect(runtime[0] == 0, "the front end's first step has no frames: no score")
        // Each step's score is the logistic of the trainer's int8 logit code, or of a code next
        // to it (the int8 kernels requantize each layer by fixed-point multipliers, the trainer
        // rounds the float sums: a value on a rounding boundary may land one code away).
        let steps = Array(runtime.dropFirst())
        let within = (0..<79).filter { t in (-1...1).contains { MicroWakeWordTrainer.score(code: codes[t] + $0, q) == steps[t] } }
        let exact = (0..<79).filter { steps[$0] == trainer[$0] }
        #expect(within.count == 79, "steps off by more than one logit code: \((0..<79).filter { !within.contains($0) })")
        #expect(exact.count >= 70, "\(exact.count) of 79 steps exact")
        // Every score is a uint8 code over 256.
        #expect(runtime.allSatisfy { ($0 * 256).rounded() == $0 * 256 })
        // The chirp ends at 1.4 s (step 46): found there, and not in the noise before it.
        let before = runtime[1..<30].max() ?? 1, after = runtime[40..<60].max() ?? 0
        #expect(before < 0.5 && after > 0.5, "noise \(before), chirp \(after)")
    }

    @Test("earshot export writes the trained package as a .tflite whose import gives the package's scores bit for bit, and a manifest with its phrase")
    func exportRoundTrip() throws {
        let root = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let trained = try Self.train(root, epochs: 4)
        let files = try MicroWakeWordExport.export(manifest: trained.manifest, tensors: trained.tensors, modelFile: "word.tflite")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(files.json)) as? [String: Any])
        let micro = try #require(json["micro"] as? [String: Any])
        #expect(json["wake_word"] as? String == "word" && json["model"] as? String == "word.tflite")
        #expect(micro["probability_cutoff"] as? Double == 0.5 && micro["sliding_window_size"] as? Int == 5 && micro["feature_step_size"] as? Int == 10)
        #expect((micro["tensor_arena_size"] as? Int ?? 0) == files.arenaBytes && files.arenaBytes > 1000)
        let path = root + "/word.tflite"
        try Data(files.tflite).write(to: URL(fileURLWithPath: path))
        var options = ImportOptions()
        options.metadata.name = "word"
        options.frontEnd = "microfrontend"
        let (manifest, tensors) = try TFLiteImporter.importModel(path: path, options: options)
        let imported = try Model(manifest: manifest, tensors: tensors, name: "word")
        let package = try Model(manifest: trained.manifest, tensors: trained.tensors, name: "word")
        let audio = Self.recording()
        let a = try Self.runtimeScores(package, audio), b = try Self.runtimeScores(imported, audio)
        #expect(a == b)
        #expect(Set(a).count > 5, "the scores move over the recording")
    }

    @Test("TFLite's reference kernels on the exported file give Earshot's outputs bit for bit at every step (skipped, saying so, where no Python has ai-edge-litert: tools/.venv or $EARSHOT_PYTHON)",
          .enabled(if: LiteRT.python != nil, Comment(rawValue: LiteRT.missing)))
    func tfliteReference() throws {
        let root = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let trained = try Self.train(root, epochs: 4)
        let files = try MicroWakeWordExport.export(manifest: trained.manifest, tensors: trained.tensors, modelFile: "word.tflite")
        try Data(files.tflite).write(to: URL(fileURLWithPath: root + "/word.tflite"))
        let audio = Self.recording()
        // The int8 input codes the package's Quantize computes, step by step (from step 1).
        let x = try MicroWakeWordTrainer.features([audio])
        let codes = x.values.map { Int8(FakeQuant.code($0, MicroWakeWordTrainer.inputQuantization)) }
        let reference = try LiteRT.microWakeWordOutputs(model: root + "/word.tflite", inputs: codes)
        let runtime = try Self.runtimeScores(try Model(manifest: trained.manifest, tensors: trained.tensors, name: "word"), audio)
        let earshot = runtime.dropFirst().map { Int(($0 * 256).rounded()) }
        #expect(reference.count == 79)
        #expect(reference == earshot)
        #expect(Set(reference).count > 5, "the outputs move over the recording")
    }
}
