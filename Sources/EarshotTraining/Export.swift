import EarshotModel

extension Trainer {
    /// The trained classifier as a runtime package: the feature layers, then each trained layer
    /// as the runtime layer it computes the same as (causal conv1d, relu, gru, linear), softmax.
    static func export(name: String, recipe: FeatureRecipe, mean: [Float], variance: [Float], network: Network,
                       parameters: [[Float]], labels: [String], background: String?,
                       record: ModelManifest.Training) throws(TrainingError) -> (ModelManifest, [String: Tensor]) {
        var (specs, tensors) = try recipe.layers(mean: mean, variance: variance)
        var p = 0, convs = 0, grus = 0
        for (index, layer) in network.layers.enumerated() {
            switch layer {
            case let .conv(i, o, k) where k == 1 && index == network.layers.count - 1:
                specs.append(LayerSpec(type: "linear", name: "classifier", inFeatures: i, outFeatures: o, weight: "classifier.weight",
                                        bias: "classifier.bias"))
                tensors["classifier.weight"] = Tensor(shape: [o, i], values: parameters[p])
                tensors["classifier.bias"] = Tensor(shape: [o], values: parameters[p + 1])
            case let .conv(i, o, k):
                convs += 1
                let n = "conv\(convs)"
                specs.append(causalConv(n, inputs: i, outputs: o, taps: k, groups: 1))
                // Trained as [out][tap][in]; stored as PyTorch's [out][in][tap].
                var w = [Float](repeating: 0, count: o * i * k)
                for oc in 0..<o { for tap in 0..<k { for c in 0..<i { w[(oc * i + c) * k + tap] = parameters[p][(oc * k + tap) * i + c] } } }
                tensors["\(n).weight"] = Tensor(shape: [o, i, k], values: w)
                tensors["\(n).bias"] = Tensor(shape: [o], values: parameters[p + 1])
            case .relu:
                specs.append(LayerSpec(type: "relu"))
            case let .depthwise(c, k):
                convs += 1
                let n = "conv\(convs)"
                specs.append(causalConv(n, inputs: c, outputs: c, taps: k, groups: c))
                // Trained as [channel][tap]: PyTorch's [out][in / groups = 1][tap] as it is.
                tensors["\(n).weight"] = Tensor(shape: [c, 1, k], values: parameters[p])
                tensors["\(n).bias"] = Tensor(shape: [c], values: parameters[p + 1])
            case .fakeQuant, .pair:
                preconditionFailure("microWakeWord's layers are written by MicroWakeWordTrainer's int8 graph")
            case let .gru(i, h):
                grus += 1
                let n = "gru\(grus)"
                var spec = LayerSpec(type: "gru", name: n)
                spec.inputSize = i
                spec.hiddenSize = h
                spec.gateOrder = "rzn"
                spec.weightIH = "\(n).weight_ih"
                spec.weightHH = "\(n).weight_hh"
                spec.biasIH = "\(n).bias_ih"
                spec.biasHH = "\(n).bias_hh"
                specs.append(spec)
                tensors["\(n).weight_ih"] = Tensor(shape: [3 * h, i], values: parameters[p])
                tensors["\(n).weight_hh"] = Tensor(shape: [3 * h, h], values: parameters[p + 1])
                tensors["\(n).bias_ih"] = Tensor(shape: [3 * h], values: parameters[p + 2])
                tensors["\(n).bias_hh"] = Tensor(shape: [3 * h], values: parameters[p + 3])
            }
            p += layer.parameterShapes.count
        }
        let manifest = ModelManifest(
            name: name, version: "1",
            description: "Streaming classifier of \(labels.joined(separator: ", ")), trained by earshot train.",
            source: "earshot train", audio: recipe.audio, frontEnd: recipe.frontEnd, network: specs,
            outputs: .init(activation: .softmax, reduceTime: .last, labels: labels),
            // A winner needs 0.7 of the probability for 100 ms to be an event (tools/train_models.sh
            // and evaluate --stream show the trade-off); label and listen can override both.
            decision: .init(threshold: 0.7, minSegmentMs: 100, minSilenceMs: 100, padMs: 0, backgroundLabel: background),
            training: record)
        // Checked as any package is when it loads.
        do { _ = try Model(manifest: manifest, tensors: tensors) } catch { throw .model(reason: "the trained model does not load: \(error)") }
        return (manifest, tensors)
    }

    /// The runtime's causal conv1d (stride and dilation 1) named `n`, its tensors n.weight and n.bias.
    private static func causalConv(_ n: String, inputs: Int, outputs: Int, taps: Int, groups: Int) -> LayerSpec {
        var spec = LayerSpec(type: "conv1d", name: n, weight: "\(n).weight", bias: "\(n).bias")
        spec.inChannels = inputs
        spec.outChannels = outputs
        spec.kernelSize = taps
        spec.stride = 1
        spec.padding = 0
        spec.dilation = 1
        spec.groups = groups
        spec.causal = true
        return spec
    }
}
