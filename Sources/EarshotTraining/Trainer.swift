import EarshotAudio
import EarshotModel
import Foundation

/// Augmentations applied to each training clip, afresh every epoch.
public enum Augmentation: String, Sendable, CaseIterable {
    /// Background noise at a random SNR (5 to 25 dB): the background label's clips, else white noise.
    case noise
    /// A random gain, -6 to +6 dB.
    case gain
    /// A random time shift of up to 100 ms either way.
    case shift
    /// Speed and pitch together, 0.9 to 1.1 times (the clip resampled with libsoxr), as
    /// Kaldi's speed perturbation: other voices from the same speakers.
    case speed
    /// A synthetic room (a Schroeder reverberator: four feedback combs and two all-passes),
    /// reverberation time 0.1 to 0.6 s, mixed in at 10% to 50%.
    case reverb
    /// SpecAugment: a band of up to 6 mel channels and a span of up to 10 frames of the clip set
    /// to the features' mean.
    case mask
}

/// How a classifier is trained; every default is what `earshot train` uses.
public struct TrainingOptions: Sendable {
    /// The learning rates training accepts (the CLI declares the same range).
    public static let learningRateRange = 1e-7...1.0

    /// "conv:64x3,gru:2x64": a causal convolution (channels x taps) and GRU layers (count x hidden),
    /// then a linear layer to the labels. Parts may be left out or repeated. nil: that one
    /// (`Trainer.defaultArchitecture`), or `Trainer.headArchitecture` for a head on an embedding.
    public var architecture: String?
    /// The front end: log-mel:N or mfcc:N.
    public var features = "log-mel:40"
    /// The model's rate; nil: the rate of the first training file.
    public var sampleRate: Int?
    /// Passes over the data at most; nil: enough for about 3000 optimizer steps (30 to 400
    /// passes), so that a small data set trains as long as a large one.
    public var epochs: Int?
    /// The seed of every random choice: the same seed, the same model.
    public var seed: UInt64 = 1
    /// Clips per step.
    public var batchSize = 32
    /// Adam's peak step size (in `learningRateRange`): reached by a linear warm-up over the
    /// first 5% of the steps (at least 20), then lowered along a cosine to 5% of it at the last.
    public var learningRate: Float = 2e-3
    /// Augmentations applied to training clips.
    public var augment: Set<Augmentation> = [.noise, .gain, .shift]
    /// Epochs without a better validation accuracy (or as good with a lower loss) before
    /// training stops, counted only after the first fifth of the epochs (at least 5), so that
    /// a plateau at the start does not end it; nil: a quarter of the epochs, at least 10.
    public var patience: Int?
    /// Clip length; nil: the 95th percentile of the training clips' lengths.
    public var clipSeconds: Double?
    /// The last part of a clip the loss and the decision look at.
    public var decisionSeconds = 0.3
    /// Audio before each training clip: another training clip and a gap, up to this long, so that
    /// the model learns to decide whatever came before (a stream's state, not a fresh one), as it
    /// must in `listen` and `label`. 0: none (each clip from a fresh state).
    public var contextSeconds = 1.0
    /// A recording and its truth, run each epoch as `listen` runs the model: the epoch kept is the
    /// one that finds the most words less false alarms (then the best clip accuracy, the lowest
    /// loss), and patience counts on that. nil: clip accuracy alone.
    public var validationStream: ValidationStream?
    /// openWakeWord's weighting of the negatives: the background label's targets weigh up to this
    /// many times their class-balanced weight in the loss, from 1 at the first step rising
    /// linearly to it at 80% of the steps, and every target whose label the model already gives
    /// 0.999 or more leaves the loss (so that the weight falls on the negatives it still takes for
    /// something else). nil: none (the class-balanced loss alone). Not for microWakeWord's network.
    public var negativeWeight: Double?
    /// The label that is no event (silence, background): `listen` and `label` report no segments
    /// for it. Without one, the trainer adds a label "_background_" of noise and near-silence.
    public var background: String?
    /// The command line, kept in the manifest.
    public var command: String?
    /// For the manifest: what the model is, who made it, under which licence (trained weights
    /// often carry the data's licence).
    public var description: String?
    /// The package's author.
    public var author: String?
    /// The package's licence.
    public var license: String?

    /// The defaults.
    public init() {}
}

/// One epoch's figures, for progress and for the record.
public struct EpochReport: Sendable {
    /// The epoch just run (from 1).
    public var epoch: Int
    /// Epochs at most.
    public var epochs: Int
    /// Mean training loss.
    public var loss: Double
    /// Clip accuracy on the training set.
    public var trainingAccuracy: Double
    /// Mean validation loss.
    public var validationLoss: Double
    /// Clip accuracy on the validation set.
    public var validationAccuracy: Double
    /// Wall time of the epoch.
    public var seconds: Double
    /// This epoch's model is the best so far (the one kept).
    public var best: Bool
    /// A head's: the fraction of the validation sequences' background steps at which another
    /// label wins (where a stream would raise a false alarm).
    public var validationFalseSteps: Double? = nil
    /// On the validation stream, when one is given.
    public var stream: StreamScore? = nil
}

/// A trained classifier as a package: its manifest and tensors, and how each epoch went.
public struct TrainedClassifier: Sendable {
    /// The package's model.json.
    public var manifest: ModelManifest
    /// Its weights.
    public var tensors: [String: Tensor]
    /// Per epoch.
    public var reports: [EpochReport]
    /// The validation accuracy of the kept model, as the trainer computed it.
    public var validationAccuracy: Double
    /// The trained layers and the model that computes their input features.
    let network: Network
    let parameters: [[Float]]
    let featureModel: Model
    /// The rows the network sees before a stream's first frame ([rows][channels]; a head's
    /// window's first values), or none.
    var featureStart: [Float] = []
}

/// Trains a streaming classifier: the runtime's features, then a causal convolution and GRU
/// layers, softmax over the labels; backpropagation through time with Adam, class-balanced
/// loss, augmentation, early stopping on validation accuracy. Deterministic for a seed: every
/// random draw comes from the seed and the clip and epoch it is for, and the two halves of a
/// batch (one per core) are summed in a fixed order.
public enum Trainer {
    /// Trains a streaming classifier.
    /// - Throws: `TrainingError` naming the option or file that stops it.
    public static func train(name: String, training: Dataset, validation: Dataset, options: TrainingOptions,
                             progress: (EpochReport) -> Void = { _ in }) throws(TrainingError) -> TrainedClassifier {
        if options.architecture == MicroWakeWordTrainer.architectureName {
            return try MicroWakeWordTrainer.train(name: name, training: training, validation: validation, options: options, progress: progress)
        }
        let started = Date()
        try check(options, training: training, validation: validation)
        let rate: Int
        if let given = options.sampleRate { rate = given } else { rate = try sampleRate(of: training.files[0].path) }
        let recipe = try FeatureRecipe.parse(options.features, sampleRate: rate)
        var labels = training.labels
        var trainAudio = try loadAudio(training.files, rate: rate)
        var validationAudio = try loadAudio(validation.files, rate: rate)
        var trainLabels = training.files.map { labels.firstIndex(of: $0.label)! }  // labels hold every file's label
        var validationLabels = validation.files.map { labels.firstIndex(of: $0.label)! }
        let background = options.background ?? addBackground(&labels, &trainAudio, &trainLabels, &validationAudio, &validationLabels, seed: options.seed)

        // Clip length: a whole number of hops, at least the decision span and 0.1 s.
        let lengths = trainAudio.map(\.count).sorted()
        let seconds = options.clipSeconds ?? Double(lengths[min(lengths.count - 1, lengths.count * 95 / 100)]) / Double(rate)
        let decisionFrames = max(1, Int((options.decisionSeconds * 100).rounded()))
        let frames = max(decisionFrames, Int((seconds * 100).rounded(.up)), 10)
        let clip = Clip(samples: frames * recipe.hop, hop: recipe.hop)

        // Feature statistics from the plain training clips, then the features model with them.
        let plainModel = try recipe.model(mean: nil, variance: nil)
        let plain = try features(trainAudio.map { clip.fitted($0) }, model: plainModel)
        let (mean, variance) = statistics(plain, channels: recipe.melCount)
        let featureModel = try recipe.model(mean: mean, variance: variance)
        let validationFrames = try features(validationAudio.map { clip.fitted($0) }, model: featureModel)

        let network = try architecture(options.architecture ?? defaultArchitecture, inputs: recipe.melCount, classes: labels.count)
        var parameters = network.initialParameters(seed: options.seed)
        var adam = Adam(shapes: network.parameterShapes)
        let (epochs, stepsPerEpoch, schedule, plannedStopping) = plan(options, clips: trainAudio.count)
        var stopping = plannedStopping
        let objective = Objective(classWeights: balancedWeights(trainLabels, classes: labels.count), decisionFrames: decisionFrames)
        let noise = options.background.map { b in trainAudio.indices.filter { trainLabels[$0] == labels.firstIndex(of: b) }.map { trainAudio[$0] } } ?? []
        let augmenter = Augmenter(kinds: options.augment, noise: noise, clip: clip, rate: rate)
        let contextSamples = Int((options.contextSeconds * 100).rounded()) * recipe.hop
        let backgroundIndex = labels.firstIndex(of: background) ?? labels.count - 1

        let streamCheck = try options.validationStream.map { (v) throws(TrainingError) in try StreamCheck(v, background: background) }
        for epoch in 1...epochs {
            let epochStart = Date()
            var order = SplitMix64(seed: options.seed, 1, epoch)
            let shuffled = Array(trainAudio.indices).shuffled(using: &order)
            var totalLoss = 0.0, correct = 0
            for start in stride(from: 0, to: shuffled.count, by: options.batchSize) {
                let members = Array(shuffled[start..<min(start + options.batchSize, shuffled.count)])
                // Each clip after another one (augmented too) and a gap, as a stream brings them:
                // the clip before is trained on its label at its end and the background in the
                // gap after it, so the model learns to leave a label as well as to reach it.
                var extra: [Objective.Targets] = []
                let audio = members.map { m in
                    let clip = augmenter.apply(trainAudio[m], seed: options.seed, epoch: epoch, clip: m)
                    guard contextSamples > 0 else { extra.append([]); return clip }
                    var random = SplitMix64(seed: options.seed &+ 0xC0DE, epoch, m)
                    let other = Int.random(in: 0..<trainAudio.count, using: &random)
                    let before = augmenter.apply(trainAudio[other], seed: options.seed &+ 1, epoch: epoch, clip: other)
                    let gap = Int.random(in: 0...(contextSamples / 3), using: &random)
                    let lead = Array(before.suffix(contextSamples - gap)) + [Float](repeating: 0, count: gap)
                    extra.append(Self.contextTargets(contextFrames: contextSamples / recipe.hop, gapFrames: gap / recipe.hop,
                                                     before: trainLabels[other], clipFrames: frames,
                                                     clipLabel: trainLabels[m], background: backgroundIndex, decisionFrames: decisionFrames))
                    return [Float](repeating: 0, count: contextSamples - lead.count) + lead + clip
                }
                var x = try features(audio, model: featureModel)
                if options.augment.contains(.mask) {
                    for (b, m) in members.enumerated() { Self.mask(&x, clip: b, lastFrames: frames, seed: options.seed, epoch: epoch, index: m) }
                }
                let batchLabels = members.map { trainLabels[$0] }
                let weighted = weightedObjective(objective, options: options, background: backgroundIndex, step: adam.step, steps: epochs * stepsPerEpoch)
                let normalizer = weighted.weight(labels: batchLabels, extra: extra)
                let step = gradients(network, parameters, x, batchLabels, extra, weighted, normalizer: normalizer)
                totalLoss += step.loss
                correct += zip(step.predictions, batchLabels).filter { $0 == $1 }.count
                adam.update(&parameters, step.grads, learningRate: schedule.rate(atStep: adam.step))
            }
            let check = validate(network, parameters, validationFrames, validationLabels, objective)
            let stream = try streamCheck.map { (c) throws(TrainingError) in
                let (m, t) = try export(name: name, recipe: recipe, mean: mean, variance: variance, network: network, parameters: parameters,
                                        labels: labels, background: background, record: .init(clipSeconds: 1, decisionSeconds: 0.3))
                return try c.score(m, t)
            }
            let report = stopping.close(epoch: epoch, epochs: epochs, loss: totalLoss / Double(max(1, (shuffled.count + options.batchSize - 1) / options.batchSize)),
                                        trainingAccuracy: Double(correct) / Double(shuffled.count), validation: (check.accuracy, check.loss),
                                        stream: stream, parameters: parameters, started: epochStart)
            progress(report)
            if stopping.shouldStop { break }
        }
        let best = stopping.kept(or: parameters)
        let record = stopping.record(clipSeconds: Double(clip.samples) / Double(rate), decisionSeconds: Double(decisionFrames) / 100, options: options,
                                     architecture: options.architecture ?? defaultArchitecture, features: "log-mel:\(recipe.melCount)", started: started)
        var (manifest, tensors) = try export(name: name, recipe: recipe, mean: mean, variance: variance, network: network,
                                             parameters: best.parameters, labels: labels, background: background, record: record)
        if let d = options.description { manifest.description = d }
        manifest.author = options.author
        manifest.license = options.license
        return TrainedClassifier(manifest: manifest, tensors: tensors, reports: stopping.reports, validationAccuracy: best.accuracy,
                                 network: network, parameters: best.parameters, featureModel: featureModel)
    }

    /// The context's frame targets (frames counted from the sequence's start; the clip follows
    /// the context): the clip before at its last decision frames, then, from 0.15 s after its end
    /// until 0.1 s before this clip's audio begins, the background. A background clip before is
    /// the background at every frame.
    static func contextTargets(contextFrames: Int, gapFrames: Int, before: Int, clipFrames: Int, clipLabel: Int,
                               background: Int, decisionFrames: Int) -> Objective.Targets {
        let beforeEnd = contextFrames - gapFrames
        var targets: Objective.Targets = []
        let firstOfBefore = before == background ? max(0, beforeEnd - 2 * decisionFrames) : max(0, beforeEnd - decisionFrames)
        if beforeEnd > firstOfBefore { for t in firstOfBefore..<beforeEnd { targets.append((t, before)) } }
        // (A clip's audio starts where the clip starts.)
        let quietFrom = beforeEnd + 15, quietTo = contextFrames - 10
        if quietTo > quietFrom { for t in quietFrom..<quietTo { targets.append((t, background)) } }
        if clipLabel == background {
            // A background clip: all of it is the background (its last frames are already targets).
            let from = max(contextFrames, quietTo), to = contextFrames + clipFrames - decisionFrames
            if to > from { for t in from..<to { targets.append((t, background)) } }
        }
        return targets
    }

    /// SpecAugment's masks on one clip of a batch of (normalized) features: a band of up to 6
    /// channels and a span of up to 10 of its last `lastFrames` frames set to 0, the mean.
    /// ref: Park et al., "SpecAugment: A Simple Data Augmentation Method for Automatic Speech Recognition" (2019)
    static func mask(_ x: inout Frames, clip b: Int, lastFrames: Int, seed: UInt64, epoch: Int, index: Int) {
        var random = SplitMix64(seed: seed &+ 0x3A5C, epoch, index)
        let C = x.channels, T = x.time
        let width = Int.random(in: 0...min(6, C / 4), using: &random)
        let band = Int.random(in: 0...(C - width), using: &random)
        let span = Int.random(in: 0...min(10, lastFrames / 4), using: &random)
        let firstFrame = max(0, T - lastFrames)
        let from = Int.random(in: firstFrame...max(firstFrame, T - span), using: &random)
        for t in 0..<T {
            let row = (b * T + t) * C
            if t >= from && t < from + span {
                for c in 0..<C { x.values[row + c] = 0 }
            } else {
                for c in band..<(band + width) { x.values[row + c] = 0 }
            }
        }
    }

    /// The probability of its label above which a target leaves the loss under `negativeWeight`
    /// (openWakeWord's high-loss filter: negatives scored 0.001 or less, positives 0.999 or more).
    static let confidentProbability: Float = 0.999

    /// The factor on the background's weight at optimizer step `step` (from 0) of `steps` under
    /// `TrainingOptions.negativeWeight` `peak`: 1 at the first step, rising linearly to `peak` at
    /// 80% of the steps, then `peak` (openWakeWord ramps its weight over its first and longest
    /// training sequence, then holds it while the learning rate falls).
    static func negativeFactor(peak: Double, step: Int, steps: Int) -> Float {
        let rampSteps = max(1.0, 0.8 * Double(steps))
        return Float(1 + (peak - 1) * min(1, Double(step) / rampSteps))
    }

    /// The objective for the step `step` of `steps`: `objective` itself, or with the background
    /// weighted as `options.negativeWeight` asks.
    static func weightedObjective(_ objective: Objective, options: TrainingOptions, background: Int, step: Int, steps: Int) -> Objective {
        guard let peak = options.negativeWeight else { return objective }
        return objective.weighingBackground(background, by: negativeFactor(peak: peak, step: step, steps: steps))
    }

    /// The layers of a classifier on log-mel features.
    public static let defaultArchitecture = "conv:64x3,gru:2x64"

    /// Epochs for about 3000 optimizer steps, 30 to 400.
    public static func automaticEpochs(stepsPerEpoch: Int) -> Int {
        min(400, max(30, (3000 + stepsPerEpoch - 1) / max(1, stepsPerEpoch)))
    }

    /// The checks both trainers make before any work: the data sets agree, the background is one
    /// of their labels, each option lies in its range.
    static func check(_ options: TrainingOptions, training: Dataset, validation: Dataset) throws(TrainingError) {
        guard training.labels == validation.labels else {
            throw .data(path: validation.source, reason: "labels \(validation.labels) differ from the training data's \(training.labels)")
        }
        if let background = options.background, !training.labels.contains(background) {
            throw .option(name: "background", value: background, expected: "one of the labels \(training.labels)")
        }
        if let epochs = options.epochs, !(1...100_000).contains(epochs) { throw .option(name: "epochs", value: "\(epochs)", expected: "1...100000") }
        if let weight = options.negativeWeight, !(1...100_000).contains(weight) {
            throw .option(name: "negative-weight", value: "\(weight)", expected: "1...100000")
        }
        if let patience = options.patience, !(1...100_000).contains(patience) { throw .option(name: "patience", value: "\(patience)", expected: "1...100000") }
        guard (2...4096).contains(options.batchSize) else { throw .option(name: "batch-size", value: "\(options.batchSize)", expected: "2...4096") }
        for (name, value, range) in [("decision-seconds", options.decisionSeconds, 0.01...60.0), ("context-seconds", options.contextSeconds, 0...60.0),
                                     ("clip-seconds", options.clipSeconds ?? 1, 0.1...600.0),
                                     ("learning-rate", Double(options.learningRate), TrainingOptions.learningRateRange)] where !range.contains(value) {
            throw .option(name: name, value: "\(value)", expected: "\(range.lowerBound)...\(range.upperBound)")
        }
        guard !training.files.isEmpty, !validation.files.isEmpty else {
            throw .data(path: training.files.isEmpty ? training.source : validation.source, reason: "no files")
        }
    }

    /// No label for "nothing here": adds one, of noise and near-silence, as many clips as the
    /// median label has (and as many in proportion to validation), so that a stream between
    /// events has somewhere to go. Returns its name.
    static func addBackground(_ labels: inout [String], _ trainAudio: inout [[Float]], _ trainLabels: inout [Int],
                              _ validationAudio: inout [[Float]], _ validationLabels: inout [Int], seed: UInt64) -> String {
        let perLabel = labels.indices.map { l in trainLabels.filter { $0 == l }.count }.sorted()[labels.count / 2]
        let length = trainAudio.map(\.count).sorted()[trainAudio.count / 2]
        labels.append(syntheticBackground)
        trainAudio += (0..<perLabel).map { backgroundClip(length: length, seed: seed, index: $0) }
        trainLabels += Array(repeating: labels.count - 1, count: perLabel)
        let held = max(1, perLabel * validationAudio.count / max(1, trainAudio.count - perLabel))
        validationAudio += (0..<held).map { backgroundClip(length: length, seed: seed, index: -1 - $0) }
        validationLabels += Array(repeating: labels.count - 1, count: held)
        return syntheticBackground
    }

    /// The label the trainer adds when the data has no background label of its own.
    public static let syntheticBackground = "_background_"

    /// Below this many validation files a validation accuracy is too coarse to trust: each file
    /// moves it by 2% or more, and the 95% interval of an accuracy near 90% is ±8% at 50 files.
    public static let fewestReliableValidationFiles = 50

    /// Noise or near-silence: white or low-passed (rumble-like) noise, 70 to 20 dB below full scale.
    static func backgroundClip(length: Int, seed: UInt64, index: Int) -> [Float] {
        var random = SplitMix64(seed: seed &+ 0xBAC6, index, 0)
        let level = Float(pow(10, Double.random(in: -70 ... -20, using: &random) / 20))
        let smooth = Bool.random(using: &random) ? Float.random(in: 0.9...0.995, using: &random) : 0
        var out = [Float](repeating: 0, count: length), previous: Float = 0
        for i in out.indices {
            previous = smooth * previous + (1 - smooth) * random.normal()
            out[i] = previous
        }
        let rms = (out.reduce(0) { $0 + $1 * $1 } / Float(max(1, length))).squareRoot()
        return out.map { $0 * level / max(rms, 1e-12) }
    }

    static func sampleRate(of path: String) throws(TrainingError) -> Int {
        do { return try AudioFile(path: path).sampleRate } catch { throw .audio(path: path, reason: TrainingError.reason(error, of: path)) }
    }

    /// Features of clips (each a whole number of hops) as one batch [clips][frames][mels], on every
    /// core; each clip's after `start` (rows a stream's network sees before its first: a head's
    /// window's first values), when given.
    static func features(_ clips: [[Float]], model: Model, start: [Float] = []) throws(TrainingError) -> Frames {
        let results = parallelMap(clips.count) { i in Result { () throws(TrainingError) in start + (try FeatureRecipe.frames(of: clips[i], model: model)) } }
        let values = try results.map { (r) throws(TrainingError) in try r.get() }
        let time = values.first.map { $0.count / model.labels.count } ?? 0
        return Frames(batch: clips.count, time: time, channels: model.labels.count, values: values.flatMap { $0 })
    }

    /// Per channel mean and (biased) variance over every frame, in Double.
    static func statistics(_ x: Frames, channels C: Int) -> (mean: [Float], variance: [Float]) {
        var sum = [Double](repeating: 0, count: C), squares = [Double](repeating: 0, count: C)
        for j in 0..<x.rows {
            for c in 0..<C {
                let v = Double(x.values[j * C + c])
                sum[c] += v
                squares[c] += v * v
            }
        }
        let n = Double(max(x.rows, 1))
        return (sum.map { Float($0 / n) }, (0..<C).map { Float(max(squares[$0] / n - (sum[$0] / n) * (sum[$0] / n), 0)) })
    }

    /// "conv:64x3,gru:2x64" as layers, ending in a linear layer to the classes.
    static func architecture(_ text: String, inputs: Int, classes: Int) throws(TrainingError) -> Network {
        var layers: [TrainingLayer] = [], channels = inputs
        for part in text.split(separator: ",") {
            let pieces = part.split(separator: ":")
            let numbers = pieces.count == 2 ? pieces[1].split(separator: "x").compactMap { Int($0) } : []
            guard pieces.count == 2, numbers.count == 2, numbers.allSatisfy({ (1...4096).contains($0) }) else {
                throw .option(name: "architecture", value: text, expected: "parts like conv:CHANNELSxTAPS, mix:CHANNELSxTAPS and gru:COUNTxHIDDEN, comma-separated")
            }
            switch pieces[0] {
            case "conv":
                layers += [.conv(inputs: channels, outputs: numbers[0], taps: numbers[1]), .relu]
                channels = numbers[0]
            case "mix":
                // microWakeWord's block: a depthwise convolution over time, then a pointwise layer.
                layers += [.depthwise(channels: channels, taps: numbers[1]), .conv(inputs: channels, outputs: numbers[0], taps: 1), .relu]
                channels = numbers[0]
            case "gru":
                for _ in 0..<numbers[0] {
                    layers.append(.gru(inputs: channels, hidden: numbers[1]))
                    channels = numbers[1]
                }
            default:
                throw .option(name: "architecture", value: text, expected: "conv:CHANNELSxTAPS, mix:CHANNELSxTAPS or gru:COUNTxHIDDEN parts, not '\(pieces[0])'")
            }
        }
        layers.append(.conv(inputs: channels, outputs: classes, taps: 1))
        return Network(inputs: inputs, layers: layers)
    }

    /// Loss, gradients and predictions of a batch: its two halves on the two cores, their
    /// gradients added in a fixed order.
    static func gradients(_ network: Network, _ parameters: [[Float]], _ x: Frames, _ labels: [Int], _ extra: [Objective.Targets] = [],
                          _ objective: Objective, normalizer: Float) -> (loss: Double, grads: [[Float]], predictions: [Int]) {
        let halves = split(x, labels)
        let half = (x.batch + 1) / 2
        let parts = parallelMap(halves.count) { h in
            let (logits, caches) = network.forward(halves[h].x, parameters)
            let targets = Array(extra.dropFirst(h * half).prefix(halves[h].labels.count))
            let (loss, dLogits, predictions) = objective.evaluate(logits, labels: halves[h].labels, extra: targets, normalizer: normalizer)
            return (loss, network.backward(dLogits, caches: caches, parameters).grads, predictions)
        }
        var grads = parts[0].1
        for part in parts.dropFirst() {
            for k in grads.indices { for i in grads[k].indices { grads[k][i] += part.1[k][i] } }
        }
        return (parts.reduce(0) { $0 + $1.0 }, grads, parts.flatMap(\.2))
    }

    /// A batch in two halves (one, when it holds a single clip).
    static func split(_ x: Frames, _ labels: [Int]) -> [(x: Frames, labels: [Int])] {
        let half = (x.batch + 1) / 2, size = x.time * x.channels
        return stride(from: 0, to: x.batch, by: half).map { start in
            let end = min(start + half, x.batch)
            return (Frames(batch: end - start, time: x.time, channels: x.channels, values: Array(x.values[(start * size)..<(end * size)])),
                    Array(labels[start..<end]))
        }
    }

    /// Accuracy and mean loss on validation clips, 64 at a time.
    static func validate(_ network: Network, _ parameters: [[Float]], _ x: Frames, _ labels: [Int], _ objective: Objective) -> (accuracy: Double, loss: Double) {
        var correct = 0, loss = 0.0
        let size = x.time * x.channels
        for start in stride(from: 0, to: x.batch, by: 64) {
            let end = min(start + 64, x.batch)
            let chunk = Frames(batch: end - start, time: x.time, channels: x.channels, values: Array(x.values[(start * size)..<(end * size)]))
            let parts = split(chunk, Array(labels[start..<end]))
            let results = parallelMap(parts.count) { h in
                objective.evaluate(network.forward(parts[h].x, parameters).logits, labels: parts[h].labels,
                                   normalizer: Float(objective.decisionFrames))
            }
            for (part, r) in zip(parts, results) {
                loss += r.loss
                correct += zip(r.predictions, part.labels).filter { $0 == $1 }.count
            }
        }
        return (Double(correct) / Double(max(1, x.batch)), loss / Double(max(1, x.batch)))
    }
}

/// Fits audio to the clip length: cut at the end, or padded with silence after it. (Aligning
/// clips at their end instead lost the starts of long clips: FSDD's leave-one-speaker-out fell
/// from 75.0% to 68.8% on george.)
struct Clip: Sendable {
    let samples: Int
    let hop: Int

    func fitted(_ audio: [Float], offset: Int = 0) -> [Float] {
        var out = [Float](repeating: 0, count: samples)
        let start = offset  // where audio[0] lands: the clip's start, shifted
        for i in 0..<samples {
            let j = i - start
            if j >= 0 && j < audio.count { out[i] = audio[j] }
        }
        return out
    }
}

extension Clip {
    /// Where a clip's audio lands in its window.
    enum Placement: Sendable, Equatable {
        /// From the window's start, moved by the `shift` augmentation.
        case start
        /// The sound's end (`soundEnd`) at the window's end, or up to `jitter` samples before it:
        /// a phrase, trained at the steps just after it is said, as a stream decides.
        case end(jitter: Int)
        /// Audio longer than the window: a random window of it; shorter: its end at the window's end.
        case anywhere
    }

    /// The offset (where audio[0] lands) that places `audio` as `placement` says.
    func offset(of audio: [Float], _ placement: Placement, shift: Int, random: inout SplitMix64) -> Int {
        switch placement {
        case .start:
            return shift
        case let .end(jitter):
            return samples - Self.soundEnd(audio) - (jitter > 0 ? Int.random(in: 0...jitter, using: &random) : 0)
        case .anywhere:
            return audio.count > samples ? -Int.random(in: 0...(audio.count - samples), using: &random) : samples - audio.count
        }
    }

    /// Where the sound ends: after the last 10 ms piece whose peak is within 40 dB of the
    /// audio's own (trailing silence and faint noise left out), the audio's length if it is silent.
    static func soundEnd(_ audio: [Float]) -> Int {
        let peak = audio.reduce(Float(0)) { max($0, abs($1)) }
        guard peak > 0 else { return audio.count }
        let piece = 160, floor = peak * 0.01
        var end = audio.count
        while end > 0 {
            let start = max(0, end - piece)
            if audio[start..<end].contains(where: { abs($0) > floor }) { return end }
            end = start
        }
        return audio.count
    }
}

/// The training clips' augmentation, drawn from (seed, epoch, clip) alone.
struct Augmenter: Sendable {
    let kinds: Set<Augmentation>
    let noise: [[Float]]
    let clip: Clip
    let rate: Int

    func apply(_ audio: [Float], seed: UInt64, epoch: Int, clip index: Int, placement: Clip.Placement = .start) -> [Float] {
        var random = SplitMix64(seed: seed &+ 0x5EED, epoch, index)
        let shiftLimit = rate / 10
        let shift = kinds.contains(.shift) ? Int.random(in: -shiftLimit...shiftLimit, using: &random) : 0
        var source = audio
        if kinds.contains(.speed) {
            // Played 0.9 to 1.1 times as fast: read at rate * factor, written at rate.
            source = Self.speed(audio, factor: Double.random(in: 0.9...1.1, using: &random), rate: rate)
        }
        let offset = clip.offset(of: source, placement, shift: shift, random: &random)
        var out = clip.fitted(source, offset: offset)
        if placement != .start, offset > 0, !noise.isEmpty {
            // Before a placed clip, what a stream has before it: a stretch of a background clip
            // (looped), not digital silence, which a network would learn to tell the phrase by.
            let before = noise[Int.random(in: 0..<noise.count, using: &random)]
            if !before.isEmpty {
                let start = Int.random(in: 0..<before.count, using: &random)
                for i in 0..<min(offset, clip.samples) { out[i] = before[(start + i) % before.count] }
            }
        }
        if kinds.contains(.gain) {
            let gain = Float(pow(10, Double.random(in: -6...6, using: &random) / 20))
            for i in out.indices { out[i] *= gain }
        }
        if kinds.contains(.reverb), Double.random(in: 0..<1, using: &random) < 0.7 {
            out = Self.reverberate(out, rate: rate, seconds: Double.random(in: 0.1...0.6, using: &random),
                                   wet: Float.random(in: 0.1...0.5, using: &random))
        }
        if kinds.contains(.noise), Double.random(in: 0..<1, using: &random) < 0.8 {
            let power = out.reduce(Float(0)) { $0 + $1 * $1 } / Float(out.count)
            let snr = Float.random(in: 5...25, using: &random)
            var added = [Float](repeating: 0, count: out.count)
            if !noise.isEmpty, Bool.random(using: &random) {
                // A background clip from a random place, looped when shorter than the clip.
                let source = noise[Int.random(in: 0..<noise.count, using: &random)]
                let start = source.count > out.count ? Int.random(in: 0...(source.count - out.count), using: &random) : 0
                if !source.isEmpty { for i in added.indices { added[i] = source[(start + i) % source.count] } }
            } else {
                for i in added.indices { added[i] = random.normal() }
            }
            let noisePower = added.reduce(Float(0)) { $0 + $1 * $1 } / Float(added.count)
            if power > 0, noisePower > 0 {
                let scale = (power / noisePower / pow(10, snr / 10)).squareRoot()
                for i in out.indices { out[i] += added[i] * scale }
            }
        }
        return out
    }
}

/// The step size over training: a linear warm-up over the first 5% of the steps (at least 20),
/// then a cosine from the peak down to 5% of it at the last step.
/// ref: Loshchilov and Hutter, "SGDR: Stochastic Gradient Descent with Warm Restarts" (2017); Goyal et al., "Accurate, Large Minibatch SGD" (2017)
struct LearningRateSchedule: Sendable {
    let peak: Float
    let totalSteps: Int
    var warmupSteps: Int { min(max(20, totalSteps / 20), max(1, totalSteps)) }

    func rate(atStep step: Int) -> Float {
        if step < warmupSteps { return peak * Float(step + 1) / Float(warmupSteps) }
        let progress = Double(step - warmupSteps) / Double(max(1, totalSteps - warmupSteps))
        let floor = 0.05
        return peak * Float(floor + (1 - floor) * 0.5 * (1 + cos(Double.pi * min(1, progress))))
    }
}

extension Augmenter {
    /// `audio` played `factor` times as fast (read at rate * factor, written at rate, by
    /// libsoxr); as it was if the resampler cannot be made.
    static func speed(_ audio: [Float], factor: Double, rate: Int) -> [Float] {
        guard let r = try? Resampler(inputRate: Double(rate) * factor, outputRate: Double(rate)),
              let faster = try? r.process(audio) + r.finish() else { return audio }
        return faster
    }

    /// A Schroeder reverberator: four feedback combs in parallel (29.7, 37.1, 41.1, 43.7 ms, each
    /// decaying by 60 dB in `seconds`), then two all-passes (5 and 1.7 ms, gain 0.7); `wet` of
    /// it mixed with the dry signal.
    /// ref: M. R. Schroeder, "Natural sounding artificial reverberation", JAES 10 (1962)
    static func reverberate(_ x: [Float], rate: Int, seconds: Double, wet: Float) -> [Float] {
        let n = x.count
        var sum = [Float](repeating: 0, count: n)
        for ms in [29.7, 37.1, 41.1, 43.7] {
            let d = max(1, Int(ms / 1000 * Double(rate)))
            let g = Float(pow(10, -3 * (ms / 1000) / seconds))
            var y = [Float](repeating: 0, count: n)
            for i in 0..<n { y[i] = x[i] + (i >= d ? g * y[i - d] : 0) }
            for i in 0..<n { sum[i] += y[i] * 0.25 }
        }
        for ms in [5.0, 1.7] {
            let d = max(1, Int(ms / 1000 * Double(rate)))
            let g: Float = 0.7
            var y = [Float](repeating: 0, count: n)
            for i in 0..<n {
                let delayed = i >= d ? sum[i - d] : 0, fed = i >= d ? y[i - d] : 0
                y[i] = -g * sum[i] + delayed + g * fed
            }
            sum = y
        }
        // The room's level matched to the dry signal's, then mixed.
        let dry = x.reduce(Float(0)) { $0 + $1 * $1 }, room = sum.reduce(Float(0)) { $0 + $1 * $1 }
        let scale = room > 0 ? (dry / room).squareRoot() : 0
        return (0..<n).map { (1 - wet) * x[$0] + wet * sum[$0] * scale }
    }
}

/// Adam with the gradient clipped to a global norm of 5.
/// ref: Kingma and Ba, "Adam: A Method for Stochastic Optimization" (2015)
struct Adam {
    var m: [[Float]], v: [[Float]]
    var step = 0
    let beta1: Float = 0.9, beta2: Float = 0.999, epsilon: Float = 1e-8, clip: Float = 5

    init(shapes: [[Int]]) {
        m = shapes.map { [Float](repeating: 0, count: $0.reduce(1, *)) }
        v = m
    }

    mutating func update(_ parameters: inout [[Float]], _ grads: [[Float]], learningRate: Float) {
        let norm = grads.reduce(Float(0)) { $0 + $1.reduce(0) { $0 + $1 * $1 } }.squareRoot()
        guard norm.isFinite else { return }  // a batch whose gradient overflowed moves nothing (its loss shows it)
        step += 1
        let scale = norm > clip ? clip / norm : 1
        let c1 = 1 - pow(beta1, Float(step)), c2 = 1 - pow(beta2, Float(step))
        for k in parameters.indices {
            for i in parameters[k].indices {
                let g = grads[k][i] * scale
                m[k][i] = beta1 * m[k][i] + (1 - beta1) * g
                v[k][i] = beta2 * v[k][i] + (1 - beta2) * g * g
                parameters[k][i] -= learningRate * (m[k][i] / c1) / ((v[k][i] / c2).squareRoot() + epsilon)
            }
        }
    }
}
