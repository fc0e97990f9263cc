import Foundation
import EarshotTestSupport
import Testing
@testable import EarshotTraining

/// Every backward pass against central finite differences of the forward pass.
///
/// Float32 forward passes, differences with step 1e-2 (in Double from there): truncation error
/// O(h^2) of the smooth layers and rounding of about 1e-6 / h. Tolerance: 1e-3 absolute plus 1e-2
/// of the gradient; measured errors are printed.
@Suite("Backward passes against finite differences")
struct GradientTests {
    static let step: Float = 1e-2

    /// Σ y ⊙ weights, in Double.
    static func weightedSum(_ y: Frames, _ weights: [Float]) -> Double {
        zip(y.values, weights).reduce(0) { $0 + Double($1.0) * Double($1.1) }
    }

    static func random(_ count: Int, _ random: inout SeededRandom, scale: Float = 1) -> [Float] {
        (0..<count).map { _ in Float.random(in: -scale...scale, using: &random) }
    }

    /// The central difference of `loss` at parameters[k][i], in Double.
    static func difference(_ parameters: inout [[Float]], _ k: Int, _ i: Int, step: Float, _ loss: ([[Float]]) -> Double) -> Double {
        let keep = parameters[k][i]
        parameters[k][i] = keep + step
        let plus = loss(parameters)
        parameters[k][i] = keep - step
        let minus = loss(parameters)
        parameters[k][i] = keep
        return (plus - minus) / (2 * Double(step))
    }

    /// Checks every parameter and input gradient of `layer` on a random batch.
    func check(_ layer: TrainingLayer, inputs: Int, batch: Int = 2, time: Int = 5, seed: UInt64) {
        var random = SeededRandom(seed: seed)
        let x = Frames(batch: batch, time: time, channels: inputs, values: Self.random(batch * time * inputs, &random))
        var parameters = layer.parameterShapes.map { Self.random($0.reduce(1, *), &random, scale: 0.6) }
        let (y, cache) = layer.forward(x, parameters[...])
        let weights = Self.random(y.values.count, &random)
        let (dx, grads) = layer.backward(Frames(batch: y.batch, time: y.time, channels: y.channels, values: weights), cache,
                                         parameters[...])
        var worst = 0.0
        func compare(_ analytic: Float, _ plus: Double, _ minus: Double, _ what: String) {
            let numeric = (plus - minus) / (2 * Double(Self.step))
            let error = abs(Double(analytic) - numeric)
            worst = max(worst, error / (1e-3 + 1e-2 * abs(numeric)))
            #expect(error <= 1e-3 + 1e-2 * abs(numeric), "\(layer) \(what): analytic \(analytic), numeric \(numeric)")
        }
        for k in parameters.indices {
            for i in parameters[k].indices {
                let keep = parameters[k][i]
                parameters[k][i] = keep + Self.step
                let plus = Self.weightedSum(layer.forward(x, parameters[...]).0, weights)
                parameters[k][i] = keep - Self.step
                let minus = Self.weightedSum(layer.forward(x, parameters[...]).0, weights)
                parameters[k][i] = keep
                compare(grads[k][i], plus, minus, "parameter \(k)[\(i)]")
            }
        }
        var nudged = x
        for i in x.values.indices {
            nudged.values[i] = x.values[i] + Self.step
            let plus = Self.weightedSum(layer.forward(nudged, parameters[...]).0, weights)
            nudged.values[i] = x.values[i] - Self.step
            let minus = Self.weightedSum(layer.forward(nudged, parameters[...]).0, weights)
            nudged.values[i] = x.values[i]
            compare(dx.values[i], plus, minus, "input [\(i)]")
        }
        print("\(layer): worst error / tolerance \(worst)")
    }

    @Test("Causal convolution, 3 taps")
    func conv() { check(.conv(inputs: 3, outputs: 4, taps: 3), inputs: 3, seed: 1) }

    @Test("Causal convolution, 1 tap (linear)")
    func linear() { check(.conv(inputs: 5, outputs: 3, taps: 1), inputs: 5, seed: 2) }

    @Test("Depthwise causal convolution, 4 taps over 5 frames")
    func depthwise() { check(.depthwise(channels: 3, taps: 4), inputs: 3, seed: 6) }

    @Test("ReLU")
    func relu() { check(.relu, inputs: 4, seed: 3) }

    @Test("One logit as the softmax's pair [0, z] (the background's logit the constant 0), either way round")
    func pair() {
        check(.pair(background: 0), inputs: 1, seed: 7)
        check(.pair(background: 1), inputs: 1, seed: 8)
    }

    @Test("GRU over 5 steps, batch of 2")
    func gru() { check(.gru(inputs: 3, hidden: 4), inputs: 3, seed: 4) }

    @Test("GRU with more hidden units than a vector holds (17)")
    func wideGRU() { check(.gru(inputs: 2, hidden: 17), inputs: 2, batch: 3, time: 4, seed: 5) }

    @Test("The objective's gradient against its loss, and a whole network's against its loss")
    func objectiveAndNetwork() {
        var random = SeededRandom(seed: 6)
        let network = Network(inputs: 3, layers: [.conv(inputs: 3, outputs: 5, taps: 2), .relu, .gru(inputs: 5, hidden: 4),
                                                  .conv(inputs: 4, outputs: 3, taps: 1)])
        var parameters = network.initialParameters(seed: 7)
        let x = Frames(batch: 3, time: 6, channels: 3, values: Self.random(54, &random))
        let labels = [0, 2, 1]
        let objective = Objective(classWeights: [1, 0.5, 2], decisionFrames: 3)
        // Context targets before the decision frames too (frame, label), as training in streams gives.
        let extra: [Objective.Targets] = [[(0, 1), (1, 1)], [], [(2, 0)]]
        let normalizer = objective.weight(labels: labels, extra: extra)
        #expect(normalizer == 3 * 3.5 + 0.5 + 0.5 + 1)
        func loss(_ p: [[Float]]) -> Double { objective.evaluate(network.forward(x, p).logits, labels: labels, extra: extra, normalizer: normalizer).loss }
        let (logits, caches) = network.forward(x, parameters)
        let (_, dLogits, _) = objective.evaluate(logits, labels: labels, extra: extra, normalizer: normalizer)
        let grads = network.backward(dLogits, caches: caches, parameters).grads
        #expect(grads.map(\.count) == parameters.map(\.count))
        // A smaller step here: a bias moves every row of its channel, and a step of 1e-2 could carry
        // one of them across the ReLU's kink.
        let step: Float = 1e-3
        var checked = 0
        for k in parameters.indices {
            for i in stride(from: 0, to: parameters[k].count, by: 3) {
                let numeric = Self.difference(&parameters, k, i, step: step, loss)
                #expect(abs(Double(grads[k][i]) - numeric) <= 1e-3 + 1e-2 * abs(numeric), "parameter \(k)[\(i)]")
                checked += 1
            }
        }
        #expect(checked > 40)
    }

    @Test("openWakeWord's weighting: the background's targets weigh the factor more, targets scored 0.999 for their label leave the loss, the factor ramps from 1 to its peak at 80% of the steps")
    func negativeWeighting() {
        // Two clips of one decision frame, classes [phrase, background]: clip 0 a phrase, clip 1
        // the background; a context target of the background on each at frame 0.
        let objective = Objective(classWeights: [1, 1], decisionFrames: 1)
        let weighted = objective.weighingBackground(1, by: 10)
        #expect(weighted.classWeights == [1, 10] && weighted.confident == Trainer.confidentProbability && objective.confident == nil)
        // Frame 0 of clip 0 unsure (background target), frame 1 of clip 0 unsure (phrase target);
        // clip 1: frame 0 sure of the background (p = 0.9999), frame 1 unsure (background target).
        let logits = Frames(batch: 2, time: 2, channels: 2, values: [0.3, -0.2, 0.5, 0.1, -5, 5, 0.4, 0.2])
        let labels = [0, 1], extra: [Objective.Targets] = [[(0, 1)], [(0, 1)]]
        let plain = objective.evaluate(logits, labels: labels, extra: extra, normalizer: 1)
        let heavy = weighted.evaluate(logits, labels: labels, extra: extra, normalizer: 1)
        let row = { (d: Frames, b: Int, t: Int) in Array(d.values[((b * 2 + t) * 2)..<((b * 2 + t) * 2 + 2)]) }
        // The phrase's target: as before. The background's unsure targets: ten times the gradient.
        #expect(row(heavy.dLogits, 0, 1) == row(plain.dLogits, 0, 1))
        for (b, t) in [(0, 0), (1, 1)] {
            #expect(zip(row(heavy.dLogits, b, t), row(plain.dLogits, b, t)).allSatisfy { abs($0 - 10 * $1) <= 1e-6 * max(1, abs($1)) },
                    "clip \(b) frame \(t)")
        }
        // The confident target: no gradient and no loss (it has some without the weighting).
        #expect(row(plain.dLogits, 1, 0).contains { $0 != 0 } && row(heavy.dLogits, 1, 0) == [0, 0])
        func loss(_ v: [Float]) -> Double { let p = softmax(v[...]); return -Double(log(p[1])) }
        let confidentLoss = loss([-5, 5])
        let unsure = [([Float](arrayLiteral: 0.3, -0.2), 1, Double(10)), ([0.5, 0.1], 0, 1), ([0.4, 0.2], 1, 10)].map { v, label, w in
            w * -Double(log(softmax(v[...])[label]))
        }
        #expect(abs(plain.loss - (unsure[0] / 10 + unsure[1] + unsure[2] / 10 + confidentLoss)) < 1e-5)
        #expect(abs(heavy.loss - unsure.reduce(0, +)) < 1e-5)
        // The ramp.
        #expect(Trainer.negativeFactor(peak: 1500, step: 0, steps: 100) == 1)
        #expect(Trainer.negativeFactor(peak: 1500, step: 40, steps: 100) == 750.5)
        #expect(Trainer.negativeFactor(peak: 1500, step: 80, steps: 100) == 1500)
        #expect(Trainer.negativeFactor(peak: 1500, step: 99, steps: 100) == 1500)
        // Without the option, the objective itself at every step.
        var options = TrainingOptions()
        #expect(Trainer.weightedObjective(objective, options: options, background: 1, step: 50, steps: 100).classWeights == [1, 1])
        options.negativeWeight = 101
        #expect(Trainer.weightedObjective(objective, options: options, background: 1, step: 40, steps: 100).classWeights == [1, 51])
    }

    @Test("Adam: the first step moves each parameter by the learning rate against its gradient; later steps follow the moments; an overflowed gradient moves nothing")
    func adam() {
        var adam = Adam(shapes: [[3]])
        var p: [[Float]] = [[1, 2, 3]]
        adam.update(&p, [[0.5, -2, 0]], learningRate: 0.1)
        // m̂ = g, v̂ = g²: a step of lr * g / (|g| + 1e-8).
        #expect(zip(p[0], [Float(0.9), 2.1, 3]).allSatisfy { abs($0 - $1) < 1e-6 }, "\(p)")
        adam.update(&p, [[1, 1, 1]], learningRate: 0.1)
        // By hand: m = 0.9 m + 0.1 g, v = 0.999 v + 0.001 g², then m / 0.19 and v / 0.001999.
        func expected(_ g1: Double, _ g2: Double) -> Double {
            let m = 0.9 * (0.1 * g1) + 0.1 * g2, v = 0.999 * (0.001 * g1 * g1) + 0.001 * g2 * g2
            return 0.1 * (m / 0.19) / ((v / 0.001999).squareRoot() + 1e-8)
        }
        let want = [0.9 - expected(0.5, 1), 2.1 - expected(-2, 1), 3 - expected(0, 1)]
        #expect(zip(p[0], want).allSatisfy { abs(Double($0) - $1) < 1e-5 }, "\(p) vs \(want)")
        let before = p
        adam.update(&p, [[.infinity, 1, 1]], learningRate: 0.1)
        #expect(p == before)
        // A gradient of norm 10 is clipped to 5: the same direction, so the first step is the same.
        var clipped = Adam(shapes: [[2]]), q: [[Float]] = [[0, 0]]
        clipped.update(&q, [[6, 8]], learningRate: 0.1)
        #expect(zip(q[0], [Float(-0.1), -0.1]).allSatisfy { abs($0 - $1) < 1e-6 })
        #expect(abs(clipped.m[0][0] - 0.1 * 3) < 1e-6 && abs(clipped.m[0][1] - 0.1 * 4) < 1e-6)
    }

    @Test("The learning rate warms up linearly, peaks, then falls along a cosine to 5% of the peak at the last step")
    func schedule() {
        let s = LearningRateSchedule(peak: 1, totalSteps: 1000)
        #expect(s.warmupSteps == 50)
        #expect(abs(s.rate(atStep: 0) - 0.02) < 1e-6 && abs(s.rate(atStep: 24) - 0.5) < 1e-6 && abs(s.rate(atStep: 49) - 1) < 1e-6)
        #expect(abs(s.rate(atStep: 50) - 1) < 1e-6)
        #expect(abs(s.rate(atStep: 525) - 0.525) < 1e-3)  // halfway down: (1 + 0.05) / 2
        #expect(abs(s.rate(atStep: 1000) - 0.05) < 1e-6)
        let rates = (50...1000).map { s.rate(atStep: $0) }
        #expect(zip(rates, rates.dropFirst()).allSatisfy { $0 >= $1 })
    }
}

@Suite("Augmentations")
struct AugmentationTests {
    static func tone(_ n: Int, rate: Int = 16000, frequency: Double = 440) -> [Float] {
        (0..<n).map { Float(0.5 * sin(2 * .pi * frequency * Double($0) / Double(rate))) }
    }

    /// The frequency of a clean tone from its zero crossings.
    static func frequency(_ x: [Float], rate: Int = 16000) -> Double {
        let crossings = zip(x, x.dropFirst()).filter { $0 < 0 && $1 >= 0 }.count
        return Double(crossings) / (Double(x.count) / Double(rate))
    }

    @Test("Speed: the clip plays 0.9 to 1.1 times as fast (length and pitch), drawn from (seed, epoch, clip)")
    func speed() {
        let clip = Clip(samples: 32000, hop: 160)
        let augmenter = Augmenter(kinds: [.speed], noise: [], clip: clip, rate: 16000)
        let source = Self.tone(16000)
        var seen: Set<Int> = []
        for epoch in 1...8 {
            let out = augmenter.apply(source, seed: 1, epoch: epoch, clip: 0)
            #expect(out == augmenter.apply(source, seed: 1, epoch: epoch, clip: 0))
            // The sound starts at the clip's start; its length says the factor.
            let length = (out.lastIndex { abs($0) > 1e-3 } ?? 0) + 1
            let factor = 16000 / Double(length)
            #expect((0.89...1.11).contains(factor), "\(factor)")
            let f = Self.frequency(Array(out.prefix(length).dropFirst(200).dropLast(200)))
            #expect(abs(f / 440 - factor) < 0.02, "pitch \(f) Hz at speed \(factor)")
            seen.insert(Int(factor * 100))
        }
        #expect(seen.count > 3)
    }

    @Test("Reverb: the same level, and a tail after the sound stops")
    func reverb() {
        var x = Self.tone(8000)
        x += [Float](repeating: 0, count: 8000)
        let y = Augmenter.reverberate(x, rate: 16000, seconds: 0.5, wet: 0.5)
        let energy = { (v: ArraySlice<Float>) in v.reduce(Float(0)) { $0 + $1 * $1 } }
        #expect(abs(energy(y[..<8000]) / energy(x[..<8000]) - 1) < 0.3)
        #expect(energy(y[8000..<9600]) > 0.01 * energy(y[..<8000]) / 5)  // 100 ms after: still ringing
        #expect(energy(y[15000...]) < energy(y[8000..<9000]))  // and dying away
    }

    @Test("SpecAugment: one band of channels and one span of the clip's frames at 0, the rest untouched")
    func mask() {
        var x = Frames(batch: 2, time: 50, channels: 40, values: [Float](repeating: 1, count: 4000))
        Trainer.mask(&x, clip: 1, lastFrames: 40, seed: 3, epoch: 2, index: 7)
        #expect(x.values[0..<2000].allSatisfy { $0 == 1 })  // the other clip
        let zeroRows = (0..<50).filter { t in (0..<40).allSatisfy { x.values[2000 + t * 40 + $0] == 0 } }
        #expect(zeroRows.allSatisfy { $0 >= 10 } && zeroRows.count <= 10)
        let zeroColumns = (0..<40).filter { c in (0..<50).allSatisfy { x.values[2000 + $0 * 40 + c] == 0 } }
        #expect(zeroColumns.count <= 6)
    }
}
