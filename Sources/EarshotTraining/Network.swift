import EarshotModel
import Foundation

/// The trainable part of a classifier: layers from the features to one logit per class, and
/// their parameters as a flat list of tensors (layer by layer, in `parameterShapes` order).
struct Network: Sendable, Equatable {
    let inputs: Int
    let layers: [TrainingLayer]

    var classes: Int { layers.reduce(inputs) { $1.outputChannels(input: $0) } }

    var parameterShapes: [[Int]] { layers.flatMap(\.parameterShapes) }

    func initialParameters(seed: UInt64) -> [[Float]] {
        var random = SplitMix64(seed: seed)
        return layers.flatMap { $0.initialParameters(&random) }
    }

    /// Where each layer's parameters start in the flat list.
    private var offsets: [Int] {
        var offsets: [Int] = [], n = 0
        for layer in layers {
            offsets.append(n)
            n += layer.parameterShapes.count
        }
        return offsets
    }

    /// Logits [batch][time][classes] and what the backward pass needs.
    func forward(_ x: Frames, _ parameters: [[Float]]) -> (logits: Frames, caches: [LayerCache]) {
        var h = x, caches: [LayerCache] = []
        for (layer, offset) in zip(layers, offsets) {
            let (y, cache) = layer.forward(h, parameters[offset..<(offset + layer.parameterShapes.count)])
            caches.append(cache)
            h = y
        }
        return (h, caches)
    }

    /// The parameters' gradients (same shapes as the parameters) and the input's.
    func backward(_ dLogits: Frames, caches: [LayerCache], _ parameters: [[Float]]) -> (grads: [[Float]], dx: Frames) {
        var grads = [[Float]](repeating: [], count: parameters.count)
        var d = dLogits
        for (index, (layer, offset)) in zip(layers, offsets).enumerated().reversed() {
            let count = layer.parameterShapes.count
            let (dx, g) = layer.backward(d, caches[index], parameters[offset..<(offset + count)])
            for (k, grad) in g.enumerated() { grads[offset + k] = grad }
            d = dx
        }
        return (grads, d)
    }
}

/// Softmax of one row's logits: the runtime's softmax.
func softmax(_ logits: ArraySlice<Float>) -> [Float] {
    var p = Array(logits)
    p.withUnsafeMutableBufferPointer { EarshotModel.softmax($0) }
    return p
}

/// The training objective: softmax cross-entropy at each clip's last `decisionFrames` frames
/// (its label), and at the frames `extra` names (the preceding context's targets: the clip
/// before it at its end, the background in the gap after), each frame weighted by its class's
/// weight, summed and divided by `normalizer`.
struct Objective: Sendable {
    let classWeights: [Float]
    let decisionFrames: Int
    /// Targets whose label already has at least this probability leave the loss (openWakeWord
    /// trains only on its batches' high-loss examples); nil: every target counts.
    var confident: Float? = nil

    /// The same objective with the background's weight `factor` times as large and confident
    /// targets left out: openWakeWord's weighting of the negatives (`Trainer.negativeFactor`).
    func weighingBackground(_ background: Int, by factor: Float) -> Objective {
        var weights = classWeights
        weights[background] *= factor
        return Objective(classWeights: weights, decisionFrames: decisionFrames, confident: Trainer.confidentProbability)
    }

    /// Per clip, frames of the context and their labels.
    typealias Targets = [(frame: Int, label: Int)]

    /// The sum of the weights of every frame the loss covers (what `normalizer` should be).
    func weight(labels: [Int], extra: [Targets]) -> Float {
        labels.reduce(Float(0)) { $0 + classWeights[$1] } * Float(decisionFrames)
            + extra.reduce(Float(0)) { total, t in t.reduce(total) { $0 + classWeights[$1.label] } }
    }

    /// Loss, the logits' gradient, and each clip's predicted class (the largest mean probability
    /// over its decision frames: how `evaluate` decides).
    func evaluate(_ logits: Frames, labels: [Int], extra: [Targets] = [], normalizer: Float) -> (loss: Double, dLogits: Frames, predictions: [Int]) {
        let C = logits.channels, T = logits.time, first = max(0, T - decisionFrames)
        var d = Frames(batch: logits.batch, time: T, channels: C)
        var loss = 0.0
        var predictions: [Int] = []
        func target(_ b: Int, _ t: Int, _ label: Int) -> [Float] {
            let w = classWeights[label] / normalizer
            let row = (b * T + t) * C
            let p = softmax(logits.values[row..<(row + C)])
            if let confident, p[label] >= confident { return p }
            loss -= Double(w) * Double(log(max(p[label], 1e-30)))
            for c in 0..<C { d.values[row + c] += w * (p[c] - (c == label ? 1 : 0)) }
            return p
        }
        for b in 0..<logits.batch {
            var mean = [Float](repeating: 0, count: C)
            for t in first..<T {
                let p = target(b, t, labels[b])
                for c in 0..<C { mean[c] += p[c] }
            }
            if b < extra.count {
                for (t, label) in extra[b] where t >= 0 && t < first { _ = target(b, t, label) }
            }
            predictions.append(mean.indices.max { mean[$0] < mean[$1] } ?? 0)
        }
        return (loss, d, predictions)
    }
}
