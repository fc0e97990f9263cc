import EarshotGraph

/// A package's graph (`GraphSpec`) made ready to run: constants as tensors, attributes in the
/// kernels' form, every node's inputs checked to exist before it runs (so the graph has no
/// cycle and no tensor nobody produces), and one dry step at load that proves every shape fits.
/// Immutable, shared by every stream; a stream's state is its state tensors, concatenated.
///
/// Steps run on the graph compiled for its fixed shapes (`GraphPlan`): batched, allocation-free
/// where every node has a compiled kernel. A graph the plan cannot take (one that computes
/// integers from the audio, say) runs on the reference kernels, node by node; `interpreted` says why.
struct GraphProgram: Sendable {
    let spec: GraphSpec
    let constants: [String: GraphTensor]
    let nodes: [GraphNode]
    /// Per node, the tensors a step on the reference kernels lets go after it (`GraphNode.releases`).
    let releases: [[String]]
    private(set) var plan: GraphPlan?
    /// Per state tensor, whether the compiled plan takes it in and gives it out as int8 codes
    /// (`GraphPlan.inputCoded`/`outputCoded` of the state's input and output): kept beside the
    /// plan, so that moving a stream's states in and out of the arena reads two flags, not the plan.
    private(set) var planTakesCodes: [Bool]
    private(set) var planGivesCodes: [Bool]
    /// The plan split for consecutive steps of one stream: the state inputs (every input after
    /// the audio) carried.
    private(set) var consecutive: GraphPlan.Consecutive?
    /// Why the graph runs on the reference kernels (nil when it runs compiled).
    private(set) var interpreted: String?
    /// Floats per state tensor, in `spec.states` order.
    let stateSizes: [Int]
    let path: String
    /// Scores a step gives (known from the dry step at load).
    private(set) var scoreCount: Int
    let parameterCount: Int

    /// Where each state tensor starts in a stream's state.
    let stateOffsets: [Int]
    let stateCount: Int
    /// A fresh stream's state tensors, concatenated (zeros unless a state names its first values).
    let initialState: [Float]
    /// Per state tensor, whether a stream keeps it as int8 codes (it only ever holds int8 values:
    /// `IntegerRanges`), not as floats; and where it starts among the stream's float carry or its
    /// codes.
    let stateCoded: [Bool]
    let storedOffsets: [Int]
    /// Floats and codes a stream keeps (together the `stateCount` values of its state tensors).
    let carryCount: Int
    let codeCount: Int

    init(spec: GraphSpec, tensors: [String: Tensor], path: String, blockSamples: Int, precision: Precision = .fp32,
         fp32Nodes: [String] = []) throws(ModelError) {
        self.spec = spec
        self.path = path
        func fail(_ reason: String) -> ModelError { .manifest(path: path, reason: "graph: \(reason)") }
        guard spec.nodes.count <= GraphSpec.maxNodes else {
            throw fail("\(spec.nodes.count) nodes, more than the limit of \(GraphSpec.maxNodes)")
        }
        guard spec.audioShape.allSatisfy({ $0 > 0 }), elementCount(spec.audioShape) == blockSamples else {
            throw fail("audioShape \(spec.audioShape) does not hold a block of \(blockSamples) samples (context + chunk)")
        }
        var constants: [String: GraphTensor] = [:]
        var parameters = 0
        for (name, t) in tensors {
            constants[name] = GraphTensor(shape: t.shape, floats: t.values)
            parameters += t.values.count
        }
        for (name, c) in spec.constants {
            guard constants[name] == nil else { throw fail("constant '\(name)' is both a weight tensor and an integer constant") }
            guard boundedCount(c.shape) == c.values.count, ["int64", "bool"].contains(c.dtype) else {
                throw fail("integer constant '\(name)': \(c.values.count) values for shape \(c.shape) (\(c.dtype))")
            }
            constants[name] = GraphTensor(shape: c.shape, integers: c.values, dtype: c.dtype == "bool" ? .bool : .int64)
        }
        var known = Set(constants.keys)
        func introduce(_ name: String, by who: String) throws(ModelError) {
            guard !name.isEmpty, known.insert(name).inserted else { throw fail("tensor '\(name)' is produced twice (\(who))") }
        }
        try introduce(spec.audioInput, by: "the audio input")
        var sizes: [Int] = []
        for s in spec.states {
            guard s.shape.allSatisfy({ $0 > 0 }), s.shape.count <= 8 else { throw fail("state '\(s.input)': shape \(s.shape)") }
            guard let size = elementCount(s.shape), size <= 1 << 24 else { throw fail("state '\(s.input)': shape \(s.shape) is too large") }
            sizes.append(size)
            try introduce(s.input, by: "a state input")
        }
        var nodes: [GraphNode] = []
        var used = Set<String>()
        // Each op's name is read once, here; one no kernel knows is refused where the graph would
        // first run, after the checks of its structure.
        var unknownOp: GraphError?
        for n in spec.nodes {
            for input in n.inputs where !input.isEmpty {
                guard known.contains(input) else {
                    throw fail("node '\(n.name)' (\(n.op)) reads '\(input)', which no earlier node, constant, state or the audio gives")
                }
                used.insert(input)
            }
            for output in n.outputs where !output.isEmpty { try introduce(output, by: "node '\(n.name)'") }
            let attributes = (n.attributes ?? [:]).mapValues(\.graphAttribute)
            do throws(GraphError) {
                nodes.append(GraphNode(op: try GraphOp(named: n.op, node: n.name), name: n.name, inputs: n.inputs, outputs: n.outputs,
                                       attributes: attributes))
            } catch {
                unknownOp = unknownOp ?? error
            }
        }
        guard known.contains(spec.scoreOutput) else { throw fail("the score output '\(spec.scoreOutput)' is not produced") }
        for s in spec.states where !known.contains(s.output) {
            throw fail("state '\(s.input)': its output '\(s.output)' is not produced")
        }
        var initial: [Float] = []
        for (s, size) in zip(spec.states, sizes) {
            guard let name = s.initial else {
                initial += [Float](repeating: 0, count: size)
                continue
            }
            guard let t = tensors[name], t.values.count == size else {
                throw fail("state '\(s.input)': its first values '\(name)' are not a weight tensor of \(size) values")
            }
            initial += t.values
            used.insert(name)
        }
        let unused = Set(tensors.keys).subtracting(used)
        guard unused.isEmpty else { throw .unusedTensors(path: path, names: unused.sorted()) }
        if let unknownOp { throw .layer(path: path, layer: unknownOp.node, reason: "\(unknownOp)") }
        let names = Set(spec.nodes.map(\.name))
        if let unknown = fp32Nodes.first(where: { !names.contains($0) }) {
            throw .manifest(path: path, reason: "fp32Nodes: the graph has no node '\(unknown)'")
        }
        self.initialState = initial
        self.constants = constants
        self.nodes = nodes
        self.releases = GraphNode.releases(nodes, keeping: Set([spec.scoreOutput] + spec.states.map(\.output)))
        self.stateSizes = sizes
        let offsets = sizes.indices.map { sizes[..<$0].reduce(0, +) }
        self.stateOffsets = offsets
        self.stateCount = sizes.reduce(0, +)
        let coded = IntegerRanges.int8States(nodes: nodes, constants: constants, states: spec.states.indices.map { i in
            (spec.states[i].input, spec.states[i].output, Array(initial[offsets[i]..<(offsets[i] + sizes[i])]))
        })
        var stored: [Int] = [], floats = 0, codes = 0
        for (size, c) in zip(sizes, coded) {
            stored.append(c ? codes : floats)
            if c { codes += size } else { floats += size }
        }
        self.stateCoded = coded
        self.storedOffsets = stored
        self.carryCount = floats
        self.codeCount = codes
        self.parameterCount = parameters
        self.scoreCount = 0
        self.plan = nil
        self.planTakesCodes = sizes.map { _ in false }
        self.planGivesCodes = sizes.map { _ in false }
        self.consecutive = nil
        self.interpreted = "not compiled yet"
        do {
            // The int8 states go in and out of the plan as the codes a stream keeps.
            let codes = Set(spec.states.indices.filter { coded[$0] }.flatMap { [spec.states[$0].input, spec.states[$0].output] })
                .subtracting([spec.audioInput, spec.scoreOutput])
            let inputs = [(spec.audioInput, spec.audioShape)] + spec.states.map { ($0.input, $0.shape) }
            let outputs = [spec.scoreOutput] + spec.states.map(\.output)
            var plan = try GraphPlan(nodes: nodes, constants: constants, inputs: inputs, outputs: outputs, opset: spec.opset, codes: codes)
            if precision != .fp32 {
                // The fp32 plan, checked against the reference kernels, proves the lowering; the
                // bf16 plan is the same lowering with other product kernels.
                plan = try GraphPlan(nodes: nodes, constants: constants, inputs: inputs, outputs: outputs, opset: spec.opset, codes: codes,
                                     precision: precision, fp32Nodes: Set(fp32Nodes), verify: false)
            }
            // Building the plan ran every node on the reference kernels (its shapes fit) and checked
            // it against them: the score count is its first output's.
            let counts = plan.outputShapes.map { $0.reduce(1, *) }
            if counts.count == sizes.count + 1, Array(counts.dropFirst()) == sizes {
                self.plan = plan
                self.scoreCount = counts[0]
                self.planTakesCodes = sizes.indices.map { plan.inputCoded[$0 + 1] }
                self.planGivesCodes = sizes.indices.map { plan.outputCoded[$0 + 1] }
                self.consecutive = plan.consecutive(carrying: Set(sizes.indices.map { $0 + 1 }))
                self.interpreted = nil
            } else {
                self.interpreted = "the compiled graph's states hold \(counts.dropFirst()) values; the model's states \(sizes)"
            }
        } catch {
            self.interpreted = "\(error)"
        }
        if plan == nil {
            // Not compiled: a dry step on silence, so that every node's shapes fit, the states keep
            // their shapes, and the score count is known before any audio is seen.
            var state = initial
            let scores = try state.withUnsafeMutableBufferPointer { s throws(ModelError) in
                try interpretedStep(audio: [Float](repeating: 0, count: blockSamples), states: s)
            }
            scoreCount = scores.count
        }
    }

    /// Steps `streams` streams: stream b's audio input (context + chunk) is filled by
    /// `audio(b, buffer)`; its state tensors are at `carries + b * stateCount`, read and then
    /// replaced; its scores go to `scores + b * scoreCount`.
    func run(streams: Int, workspace: inout GraphWorkspace, audio: (Int, UnsafeMutableBufferPointer<Float>) -> Void,
             carries: UnsafeMutablePointer<Float>, scores: UnsafeMutablePointer<Float>) throws(ModelError) {
        let S = stateCount, offsets = stateOffsets
        try run(streams: streams, workspace: &workspace, audio: audio,
                loadState: { b, i, buffer in buffer.baseAddress?.update(from: carries + b * S + offsets[i], count: buffer.count) },
                storeState: { b, i, values in
                    if let start = values.baseAddress { (carries + b * S + offsets[i]).update(from: start, count: values.count) }
                }, scores: scores)
    }

    /// Whether a step of the compiled graph always completes (`GraphPlan.cannotFail`): then a
    /// caller may let it read and write each stream's state where the stream keeps it.
    var cannotFail: Bool { plan?.cannotFail ?? false }

    /// As `run(streams:workspace:audio:carries:scores:)`, with stream b's state tensor i read by
    /// `loadState(b, i, buffer)` (its `stateSizes[i]` values into buffer) and written by
    /// `storeState(b, i, values)`.
    func run(streams: Int, workspace: inout GraphWorkspace, audio: (Int, UnsafeMutableBufferPointer<Float>) -> Void,
             loadState: (Int, Int, UnsafeMutableBufferPointer<Float>) -> Void, storeState: (Int, Int, UnsafeBufferPointer<Float>) -> Void,
             scores: UnsafeMutablePointer<Float>) throws(ModelError) {
        let S = stateCount, n = scoreCount
        guard let plan else {
            var block = [Float](repeating: 0, count: spec.audioShape.reduce(1, *))
            var carry = [Float](repeating: 0, count: S)
            for b in 0..<streams {
                block.withUnsafeMutableBufferPointer { audio(b, $0) }
                carry.withUnsafeMutableBufferPointer { c in
                    for i in stateSizes.indices { loadState(b, i, UnsafeMutableBufferPointer(rebasing: c[stateOffsets[i]..<(stateOffsets[i] + stateSizes[i])])) }
                }
                let out = try carry.withUnsafeMutableBufferPointer { c throws(ModelError) in try interpretedStep(audio: block, states: c) }
                carry.withUnsafeBufferPointer { c in
                    for i in stateSizes.indices { storeState(b, i, UnsafeBufferPointer(rebasing: c[stateOffsets[i]..<(stateOffsets[i] + stateSizes[i])])) }
                }
                for k in 0..<n { scores[b * n + k] = out[k] }
            }
            return
        }
        do {
            try plan.run(streams: streams, workspace: &workspace, load: { b, i, buffer in
                if i == 0 {
                    audio(b, buffer)
                } else {
                    loadState(b, i - 1, buffer)
                }
            }, store: { b, j, values in
                if j == 0 {
                    if let start = values.baseAddress { (scores + b * n).update(from: start, count: values.count) }
                } else {
                    storeState(b, j - 1, values)
                }
            })
        } catch {
            throw .layer(path: path, layer: error.node, reason: "\(error)")
        }
    }

    /// As `run(streams:workspace:audio:loadState:storeState:scores:)` on the compiled graph (for
    /// callers that have checked `cannotFail`), with state tensor i given by `fillState(b, i, bytes)` and read by
    /// `readState(b, i, bytes)` in the form the plan keeps it: int8 codes where the plan's
    /// `inputCoded[i + 1]` (`outputCoded[i + 1]`), floats otherwise.
    func runCompiled(streams: Int, workspace: inout GraphWorkspace, audio: (Int, UnsafeMutableBufferPointer<Float>) -> Void,
                     fillState: (Int, Int, UnsafeMutableRawBufferPointer) -> Void, readState: (Int, Int, UnsafeRawBufferPointer) -> Void,
                     scores: UnsafeMutablePointer<Float>) throws(ModelError) {
        guard let plan else { throw .layer(path: path, layer: spec.scoreOutput, reason: "the graph is not compiled (\(interpreted ?? ""))") }
        let n = scoreCount, scoreCoded = plan.outputCoded[0]
        do {
            try plan.run(streams: streams, workspace: &workspace, fill: { b, i, bytes in
                if i == 0 {
                    GraphPlan.asFloats(bytes, coded: plan.inputCoded[0]) { audio(b, $0) }
                } else {
                    fillState(b, i - 1, bytes)
                }
            }, read: { b, j, bytes in
                if j == 0 {
                    GraphPlan.asFloats(bytes, coded: scoreCoded) { values in
                        if let start = values.baseAddress { (scores + b * n).update(from: start, count: values.count) }
                    }
                } else {
                    readState(b, j - 1, bytes)
                }
            })
        } catch {
            throw .layer(path: path, layer: error.node, reason: "\(error)")
        }
    }

    /// Steps one stream `count` times in a row, in two halves (see `GraphPlan.Consecutive`):
    /// `prepareConsecutive` runs the part of the graph that does not depend on the state once for
    /// all the steps (it may run ahead on another thread, with its own workspace);
    /// `finishConsecutive` the rest, step by step. Step k's audio input is filled by
    /// `audio(k, buffer)`; the stream's state tensors are at `carry`, read and replaced step by
    /// step; step k's scores go to `scores + k * scoreCount`. Equal, bit for bit, to `count`
    /// calls of `run(streams: 1, ...)`.
    func prepareConsecutive(count: Int, workspace: inout GraphWorkspace,
                            audio: (Int, UnsafeMutableBufferPointer<Float>) -> Void) throws(ModelError) {
        guard let plan, let consecutive else { return }
        do {
            try plan.prepareConsecutive(consecutive, count: count, workspace: &workspace) { k, i, buffer in
                if i == 0 { audio(k, buffer) }
            }
        } catch {
            throw .layer(path: path, layer: error.node, reason: "\(error)")
        }
    }

    func finishConsecutive(count: Int, workspace: inout GraphWorkspace, audio: (Int, UnsafeMutableBufferPointer<Float>) -> Void,
                           carry: UnsafeMutablePointer<Float>, scores: UnsafeMutablePointer<Float>) throws(ModelError) {
        guard let plan, let consecutive else {
            for k in 0..<count {
                try run(streams: 1, workspace: &workspace, audio: { _, buffer in audio(k, buffer) }, carries: carry,
                        scores: scores + k * scoreCount)
            }
            return
        }
        let n = scoreCount, offsets = stateOffsets
        do {
            try plan.finishConsecutive(consecutive, count: count, workspace: &workspace, load: { _, i, buffer in
                if i > 0, let start = buffer.baseAddress { start.update(from: carry + offsets[i - 1], count: buffer.count) }
            }, store: { k, j, values in
                guard let start = values.baseAddress else { return }
                (j == 0 ? scores + k * n : carry + offsets[j - 1]).update(from: start, count: values.count)
            })
        } catch {
            throw .layer(path: path, layer: error.node, reason: "\(error)")
        }
    }

    /// One step of one stream: `audio` is context + chunk; `states` the stream's state tensors,
    /// read and then replaced by the step's state outputs. Returns the scores.
    func interpretedStep(audio: [Float], states: UnsafeMutableBufferPointer<Float>) throws(ModelError) -> [Float] {
        var values = constants
        values[spec.audioInput] = GraphTensor(shape: spec.audioShape, floats: audio)
        var offset = 0
        for (i, s) in spec.states.enumerated() {
            values[s.input] = GraphTensor(shape: s.shape, floats: Array(states[offset..<(offset + stateSizes[i])]))
            offset += stateSizes[i]
        }
        for (i, node) in nodes.enumerated() {
            let inputs = node.inputs.map { $0.isEmpty ? nil : values[$0] }
            let outputs: [GraphTensor]
            do {
                outputs = try GraphOps.run(node.op, node: node.name, inputs: inputs, attributes: node.attributes, opset: spec.opset,
                                           outputCount: node.outputs.count)
            } catch {
                throw .layer(path: path, layer: node.name, reason: "\(error)")
            }
            for (name, value) in zip(node.outputs, outputs) where !name.isEmpty { values[name] = value }
            for name in releases[i] { values[name] = nil }
        }
        offset = 0
        for (i, s) in spec.states.enumerated() {
            guard let out = values[s.output], out.dtype == .float32, out.floats.count == stateSizes[i] else {
                throw .layer(path: path, layer: s.output, reason: "state output '\(s.output)' does not have the shape \(s.shape) of '\(s.input)'")
            }
            for k in 0..<stateSizes[i] { states[offset + k] = out.floats[k] }
            offset += stateSizes[i]
        }
        guard let scores = values[spec.scoreOutput], scores.dtype == .float32 else {
            throw .layer(path: path, layer: spec.scoreOutput, reason: "the score output is not float32")
        }
        return scores.floats
    }
}

extension GraphProgram {
    /// Per node, from one step on silence: its first input's and first output's shapes, the
    /// weights it reads and its multiply-adds (Conv, Gemm, MatMul, LSTM, GRU; 0 for the rest).
    func nodeInfo(blockSamples: Int) -> [(name: String, op: String, input: [Int], output: [Int], parameters: Int, multiplyAdds: Int)] {
        var values = constants
        values[spec.audioInput] = GraphTensor(shape: spec.audioShape, floats: [Float](repeating: 0, count: blockSamples))
        for (i, s) in spec.states.enumerated() {
            values[s.input] = GraphTensor(shape: s.shape, floats: Array(initialState[stateOffsets[i]..<(stateOffsets[i] + stateSizes[i])]))
        }
        var infos: [(name: String, op: String, input: [Int], output: [Int], parameters: Int, multiplyAdds: Int)] = []
        for (i, node) in nodes.enumerated() {
            let inputs = node.inputs.map { $0.isEmpty ? nil : values[$0] }
            guard let outputs = try? GraphOps.run(node.op, node: node.name, inputs: inputs, attributes: node.attributes, opset: spec.opset,
                                                  outputCount: node.outputs.count) else { break }
            for (name, value) in zip(node.outputs, outputs) where !name.isEmpty { values[name] = value }
            for name in releases[i] { values[name] = nil }
            let parameters = node.inputs.reduce(0) { sum, name in
                sum + ((constants[name]?.dtype == .float32) ? (constants[name]?.count ?? 0) : 0)
            }
            let x = inputs.first.flatMap { $0 }?.shape ?? [], y = outputs.first?.shape ?? []
            let w = inputs.count > 1 ? inputs[1]?.shape ?? [] : []
            var macs = 0
            switch node.op {
            case .conv, .tfliteConv2D: macs = y.reduce(1, *) * w.dropFirst().reduce(1, *)
            case .tfliteDepthwiseConv2D: macs = y.reduce(1, *) * w.dropFirst().dropLast().reduce(1, *)
            case .tfliteFullyConnected: macs = y.reduce(1, *) * (w.count == 2 ? w[1] : 0)
            case .gemm, .matMul: macs = y.reduce(1, *) * (w.count >= 2 ? (node.op == .gemm && node.attributes["transB"] == .int(1) ? w[w.count - 1] : w[w.count - 2]) : 1)
            case .lstm, .gru:
                let gates = node.op == .lstm ? 4 : 3
                let h = (w.count == 3 ? w[1] : 0) / gates, i = w.count == 3 ? w[2] : 0
                macs = (x.first ?? 1) * (x.count > 1 ? x[1] : 1) * gates * h * (i + h)
            default: break
            }
            infos.append((node.name, node.op.rawValue, x, y, parameters, macs))
        }
        return infos
    }
}
