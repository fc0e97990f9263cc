import Earshot
import EarshotAudio
import EarshotImport
import EarshotModel
import Foundation

/// A frozen, pretrained speech embedding a small head is trained on (openWakeWord's, say): a
/// model whose output at each step is that step's embedding, and how to make one package of it
/// and a trained head.
public struct EmbeddingFrontEnd: Sendable {
    /// What it is called (`--embedding NAME`).
    public var name: String
    /// Audio in (16 kHz for openWakeWord), one embedding out per step.
    public var model: Model
    /// Embeddings the head sees: the latest `window` of them.
    public var window: Int
    /// The embeddings the package's window holds at a stream's start ([window][width]; zeros
    /// when empty): the head learns on sequences that start from them, as it runs.
    public var start: [Float]
    /// The package of the front end and `head`: a graph from [1, window, width] embeddings to one
    /// score per label. Throws when the package cannot be made.
    public var package: @Sendable (_ head: GraphSpec, _ tensors: [String: Tensor]) throws -> (ModelManifest, [String: Tensor])

    /// A front end over `model`'s outputs, whose package's window starts from `start` (zeros when empty).
    public init(name: String, model: Model, window: Int, start: [Float] = [],
                package: @escaping @Sendable (_ head: GraphSpec, _ tensors: [String: Tensor]) throws -> (ModelManifest, [String: Tensor])) {
        self.name = name
        self.model = model
        self.window = window
        self.start = start
        self.package = package
    }

    /// The rows a head's network sees before a stream's first embedding: the window's first values.
    var startRows: [Float] { start.isEmpty ? [Float](repeating: 0, count: window * width) : start }

    /// The size of one embedding.
    public var width: Int { model.labels.count }
}

/// Trains a head on a frozen embedding, as openWakeWord trains its heads: every clip is placed
/// at the end of a sequence of audio (its lead: silence, noise or a clip of the background
/// label, then a gap), the embeddings of a few augmented copies of each sequence are computed
/// once (after the embeddings the package's window starts from, as a stream's follow them), and
/// the head (a causal convolution over the latest embeddings, then linear layers) learns the
/// clip's label at the sequence's last steps, just after the clip ends, and the background
/// where the clip has not yet been heard (its first half) and in all of a background clip's
/// sequence: a stream's targets, so that it fires once a phrase is over and not on its first
/// word or on anything else.
extension Trainer {
    /// The default head: 32 units over the latest 16 embeddings, one more layer of 32 (openWakeWord's shape).
    public static let headArchitecture = "conv:32x16,conv:32x1"
    /// Steps after a clip's end whose targets are its label (80 ms each with openWakeWord).
    static let headDecisionSteps = 3
    /// Augmented copies of each training sequence whose embeddings are computed (epoch e trains
    /// on copy e mod this). On tools/make_wake_phrase.sh's full set, 8 against 4: 0 false alarms
    /// against 3 in 72 minutes of unheard real speech at 0.95, the same 159 of 160 phrases found.
    static let headCopies = 8
    /// A trained head's threshold (listen and label may override it). On tools/make_wake_phrase.sh's
    /// full set: 0.5 found 160 of 160 held-out takes with 1 false alarm in 1.85 hours of
    /// negatives; 0.9, 160 with none; 0.95, 158 with none.
    public static let headThreshold = 0.95
    /// Steps at a stream's start whose scores the package gates to 0 (and the loss leaves out).
    static let headGatedSteps = 5

    /// Trains a head on `embedding` for the labels of `training`; the package is the embedding's
    /// front end and the head, with one score per label other than the background
    /// (`options.background`; without one, a label of noise and near-silence is added).
    /// The embedding fixes the features, the rate and the step, so `features`, `sampleRate`,
    /// `decisionSeconds` and `contextSeconds` do not apply (three decision steps, leads of up to
    /// the head's reach), nor do the `shift` and `mask` augmentations.
    /// - Throws: `TrainingError` naming the option or file that stops it.
    public static func trainHead(name: String, training: Dataset, validation: Dataset, options: TrainingOptions, embedding: EmbeddingFrontEnd,
                                 progress: (EpochReport) -> Void = { _ in }) throws(TrainingError) -> TrainedClassifier {
        let started = Date()
        try check(options, training: training, validation: validation)
        if let background = options.background, training.labels == [background] {
            throw .data(path: training.source, reason: "no label besides the background '\(background)': a head needs a phrase or sound to learn")
        }
        var labels = training.labels
        let rate = embedding.model.sampleRate, S = embedding.model.chunkSamples
        var trainAudio = try loadAudio(training.files, rate: rate), validationAudio = try loadAudio(validation.files, rate: rate)
        var trainLabels = training.files.map { labels.firstIndex(of: $0.label)! }  // labels hold every file's label
        var validationLabels = validation.files.map { labels.firstIndex(of: $0.label)! }
        let background = options.background ?? addBackground(&labels, &trainAudio, &trainLabels, &validationAudio, &validationLabels, seed: options.seed)
        let backgroundIndex = labels.firstIndex(of: background)!  // given and checked, or just added

        let architectureText = options.architecture ?? headArchitecture
        let network = try architecture(architectureText, inputs: embedding.width, classes: labels.count)
        for (index, layer) in network.layers.enumerated() {
            switch layer {
            case let .conv(_, _, taps) where index == 0 && taps <= embedding.window: continue
            case let .conv(_, _, taps) where index > 0 && taps == 1: continue
            case .relu: continue
            default:
                throw .option(name: "architecture", value: architectureText,
                              expected: "a head: conv:UNITSxTAPS (TAPS 1...\(embedding.window), the embeddings it sees), then conv:UNITSx1 parts")
            }
        }

        // The sequences: a lead as long as the head's reach (its window of embeddings, each of
        // which sees about 0.8 s), the clip (the 95th percentile of the clips' lengths, or
        // --clip-seconds; longer clips keep their end), and the decision steps.
        let lengths = trainAudio.map(\.count).sorted()
        let clipSamples = Int((options.clipSeconds.map { $0 * Double(rate) } ?? Double(lengths[min(lengths.count - 1, lengths.count * 95 / 100)])).rounded())
        let D = headDecisionSteps
        let layout = HeadSequence(rate: rate, step: S, leadSteps: embedding.window + (Int(0.8 * Double(rate)) + S - 1) / S,
                                  clipSteps: max(1, (clipSamples + S - 1) / S), decisionSteps: D, gatedSteps: headGatedSteps)
        // Leads: every clip (the background's, and the others' when they fit whole); noise: the background's.
        let leads = trainAudio.indices.map { (trainAudio[$0], trainLabels[$0]) }
        let validationLeads = validationAudio.indices.map { (validationAudio[$0], validationLabels[$0]) }
        let noise = trainAudio.indices.filter { trainLabels[$0] == backgroundIndex }.map { trainAudio[$0] }
        let augmenter = Augmenter(kinds: options.augment.subtracting([.shift, .speed, .mask]), noise: noise,
                                  clip: Clip(samples: layout.samples, hop: S), rate: rate)

        // Every sequence's embeddings follow the window's first values, as a stream's do in the
        // package: the targets' steps come after those rows.
        let startRows = embedding.startRows, lead = embedding.window
        func embeddings(_ sequences: [[Float]]) throws(TrainingError) -> Frames { try features(sequences, model: embedding.model, start: startRows) }
        func shifted(_ t: Objective.Targets) -> Objective.Targets { t.map { ($0.frame + lead, $0.label) } }
        var copies: [Frames] = [], copyTargets: [[Objective.Targets]] = []
        for copy in 0..<headCopies {
            var targets: [Objective.Targets] = []
            let sequences = trainAudio.indices.map { i in
                var random = SplitMix64(seed: options.seed &+ 0x4EAD, copy, i)
                var clip = trainAudio[i]
                if options.augment.contains(.speed) { clip = Augmenter.speed(clip, factor: Double.random(in: 0.9...1.1, using: &random), rate: rate) }
                let (audio, t) = layout.sequence(clip: clip, label: trainLabels[i], background: backgroundIndex, leads: leads, random: &random)
                targets.append(shifted(t))
                return augmenter.apply(audio, seed: options.seed &+ 0x4EAD, epoch: copy, clip: i)
            }
            copies.append(try embeddings(sequences))
            copyTargets.append(targets)
        }
        var validationTargets: [Objective.Targets] = []
        let validationSequences = validationAudio.indices.map { i in
            var random = SplitMix64(seed: options.seed &+ 0x7E57, 0, i)
            let (audio, t) = layout.sequence(clip: validationAudio[i], label: validationLabels[i], background: backgroundIndex,
                                             leads: validationLeads, random: &random, centred: true)
            validationTargets.append(shifted(t))
            return audio
        }
        let validationX = try embeddings(validationSequences)

        var parameters = network.initialParameters(seed: options.seed)
        var adam = Adam(shapes: network.parameterShapes)
        let (epochs, stepsPerEpoch, schedule, plannedStopping) = plan(options, clips: trainAudio.count)
        var stopping = plannedStopping
        let objective = Objective(classWeights: balancedWeights(trainLabels, classes: labels.count), decisionFrames: D)
        let streamCheck = try options.validationStream.map { (v) throws(TrainingError) in try StreamCheck(v, background: background) }
        let keep = labels.indices.filter { $0 != backgroundIndex }
        func package(_ parameters: [[Float]]) throws(TrainingError) -> (ModelManifest, [String: Tensor]) {
            let (head, headTensors) = headGraph(network, parameters, window: embedding.window, width: embedding.width, keep: keep)
            var (manifest, tensors): (ModelManifest, [String: Tensor])
            do { (manifest, tensors) = try embedding.package(head, headTensors) } catch { throw .model(reason: "the head's package: \(error)") }
            manifest.outputs.labels = keep.map { labels[$0] }
            manifest.decision?.threshold = headThreshold
            manifest.decision?.backgroundLabel = background
            return (manifest, tensors)
        }
        for epoch in 1...epochs {
            let epochStart = Date()
            let x = copies[(epoch - 1) % headCopies], targets = copyTargets[(epoch - 1) % headCopies]
            var order = SplitMix64(seed: options.seed, 2, epoch)
            let shuffled = Array(trainAudio.indices).shuffled(using: &order)
            var totalLoss = 0.0, correct = 0
            for start in stride(from: 0, to: shuffled.count, by: options.batchSize) {
                let members = Array(shuffled[start..<min(start + options.batchSize, shuffled.count)])
                let batch = x.gather(members)
                let batchLabels = members.map { trainLabels[$0] }, extra = members.map { targets[$0] }
                let weighted = weightedObjective(objective, options: options, background: backgroundIndex, step: adam.step, steps: epochs * stepsPerEpoch)
                let step = gradients(network, parameters, batch, batchLabels, extra, weighted,
                                     normalizer: weighted.weight(labels: batchLabels, extra: extra))
                totalLoss += step.loss
                correct += zip(step.predictions, batchLabels).filter { $0 == $1 }.count
                adam.update(&parameters, step.grads, learningRate: schedule.rate(atStep: adam.step))
            }
            let check = validateHead(network, parameters, validationX, validationLabels, validationTargets, objective, background: backgroundIndex)
            let stream = try streamCheck.map { (c) throws(TrainingError) in let (m, t) = try package(parameters); return try c.score(m, t) }
            let report = stopping.close(epoch: epoch, epochs: epochs, loss: totalLoss / Double(max(1, stepsPerEpoch)),
                                        trainingAccuracy: Double(correct) / Double(shuffled.count), validation: (check.accuracy, check.loss),
                                        falseSteps: check.falseSteps, stream: stream, parameters: parameters, started: epochStart)
            progress(report)
            if stopping.shouldStop { break }
        }
        let best = stopping.kept(or: parameters)
        let record = stopping.record(clipSeconds: Double(layout.samples) / Double(rate), decisionSeconds: Double(D * S) / Double(rate), options: options,
                                     architecture: architectureText, features: "embedding:\(embedding.name)", started: started)
        var (manifest, tensors) = try package(best.parameters)
        let phrases = labels.filter { $0 != background }
        // A label such as hey-earshot is the phrase "hey earshot".
        let spoken = phrases.map { $0.replacingOccurrences(of: "-", with: " ").replacingOccurrences(of: "_", with: " ") }
        manifest.name = name
        manifest.version = "1"
        manifest.source = "earshot train --embedding \(embedding.name)"
        manifest.description = options.description
            ?? "Wake-phrase head (\(spoken.joined(separator: ", "))) on the \(embedding.name) embedding, trained by earshot train."
        if spoken.count == 1 { manifest.phrase = spoken[0] }
        manifest.author = options.author
        manifest.license = options.license
        manifest.training = record
        do { _ = try Model(manifest: manifest, tensors: tensors) } catch { throw .model(reason: "the trained model does not load: \(error)") }
        return TrainedClassifier(manifest: manifest, tensors: tensors, reports: stopping.reports, validationAccuracy: best.accuracy,
                                 network: network, parameters: best.parameters, featureModel: embedding.model, featureStart: startRows)
    }

    /// Clip accuracy at the decision steps, the mean loss over every target, and the fraction of
    /// background targets at which a label other than the background wins (a stream's false alarms).
    static func validateHead(_ network: Network, _ parameters: [[Float]], _ x: Frames, _ labels: [Int], _ targets: [Objective.Targets],
                             _ objective: Objective, background: Int) -> (accuracy: Double, loss: Double, falseSteps: Double) {
        let chunks = stride(from: 0, to: x.batch, by: 64).map { Array($0..<min($0 + 64, x.batch)) }
        let results = parallelMap(chunks.count) { c in
            let members = chunks[c]
            let logits = network.forward(x.gather(members), parameters).logits
            let extra = members.map { targets[$0] }, batchLabels = members.map { labels[$0] }
            let r = objective.evaluate(logits, labels: batchLabels, extra: extra, normalizer: 1)
            var falseSteps = 0, backgroundSteps = 0
            for (b, t) in extra.enumerated() {
                for (frame, label) in t where label == background {
                    backgroundSteps += 1
                    let row = (b * logits.time + frame) * logits.channels
                    let p = softmax(logits.values[row..<(row + logits.channels)])
                    if p[background] < 0.5 { falseSteps += 1 }
                }
            }
            return (r.loss, zip(r.predictions, batchLabels).filter { $0 == $1 }.count, falseSteps, backgroundSteps,
                    objective.weight(labels: batchLabels, extra: extra))
        }
        let weight = results.reduce(Float(0)) { $0 + $1.4 }
        let falseSteps = results.reduce(0) { $0 + $1.2 }, backgroundSteps = results.reduce(0) { $0 + $1.3 }
        return (Double(results.reduce(0) { $0 + $1.1 }) / Double(max(1, x.batch)), results.reduce(0) { $0 + $1.0 } / Double(max(weight, 1e-12)),
                Double(falseSteps) / Double(max(1, backgroundSteps)))
    }

    /// The trained head as a graph: the latest embeddings (as many as the first layer's taps) in
    /// one row, a Gemm per layer (relu between), softmax, and the scores of the labels `keep`.
    static func headGraph(_ network: Network, _ parameters: [[Float]], window: Int, width: Int, keep: [Int]) -> (GraphSpec, [String: Tensor]) {
        var g = GraphSpecBuilder()
        var x = "embeddings", p = 0, layer = 0
        for trained in network.layers {
            switch trained {
            case let .conv(i, o, k):
                layer += 1
                if layer == 1 {
                    if k < window {
                        g.slice(x, axis: 1, from: window - k, to: window, into: "recent")
                        x = "recent"
                    }
                    x = g.reshape(x, [1, k * i], into: "row")
                }
                // Trained as [out][tap][in], tap 0 the oldest: the row's order, so the weight is as it is.
                let weight = g.weight("layer\(layer).weight", shape: [o, k * i], values: parameters[p])
                let bias = g.weight("layer\(layer).bias", shape: [o], values: parameters[p + 1])
                g.node("Gemm", "layer\(layer)", [x, weight, bias], ["layer\(layer)"], ["transB": .int(1)])
                x = "layer\(layer)"
            case .relu:
                g.node("Relu", "\(x) relu", [x], ["\(x) relu"])
                x = "\(x) relu"
            case .gru, .depthwise, .fakeQuant, .pair:
                preconditionFailure("trainHead admits convolutions and relu only")
            }
            p += trained.parameterShapes.count
        }
        g.node("Softmax", "probabilities", [x], ["probabilities"], ["axis": .int(-1)])
        let kept = g.integers("labels kept", keep.map(Int64.init), shape: [keep.count])
        g.node("Gather", "scores", ["probabilities", kept], ["scores"], ["axis": .int(1)])
        return (g.spec(opset: 17, audioInput: "embeddings", audioShape: [1, window, width], scoreOutput: "scores", states: []), g.tensors)
    }
}

/// Where a clip sits in a head's training sequence, and the sequence's targets.
struct HeadSequence: Sendable {
    let rate: Int, step: Int, leadSteps: Int, clipSteps: Int, decisionSteps: Int, gatedSteps: Int
    var steps: Int { leadSteps + clipSteps + decisionSteps }
    var samples: Int { steps * step }

    /// The clip (its last `clipSteps` steps' worth when longer) ending within the first decision
    /// step (`centred`: at its middle), after a lead: silence (a quarter of the time, and when a
    /// lead of another label than the background does not fit whole) or a clip of `leads` and a
    /// gap of 0.1 to 0.6 s. Targets: the clip's label at the decision steps (the caller's), the background from
    /// the gated steps on until half of the clip has been heard (all of it for a background
    /// clip); after a lead of another label, that label at the decision steps after its end and
    /// the background only from a step after them.
    func sequence(clip: [Float], label: Int, background: Int, leads: [(audio: [Float], label: Int)], random: inout SplitMix64,
                  centred: Bool = false) -> (audio: [Float], targets: Objective.Targets) {
        var audio = [Float](repeating: 0, count: samples)
        let body = Array(clip.suffix(clipSteps * step))
        let end = samples - decisionSteps * step + (centred ? step / 2 : Int.random(in: 0..<step, using: &random))
        let start = end - body.count
        for (k, v) in body.enumerated() where start + k >= 0 { audio[start + k] = v }
        var quietFrom = gatedSteps
        var targets: Objective.Targets = []
        if !leads.isEmpty, Double.random(in: 0..<1, using: &random) < 0.75 {
            let lead = leads[Int.random(in: 0..<leads.count, using: &random)]
            let leadEnd = start - Int(Double.random(in: 0.1...0.6, using: &random) * Double(rate))
            if lead.label == background || lead.audio.count <= leadEnd {
                for (k, v) in lead.audio.suffix(max(0, leadEnd)).reversed().enumerated() where leadEnd - 1 - k >= 0 { audio[leadEnd - 1 - k] = v }
                if lead.label != background {
                    // The first step whose end is at or after the lead's end, and the decision steps from it.
                    let first = (leadEnd + step - 1) / step - 1
                    for t in max(first, gatedSteps)..<max(first + decisionSteps, gatedSteps) where t < steps - decisionSteps { targets.append((t, lead.label)) }
                    quietFrom = max(gatedSteps, first + decisionSteps + 1)
                }
            }
        }
        let quietUntil = label == background ? steps - decisionSteps : min(steps - decisionSteps, (start + body.count / 2) / step)
        if quietUntil > quietFrom { for t in quietFrom..<quietUntil { targets.append((t, background)) } }
        return (audio, targets)
    }
}

extension Frames {
    /// The given clips of a batch, in that order.
    func gather(_ members: [Int]) -> Frames {
        let size = time * channels
        var out = Frames(batch: members.count, time: time, channels: channels)
        for (b, m) in members.enumerated() { out.values.replaceSubrange((b * size)..<((b + 1) * size), with: values[(m * size)..<((m + 1) * size)]) }
        return out
    }
}

extension EmbeddingFrontEnd {
    /// openWakeWord's speech embedding (its melspectrogram.onnx and embedding_model.onnx,
    /// imported): 96 values every 80 ms of 16 kHz audio; a head sees the latest 16, starting
    /// from openWakeWord's start (the embeddings of `OpenWakeWordImporter.startNoise`).
    /// - Throws: `ImportError` naming the file that does not import.
    public static func openWakeWord(melspectrogram: String, embedding: String) throws -> EmbeddingFrontEnd {
        let frontEnd = try OpenWakeWordImporter.FrontEnd(melspectrogram: melspectrogram, embedding: embedding)
        let (manifest, tensors) = frontEnd.embeddingPackage()
        let model = try Model(manifest: manifest, tensors: tensors)
        return EmbeddingFrontEnd(name: "openwakeword", model: model, window: OpenWakeWordImporter.FrontEnd.window, start: frontEnd.start) { head, headTensors in
            frontEnd.package(head: head, tensors: headTensors, options: ImportOptions(),
                             source: "earshot train --embedding openwakeword")
        }
    }
}
