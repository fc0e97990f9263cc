import EarshotGraph

/// What a model takes, gives and costs: for people (`earshot inspect`) and for programs.
public struct ModelDescription: Sendable, Codable, Equatable {
    /// One layer or node: its shapes and costs.
    public struct LayerInfo: Sendable, Codable, Equatable {
        /// Its name.
        public var name: String
        /// Its type or op.
        public var type: String
        /// [channels, time] in and out, per step.
        public var inputShape: [Int]
        /// Its output shape for one stream.
        public var outputShape: [Int]
        /// Weights it holds.
        public var parameters: Int
        /// Multiply-adds per step.
        public var multiplyAdds: Int
        /// State it carries per stream (floats).
        public var stateFloats: Int
        /// How a graph's node runs: "packed product", "depthwise", "LSTM cell", "element-wise", "copy",
        /// "alias" (no work: a view of its input), "folded" (computed at load) or "reference"
        /// (the reference kernel, on the node's values). nil for a layer network.
        public var kernel: String?
    }

    /// The package's name.
    public var name: String
    /// The model's version.
    public var version: String?
    /// The package's description.
    public var summary: String?
    /// Its author.
    public var author: String?
    /// Its licence.
    public var license: String?
    /// Where it comes from.
    public var source: String?
    /// Audio rate (Hz).
    public var sampleRate: Int
    /// New samples per step.
    public var chunkSamples: Int
    /// Samples of context per step.
    public var contextSamples: Int
    /// The input one step takes: chunkSamples new samples at sampleRate.
    public var input: String
    /// For a graph: whether it runs compiled, and how many nodes on the reference kernels; or
    /// why it runs node by node on the reference kernels.
    public var execution: String?
    /// The front end, in words.
    public var frontEnd: String
    /// none, sigmoid or softmax.
    public var outputActivation: String
    /// The labels.
    public var labels: [String]
    /// Bytes of state per stream.
    public var stateBytesPerStream: Int
    /// Weights in all.
    public var parameterCount: Int
    /// Bytes of weights.safetensors.
    public var storageBytes: Int
    /// How many layers or nodes of each type.
    public var layerCounts: [String: Int]
    /// Multiply-adds per step, all layers.
    public var multiplyAddsPerStep: Int
    /// The weights' hash (what states are bound to).
    public var contentHash: String
    /// Per layer or node.
    public var layers: [LayerInfo]
    /// For a compiled graph: the multiply-adds its product kernels run per step (fewer than
    /// `multiplyAddsPerStep` where Convs run as Winograd's tiles or FFTs).
    public var productMultiplyAddsPerStep: Int? = nil
    /// What a stream's state tensors start from, where the package says ("NAME: words"), in
    /// the states' order.
    public var stateStarts: [String]? = nil
    /// The arithmetic of the products (`Model.precision`: "fp32" or "bf16").
    public var precision: String = "fp32"
    /// For a compiled graph in bf16: the multiply-adds of `productMultiplyAddsPerStep` that run
    /// in bf16 (the others, where a log magnifies the rounding, in fp32).
    public var bf16MultiplyAddsPerStep: Int? = nil
}

extension Model {
    /// What the model takes, gives and costs (`earshot inspect`).
    public var description: ModelDescription {
        if let graph {
            let block = manifest.audio.contextSamples + chunkSamples
            let infos = graph.nodeInfo(blockSamples: block).map {
                ModelDescription.LayerInfo(name: $0.name, type: $0.op, inputShape: $0.input, outputShape: $0.output, parameters: $0.parameters,
                                           multiplyAdds: $0.multiplyAdds, stateFloats: 0,
                                           kernel: graph.plan?.kernels[$0.name] ?? "reference")
            }
            let execution: String
            if let plan = graph.plan {
                let slow = graph.nodes.filter { plan.kernels[$0.name] == "reference" }.map(\.op.rawValue)
                execution = "compiled" + (slow.isEmpty ? "" : "; \(slow.count) nodes on the reference kernels (\(Set(slow).sorted().joined(separator: ", ")))")
                    + (plan.precision == .bf16 ? "; products in bf16: \(plan.bf16MultiplyAdds) of \(plan.productMultiplyAdds) multiply-adds a step"
                        + " (\(Precision.path.name) path), the rest in fp32" : "")
            } else {
                execution = "node by node on the reference kernels: \(graph.interpreted ?? "")"
            }
            let states = graph.spec.states.map { "\($0.input) \($0.shape) → \($0.output)" }.joined(separator: ", ")
            let starts = graph.spec.states.compactMap { s in s.starts.map { "\(s.input): \($0)" } }
            return ModelDescription(
                name: manifest.name, version: manifest.version, summary: manifest.description, author: manifest.author,
                license: manifest.license, source: manifest.source, sampleRate: sampleRate, chunkSamples: chunkSamples,
                contextSamples: manifest.audio.contextSamples,
                input: "\(chunkSamples) samples at \(sampleRate) Hz (\(Double(chunkSamples) * 1000 / Double(sampleRate)) ms) per step",
                execution: execution,
                frontEnd: "\(manifest.frontEnd.type.rawValue): '\(graph.spec.audioInput)' \(graph.spec.audioShape) per step (context and chunk); graph of \(graph.nodes.count) nodes, opset \(graph.spec.opset); state tensors \(states.isEmpty ? "none" : states)",
                outputActivation: manifest.outputs.activation.rawValue, labels: labels, stateBytesPerStream: makeState().byteCount,
                parameterCount: graph.parameterCount, storageBytes: weightsBytes,
                layerCounts: Dictionary(infos.map { ($0.type, 1) }, uniquingKeysWith: +),
                multiplyAddsPerStep: infos.reduce(0) { $0 + $1.multiplyAdds }, contentHash: contentHash, layers: infos,
                productMultiplyAddsPerStep: graph.plan?.productMultiplyAdds, stateStarts: starts.isEmpty ? nil : starts,
                precision: precision.rawValue, bf16MultiplyAddsPerStep: precision == .bf16 ? graph.plan?.bf16MultiplyAdds : nil)
        }
        let infos = layers.enumerated().map { i, layer -> ModelDescription.LayerInfo in
            let (c, t) = shapes[i]
            return .init(
                name: layer.name, type: layerTypes[i], inputShape: [c, t],
                outputShape: [layer.outputChannels(input: c), layer.outputTime(input: t)],
                parameters: layer.parameterCount, multiplyAdds: layer.multiplyAdds(time: t), stateFloats: layer.stateCount)
        }
        let fe = frontEnd
        let frames = shapes.first?.time ?? 0
        return ModelDescription(
            name: manifest.name, version: manifest.version, summary: manifest.description, author: manifest.author,
            license: manifest.license, source: manifest.source, sampleRate: sampleRate, chunkSamples: chunkSamples,
            contextSamples: manifest.audio.contextSamples,
            input: "\(chunkSamples) samples at \(sampleRate) Hz (\(Double(chunkSamples) * 1000 / Double(sampleRate)) ms) per step",
            execution: nil,
            frontEnd: "STFT \(fe.spectrum.rawValue), n_fft \(fe.nFFT), hop \(fe.hopLength), \(fe.window.rawValue)\(fe.periodic ? " periodic" : ""), pad \(padLeft)/\(padRight) \(fe.padMode.rawValue): [\(fe.binCount)][\(frames)] per step",
            outputActivation: manifest.outputs.activation.rawValue, labels: labels,
            stateBytesPerStream: makeState().byteCount,
            parameterCount: infos.reduce(0) { $0 + $1.parameters }, storageBytes: weightsBytes,
            layerCounts: Dictionary(infos.map { ($0.type, 1) }, uniquingKeysWith: +),
            multiplyAddsPerStep: infos.reduce(0) { $0 + $1.multiplyAdds }, contentHash: contentHash, layers: infos)
    }
}
