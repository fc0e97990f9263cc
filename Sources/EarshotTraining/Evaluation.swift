import EarshotModel
import Foundation

/// A clip's class by the runtime model, as the trainer decides it: the clip fitted to the model's
/// clip length, run from a fresh state, and the mean score of its last steps. A head trained on
/// an embedding (`train --embedding`) sees the clip as its validation does: at the end of its
/// sequence (silence before), the decision steps after it; its background's score is what its
/// phrases leave (1 - their sum).
public struct ClipClassifier: Sendable {
    /// The classifier.
    public let model: Model
    /// Its labels (a head's: the phrases, then the background).
    public let labels: [String]
    let clipSamples: Int
    let decisionSteps: Int
    let head: HeadSequence?

    /// A clip classifier over a softmax package or a head trained on an embedding.
    /// - Throws: `TrainingError` when the package is neither.
    public init(model: Model) throws(TrainingError) {
        self.model = model
        let n = model.chunkSamples
        let training = model.manifest.training
        if let t = training {
            guard (0.01...3600).contains(t.clipSeconds), (0.001...3600).contains(t.decisionSeconds) else {
                throw .model(reason: "\(model.path): training.clipSeconds \(t.clipSeconds) and decisionSeconds \(t.decisionSeconds) must lie in 0.01...3600 s")
            }
        }
        if let t = training, t.features?.hasPrefix("embedding:") == true, model.manifest.outputs.activation == .none,
           let background = model.manifest.decision?.backgroundLabel {
            let steps = max(1, Int((t.clipSeconds * Double(model.sampleRate) / Double(n)).rounded()))
            let decision = max(1, Int((t.decisionSeconds * Double(model.sampleRate) / Double(n)).rounded()))
            labels = model.labels + [background]
            clipSamples = steps * n
            decisionSteps = decision
            head = HeadSequence(rate: model.sampleRate, step: n, leadSteps: 0, clipSteps: max(1, steps - decision), decisionSteps: decision,
                                gatedSteps: Trainer.headGatedSteps)
            return
        }
        guard model.manifest.outputs.activation == .softmax else {
            throw .model(reason: "\(model.path): a clip classifier needs a softmax model or a head trained on an embedding (this one's outputs are \(model.manifest.outputs.activation))")
        }
        labels = model.labels
        head = nil
        if let t = training {
            clipSamples = max(n, Int((t.clipSeconds * Double(model.sampleRate) / Double(n)).rounded()) * n)
            decisionSteps = max(1, Int((t.decisionSeconds * Double(model.sampleRate) / Double(n)).rounded()))
        } else {
            clipSamples = 0  // the whole clip
            decisionSteps = 1
        }
    }

    /// The winning label's index (in `labels`) and the mean scores over the decision steps.
    public func classify(_ audio: [Float]) throws(TrainingError) -> (label: Int, scores: [Float]) {
        let n = model.chunkSamples
        let fitted: [Float]
        if let head {
            var random = SplitMix64(seed: 0)
            fitted = head.sequence(clip: audio, label: 0, background: 1, leads: [], random: &random, centred: true).audio
        } else {
            let length = clipSamples > 0 ? clipSamples : max(n, (audio.count + n - 1) / n * n)
            fitted = Clip(samples: length, hop: n).fitted(audio)
        }
        let blocks = stride(from: 0, to: fitted.count, by: n).map { Array(fitted[$0..<($0 + n)]) }
        var state = model.makeState()
        let steps: [[Float]]
        do { steps = try model.predictions(forConsecutive: blocks, using: &state) } catch { throw .model(reason: "\(error)") }
        var mean = [Float](repeating: 0, count: labels.count)
        let last = steps.suffix(decisionSteps)
        for s in last {
            for c in s.indices { mean[c] += s[c] / Float(last.count) }
            if head != nil { mean[labels.count - 1] += (1 - s.reduce(0, +)) / Float(last.count) }
        }
        return (mean.indices.max { mean[$0] < mean[$1] } ?? 0, mean)
    }
}

/// Accuracy, per-class precision, recall and F1, and the confusion matrix of a model on labelled files.
public struct Evaluation: Sendable {
    /// One label's figures.
    public struct ClassFigures: Sendable {
        /// The label.
        public var label: String
        /// Right among the clips predicted as it.
        public var precision: Double
        /// Found among its clips.
        public var recall: Double
        /// Harmonic mean of the two.
        public var f1: Double
        /// Files of this label.
        public var support: Int
    }

    /// One clip's prediction.
    public struct Prediction: Sendable {
        /// The clip.
        public var path: String
        /// Its label.
        public var truth: String
        /// The label predicted.
        public var predicted: String
        /// The predicted label's score.
        public var score: Float
        /// Its group (`--group-by`).
        public var group: String
    }

    /// The labels, in the model's order.
    public var labels: [String]
    /// [truth][predicted] counts, in `labels` order.
    public var confusion: [[Int]]
    /// Every clip's prediction.
    public var predictions: [Prediction]

    /// Clips predicted right, over all.
    public var accuracy: Double {
        let correct = labels.indices.reduce(0) { $0 + confusion[$1][$1] }
        return Double(correct) / Double(max(1, predictions.count))
    }

    /// Per label.
    public var classes: [ClassFigures] {
        labels.indices.map { c in
            let tp = Double(confusion[c][c])
            let predicted = Double(labels.indices.reduce(0) { $0 + confusion[$1][c] })
            let actual = Double(confusion[c].reduce(0, +))
            let p = predicted > 0 ? tp / predicted : 0, r = actual > 0 ? tp / actual : 0
            return ClassFigures(label: labels[c], precision: p, recall: r, f1: p + r > 0 ? 2 * p * r / (p + r) : 0, support: Int(actual))
        }
    }

    /// Accuracy per group (e.g. speaker), groups sorted.
    public var groups: [(group: String, correct: Int, total: Int)] {
        Dictionary(grouping: predictions, by: \.group).map { g, ps in (g, ps.filter { $0.truth == $0.predicted }.count, ps.count) }
            .sorted { $0.group < $1.group }
    }

    /// Files that could not be classified (unreadable, NaN audio, a rate the resampler refuses),
    /// each error naming its file; they are not in the figures.
    public var failures: [TrainingError] = []

    /// Runs `model` on every file of `data` (on every core). A file that fails is left out and
    /// listed in `failures`; with `strict` the first failure is thrown instead.
    public static func run(model: Model, data: Dataset, strict: Bool = false) throws(TrainingError) -> Evaluation {
        let classifier = try ClipClassifier(model: model)
        let labels = classifier.labels
        for label in data.labels where !labels.contains(label) {
            throw .data(path: data.source, reason: "label '\(label)' is not one of the model's \(labels)")
        }
        let audio = loadAudioEach(data.files, rate: model.sampleRate)
        let results = parallelMap(data.files.count) { i in
            Result { () throws(TrainingError) in
                let samples = try audio[i].get()
                do { return try classifier.classify(samples) } catch {
                    throw .audio(path: data.files[i].path, reason: TrainingError.reason(error, of: data.files[i].path))
                }
            }
        }
        var confusion = [[Int]](repeating: [Int](repeating: 0, count: labels.count), count: labels.count)
        var predictions: [Prediction] = []
        var failures: [TrainingError] = []
        for (file, result) in zip(data.files, results) {
            let predicted: Int, scores: [Float]
            switch result {
            case let .success(r): (predicted, scores) = r
            case let .failure(error):
                if strict { throw error }
                failures.append(error)
                continue
            }
            let truth = labels.firstIndex(of: file.label)!  // checked above
            confusion[truth][predicted] += 1
            predictions.append(Prediction(path: file.path, truth: file.label, predicted: labels[predicted], score: scores[predicted], group: file.group))
        }
        var evaluation = Evaluation(labels: labels, confusion: confusion, predictions: predictions)
        evaluation.failures = failures
        return evaluation
    }
}
