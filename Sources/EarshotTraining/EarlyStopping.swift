import Earshot
import EarshotAudio
import EarshotModel
import Foundation

/// A long recording and its truth (`start,end,label` lines, seconds), on which each epoch's model
/// is run as `listen` runs it: the words found and the false alarms decide which epoch is kept.
public struct ValidationStream: Sendable, Equatable {
    /// The recording (any rate; resampled as `listen` would).
    public var audio: String
    /// Its truth CSV.
    public var truth: String

    /// A stream and its truth.
    public init(audio: String, truth: String) {
        self.audio = audio
        self.truth = truth
    }
}

/// How an epoch's model did on the validation stream.
public struct StreamScore: Sendable, Equatable {
    /// Words in the truth that count (not the background, not ignored).
    public var words: Int
    /// Of them, found.
    public var hits: Int
    /// Detections that found no word.
    public var falseAlarms: Int
    /// False alarms per hour of the stream.
    public var falseAlarmsPerHour: Double
}

/// The validation stream, read once, and its scoring of a package.
struct StreamCheck: Sendable {
    let audio: [Float], rate: Int
    let words: [DetectionEvaluation.Word]
    let ignoring: Set<String>

    init(_ stream: ValidationStream, background: String?) throws(TrainingError) {
        do { (audio, rate) = try AudioFile.readMono(path: stream.audio) } catch { throw .audio(path: stream.audio, reason: TrainingError.reason(error, of: stream.audio)) }
        do { words = try DetectionEvaluation.words(csv: stream.truth) } catch { throw .data(path: stream.truth, reason: TrainingError.reason(error, of: stream.truth)) }
        // As evaluate --stream counts: not the background, not Speech Commands' unknown words.
        ignoring = Set(["_unknown_"] + (background.map { [$0] } ?? []))
    }

    func score(_ manifest: ModelManifest, _ tensors: [String: Tensor]) throws(TrainingError) -> StreamScore {
        do {
            let model = try Model(manifest: manifest, tensors: tensors)
            let e = try DetectionEvaluation.evaluate(model: model, audio: audio, sampleRate: rate, words: words, ignoring: ignoring)
            return StreamScore(words: e.keywordCount, hits: e.hits, falseAlarms: e.falseAlarms, falseAlarmsPerHour: e.falseAlarmsPerHour)
        } catch {
            throw .model(reason: "the validation stream: \(error)")
        }
    }
}

/// Which epoch's parameters to keep, and when to stop: the best validation stream score (words
/// found less false alarms) when there is a stream, then the best clip accuracy, then the lowest
/// loss; `patience` epochs without a better one end training, counted after `from` epochs.
struct EarlyStopping {
    let patience: Int, from: Int
    private(set) var best: (key: [Double], parameters: [[Float]])?
    private var sinceBest = 0

    init(patience: Int, from: Int) {
        self.patience = patience
        self.from = from
    }

    /// Offers an epoch's result; true when it is the best so far (and is kept).
    mutating func offer(epoch: Int, accuracy: Double, loss: Double, stream: StreamScore?, parameters: [[Float]]) -> Bool {
        let key = (stream.map { [Double($0.hits - $0.falseAlarms)] } ?? []) + [accuracy, -loss]
        if let best, !key.lexicographicallyPrecedes(best.key, by: >) {
            if epoch > from { sinceBest += 1 }
            return false
        }
        best = (key, parameters)
        sinceBest = 0
        return true
    }

    var shouldStop: Bool { sinceBest >= patience }

    /// Every epoch's report so far.
    private(set) var reports: [EpochReport] = []

    /// Closes an epoch: its report, its parameters offered (kept when they are the best so far;
    /// never when not `eligible`).
    mutating func close(epoch: Int, epochs: Int, loss: Double, trainingAccuracy: Double, validation: (accuracy: Double, loss: Double),
                        falseSteps: Double? = nil, stream: StreamScore?, parameters: [[Float]], eligible: Bool = true, started: Date) -> EpochReport {
        var report = EpochReport(epoch: epoch, epochs: epochs, loss: loss, trainingAccuracy: trainingAccuracy, validationLoss: validation.loss,
                                 validationAccuracy: validation.accuracy, seconds: 0, best: false)
        report.validationFalseSteps = falseSteps
        report.stream = stream
        report.best = eligible && offer(epoch: epoch, accuracy: validation.accuracy, loss: validation.loss, stream: stream, parameters: parameters)
        report.seconds = Date().timeIntervalSince(started)
        reports.append(report)
        return report
    }

    /// The kept epoch's validation accuracy and parameters (`fallback` before any epoch).
    func kept(or fallback: [[Float]]) -> (accuracy: Double, parameters: [[Float]]) {
        (reports.last(where: \.best)?.validationAccuracy ?? 0, best?.parameters ?? fallback)
    }

    /// The manifest's record of a run: what was asked, how many epochs it took, how long.
    func record(clipSeconds: Double, decisionSeconds: Double, options: TrainingOptions, architecture: String, features: String,
                started: Date) -> ModelManifest.Training {
        var record = ModelManifest.Training(clipSeconds: clipSeconds, decisionSeconds: decisionSeconds)
        record.command = options.command
        record.architecture = architecture
        record.features = features
        record.seed = Int(truncatingIfNeeded: options.seed)
        record.epochs = reports.count
        record.validationAccuracy = kept(or: []).accuracy
        record.trainingSeconds = Date().timeIntervalSince(started)
        return record
    }
}

extension Trainer {
    /// A run's length: optimizer steps per epoch, epochs (`options.epochs`, or about 3000 steps),
    /// the learning-rate schedule over them, and the early stopping (patience a quarter of the
    /// epochs, at least 10, counted after the first fifth).
    static func plan(_ options: TrainingOptions, clips: Int) -> (epochs: Int, stepsPerEpoch: Int, schedule: LearningRateSchedule, stopping: EarlyStopping) {
        let stepsPerEpoch = (clips + options.batchSize - 1) / options.batchSize
        let epochs = options.epochs ?? automaticEpochs(stepsPerEpoch: stepsPerEpoch)
        return (epochs, stepsPerEpoch, LearningRateSchedule(peak: options.learningRate, totalSteps: epochs * stepsPerEpoch),
                EarlyStopping(patience: options.patience ?? max(10, epochs / 4), from: max(5, epochs / 5)))
    }

    /// Class weights that balance the labels (a label with no clip: 0).
    static func balancedWeights(_ labels: [Int], classes: Int) -> [Float] {
        let counts = (0..<classes).map { l in labels.filter { $0 == l }.count }
        return counts.map { $0 == 0 ? 0 : Float(labels.count) / Float(classes * $0) }
    }
}
