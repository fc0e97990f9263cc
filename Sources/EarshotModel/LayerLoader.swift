import Foundation

/// Builds layers from manifest entries, checking each tensor's presence and shape and that
/// each layer takes what the one before it gives. Records which tensors were used.
struct LayerLoader {
    let path: String
    let tensors: [String: Tensor]
    private(set) var used = Set<String>()

    init(path: String, tensors: [String: Tensor]) {
        self.path = path
        self.tensors = tensors
    }

    mutating func tensor(_ name: String?, layer: String, shape: [Int], required: Bool = true) throws(ModelError) -> [Float] {
        guard let name else {
            if required { throw .layer(path: path, layer: layer, reason: "no tensor name given") }
            return [Float](repeating: 0, count: shape.reduce(1, *))
        }
        guard let t = tensors[name] else { throw .missingTensor(path: path, layer: layer, tensor: name) }
        guard t.shape == shape else { throw .tensorShape(path: path, layer: layer, name: name, expected: shape, found: t.shape) }
        used.insert(name)
        return t.values
    }

    func need(_ value: Int?, _ field: String, layer: String) throws(ModelError) -> Int {
        guard let value, value > 0 else { throw .layer(path: path, layer: layer, reason: "\(field) missing or not > 0") }
        return value
    }

    func expect(_ declared: Int, _ field: String, equals channels: Int, layer: String) throws(ModelError) {
        guard declared == channels else {
            throw .layer(path: path, layer: layer, reason: "\(field) \(declared), but its input has \(channels) channels")
        }
    }

    mutating func make(_ spec: LayerSpec, index: Int, label: String, channels: Int, time: Int) throws(ModelError) -> Layer {
        switch spec.type {
        case "conv1d":
            let inC = try need(spec.inChannels, "inChannels", layer: label), outC = try need(spec.outChannels, "outChannels", layer: label)
            let k = try need(spec.kernelSize, "kernelSize", layer: label), groups = spec.groups ?? 1
            try expect(inC, "inChannels", equals: channels, layer: label)
            guard groups >= 1, inC % groups == 0, outC % groups == 0 else {
                throw .layer(path: path, layer: label, reason: "groups \(groups) must divide inChannels \(inC) and outChannels \(outC)")
            }
            let causal = spec.causal ?? false
            let conv = Conv1d(
                name: label, inChannels: inC, outChannels: outC, kernelSize: k, stride: spec.stride ?? 1,
                padding: causal ? 0 : spec.padding ?? 0, dilation: spec.dilation ?? 1, groups: groups, causal: causal,
                weight: try tensor(spec.weight, layer: label, shape: [outC, inC / groups, k]),
                bias: try tensor(spec.bias, layer: label, shape: [outC], required: false))
            guard (1...65536).contains(conv.stride), (1...65536).contains(conv.dilation), (0...65536).contains(conv.padding),
                  k <= 65536 else {
                throw .layer(path: path, layer: label, reason: "stride and dilation must be in 1...65536, padding in 0...65536, kernelSize <= 65536")
            }
            guard !causal || conv.stride == 1 else {
                throw .layer(path: path, layer: label, reason: "a causal conv1d takes stride 1 (its left context is carried step to step)")
            }
            guard conv.outputLength(time) >= 1 else {
                throw .layer(path: path, layer: label, reason: "stride/dilation/padding leave no output steps from \(time) input steps")
            }
            return .conv1d(conv)
        case "linear":
            let inF = try need(spec.inFeatures, "inFeatures", layer: label), outF = try need(spec.outFeatures, "outFeatures", layer: label)
            try expect(inF, "inFeatures", equals: channels, layer: label)
            return .linear(Linear(name: label, inFeatures: inF, outFeatures: outF,
                                  weight: try tensor(spec.weight, layer: label, shape: [outF, inF]),
                                  bias: try tensor(spec.bias, layer: label, shape: [outF], required: false)))
        case "lstm", "gru":
            let I = try need(spec.inputSize, "inputSize", layer: label), H = try need(spec.hiddenSize, "hiddenSize", layer: label)
            try expect(I, "inputSize", equals: channels, layer: label)
            guard (spec.numLayers ?? 1) == 1 else {
                throw .layer(path: path, layer: label, reason: "numLayers \(spec.numLayers ?? 1): give each layer its own entry")
            }
            let lstm = spec.type == "lstm"
            let expectedOrder = lstm ? "ifgo" : "rzn"
            guard (spec.gateOrder ?? expectedOrder) == expectedOrder else {
                throw .layer(path: path, layer: label, reason: "gateOrder '\(spec.gateOrder ?? "")': expected \(expectedOrder) (PyTorch)")
            }
            let gates = lstm ? 4 : 3
            let wi = try tensor(spec.weightIH, layer: label, shape: [gates * H, I])
            let wh = try tensor(spec.weightHH, layer: label, shape: [gates * H, H])
            let bi = try tensor(spec.biasIH, layer: label, shape: [gates * H], required: false)
            let bh = try tensor(spec.biasHH, layer: label, shape: [gates * H], required: false)
            let weights = RecurrentWeights(gates: gates, inputSize: I, hiddenSize: H, weightIH: wi, weightHH: wh)
            if lstm {
                return .lstm(LSTM(name: label, weights: weights, bias: zip(bi, bh).map(+)))
            }
            return .gru(GRU(name: label, weights: weights, biasIH: bi, biasHH: bh))
        case "layerNorm":
            let c = try need(spec.normalizedShape, "normalizedShape", layer: label)
            try expect(c, "normalizedShape", equals: channels, layer: label)
            return .layerNorm(LayerNorm(name: label, channels: c, eps: Float(spec.eps ?? 1e-5),
                                        weight: try tensor(spec.weight, layer: label, shape: [c], required: false)
                                            .withDefault(spec.weight == nil, 1),
                                        bias: try tensor(spec.bias, layer: label, shape: [c], required: false)))
        case "batchNorm":  // after a layer it cannot fold into: a layer of its own
            let (scale, shift) = try batchNorm(spec, channels: channels, label: label)
            return .affine(ChannelAffine(name: label, scale: scale.map { Float($0) }, shift: shift.map { Float($0) }))
        case "meanPool": return .pool(.mean)
        case "maxPool": return .pool(.max)
        default:
            guard let activation = Layer.Activation(rawValue: spec.type) else {
                throw .unknownLayer(path: path, index: index, type: spec.type)
            }
            return .activation(activation)
        }
    }

    /// A manifest's network as run-time layers, each with its input shape and its type as the
    /// manifest gives it ("conv1d+batchNorm" where a batch norm was folded into the layer before).
    mutating func network(_ specs: [LayerSpec], channels: Int, time: Int) throws(ModelError)
        -> [(layer: Layer, input: (channels: Int, time: Int), type: String)] {
        var network: [(layer: Layer, input: (channels: Int, time: Int), type: String)] = []
        var channels = channels, time = time
        for (index, spec) in specs.enumerated() {
            let label = spec.name ?? "#\(index) (\(spec.type))"
            if spec.type == "batchNorm", let previous = network.last, previous.layer.foldsBatchNorm {
                // Folded into the conv1d or linear layer before it: no layer of its own at run time.
                network[network.count - 1].layer = try fold(spec, into: previous.layer, label: label)
                network[network.count - 1].type += "+batchNorm"
                continue
            }
            let layer = try make(spec, index: index, label: label, channels: channels, time: time)
            network.append((layer, (channels, time), spec.type))
            channels = layer.outputChannels(input: channels)
            time = layer.outputTime(input: time)
        }
        return network
    }

    /// Eval-mode batch norm folded into the conv1d or linear layer before it:
    /// scale = weight / sqrt(runningVar + eps); W' = W * scale[o]; b' = (b - runningMean) * scale + bias.
    /// ref: torch.nn.BatchNorm1d (eval), the usual conv-bn fusion
    mutating func fold(_ spec: LayerSpec, into previous: Layer, label: String) throws(ModelError) -> Layer {
        let outputs: Int
        switch previous {
        case let .conv1d(c): outputs = c.outChannels
        case let .linear(l): outputs = l.outFeatures
        default: throw .layer(path: path, layer: label, reason: "batchNorm folds into a conv1d or linear layer, not \(previous.name)")
        }
        let (scale, shift) = try batchNorm(spec, channels: outputs, label: label)
        let n = outputs
        func folded(weight: [Float], bias: [Float]) -> ([Float], [Float]) {
            let per = weight.count / n
            let w = weight.enumerated().map { Float(Double($1) * scale[$0 / per]) }
            let b = (0..<n).map { Float(Double(bias[$0]) * scale[$0] + shift[$0]) }
            return (w, b)
        }
        switch previous {
        case let .conv1d(c):
            let (w, b) = folded(weight: c.weight, bias: c.bias)
            return .conv1d(Conv1d(name: c.name + "+" + label, inChannels: c.inChannels, outChannels: c.outChannels,
                                  kernelSize: c.kernelSize, stride: c.stride, padding: c.padding, dilation: c.dilation,
                                  groups: c.groups, causal: c.causal, weight: w, bias: b))
        case let .linear(l):
            let (w, b) = folded(weight: l.weight, bias: l.bias)
            return .linear(Linear(name: l.name + "+" + label, inFeatures: l.inFeatures, outFeatures: l.outFeatures, weight: w, bias: b))
        default:
            return previous
        }
    }
}

extension LayerLoader {
    /// Eval-mode batch norm as y = x * scale + shift per channel, in Double:
    /// scale = weight / sqrt(runningVar + eps), shift = bias - runningMean * scale.
    /// ref: torch.nn.BatchNorm1d (eval)
    mutating func batchNorm(_ spec: LayerSpec, channels: Int, label: String) throws(ModelError) -> (scale: [Double], shift: [Double]) {
        let n = try need(spec.numFeatures, "numFeatures", layer: label)
        guard n == channels else { throw .layer(path: path, layer: label, reason: "numFeatures \(n), but its input has \(channels) channels") }
        let gamma = try tensor(spec.weight, layer: label, shape: [n], required: false).withDefault(spec.weight == nil, 1)
        let beta = try tensor(spec.bias, layer: label, shape: [n], required: false)
        let mean = try tensor(spec.runningMean, layer: label, shape: [n])
        let variance = try tensor(spec.runningVar, layer: label, shape: [n])
        let eps = spec.eps ?? 1e-5
        guard variance.allSatisfy({ $0 >= 0 && $0.isFinite }) else {
            throw .layer(path: path, layer: label, reason: "runningVar holds negative or non-finite values")
        }
        let scale = (0..<n).map { Double(gamma[$0]) / (Double(variance[$0]) + eps).squareRoot() }
        return (scale, (0..<n).map { Double(beta[$0]) - Double(mean[$0]) * scale[$0] })
    }
}

extension Array where Element == Float {
    /// All `value` when `absent` (a tensor the manifest left out whose default is not zero).
    func withDefault(_ absent: Bool, _ value: Float) -> [Float] {
        absent ? [Float](repeating: value, count: count) : self
    }
}
