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

    static func train(_ root: String, epochs: Int = 4) throws -> TrainedClassifier {
        var o = TrainingOptions()
        o.architecture = MicroWakeWordTrainer.architectureName
        o.epochs = epochs
        o.batchSize = 4
        o.learningRate = 0.01
        o.seed = 3
        o.background = "other"
        o.augment = [.gain, .noise]
        let (training, validation) = try Dataset.load(root, groupBy: "^(s[0-9]+)_").split(validationFraction: 0.25, seed: 3)
        return try Trainer.train(name: "word", training: training, validation: validation, options: o)
    }

    /// Noise, the chirp (2.0 to 2.4 s), noise: 114 steps of 30 ms (3.42 s).
    static let recordingSteps = 114

    static func recording(noise: Float = 0.01) -> [Float] {
        var random = SeededRandom(seed: 99)
        var audio = (0..<(recordingSteps * 480)).map { _ in Float.random(in: -noise...noise, using: &random) }
        for j in 0..<6400 { audio[32000 + j] += chirp(j) }
        return audio
    }

    /// The runtime's score at every step (the package as a stream, 480 samples a step).
    static func runtimeScores(_ model: Model, _ audio: [Float]) throws -> [Float] {
        var state = model.makeState()
        return try stride(from: 0, to: audio.count, by: 480).map { try model.prediction(from: Array(audio[$0..<($0 + 480)]), using: &state)[0] }
    }

    /// 16 kHz clips of 5 s in faint noise (-46 dB below the chirp): "word" the rising chirp at the
    /// start (then the noise alone, as a take with silence after it), "other" the noise alone or
    /// a steady tone where the chirp would be.
    static func phraseAtStart(files: Int = 16) throws -> String {
        let root = try Repo.temporaryFolder().path
        var random = SeededRandom(seed: 23)
        for label in ["word", "other"] {
            try FileManager.default.createDirectory(atPath: root + "/" + label, withIntermediateDirectories: true)
            for i in 0..<files {
                var clip = (0..<80000).map { _ in Float.random(in: -0.002...0.002, using: &random) }
                let start = Int.random(in: 800...4000, using: &random)
                if label == "word" {
                    for j in 0..<6400 { clip[start + j] += chirp(j) }
                } else if i % 2 == 1 {
                    // As loud, as long and where the chirp is: the front end's slow adaptation
                    // after it does not tell them apart, only the sound itself.
                    let tone = sine(frequency: Double.random(in: 300...3000, using: &random), sampleRate: 16000, count: 6400, amplitude: 0.4)
                    for j in tone.indices { clip[start + j] += tone[j] }
                }
                try writeAudio("\(root)/\(label)/s\(i / 2)_\(label)_\(i).wav", samples: clip, channels: 1, sampleRate: 16000)
            }
        }
        return root
    }

    static func trainPhraseAtStart(_ root: String) throws -> (TrainedClassifier, Dataset) {
        var o = TrainingOptions()
        o.architecture = MicroWakeWordTrainer.architectureName
        o.epochs = 16
        o.batchSize = 8
        o.learningRate = 0.005
        o.seed = 5
        o.background = "other"
        o.augment = []
        let (training, validation) = try Dataset.load(root, groupBy: "^(s[0-9]+)_").split(validationFraction: 0.25, seed: 3)
        return (try Trainer.train(name: "word", training: training, validation: validation, options: o), validation)
    }

    @Test("A phrase followed by silence in a longer clip is learned: the window the loss looks at ends just after the phrase (it ended in the silence, out of the network's reach, and validation stayed at chance)")
    func phraseEndInWindow() throws {
        let root = try Self.phraseAtStart()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (trained, validation) = try Self.trainPhraseAtStart(root)
        let accuracies = trained.reports.map(\.validationAccuracy)
        #expect(validation.files.count >= 8)
        #expect(trained.validationAccuracy >= 0.95, "validation accuracy by epoch: \(accuracies)")
    }

    @Test("The gradient reaches every layer of the network: the loss's gradient against finite differences at the parameters with the largest gradients of each tensor")
    func gradientThroughNetwork() {
        var random = SeededRandom(seed: 8)
        let network = MicroWakeWordTrainer.network(background: 0)
        var parameters = network.initialParameters(seed: 9)
        let steps = MicroWakeWordTrainer.receptiveSteps + 4
        // Features as the front end gives them (0 to 26), in float (no fake quantization).
        let x = Frames(batch: 2, time: steps, channels: network.inputs,
                       values: (0..<(2 * steps * network.inputs)).map { _ in Float.random(in: 0...26, using: &random) })
        let labels = [0, 1], objective = Objective(classWeights: [1, 1], decisionFrames: MicroWakeWordTrainer.decisionSteps)
        let normalizer = objective.weight(labels: labels, extra: [])
        func loss(_ p: [[Float]]) -> Double { objective.evaluate(network.forward(x, p).logits, labels: labels, normalizer: normalizer).loss }
        let grads = Trainer.gradients(network, parameters, x, labels, [], objective, normalizer: normalizer).grads
        let step: Float = 1e-3
        var checked = 0
        for k in parameters.indices where network.parameterShapes[k] != [2] {
            // The 3 largest gradients of each filter and bias: each layer's gradient is there.
            let largest = parameters[k].indices.sorted { abs(grads[k][$0]) > abs(grads[k][$1]) }.prefix(3)
            #expect(abs(grads[k][largest.first ?? 0]) > 1e-6, "tensor \(k): no gradient")
            for i in largest {
                let numeric = GradientTests.difference(&parameters, k, i, step: step, loss)
                #expect(abs(Double(grads[k][i]) - numeric) <= 1e-3 + 2e-2 * abs(numeric), "tensor \(k)[\(i)]: analytic \(grads[k][i]), numeric \(numeric)")
                checked += 1
            }
        }
        #expect(checked == parameters.indices.filter { network.parameterShapes[$0] != [2] }.reduce(0) { $0 + min(3, parameters[$1].count) })
    }

    @Test("The int8 package computes the trainer's fake-quantized forward pass: at every step the logistic of its int8 logit code or of one next to it, mostly the same; it finds the chirp")
    func packageEqualsFakeQuant() throws {
        let root = try Self.phraseAtStart()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let trained = try Self.trainPhraseAtStart(root).0
        #expect(trained.manifest.phrase == "word" && trained.manifest.outputs.labels == ["word"])
        #expect(trained.manifest.decision?.detectionWindow == 5 && trained.manifest.decision?.threshold == 0.5)
        #expect(trained.manifest.training?.architecture == "microwakeword")
        let folder = URL(fileURLWithPath: root + "/model")
        try Model.write(manifest: trained.manifest, tensors: trained.tensors, to: folder)
        let model = try Model(contentsOf: folder)
        #expect(model.chunkSamples == 480 && model.sampleRate == 16000)

        let audio = Self.recording(noise: 0.002)
        let runtime = try Self.runtimeScores(model, audio)
        let x = try MicroWakeWordTrainer.features([audio])
        let (codes, q) = MicroWakeWordTrainer.logitCodes(trained.network, trained.parameters, x)
        let trainer = MicroWakeWordTrainer.scores(trained.network, trained.parameters, x)
        let n = Self.recordingSteps - 1
        #expect(runtime.count == n + 1 && trainer.count == n)
        #expect(runtime[0] == 0, "the front end's first step has no frames: no score")
        // Each step's score is the logistic of the trainer's int8 logit code, or of a code next
        // to it (the int8 kernels requantize each layer by fixed-point multipliers, the trainer
        // rounds the float sums: a value on a rounding boundary may land one code away, and
        // through four blocks a boundary in an early layer may move the logit a few codes at a
        // few steps).
        let steps = Array(runtime.dropFirst())
        let within = (0..<n).filter { t in (-1...1).contains { MicroWakeWordTrainer.score(code: codes[t] + $0, q) == steps[t] } }
        let exact = (0..<n).filter { steps[$0] == trainer[$0] }
        #expect(within.count * 100 >= n * 95, "steps off by more than one logit code: \((0..<n).filter { !within.contains($0) })")
        #expect(exact.count * 100 >= n * 80, "\(exact.count) of \(n) steps exact")
        // Every score is a uint8 code over 256.
        #expect(runtime.allSatisfy { ($0 * 256).rounded() == $0 * 256 })
        // The chirp ends at 2.4 s (step 80): found there, and not in the noise before it (after
        // the first second, while the front end settles on the noise the stream starts with).
        let before = runtime[34..<64].max() ?? 1, after = runtime[72..<96].max() ?? 0
        #expect(before < 0.5 && after > 0.5, "noise \(before), chirp \(after): \(runtime.map { Int($0 * 256) })")
    }

    @Test("earshot export writes the trained package as a .tflite whose import gives the package's scores bit for bit, and a manifest with its phrase")
    func exportRoundTrip() throws {
        let root = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let trained = try Self.train(root)
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
        let trained = try Self.train(root)
        let files = try MicroWakeWordExport.export(manifest: trained.manifest, tensors: trained.tensors, modelFile: "word.tflite")
        try Data(files.tflite).write(to: URL(fileURLWithPath: root + "/word.tflite"))
        let audio = Self.recording()
        // The int8 input codes the package's Quantize computes, step by step (from step 1).
        let x = try MicroWakeWordTrainer.features([audio])
        let codes = x.values.map { Int8(FakeQuant.code($0, MicroWakeWordTrainer.inputQuantization)) }
        let reference = try LiteRT.microWakeWordOutputs(model: root + "/word.tflite", inputs: codes)
        let runtime = try Self.runtimeScores(try Model(manifest: trained.manifest, tensors: trained.tensors, name: "word"), audio)
        let earshot = runtime.dropFirst().map { Int(($0 * 256).rounded()) }
        #expect(reference.count == Self.recordingSteps - 1)
        #expect(reference == earshot)
        #expect(Set(reference).count > 5, "the outputs move over the recording")
    }
}
