import EarshotModel
import EarshotTestSupport
import Foundation
import Testing
@testable import EarshotTraining

/// Heads trained on openWakeWord's frozen embedding (fetched by scripts/fetch-test-models.sh).
@Suite("Heads on a frozen embedding")
struct EmbeddingHeadTests {
    static func frontEnd() throws -> EmbeddingFrontEnd {
        let folder = Repo.path("Tests/.models/openwakeword")
        guard FileManager.default.fileExists(atPath: folder + "/embedding_model.onnx") else {
            throw FixtureError(message: "openWakeWord's models are missing: run scripts/fetch-test-models.sh")
        }
        return try EmbeddingFrontEnd.openWakeWord(melspectrogram: folder + "/melspectrogram.onnx", embedding: folder + "/embedding_model.onnx")
    }

    /// Tones as a "phrase" (16 kHz), noise as the background.
    static func tones() throws -> String {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-head-\(UUID().uuidString)").path
        var random = SeededRandom(seed: 4)
        for label in ["chirp", "other"] {
            try FileManager.default.createDirectory(atPath: root + "/" + label, withIntermediateDirectories: true)
            for i in 0..<12 {
                let audio = label == "chirp"
                    ? sine(frequency: Double.random(in: 600...900, using: &random), sampleRate: 16000, count: 9600, amplitude: 0.3)
                    : (0..<9600).map { _ in Float.random(in: -0.05...0.05, using: &random) }
                try writeAudio("\(root)/\(label)/s\(i / 2)_\(i).wav", samples: audio, channels: 1, sampleRate: 16000)
            }
        }
        return root
    }

    static func train(_ root: String, embedding: EmbeddingFrontEnd, epochs: Int, negativeWeight: Double? = nil) throws -> TrainedClassifier {
        let (training, validation) = try Dataset.load(root, groupBy: "^(s[0-9]+)_").split(validationFraction: 0.25, seed: 3)
        var options = TrainingOptions()
        options.background = "other"
        options.epochs = epochs
        options.batchSize = 8
        options.negativeWeight = negativeWeight
        return try Trainer.trainHead(name: "chirp", training: training, validation: validation, options: options, embedding: embedding)
    }

    @Test("The package (front end and head), written and loaded, starts from openWakeWord's start and gives the trainer's scores at every step from the first")
    func runtimeEqualsTrainer() throws {
        let embedding = try Self.frontEnd()
        let root = try Self.tones()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let trained = try Self.train(root, embedding: embedding, epochs: 3)
        let folder = URL(fileURLWithPath: root + "/model")
        try Model.write(manifest: trained.manifest, tensors: trained.tensors, to: folder)
        let model = try Model(contentsOf: folder)
        #expect(model.labels == ["chirp"] && model.manifest.phrase == "chirp" && model.manifest.decision?.detectionWindow == 1)
        #expect(model.chunkSamples == 1280 && model.sampleRate == 16000)
        // The package's window and the trainer's sequences start from the embeddings of openWakeWord's start noise.
        let window = try #require(model.manifest.graph?.states.first { $0.input == "embeddings" })
        let initial = try #require(window.initial.flatMap { trained.tensors[$0] })
        #expect(embedding.start.count == 16 * 96 && embedding.start.contains { $0 != 0 })
        #expect(initial.values == embedding.start && trained.featureStart == embedding.start)

        var random = SeededRandom(seed: 21)
        let audio = (0..<(1280 * 20)).map { _ in Float.random(in: -0.1...0.1, using: &random) }
            + sine(frequency: 700, sampleRate: 16000, count: 1280 * 10, amplitude: 0.3) + [Float](repeating: 0, count: 1280 * 10)
        // The trainer: the embeddings from the front end's own model after the window's first
        // values, its layers, softmax per step; the first five steps gated to 0 as the package gates them.
        let x = try Trainer.features([audio], model: trained.featureModel, start: trained.featureStart)
        let logits = trained.network.forward(x, trained.parameters).logits
        let lead = trained.featureStart.count / 96
        // (The labels are chirp and other: the package's one score is chirp's probability.)
        let trainer = (lead..<logits.time).map { t in t - lead < 5 ? 0 : softmax(logits.values[(t * 2)..<(t * 2 + 2)])[0] }
        var state = model.makeState()
        let steps = try stride(from: 0, to: audio.count, by: 1280).map { try model.prediction(from: Array(audio[$0..<($0 + 1280)]), using: &state)[0] }
        #expect(steps.count == trainer.count && steps.count == 40)
        #expect(steps.prefix(5).allSatisfy { $0 == 0 })  // openWakeWord's gate
        let worst = maxAbsDifference(steps, trainer)
        print("head package vs trainer over \(steps.count) steps: max |diff| \(worst) from step 0")
        #expect(worst <= 1e-5)
    }

    @Test("The same seed trains the same head, bit for bit; a head refuses a GRU, a window wider than the embeddings it sees, an unknown background; without one it adds its own")
    func deterministicAndChecked() throws {
        let embedding = try Self.frontEnd()
        let root = try Self.tones()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let a = try Self.train(root, embedding: embedding, epochs: 2), b = try Self.train(root, embedding: embedding, epochs: 2)
        #expect(a.tensors == b.tensors && a.reports.map(\.loss) == b.reports.map(\.loss))
        // The sequences it learns on start from the window's first values: from zeros, another head.
        let zeros = EmbeddingFrontEnd(name: embedding.name, model: embedding.model, window: embedding.window, package: embedding.package)
        let c = try Self.train(root, embedding: zeros, epochs: 2)
        let head = { (t: TrainedClassifier) in t.tensors.filter { $0.key.hasPrefix("head/") } }
        #expect(!head(a).isEmpty && head(a).keys == head(c).keys && head(a) != head(c))
        #expect(c.featureStart == [Float](repeating: 0, count: 16 * 96))
        let (training, validation) = try Dataset.load(root, groupBy: "^(s[0-9]+)_").split(validationFraction: 0.25, seed: 3)
        for architecture in ["conv:8x16,gru:1x8", "conv:8x17", "conv:8x4,conv:8x2"] {
            var options = TrainingOptions()
            options.background = "other"
            options.architecture = architecture
            #expect(throws: TrainingError.self) {
                try Trainer.trainHead(name: "x", training: training, validation: validation, options: options, embedding: embedding)
            }
        }
        var wrongBackground = TrainingOptions()
        wrongBackground.background = "silence"
        #expect(throws: TrainingError.option(name: "background", value: "silence", expected: "one of the labels [\"chirp\", \"other\"]")) {
            try Trainer.trainHead(name: "x", training: training, validation: validation, options: wrongBackground, embedding: embedding)
        }
        // Without a background label, one of noise is added: both labels are scored.
        var noBackground = TrainingOptions()
        noBackground.epochs = 1
        let both = try Trainer.trainHead(name: "x", training: training, validation: validation, options: noBackground, embedding: embedding)
        #expect(both.manifest.outputs.labels == ["chirp", "other"] && both.manifest.decision?.backgroundLabel == "_background_")
    }

    @Test("openWakeWord's weighting of the negatives: a head trained with it still finds the chirp and gives noise little, and differs from one without it; microWakeWord's trainer and a weight below 1 refuse it")
    func negativeWeight() throws {
        let embedding = try Self.frontEnd()
        let root = try Self.tones()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let plain = try Self.train(root, embedding: embedding, epochs: 12), weighted = try Self.train(root, embedding: embedding, epochs: 12, negativeWeight: 10)
        #expect(plain.tensors != weighted.tensors)
        // A stream of noise unlike the training's (louder), then a chirp and silence: each head's
        // chirp probability at every step, as the package gives it.
        var random = SeededRandom(seed: 33)
        let noise = (0..<(1280 * 40)).map { _ in Float.random(in: -0.2...0.2, using: &random) }
        let audio = noise + sine(frequency: 750, sampleRate: 16000, count: 1280 * 8, amplitude: 0.3) + [Float](repeating: 0, count: 1280 * 4)
        func scores(_ t: TrainedClassifier) throws -> [Float] {
            let x = try Trainer.features([audio], model: t.featureModel, start: t.featureStart)
            let logits = t.network.forward(x, t.parameters).logits, lead = t.featureStart.count / 96
            return (lead..<logits.time).map { softmax(logits.values[($0 * 2)..<($0 * 2 + 2)])[0] }
        }
        let a = try scores(plain), b = try scores(weighted)
        let noiseSteps = 6..<40, chirpSteps = 40..<52
        let meanNoise = { (s: [Float]) in noiseSteps.reduce(Float(0)) { $0 + s[$1] } / Float(noiseSteps.count) }
        print("chirp score over noise, mean: \(meanNoise(a)) plain, \(meanNoise(b)) weighted; at the chirp, max: \(a[chirpSteps].max() ?? 0), \(b[chirpSteps].max() ?? 0)")
        #expect((b[chirpSteps].max() ?? 0) > 0.5 && (a[chirpSteps].max() ?? 0) > 0.5)
        #expect(meanNoise(b) < 0.05 && meanNoise(a) < 0.05)

        let (training, validation) = try Dataset.load(root, groupBy: "^(s[0-9]+)_").split(validationFraction: 0.25, seed: 3)
        var options = TrainingOptions()
        options.background = "other"
        options.negativeWeight = 0.5
        #expect(throws: TrainingError.option(name: "negative-weight", value: "0.5", expected: "1...100000")) {
            try Trainer.trainHead(name: "x", training: training, validation: validation, options: options, embedding: embedding)
        }
        options.negativeWeight = 100
        options.architecture = MicroWakeWordTrainer.architectureName
        #expect(throws: TrainingError.self) { try Trainer.train(name: "x", training: training, validation: validation, options: options) }
    }

    @Test("A head's sequence: the clip ends in the first decision step; a lead's label right after it ends, the background a step later until half the clip is heard")
    func sequenceTargets() {
        // 10 samples a step at 100 Hz: 8 lead steps, 2 clip steps, 2 decision steps; 1 gated.
        let layout = HeadSequence(rate: 100, step: 10, leadSteps: 8, clipSteps: 2, decisionSteps: 2, gatedSteps: 1)
        let clip = [Float](repeating: 0.5, count: 15), lead = [Float](repeating: 1, count: 15)
        var leads = 0, silences = 0
        for seed in 0..<60 {
            var random = SplitMix64(seed: UInt64(seed))
            let (audio, targets) = layout.sequence(clip: clip, label: 0, background: 1, leads: [(lead, 2)], random: &random)
            #expect(audio.count == 120)
            // The clip ends within the first decision step (samples 100..<110): its end is 100 to 109.
            let clipEnd = (audio.lastIndex(of: 0.5) ?? -1) + 1
            #expect((100..<110).contains(clipEnd) && audio[(clipEnd - 15)..<clipEnd].allSatisfy { $0 == 0.5 })
            let clipStart = clipEnd - 15
            if let last = audio.lastIndex(of: 1) {
                leads += 1
                // 0.1 to 0.6 s (10 to 60 samples) before the clip, whole.
                #expect((10...60).contains(clipStart - last - 1) && audio.filter { $0 == 1 }.count == 15)
                let first = last / 10
                let from = max(1, first + 3), to = (clipStart + 7) / 10
                let expected = (first..<(first + 2)).map { ($0, 2) } + (from < to ? Array(from..<to) : []).map { ($0, 1) }
                #expect(targets.map(\.frame) == expected.map(\.0) && targets.map(\.label) == expected.map(\.1), "seed \(seed)")
            } else {
                silences += 1
                #expect(targets.map(\.frame) == Array(1..<((clipStart + 7) / 10)) && targets.allSatisfy { $0.label == 1 })
            }
        }
        #expect(leads > 30 && silences > 5)  // about three leads in four
        // A background clip is the background all through; a long clip keeps its end.
        var random = SplitMix64(seed: 1)
        let long = (0..<40).map { Float($0) }
        let (audio, targets) = layout.sequence(clip: long, label: 1, background: 1, leads: [], random: &random, centred: true)
        #expect(Array(audio[85..<105]) == Array(long.suffix(20)) && audio[105...].allSatisfy { $0 == 0 })
        #expect(targets.map(\.frame) == Array(1..<10) && targets.allSatisfy { $0.label == 1 })
    }
}
