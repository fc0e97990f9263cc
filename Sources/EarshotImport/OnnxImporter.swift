import EarshotGraph
import EarshotModel
import EarshotONNX
import Foundation

/// Turns an ONNX model into an Earshot package: inputs fixed by the user become constants, the
/// audio input takes one block (context + chunk), state inputs and outputs are paired into the
/// stream's state, every `If` whose condition is then known is replaced by its branch, and
/// everything computable without audio (weights reordered, shape arithmetic, constant
/// subgraphs) is folded. What is left is a graph of ops the runtime's kernels run, written with
/// its constants. The graph is run once on silence while it is read, so every shape is known
/// and every op is proven to run before a package is written.
public struct OnnxImporter {
    /// A value while the graph is read: its tensor (computed on silence) and whether it is the
    /// same for every stream and step (a constant) or depends on audio or state.
    private struct Value {
        var tensor: GraphTensor
        var constant: Bool
    }

    let path: String
    let options: ImportOptions
    private var values: [String: Value] = [:]
    /// A dynamic tensor's name → the name of the tensor it is (Identity, If outputs).
    private var alias: [String: String] = [:]
    /// The nodes that depend on audio or state, in order; then the package's graph.
    private var builder = GraphSpecBuilder()
    /// A node's output → the node that writes it (ONNX writes every value once).
    private var producers: [String: String] = [:]
    private var opset = 13
    private var depth = 0

    /// Reads `path` and builds the package (manifest and weights).
    public static func importModel(path: String, options: ImportOptions) throws(ImportError) -> (manifest: ModelManifest, tensors: [String: Tensor]) {
        let model: OnnxModel
        do { model = try OnnxModel.read(path: path, maxNodes: GraphSpec.maxNodes) } catch { throw .onnx(error) }
        var importer = OnnxImporter(path: path, options: options)
        return try importer.build(model)
    }

    private init(path: String, options: ImportOptions) {
        self.path = path
        self.options = options
    }

    private func interface(_ reason: String, _ hint: String) -> ImportError { .interface(path: path, reason: reason, hint: hint) }

    private mutating func build(_ model: OnnxModel) throws(ImportError) -> (manifest: ModelManifest, tensors: [String: Tensor]) {
        opset = Int(model.opsetImports.first { $0.domain == "" || $0.domain == "ai.onnx" }?.version ?? 13)
        let graph = model.graph
        let initializerNames = Set(graph.initializers.map(\.name))
        let inputs = graph.inputs.filter { !initializerNames.contains($0.name) }
        let outputs = graph.outputs.map(\.name)

        // Which input is which.
        for name in options.fixed.keys where !inputs.contains(where: { $0.name == name }) {
            throw interface("--set \(name): the model has no input '\(name)'", "its inputs: \(inputs.map(\.name).joined(separator: ", "))")
        }
        var states = options.states
        if states.isEmpty { states = Self.pairStates(inputs: inputs, outputs: graph.outputs) }
        for s in states {
            guard inputs.contains(where: { $0.name == s.input }) else { throw interface("--state \(s.input)=\(s.output): no input '\(s.input)'", "its inputs: \(inputs.map(\.name).joined(separator: ", "))") }
            guard outputs.contains(s.output) else { throw interface("--state \(s.input)=\(s.output): no output '\(s.output)'", "its outputs: \(outputs.joined(separator: ", "))") }
        }
        let stateInputs = Set(states.map(\.input)), stateOutputs = Set(states.map(\.output))
        let audioCandidates = inputs.filter { options.fixed[$0.name] == nil && !stateInputs.contains($0.name) }
        let audioName: String
        if let given = options.audioInput {
            guard audioCandidates.contains(where: { $0.name == given }) else {
                throw interface("--input \(given) is not an input left for audio", "inputs not fixed and not state: \(audioCandidates.map(\.name).joined(separator: ", "))")
            }
            audioName = given
        } else {
            guard audioCandidates.count == 1 else {
                throw interface("\(audioCandidates.count) inputs could take the audio (\(audioCandidates.map(\.name).joined(separator: ", ")))",
                                "fix the others with --set NAME=VALUE, pair states with --state IN=OUT, or name it with --input")
            }
            audioName = audioCandidates[0].name
        }
        for extra in audioCandidates where extra.name != audioName {
            throw interface("input '\(extra.name)' is neither audio, a state, nor fixed", "give it a value with --set \(extra.name)=VALUE")
        }
        // Audio, states and scores are float tensors; a fixed input at least numbers (not strings
        // or complex numbers).
        func check(_ info: OnnxValueInfo?, _ role: String, floating: Bool) throws(ImportError) {
            guard let info, let type = info.elementType else { return }  // no type declared: the graph decides
            guard floating ? type.isFloatingPoint : type.isReadable else {
                throw .elementType(path: path, role: role, name: info.name, type: type.onnxName)
            }
        }
        try check(inputs.first { $0.name == audioName }, options.frontEnd == "features" ? "feature input" : "audio input", floating: true)
        for s in states {
            try check(inputs.first { $0.name == s.input }, "state input", floating: true)
            try check(graph.outputs.first { $0.name == s.output }, "state output", floating: true)
        }
        for name in options.fixed.keys.sorted() { try check(inputs.first { $0.name == name }, "input fixed by --set", floating: false) }
        let scoreCandidates = outputs.filter { !stateOutputs.contains($0) }
        // The outputs that become scores: the one --score names, else every output that is not a state.
        let scoreNames: [String]
        if let given = options.scoreOutput {
            guard scoreCandidates.contains(given) else { throw interface("--score \(given) is not an output", "outputs: \(scoreCandidates.joined(separator: ", "))") }
            scoreNames = [given]
        } else {
            guard !scoreCandidates.isEmpty else { throw interface("every output is a state's", "leave one out of the --state pairs for the scores") }
            scoreNames = scoreCandidates
        }
        for name in scoreNames { try check(graph.outputs.first { $0.name == name }, "score output", floating: true) }

        // Shapes: a stream at a time (named and unknown sizes are 1), the audio's last axis a block.
        guard let audioInfo = inputs.first(where: { $0.name == audioName }), let declared = audioInfo.shape, !declared.isEmpty else {
            throw interface("the audio input '\(audioName)' has no declared shape", "export it with a shape such as [1, samples]")
        }
        var context = options.contextSamples, givenChunk = options.chunkSamples
        var audioShape = declared.map { d -> Int? in if case let .value(v) = d { return v } else { return nil } }
        if options.windowed {
            // A fixed-window classifier: the window is the audio input, hop new samples a step.
            guard options.frontEnd != "features" else {
                throw interface("--window/--hop with --front-end features", "--window takes a model whose input is one window of samples, [1, N]")
            }
            let window = try options.window(length: audioShape.last!, path: path)  // not empty: checked above
            (givenChunk, context) = (window.chunk, window.context)
            audioShape[audioShape.count - 1] = window.chunk + window.context
        }
        if audioShape.last! == nil {  // not empty: checked above
            guard let chunk = givenChunk, chunk > 0 else {
                throw interface("the audio input's length is not fixed", "give --chunk N (new samples per step) and --context N")
            }
            audioShape[audioShape.count - 1] = context + chunk
        }
        let fixedShape = audioShape.map { $0 ?? 1 }  // a batch or other named size: one stream
        let features = options.frontEnd == "features" || (options.frontEnd == nil && fixedShape.filter { $0 > 1 }.count > 1)
        guard let block = elementCount(fixedShape), block <= 1 << 24 else {
            throw interface("the audio input's shape \(fixedShape) is too large (at most 2^24 values a step)", "export the model for one stream's block")
        }
        let chunk = givenChunk ?? block - context
        guard fixedShape.allSatisfy({ $0 > 0 }), chunk > 0, chunk + context == block else {
            throw interface("the audio input takes \(fixedShape) = \(block) values, not context \(context) + chunk \(chunk)",
                            "give --context and --chunk that add up to \(block)")
        }
        guard features || fixedShape.last == block else {
            throw interface("the audio input's shape \(fixedShape) holds more than one stream's block of samples",
                            "export the model for one stream (batch 1), or import it with --front-end features if it takes features")
        }
        let audioShapeFixed = fixedShape
        values[audioName] = Value(tensor: GraphTensor(shape: audioShapeFixed, floats: [Float](repeating: 0, count: block)), constant: false)
        var stateSpecs: [GraphSpec.StateSpec] = []
        for s in states {
            guard let info = inputs.first(where: { $0.name == s.input }), let dims = info.shape else {
                throw interface("state '\(s.input)' has no declared shape", "export it with a fixed shape")
            }
            let shape = dims.map { d -> Int in if case let .value(v) = d { return v } else { return 1 } }
            guard shape.allSatisfy({ $0 > 0 }), let count = elementCount(shape), count <= 1 << 24 else {
                throw interface("state '\(s.input)' has shape \(shape)", "a state must be a fixed, non-empty shape of at most 2^24 values")
            }
            values[s.input] = Value(tensor: GraphTensor(shape: shape, floats: [Float](repeating: 0, count: count)), constant: false)
            stateSpecs.append(.init(input: s.input, output: s.output, shape: shape))
        }
        for (name, value) in options.fixed {
            let info = inputs.first { $0.name == name }  // present: checked above
            let dims = (info?.shape ?? []).map { d -> Int in if case let .value(v) = d { return v } else { return 1 } }
            guard let count = elementCount(dims), count <= 1 << 24 else {
                throw interface("--set \(name): the input's shape \(dims) is too large (at most 2^24 values)", "fix inputs of a fixed, small shape")
            }
            let tensor: GraphTensor
            switch info?.elementType {
            case let type? where type.isFloatingPoint: tensor = GraphTensor(shape: dims, floats: [Float](repeating: Float(value), count: count))
            case .bool: tensor = GraphTensor(shape: dims, integers: [Int64](repeating: value != 0 ? 1 : 0, count: count), dtype: .bool)
            default:
                guard value.rounded() == value, abs(value) < 9e18 else { throw interface("--set \(name)=\(value): the input takes whole numbers", "give a whole number") }
                tensor = GraphTensor(shape: dims, integers: [Int64](repeating: Int64(value), count: count))
            }
            values[name] = Value(tensor: tensor, constant: true)
        }
        try readGraph(graph, keeping: Set(outputs))

        // What the scores and the next states need, back from the outputs.
        for name in scoreNames where values[name]?.constant != false {
            throw interface("the score output '\(name)' does not depend on the audio", scoreNames.count > 1 ? "pick another with --score NAME" : "check --input and --set")
        }
        // Several outputs: each flattened, one after another, as the scores.
        let score: String
        if scoreNames.count == 1 {
            score = resolve(scoreNames[0])
        } else {
            let flat = scoreNames.map { name in
                builder.reshape(resolve(name), [values[name]?.tensor.count ?? 0], into: freshName("\(name) (flat)"))
            }
            score = freshName("scores (\(scoreNames.joined(separator: ", ")))")
            builder.node("Concat", score, flat, [score], ["axis": .int(0)])
        }
        builder.prune(keeping: [score] + states.map { resolve($0.output) })
        for s in states where values[s.output]?.constant != false {
            throw interface("state output '\(s.output)' does not depend on the state or audio", "check the --state pairs")
        }
        // Outputs that are another tensor (an Identity, an If's output) are read under that name.
        for i in stateSpecs.indices { stateSpecs[i].output = resolve(stateSpecs[i].output) }

        // A Clip bound of -inf (min) or +inf (max) bounds nothing: the input is left out, as
        // ONNX allows, so that every stored weight is a finite number.
        for i in builder.nodes.indices where builder.nodes[i].op == "Clip" {
            for (index, unbounded) in [(1, -Float.infinity), (2, Float.infinity)] where index < builder.nodes[i].inputs.count {
                if let v = values[builder.nodes[i].inputs[index]], v.constant, v.tensor.scalarFloat == unbounded { builder.nodes[i].inputs[index] = "" }
            }
            while builder.nodes[i].inputs.last == "" { builder.nodes[i].inputs.removeLast() }
        }
        for node in builder.nodes {
            for input in node.inputs where !input.isEmpty {
                guard let v = values[input], v.constant else { continue }
                if v.tensor.dtype == .float32 {
                    if let bad = v.tensor.floats.firstIndex(where: { !$0.isFinite }) {
                        throw .node(path: path, node: node.name, op: node.op, reason: "constant '\(input)' holds \(v.tensor.floats[bad]) at \(bad)",
                                    hint: "weights must be finite numbers")
                    }
                    builder.weight(input, v.tensor)
                } else {
                    builder.integers(input, v.tensor.integers, shape: v.tensor.shape, dtype: v.tensor.dtype == .bool ? "bool" : "int64")
                }
            }
        }
        let spec = builder.spec(opset: opset, audioInput: audioName, audioShape: audioShapeFixed, scoreOutput: score, states: stateSpecs)
        let counts = scoreNames.map { values[$0]?.tensor.count ?? 0 }, scoreCount = counts.reduce(0, +)
        var named: [String] = []  // several outputs: NAME, or NAME[i] for each value of one of more
        for (name, count) in zip(scoreNames, counts) { named += count == 1 ? [name] : (0..<count).map { "\(name)[\($0)]" } }
        let numbered: [String] = scoreCount == 1 ? ["score"] : (0..<scoreCount).map { "class\($0)" }
        let labels = options.labels ?? (scoreNames.count > 1 ? named : numbered)
        try options.checkLabels(labels, scores: scoreCount, path: path)
        var manifest = options.manifest(
            source: "earshot import \(URL(fileURLWithPath: path).lastPathComponent) (\(model.producerName) \(model.producerVersion), opset \(opset))",
            audio: .init(sampleRate: options.sampleRate, chunkSamples: chunk, contextSamples: context),
            frontEnd: .init(type: features ? .features : .samples, nFFT: 0, hopLength: 0), labels: labels, decision: options.metadata.decision)
        manifest.graph = spec
        return (manifest, builder.tensors)
    }

    /// Input/output pairs of one shape whose names say "the next one": state/stateN, h/hn,
    /// x/x_out, x/next_x.
    static func pairStates(inputs: [OnnxValueInfo], outputs: [OnnxValueInfo]) -> [(input: String, output: String)] {
        var pairs: [(input: String, output: String)] = []
        for input in inputs {
            let n = input.name
            let candidates = [n + "N", n + "n", n + "_out", n + "_next", "next_" + n, n + "_new", n + "out", n + "Out"]
            if let out = outputs.first(where: { candidates.contains($0.name) }), out.elementType == input.elementType,
               out.shape?.count == input.shape?.count {
                pairs.append((n, out.name))
            }
        }
        return pairs
    }

    /// A name for a tensor the import adds: unused by the builder, and by the model's own values
    /// and node outputs (which may not have reached the builder yet).
    private mutating func freshName(_ base: String) -> String {
        var name = builder.unique(base)
        while values[name] != nil || producers[name] != nil { name = builder.unique(name) }
        return name
    }

    private func resolve(_ name: String) -> String {
        var n = name
        var hops = 0
        while let next = alias[n], hops < 10_000 { n = next; hops += 1 }
        return n
    }

    /// Reads a graph's nodes in order. A value computed on silence that no later node of the
    /// graph reads (nor `keep`) is let go once read, as only its constancy is still asked: the
    /// pass holds the values still to be read, not one per node.
    private mutating func readGraph(_ graph: OnnxGraph, keeping keep: Set<String>) throws(ImportError) {
        depth += 1
        defer { depth -= 1 }
        guard depth <= 64 else { throw interface("subgraphs nest deeper than 64", "simplify the model") }
        for t in graph.initializers { values[t.name] = Value(tensor: try tensor(t, node: graph.name), constant: true) }
        let produced = Set(graph.nodes.flatMap(\.outputs))
        let releases = GraphNode.releases(inputs: graph.nodes.map(Self.reads), outputs: graph.nodes.map(\.outputs), keeping: keep)
        for (i, node) in graph.nodes.enumerated() {
            try read(node)
            for name in releases[i] where produced.contains(name) && values[name]?.constant == false {
                values[name]?.tensor = Self.released
            }
        }
    }

    /// What a dynamic value's tensor becomes once no node will read it.
    private static let released = GraphTensor(shape: [0], floats: [])

    /// The values a node reads: its inputs, and those its subgraphs (If branches) read from
    /// outside them or give as their outputs.
    private static func reads(_ node: OnnxNode) -> [String] {
        var names = node.inputs
        for case let .graph(g) in node.attributes.values {
            names += g.outputs.map(\.name) + g.nodes.flatMap(reads)
        }
        for case let .graphs(gs) in node.attributes.values {
            for g in gs { names += g.outputs.map(\.name) + g.nodes.flatMap(reads) }
        }
        return names
    }

    private func tensor(_ t: OnnxTensor, node: String) throws(ImportError) -> GraphTensor {
        if let f = t.floats { return GraphTensor(shape: t.dims, floats: f) }
        if let i = t.integers { return GraphTensor(shape: t.dims, integers: i, dtype: t.dataType == .bool ? .bool : .int64) }
        throw .node(path: path, node: node, op: "tensor", reason: "tensor '\(t.name)' of type \(t.dataType.onnxName) holds no numbers",
                    hint: "the runtime takes float and integer tensors")
    }

    /// An `If` whose condition depends on the audio or state: both branches are read (their
    /// nodes join the graph, every stream computing both), and each output is
    /// `Where(condition, then, else)`, so each stream of a batch takes its own branch every step.
    /// Branches have no side effects, so computing the one not taken changes nothing but time.
    private mutating func readBothBranches(_ node: OnnxNode, condition: String, label: String) throws(ImportError) {
        func fail(_ reason: String, _ hint: String) -> ImportError { .node(path: path, node: label, op: node.opType, reason: reason, hint: hint) }
        guard case let .graph(thenGraph)? = node.attributes["then_branch"], case let .graph(elseGraph)? = node.attributes["else_branch"] else {
            throw fail("a branch is missing", "the file is damaged")
        }
        // Both branches join one graph: each branch's own values under names of their own (ONNX
        // lets the two branches use the same names).
        let thenBranch = thenGraph.renamed(thenGraph.definedNames) { "\(label) then/" + $0 }
        let elseBranch = elseGraph.renamed(elseGraph.definedNames) { "\(label) else/" + $0 }
        guard thenBranch.outputs.count == node.outputs.count, elseBranch.outputs.count == node.outputs.count else {
            throw fail("the branches give \(thenBranch.outputs.count) and \(elseBranch.outputs.count) outputs for \(node.outputs.count)", "the file is damaged")
        }
        guard let cond = values[condition], cond.tensor.count == 1 else {
            throw fail("the condition holds \(values[condition]?.tensor.count ?? 0) values", "an If's condition is one boolean")
        }
        try readGraph(thenBranch, keeping: Set(thenBranch.outputs.map(\.name)))
        try readGraph(elseBranch, keeping: Set(elseBranch.outputs.map(\.name)))
        let chosen = resolve(condition)
        for (k, outer) in node.outputs.enumerated() where !outer.isEmpty {
            let (thenName, elseName) = (thenBranch.outputs[k].name, elseBranch.outputs[k].name)
            guard let a = values[thenName], let b = values[elseName] else { throw fail("a branch does not produce its output \(k)", "the file is damaged") }
            guard a.tensor.shape == b.tensor.shape, a.tensor.dtype == b.tensor.dtype else {
                throw fail("its branches give output \(k) as \(a.tensor.shape) and \(b.tensor.shape)",
                           "a condition computed at run time needs branches of one shape; fix the inputs it reads with --set")
            }
            // The condition broadcast over the output: one value of the output's rank.
            var condInput = chosen
            if cond.tensor.rank > a.tensor.rank {
                condInput = builder.reshape(chosen, [Int](repeating: 1, count: a.tensor.rank), into: builder.unique("\(label) condition for \(outer)"))
            }
            let outputs: [GraphTensor]
            do {
                let c = GraphTensor(shape: [Int](repeating: 1, count: a.tensor.rank), integers: [cond.tensor.dtype == .float32 ? (cond.tensor.floats[0] != 0 ? 1 : 0) : (cond.tensor.integers[0] != 0 ? 1 : 0)], dtype: .bool)
                outputs = try GraphOps.run("Where", node: label, inputs: [c, a.tensor, b.tensor], opset: opset, outputCount: 1)
            } catch { throw fail(error.reason, "check the branches' outputs") }
            values[outer] = Value(tensor: outputs[0], constant: false)
            builder.node("Where", "\(label) \(outer)", [condInput, resolve(thenName), resolve(elseName)], [outer])
        }
    }

    /// The most iterations of a `Loop` that the importer unrolls.
    static let maxLoopIterations = 4096

    /// A `Loop` whose trip count and condition are known once the shapes are (a speech
    /// embedding's loop over the batch, whose size a stream fixes at 1): unrolled, its body read
    /// once per iteration under names of its own ("NODE #i/NAME"), so that what each iteration
    /// computes from shapes folds and only what reads the audio stays as nodes. A step's block
    /// is fixed per import, so the loop's count is too; unrolled, every iteration's nodes are
    /// compiled as any others are, with nothing left to decide at run time. A condition that
    /// depends on the audio or state is refused.
    private mutating func readLoop(_ node: OnnxNode, label: String) throws(ImportError) {
        func fail(_ reason: String, _ hint: String) -> ImportError { .node(path: path, node: label, op: node.opType, reason: reason, hint: hint) }
        guard case let .graph(body)? = node.attributes["body"] else { throw fail("no body", "the file is damaged") }
        let carried = Array(node.inputs.dropFirst(2))
        let scans = node.outputs.count - carried.count
        guard body.inputs.count == 2 + carried.count, body.outputs.count == 1 + carried.count + scans, scans >= 0 else {
            throw fail("its body takes \(body.inputs.count) inputs and gives \(body.outputs.count) outputs for \(carried.count) carried values",
                       "the file is damaged")
        }
        func known(_ name: String, _ what: String) throws(ImportError) -> GraphTensor? {
            guard !name.isEmpty else { return nil }
            guard let v = values[name] else { throw fail("reads '\(name)', which nothing produced before it", "the graph must be in order") }
            guard v.constant, v.tensor.count == 1 else {
                throw fail("its \(what) depends on the audio or state", "a loop runs a number of times fixed by the shapes; export one with a fixed count")
            }
            return v.tensor
        }
        func truth(_ t: GraphTensor) -> Bool { t.dtype == .float32 ? t.floats[0] != 0 : t.integers[0] != 0 }
        let limit = try known(node.inputs.first ?? "", "trip count").map { $0.dtype == .float32 ? Int64($0.floats[0]) : $0.integers[0] }
        var going = try known(node.inputs.count > 1 ? node.inputs[1] : "", "condition").map(truth) ?? true
        guard limit != nil || going == false || body.outputs.first != nil else { throw fail("no trip count and no condition", "the file is damaged") }
        var current = carried  // the values carried into the next iteration
        var scanned = [[String]](repeating: [], count: scans)
        let locals = body.definedNames
        var i: Int64 = 0
        while going, i < (limit ?? .max) {
            guard i < Self.maxLoopIterations else {
                throw fail("it runs more than \(Self.maxLoopIterations) times", "export the model for one stream's block (batch 1)")
            }
            let prefix = "\(label) #\(i)/"
            let iteration = body.renamed(locals) { prefix + $0 }
            values[iteration.inputs[0].name] = Value(tensor: GraphTensor(scalar: i), constant: true)
            values[iteration.inputs[1].name] = Value(tensor: GraphTensor(shape: [], integers: [1], dtype: .bool), constant: true)
            for (input, value) in zip(iteration.inputs.dropFirst(2), current) {
                guard let v = values[value] else { throw fail("reads '\(value)', which nothing produced before it", "the graph must be in order") }
                values[input.name] = v
                if !v.constant { alias[input.name] = resolve(value) }
            }
            try readGraph(iteration, keeping: Set(iteration.outputs.map(\.name)))
            let outs = iteration.outputs.map(\.name)
            going = try known(outs[0], "condition").map(truth) ?? true
            current = Array(outs[1..<(1 + carried.count)])
            for k in 0..<scans { scanned[k].append(outs[1 + carried.count + k]) }
            i += 1
        }
        for (outer, value) in zip(node.outputs, current) where !outer.isEmpty {
            guard let v = values[value] else { throw fail("gives '\(value)', which nothing produced", "the file is damaged") }
            values[outer] = v
            if !v.constant { alias[outer] = resolve(value) }
        }
        // Each scan output: the iterations' values stacked along a new first axis.
        for (k, outer) in node.outputs.dropFirst(carried.count).enumerated() where !outer.isEmpty {
            let parts = scanned[k].compactMap { values[$0] }
            guard let first = parts.first, parts.count == scanned[k].count, parts.allSatisfy({ $0.tensor.shape == first.tensor.shape && $0.tensor.dtype == first.tensor.dtype }) else {
                throw fail("its scan output \(k) has no value or values of different shapes", "a loop's scan outputs stack values of one shape")
            }
            let shape = [parts.count] + first.tensor.shape
            let stacked = first.tensor.dtype == .float32 ? GraphTensor(shape: shape, floats: parts.flatMap(\.tensor.floats))
                                                         : GraphTensor(shape: shape, integers: parts.flatMap(\.tensor.integers), dtype: first.tensor.dtype)
            let constant = parts.allSatisfy(\.constant)
            values[outer] = Value(tensor: stacked, constant: constant)
            guard !constant else { continue }
            let rows = zip(scanned[k], parts).map { name, part in
                builder.reshape(resolve(name), [1] + part.tensor.shape, into: builder.unique("\(label) \(outer) row"))
            }
            if rows.count == 1 {
                alias[outer] = rows[0]
            } else {
                builder.node("Concat", "\(label) \(outer)", rows, [outer], ["axis": .int(0)])
            }
        }
    }

    private mutating func read(_ node: OnnxNode) throws(ImportError) {
        let label = node.name.isEmpty ? (node.outputs.first ?? node.opType) : node.name
        func fail(_ reason: String, _ hint: String) -> ImportError { .node(path: path, node: label, op: node.opType, reason: reason, hint: hint) }
        guard node.domain.isEmpty || node.domain == "ai.onnx" else {
            throw fail("domain '\(node.domain)'", "only ONNX's own ops (the default domain) run")
        }
        // A value written twice is the file's fault, said against the file (the package's own
        // check would name the package being written).
        for name in node.outputs where !name.isEmpty {
            if let first = producers[name] ?? (values[name] != nil ? "a graph input or initializer" : nil) {
                throw fail("its output '\(name)' is already written by \(first)", "ONNX names every value once: the file is damaged or was edited wrongly")
            }
            producers[name] = "node '\(label)' (\(node.opType))"
        }
        switch node.opType {
        case "Constant":
            guard let (key, value) = node.attributes.first, let out = node.outputs.first else { throw fail("no value", "a Constant needs one value attribute") }
            let t: GraphTensor
            switch (key, value) {
            case let (_, .tensor(v)): t = try tensor(v, node: label)
            case let ("value_float", .float(v)): t = GraphTensor(scalar: v)
            case let ("value_floats", .floats(v)): t = GraphTensor(shape: [v.count], floats: v)
            case let ("value_int", .int(v)): t = GraphTensor(scalar: v)
            case let ("value_ints", .ints(v)): t = GraphTensor(shape: [v.count], integers: v)
            default: throw fail("attribute '\(key)'", "Constant takes value, value_float(s) or value_int(s)")
            }
            values[out] = Value(tensor: t, constant: true)
            return
        case "If":
            guard let condName = node.inputs.first, let cond = values[condName] else { throw fail("no condition", "an If needs its condition input") }
            guard cond.constant else {
                try readBothBranches(node, condition: condName, label: label)
                return
            }
            let taken = (cond.tensor.dtype == .float32 ? cond.tensor.floats.first.map { $0 != 0 } : cond.tensor.integers.first.map { $0 != 0 }) ?? false
            guard case let .graph(branch)? = node.attributes[taken ? "then_branch" : "else_branch"] else {
                throw fail("no \(taken ? "then" : "else") branch", "the file is damaged")
            }
            try readGraph(branch, keeping: Set(branch.outputs.map(\.name)))
            guard branch.outputs.count == node.outputs.count else { throw fail("the branch gives \(branch.outputs.count) outputs for \(node.outputs.count)", "the file is damaged") }
            for (outer, inner) in zip(node.outputs, branch.outputs.map(\.name)) where !outer.isEmpty {
                guard let v = values[inner] else { throw fail("the branch does not produce '\(inner)'", "the file is damaged") }
                values[outer] = v
                if !v.constant { alias[outer] = inner }
            }
            return
        case "Loop":
            try readLoop(node, label: label)
            return
        case "Scan", "SequenceConstruct":
            throw fail("loops and sequences are not part of a streaming step", "export one step of the model (the runtime carries state between steps)")
        default:
            break
        }
        var inputs: [GraphTensor?] = []
        var allConstant = true
        for name in node.inputs {
            if name.isEmpty { inputs.append(nil); continue }
            guard let v = values[name] else { throw fail("reads '\(name)', which nothing produced before it", "the graph must be in order (ONNX requires it)") }
            inputs.append(v.tensor)
            allConstant = allConstant && v.constant
        }
        var attributes: [String: GraphAttribute] = [:]
        for (key, value) in node.attributes {
            switch value {
            case let .float(v): attributes[key] = .float(v)
            case let .int(v): attributes[key] = .int(v)
            case let .string(v): attributes[key] = .string(v)
            case let .floats(v): attributes[key] = .floats(v)
            case let .ints(v): attributes[key] = .ints(v)
            case let .strings(v): attributes[key] = .strings(v)
            case let .tensor(v): attributes[key] = .tensor(try tensor(v, node: label))
            case .graph, .graphs, .tensors: throw fail("attribute '\(key)' holds graphs or tensor lists", "only If takes subgraphs")
            }
        }
        var opType = node.opType, inputNames = node.inputs
        if opType == "GlobalAveragePool" || opType == "GlobalMaxPool" {
            // A CNN classifier's last pooling: the mean (the maximum) over every axis after the
            // channels, kept as ones, which is ReduceMean (ReduceMax) over those axes.
            guard inputs.count == 1, let x = inputs[0], x.rank >= 3, node.outputs.count == 1, attributes.isEmpty else {
                throw fail("takes one input of rank 3 or more ([N, C, D1, ...]) and no attributes", "the file is damaged")
            }
            let axes = (2..<x.rank).map(Int64.init)
            opType = opType == "GlobalAveragePool" ? "ReduceMean" : "ReduceMax"
            attributes = ["keepdims": .int(1)]
            if opset >= 18 {
                // The axes are an input from opset 18.
                let name = freshName("\(label) axes"), t = GraphTensor(shape: [axes.count], integers: axes)
                values[name] = Value(tensor: t, constant: true)
                inputNames.append(name)
                inputs.append(t)
            } else {
                attributes["axes"] = .ints(axes)
            }
        }
        guard GraphOps.onnxOps.contains(opType) else {
            throw .unsupportedOp(path: path, node: label, op: node.opType, format: "ONNX", reason: "the runtime has no kernel for it")
        }
        let outputs: [GraphTensor]
        do {
            outputs = try GraphOps.run(opType, node: label, inputs: inputs, attributes: attributes, opset: opset,
                                       outputCount: node.outputs.count)
        } catch {
            if case .unsupported = error {
                throw .unsupportedOp(path: path, node: label, op: node.opType, format: "ONNX", reason: error.reason)
            }
            throw fail(error.reason, "check the model's shapes and the --set values")
        }
        // Shapes are fixed, so a tensor's shape and size are constants whatever its values.
        let constant = allConstant || opType == "Shape" || opType == "Size"
        for (name, t) in zip(node.outputs, outputs) where !name.isEmpty { values[name] = Value(tensor: t, constant: constant) }
        guard !constant else { return }
        if opType == "Identity" || (opType == "Cast" && inputs.first??.dtype == outputs.first?.dtype && attributes["to"] != .int(6)),
           let input = node.inputs.first, let output = node.outputs.first {
            alias[output] = resolve(input)  // the same tensor under another name: no node
            return
        }
        var spec: [String: GraphSpec.AttributeValue] = [:]
        for (key, value) in attributes {
            switch value {
            case let .int(v): spec[key] = .int(v)
            case let .float(v): spec[key] = .float(Double(v))
            case let .string(v): spec[key] = .string(v)
            case let .ints(v): spec[key] = .ints(v)
            case let .floats(v): spec[key] = .floats(v.map(Double.init))
            case let .strings(v): spec[key] = .strings(v)
            case .tensor: throw fail("a tensor attribute on an op that depends on audio", "fold it into an input")
            }
        }
        builder.node(opType, label, inputNames.map { $0.isEmpty ? "" : resolve($0) }, node.outputs, spec.isEmpty ? nil : spec)
    }
}
