import EarshotFeatures
import EarshotGraph
import EarshotModel
import Foundation

/// Trains microWakeWord's architecture, smaller: a streaming int8 network over TFLite Micro's
/// audio front end (40 channels, 30 ms windows, 10 ms apart, the features microWakeWord's
/// models take), three feature frames a step (30 ms). Its layers, as microWakeWord's
/// MixedNet: a first convolution over the last 6 frames, stride 3 over time (one output a
/// step); `blocks` blocks of a depthwise convolution over the last `taps` steps and a
/// pointwise convolution with ReLU; a dense layer to one logit and the logistic. (microWakeWord
/// ships 4 blocks of 64 channels with taps 5 to 17; this one keeps its shape at a size a CPU
/// trains in minutes, and leaves out the residual paths its mixconv blocks may have, which
/// okay_nabu does not use either.)
///
/// Float training first, then quantization-aware fine-tuning: every activation rounded to its
/// int8 code with scales from the ranges observed on the validation clips (recomputed at each
/// quantized epoch), every filter to its per-channel int8 codes and every bias to int32 codes,
/// gradients straight through (`FakeQuant`). The package it writes is that int8 graph
/// (`MicroWakeWordTrainer+Package.swift`): the runtime computes what the fake-quantized
/// forward computes, and `MicroWakeWordExport` writes it as a .tflite unchanged.
public enum MicroWakeWordTrainer {
    /// The architecture's name in `TrainingOptions.architecture`.
    public static let architectureName = "microwakeword"
    /// Feature frames a step (the first convolution's stride over time).
    static let stride = 3
    /// Feature frames the first convolution sees (two steps).
    static let firstTaps = 6
    /// Channels of every layer after the features.
    static let channels = 32
    /// Steps each block's depthwise convolution sees (one block each).
    static let blockTaps = [5, 9, 13, 21]
    static var blocks: Int { blockTaps.count }
    /// Steps a stream's score depends on: the first convolution's two and each block's taps.
    static var receptiveSteps: Int { firstTaps / stride + blockTaps.reduce(0) { $0 + $1 - 1 } }
    /// The last steps of a training window the loss and the validation accuracy look at.
    static let decisionSteps = 3
    /// Steps of audio before a training window that only the front end sees, so that its noise
    /// estimate and gain control have settled as in a stream (microWakeWord computes the features
    /// of a 3 s clip and trains on its end).
    static let leadSteps = 34
    /// microWakeWord's input quantization: features 0 to 26, int8 (okay_nabu's, all its models').
    static let inputQuantization = FakeQuant.Affine(scale: Float(26.0 / 255.0), zero: -128)
    /// The share of the epochs trained in float before the quantization-aware ones.
    static let floatShare = 0.7

    /// The layers: input quantization, first convolution (2 steps of 3 frames), blocks, the
    /// logit; each activation followed by its fake quantization.
    static func network(background: Int) -> Network {
        let inputs = stride * MicroFrontend.channels, c = channels
        var layers: [TrainingLayer] = [.fakeQuant(channels: inputs), .conv(inputs: inputs, outputs: c, taps: firstTaps / stride), .relu, .fakeQuant(channels: c)]
        for taps in blockTaps {
            layers += [.depthwise(channels: c, taps: taps), .fakeQuant(channels: c), .conv(inputs: c, outputs: c, taps: 1), .relu, .fakeQuant(channels: c)]
        }
        layers += [.conv(inputs: c, outputs: 1, taps: 1), .fakeQuant(channels: 1), .pair(background: background)]
        return Network(inputs: inputs, layers: layers)
    }

    /// Where each layer's parameters start in the flat list.
    static func offsets(_ network: Network) -> [Int] {
        var offsets: [Int] = [], n = 0
        for layer in network.layers {
            offsets.append(n)
            n += layer.parameterShapes.count
        }
        return offsets
    }

    /// The parameters the forward pass uses: as trained, or (`quantized`) each filter rounded to
    /// its per-channel int8 codes and each bias to its int32 codes at input scale × filter scale,
    /// the input scale being the fake quantization before the layer.
    static func forwardParameters(_ network: Network, _ parameters: [[Float]], quantized: Bool) -> [[Float]] {
        guard quantized else { return parameters }
        var out = parameters, inputScale: Float = 1
        for (layer, p) in zip(network.layers, offsets(network)) {
            let outputs: Int
            switch layer {
            case let .fakeQuant(c):
                _ = c
                inputScale = parameters[p][0]
                continue
            case let .conv(_, o, _): outputs = o
            case let .depthwise(c, _): outputs = c
            default: continue
            }
            let scales = FakeQuant.filterScales(parameters[p], channels: outputs)
            let n = parameters[p].count / outputs
            out[p] = FakeQuant.filterCodes(parameters[p], scales: scales).enumerated().map { Float($1) * scales[$0 / n] }
            out[p + 1] = FakeQuant.biasCodes(parameters[p + 1], input: inputScale, filter: scales).enumerated().map {
                Float(Double($1) * Double(inputScale) * Double(scales[$0]))
            }
        }
        return out
    }

    /// Sets each activation's quantization from the range its values take on `x` (the layers
    /// before it already quantized): TFLite's converter's calibration.
    static func calibrate(_ network: Network, _ parameters: inout [[Float]], on x: Frames) {
        let offsets = offsets(network)
        // The filters' codes depend on the input scales: quantize layer by layer, in order.
        var h = x
        for (index, layer) in network.layers.enumerated() {
            let p = offsets[index]
            if case .fakeQuant = layer, index > 0 {
                let low = h.values.min() ?? 0, high = h.values.max() ?? 0
                let q = FakeQuant.activation(min: low, max: high)
                parameters[p] = [q.scale, Float(q.zero)]
            }
            let used = forwardParameters(network, parameters, quantized: true)
            h = layer.forward(h, used[p..<(p + layer.parameterShapes.count)]).0
        }
    }

    /// The int8 logit codes of the fake-quantized forward pass, step after step ([batch][steps]),
    /// and the logit's quantization.
    static func logitCodes(_ network: Network, _ parameters: [[Float]], _ x: Frames) -> (codes: [Int], quantization: FakeQuant.Affine) {
        let logits = network.forward(x, forwardParameters(network, parameters, quantized: true)).logits
        let q = parameters[offsets(network)[network.layers.count - 2]]
        let affine = FakeQuant.Affine(scale: q[0], zero: Int(q[1]))
        let positive = 1 - background(network)
        return ((0..<logits.rows).map { FakeQuant.code(logits.values[$0 * 2 + positive], affine) }, affine)
    }

    /// A logit code's score as the package computes it: TFLite's int8 logistic (scale 1/256,
    /// zero point -128; the sigmoid rounded to its code), then the same value as uint8.
    static func score(code: Int, _ q: FakeQuant.Affine) -> Float {
        let y = 1 / (1 + Foundation.exp(-(q.scale * Float(code - q.zero))))
        return Float(Swift.min(Int((y * 256).rounded(.toNearestOrAwayFromZero)), 255)) / 256
    }

    /// The scores, step by step, of the fake-quantized forward pass: [batch][steps].
    static func scores(_ network: Network, _ parameters: [[Float]], _ x: Frames) -> [Float] {
        let (codes, q) = logitCodes(network, parameters, x)
        return codes.map { score(code: $0, q) }
    }

    static func background(_ network: Network) -> Int {
        if case let .pair(b)? = network.layers.last { return b }
        return 0
    }

    /// The features of clips (each a whole number of steps, 480 samples) as the package's front
    /// end computes them from stream start, three frames a step, from the second step on (the
    /// front end's first step has no group of frames), less the first `lead` of them:
    /// [clips][steps - 1 - lead][120].
    static func features(_ clips: [[Float]], lead: Int = 0) throws(TrainingError) -> Frames {
        let width = stride * MicroFrontend.channels
        let results = parallelMap(clips.count) { i in Result { () throws(TrainingError) in Array(try frontEnd(clips[i]).dropFirst(lead * width)) } }
        let values = try results.map { (r) throws(TrainingError) in try r.get() }
        let time = values.first.map { $0.count / width } ?? 0
        return Frames(batch: clips.count, time: time, channels: width, values: values.flatMap { $0 })
    }

    /// The audio a step takes (the new samples, the window's context before them).
    static var stepSamples: Int { stride * MicroFrontend.stepSamples }
    static var contextSamples: Int { MicroFrontend.windowSamples - MicroFrontend.stepSamples }

    /// One clip's features, by the runtime's MicroFrontend op step by step.
    static func frontEnd(_ audio: [Float]) throws(TrainingError) -> [Float] {
        let c = MicroFrontend.channels, block = stepSamples + contextSamples
        var noise = GraphTensor(shape: [1, 2 * c], floats: [Float](repeating: 0, count: 2 * c))
        var pending = GraphTensor(shape: [1, (stride - 2) * c], floats: [Float](repeating: 0, count: (stride - 2) * c))
        var started = GraphTensor(shape: [1, 1], floats: [0])
        var out: [Float] = []
        for step in 0..<(audio.count / stepSamples) {
            var samples = [Float](repeating: 0, count: block)
            let first = step * stepSamples - contextSamples
            for i in 0..<block where first + i >= 0 && first + i < audio.count { samples[i] = audio[first + i] }
            let results: [GraphTensor]
            do {
                results = try GraphOps.run("MicroFrontend", node: "front end", inputs: [GraphTensor(shape: [1, block], floats: samples), noise, pending, started],
                                           attributes: [:], opset: 13, outputCount: 4)
            } catch { throw .model(reason: "front end: \(error)") }
            if step > 0 { out += results[0].floats }
            (noise, pending, started) = (results[1], results[2], results[3])
        }
        return out
    }

    /// Trains the network on clips labelled the phrase and the background (two labels; with one,
    /// the trainer adds its background of noise and near-silence).
    /// - Throws: `TrainingError` naming the option or file that stops it.
    public static func train(name: String, training: Dataset, validation: Dataset, options: TrainingOptions,
                             progress: (EpochReport) -> Void = { _ in }) throws(TrainingError) -> TrainedClassifier {
        let started = Date()
        try Trainer.check(options, training: training, validation: validation)
        let rate = MicroFrontend.sampleRate
        if let given = options.sampleRate, given != rate {
            throw .option(name: "sample-rate", value: "\(given)", expected: "\(rate) (TFLite Micro's front end)")
        }
        if let stream = options.validationStream {
            throw .option(name: "validation-stream", value: stream.audio, expected: "none with --architecture \(architectureName) (its epoch is kept by clip accuracy)")
        }
        if let weight = options.negativeWeight {
            throw .option(name: "negative-weight", value: "\(weight)", expected: "none with --architecture \(architectureName) (a head or a log-mel classifier only)")
        }
        var labels = training.labels
        var trainAudio = try loadAudio(training.files, rate: rate)
        var validationAudio = try loadAudio(validation.files, rate: rate)
        var trainLabels = training.files.map { labels.firstIndex(of: $0.label) ?? 0 }
        var validationLabels = validation.files.map { labels.firstIndex(of: $0.label) ?? 0 }
        let backgroundName = options.background ?? Trainer.addBackground(&labels, &trainAudio, &trainLabels, &validationAudio, &validationLabels, seed: options.seed)
        guard labels.count == 2, let background = labels.firstIndex(of: backgroundName) else {
            throw .option(name: "architecture", value: architectureName,
                          expected: "a phrase and a background label (microWakeWord's models have one score), not \(labels.count) labels: \(labels.joined(separator: ", "))")
        }

        // The window: whole steps, the receptive field and the decision steps (or --clip-seconds),
        // after the lead the front end alone sees. A phrase ends in the window's last `decisionSeconds`
        // (at its end for validation): trained on the steps just after it is said, as microWakeWord
        // trains on the last step of a window that ends after the phrase; other clips a random
        // window of theirs (their end for validation).
        let stepSeconds = Double(stepSamples) / Double(rate)
        let steps = max(options.clipSeconds.map { Int(($0 / stepSeconds).rounded(.up)) } ?? 0, receptiveSteps + decisionSteps)
        let clip = Clip(samples: (leadSteps + 1 + steps) * stepSamples, hop: stepSamples)
        let jitter = Int(options.decisionSeconds * Double(rate))
        func placement(_ label: Int, jitter: Int) -> Clip.Placement { label == background ? .anywhere : .end(jitter: jitter) }
        let noise = options.background.map { b in trainAudio.indices.filter { trainLabels[$0] == labels.firstIndex(of: b) }.map { trainAudio[$0] } } ?? []
        // Validation: placed (a phrase at the window's end) without augmentation, the same each epoch.
        let placed = Augmenter(kinds: [], noise: noise, clip: clip, rate: rate)
        let validationFrames = try features(validationAudio.indices.map { i in
            placed.apply(validationAudio[i], seed: options.seed &+ 0xFA11, epoch: 0, clip: i, placement: placement(validationLabels[i], jitter: 0))
        }, lead: leadSteps)

        let network = network(background: background)
        var parameters = network.initialParameters(seed: options.seed)
        parameters[0] = [inputQuantization.scale, Float(inputQuantization.zero)]
        var adam = Adam(shapes: network.parameterShapes)
        let (epochs, _, schedule, _) = Trainer.plan(options, clips: trainAudio.count)
        let quantizedFrom = min(epochs, Int(Double(epochs) * floatShare) + 1)
        // The kept epoch is a quantized one (the float epochs are not offered); no early stop.
        var stopping = EarlyStopping(patience: epochs + 1, from: epochs)
        let objective = Objective(classWeights: Trainer.balancedWeights(trainLabels, classes: 2), decisionFrames: decisionSteps)
        // The placement replaces the shift; SpecAugment's masks are not microWakeWord's.
        let augmenter = Augmenter(kinds: options.augment.subtracting([.mask, .shift]), noise: noise, clip: clip, rate: rate)
        for epoch in 1...epochs {
            let epochStart = Date()
            let quantized = epoch >= quantizedFrom
            if quantized { calibrate(network, &parameters, on: validationFrames) }
            var order = SplitMix64(seed: options.seed, 1, epoch)
            let shuffled = Array(trainAudio.indices).shuffled(using: &order)
            var totalLoss = 0.0, correct = 0
            for start in Swift.stride(from: 0, to: shuffled.count, by: options.batchSize) {
                let members = Array(shuffled[start..<min(start + options.batchSize, shuffled.count)])
                let x = try features(members.map { augmenter.apply(trainAudio[$0], seed: options.seed, epoch: epoch, clip: $0, placement: placement(trainLabels[$0], jitter: jitter)) }, lead: leadSteps)
                let batchLabels = members.map { trainLabels[$0] }
                let used = forwardParameters(network, parameters, quantized: quantized)
                let step = Trainer.gradients(network, used, x, batchLabels, [], objective, normalizer: objective.weight(labels: batchLabels, extra: []))
                totalLoss += step.loss
                correct += zip(step.predictions, batchLabels).filter { $0 == $1 }.count
                // Straight through: the rounded filters' gradient moves the float ones.
                adam.update(&parameters, step.grads, learningRate: schedule.rate(atStep: adam.step))
            }
            let check = Trainer.validate(network, forwardParameters(network, parameters, quantized: quantized), validationFrames, validationLabels, objective)
            let report = stopping.close(epoch: epoch, epochs: epochs, loss: totalLoss / Double(max(1, (shuffled.count + options.batchSize - 1) / options.batchSize)),
                                        trainingAccuracy: Double(correct) / Double(max(1, shuffled.count)),
                                        validation: (check.accuracy, check.loss), stream: nil, parameters: parameters, eligible: quantized, started: epochStart)
            progress(report)
        }
        let best = stopping.kept(or: parameters)
        var record = stopping.record(clipSeconds: Double(steps) * stepSeconds, decisionSeconds: options.decisionSeconds,
                                     options: options, architecture: architectureName, features: "microfrontend:40", started: started)
        record.validationAccuracy = best.accuracy
        var (manifest, tensors) = try package(name: name, network: network, parameters: best.parameters, phrase: labels[1 - background], record: record)
        if let d = options.description { manifest.description = d }
        manifest.author = options.author
        manifest.license = options.license
        let model: Model
        do { model = try Model(manifest: manifest, tensors: tensors) } catch { throw .model(reason: "\(name): \(error)") }
        return TrainedClassifier(manifest: manifest, tensors: tensors, reports: stopping.reports, validationAccuracy: best.accuracy,
                                 network: network, parameters: best.parameters, featureModel: model)
    }
}
