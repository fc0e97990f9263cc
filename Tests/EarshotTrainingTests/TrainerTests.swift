import EarshotModel
import EarshotTestSupport
import Foundation
import Testing
@testable import EarshotTraining

@Suite("Training a classifier")
struct TrainerTests {
    static func options(epochs: Int = 6, architecture: String = "conv:8x3,gru:1x8") -> TrainingOptions {
        var o = TrainingOptions()
        o.architecture = architecture
        o.features = "log-mel:16"
        o.epochs = epochs
        o.batchSize = 4
        o.learningRate = 0.01
        o.seed = 5
        o.augment = [.gain, .noise, .shift]
        return o
    }

    static func train(_ root: String, epochs: Int = 6, architecture: String = "conv:8x3,gru:1x8") throws -> TrainedClassifier {
        let (training, validation) = try Dataset.load(root, groupBy: "^(s[0-9]+)_").split(validationFraction: 0.25, seed: 3)
        return try Trainer.train(name: "tones", training: training, validation: validation, options: options(epochs: epochs, architecture: architecture))
    }

    @Test("The trained model, written and loaded by the runtime, gives the trainer's own outputs at every step, bit for bit",
          arguments: ["conv:8x3,gru:1x8", "conv:8x3,mix:8x5"])
    func runtimeEqualsTrainer(architecture: String) throws {
        let root = try toneFolder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let trained = try Self.train(root, epochs: 2, architecture: architecture)
        let folder = URL(fileURLWithPath: root + "/model")
        try Model.write(manifest: trained.manifest, tensors: trained.tensors, to: folder)
        let model = try Model(contentsOf: folder)
        #expect(model.labels == ["high", "low", "_background_"])  // a background label of noise is added
        #expect(model.manifest.decision?.backgroundLabel == "_background_")
        #expect(model.manifest.training?.clipSeconds == 0.4)

        var random = SeededRandom(seed: 21)
        let audio = (0..<3200).map { _ in Float.random(in: -0.3...0.3, using: &random) }
            + sine(frequency: 400, sampleRate: 8000, count: 3200, amplitude: 0.3)
        // The trainer: features from the runtime's front end, its own layers, softmax per step.
        let x = try Trainer.features([audio], model: trained.featureModel)
        let logits = trained.network.forward(x, trained.parameters).logits
        let trainer = (0..<logits.time).map { t in softmax(logits.values[(t * 3)..<(t * 3 + 3)]) }
        // The runtime: the package loaded from disk, block by block as a stream. Its FFT is
        // planned as the trainer plans it (by estimate): the same bits.
        let blocks = stride(from: 0, to: audio.count, by: 80).map { Array(audio[$0..<($0 + 80)]) }
        #expect(model.fftPlanning == .estimate)
        var state = model.makeState()
        let steps = try blocks.map { try model.prediction(from: $0, using: &state) }
        #expect(steps.count == trainer.count)
        #expect(zip(steps, trainer).allSatisfy { $0 == $1 }, "worst |diff| \(zip(steps, trainer).map { maxAbsDifference($0, $1) }.max() ?? .infinity)")
    }

    @Test("The same seed trains the same model, bit for bit; another seed does not")
    func deterministic() throws {
        let root = try toneFolder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let a = try Self.train(root, epochs: 2), b = try Self.train(root, epochs: 2)
        #expect(a.tensors == b.tensors)
        #expect(a.reports.map(\.loss) == b.reports.map(\.loss))
        var other = Self.options(epochs: 2)
        other.seed = 6
        let (training, validation) = try Dataset.load(root, groupBy: "^(s[0-9]+)_").split(validationFraction: 0.25, seed: 3)
        let c = try Trainer.train(name: "tones", training: training, validation: validation, options: other)
        #expect(c.tensors != a.tensors)
    }

    @Test("Separable tones are learnt: every validation clip right, by the runtime too")
    func learns() throws {
        let root = try toneFolder(files: 12)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let data = try Dataset.load(root, groupBy: "^(s[0-9]+)_")
        let (training, validation) = try data.split(validationFraction: 0.25, seed: 3)
        var options = Self.options(epochs: 15)
        options.patience = 15
        let trained = try Trainer.train(name: "tones", training: training, validation: validation, options: options)
        #expect(trained.validationAccuracy == 1)
        #expect(trained.reports.last!.loss < trained.reports.first!.loss)
        let model = try Model(manifest: trained.manifest, tensors: trained.tensors)
        let evaluation = try Evaluation.run(model: model, data: validation)
        #expect(evaluation.accuracy == 1)
        #expect(evaluation.confusion == [[validation.counts[0], 0, 0], [0, validation.counts[1], 0], [0, 0, 0]])
        // Noise the trainer never drew is background, not a tone.
        let classifier = try ClipClassifier(model: model)
        for seed in UInt64(100)..<105 {
            let clip = Trainer.backgroundClip(length: 3200, seed: seed, index: 0)
            #expect(model.labels[try classifier.classify(clip).label] == "_background_")
        }
    }
}

@Suite("Labelled data")
struct DatasetTests {
    @Test("A validation split never puts one group on both sides, and keeps about the fraction asked for")
    func splitByGroup() throws {
        let root = try toneFolder(files: 12)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let data = try Dataset.load(root, groupBy: "^(s[0-9]+)_")
        #expect(data.labels == ["high", "low"])
        #expect(data.counts == [12, 12])
        #expect(Set(data.files.map(\.group)) == Set((0..<6).map { "s\($0)" }))
        for seed in UInt64(0)..<5 {
            let (training, validation) = try data.split(validationFraction: 0.3, seed: seed)
            #expect(Set(training.files.map(\.group)).isDisjoint(with: validation.files.map(\.group)))
            #expect(training.files.count + validation.files.count == 24)
            #expect((6...12).contains(validation.files.count), "\(validation.files.count) held out")
        }
    }

    @Test("A CSV of file,label reads like folders; bad data is a clear error")
    func csvAndErrors() throws {
        let root = try toneFolder(files: 2)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let csv = root + "/list.csv"
        try "file,label\nhigh/s0_high_0.wav,up\nlow/s0_low_0.wav,down\n/\(root)/low/s0_low_1.wav,down\n".write(toFile: csv, atomically: true, encoding: .utf8)
        let data = try Dataset.load(csv)
        #expect(data.labels == ["down", "up"])
        #expect(data.files.map(\.path) == [root + "/high/s0_high_0.wav", root + "/low/s0_low_0.wav", "/" + root + "/low/s0_low_1.wav"])
        #expect(throws: TrainingError.data(path: "/no/such/folder", reason: "no such folder or file")) { try Dataset.load("/no/such/folder") }
        try "file,label\nhigh/s0_high_0.wav\n".write(toFile: csv, atomically: true, encoding: .utf8)
        #expect(throws: TrainingError.data(path: csv, reason: "line 2: expected file,label")) { try Dataset.load(csv) }
        try FileManager.default.removeItem(atPath: root + "/low")
        #expect(throws: TrainingError.data(path: root, reason: "one label (high): a classifier needs two or more")) { try Dataset.load(root) }
        #expect(try Dataset.load(root, minimumLabels: 1).labels == ["high"])  // enough to evaluate on
        #expect(throws: TrainingError.self) { try Dataset.load(root, groupBy: "(unclosed") }
    }

    @Test("Per-class precision, recall and F1 follow from the confusion matrix")
    func figures() {
        // 10 "a" (8 right, 2 taken for b), 5 "b" (4 right, 1 taken for a).
        var predictions: [Evaluation.Prediction] = []
        for (truth, predicted, n) in [("a", "a", 8), ("a", "b", 2), ("b", "b", 4), ("b", "a", 1)] {
            predictions += (0..<n).map { _ in .init(path: "", truth: truth, predicted: predicted, score: 1, group: truth) }
        }
        let e = Evaluation(labels: ["a", "b"], confusion: [[8, 2], [1, 4]], predictions: predictions)
        #expect(e.accuracy == 12.0 / 15)
        #expect(e.classes[0].precision == 8.0 / 9 && e.classes[0].recall == 0.8 && e.classes[0].support == 10)
        #expect(e.classes[1].precision == 4.0 / 6 && e.classes[1].recall == 0.8)
        #expect(abs(e.classes[1].f1 - 2 * (4.0 / 6) * 0.8 / (4.0 / 6 + 0.8)) < 1e-12)
        #expect(e.groups.map(\.correct) == [8, 4] && e.groups.map(\.total) == [10, 5])
    }
}
