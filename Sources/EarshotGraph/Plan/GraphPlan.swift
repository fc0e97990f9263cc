import CEarshotKernels
import EarshotFeatures

/// A graph compiled for inputs of fixed shapes, to run many times on many streams.
///
/// At build, one pass of the reference kernels (`GraphOps`) on zeros gives every tensor's shape;
/// what does not depend on the inputs is computed there once (folded). Every other tensor gets a
/// fixed place in a stream's arena, and every node a compiled step:
/// - Conv, MatMul and Gemm with constant weights: receptive fields laid out, then the packed
///   product (`earshot_gemm_packed`), one call for every stream of a batch;
/// - LSTM: input and recurrent weights as one packed matrix, the fused cell kernel;
/// - element-wise ops: loops over fixed broadcast maps;
/// - ops that only move values (Reshape, Transpose, Slice, Gather, Concat, Split, Pad, Expand,
///   Tile, ...): copy runs found by running the op's reference kernel once on numbered inputs,
///   so they move exactly what the reference moves; a run that is one contiguous block of an
///   input is no copy at all (the output names the input's place);
/// - anything else: the reference kernel on that node's values.
///
/// A step allocates nothing unless a node runs on the reference kernel. Every output is computed
/// the same way for a stream alone and within a batch (the product kernel sums in a fixed order),
/// so a batch gives each stream exactly what it gets alone. At build the plan runs once against
/// the reference kernels on random inputs and must agree with them.
public struct GraphPlan: Sendable {
    /// Where a tensor lives: in each stream's arena, or in the plan's shared constants. A tensor of
    /// floats has its offset and count in floats; one held as int8 codes (`coded`: a TFLite int8
    /// tensor, only ever in the arena) in bytes.
    struct Ref: Sendable, Equatable {
        var shared: Bool
        var offset: Int
        var count: Int
        var coded = false

        /// Its first byte and its bytes in the arena.
        var bytes: Range<Int> { coded ? offset..<(offset + count) : (offset * 4)..<((offset + count) * 4) }

        /// Whether the two share a place in the arena (constants never do).
        func overlaps(_ other: Ref) -> Bool { !shared && !other.shared && bytes.overlaps(other.bytes) }
    }

    /// The graph's inputs.
    public let inputNames: [String]
    /// Their shapes for one stream.
    public let inputShapes: [[Int]]
    /// The graph's outputs.
    public let outputNames: [String]
    /// Their shapes for one stream.
    public let outputShapes: [[Int]]
    /// Per node (by name), how it runs: "folded", "alias", "copy", "packed product", "depthwise" (", padded rows" or
    /// ", channels-last" when its planes go so), "LSTM cell",
    /// "element-wise" or "reference".
    public let kernels: [String: String]

    let inputRefs: [Ref]
    let outputRefs: [Ref]
    /// Per input and output, whether it is given or read as int8 codes (one byte a value) by
    /// `run(streams:workspace:fill:read:)`; the float form of `run` converts.
    public let inputCoded: [Bool]
    public let outputCoded: [Bool]
    /// An output that a Where chooses whole from X or Y (`SelectStep.choosesWhole`), which no
    /// other step reads: the Where does not run, and the output is read from X or Y as it is stored
    /// (a microWakeWord model's states, gated on the front end's first step, are not copied).
    struct Chosen: Sendable {
        let condition: SelectStep.Condition
        let x, y: Ref
    }
    /// Per output, its choice (nil: read where it lies).
    let chosen: [Chosen?]
    let steps: [any Step]
    /// The steps as they are run (see `StepRunner`), and the same unretained.
    let runners: [StepRunner]
    let unretained: [Unmanaged<StepRunner>]
    /// The multiply-adds the compiled steps' product kernels run per stream and step (the
    /// outputs they compute; rows padded to whole panels not counted): fewer than the graph's own
    /// count where a Conv runs as Winograd's tiles or an FFT.
    public var productMultiplyAdds: Int { steps.reduce(0) { $0 + $1.products } }
    /// Those of them that run in bf16 (`precision` bf16).
    public var bf16MultiplyAdds: Int { steps.reduce(0) { $0 + $1.bf16Products } }
    /// The products' arithmetic the plan was built for.
    public let precision: Precision
    /// Whether a run always completes: no step runs a reference kernel (the only steps that can
    /// throw), so a run never stops between storing one stream's outputs and the next's.
    public let cannotFail: Bool
    /// The steps that run only when an If's branch is taken (`BranchStep`): those a Where with a
    /// condition of one value a stream reads as its X or Y alone.
    public let conditionalSteps: Int
    /// Floats of one stream's arena (a multiple of 16, so each stream's arena stays aligned).
    let arenaSize: Int
    /// Whether the arena is laid out by liveness (`Layout`); false: every tensor in a place of its own.
    let laidOut: Bool
    /// The consecutive split the arena was laid out for (`consecutive(carrying:)`).
    let laidOutSplit: Consecutive
    /// Floats of one stream's arena.
    public var arenaFloats: Int { arenaSize }
    /// Scratch floats per stream the steps need at most.
    let scratchSize: Int
    let shared: [Float]
    let opset: Int

    /// Builds the plan.
    /// - Parameters:
    ///   - nodes: in an order where each node's inputs come first.
    ///   - constants: weights and other constant tensors.
    ///   - inputs: the names and shapes of the float inputs given at every run.
    ///   - outputs: the float tensors read after every run.
    ///   - codes: inputs and outputs given and read as int8 codes (`inputCoded`, `outputCoded`)
    ///     instead of floats: tensors that only ever hold int8 values, as TFLite's int8 states do.
    ///   - precision: the products' arithmetic (`Precision`).
    ///   - fp32Nodes: nodes (by name) whose products stay fp32 when `precision` is bf16: those
    ///     whose rounding a model's results do not tolerate.
    ///   - layOut: lay the arena out by liveness (`Layout`); false: every tensor in a place of
    ///     its own (as a plan to compare with).
    ///   - verify: check the plan against the reference kernels on random inputs. A bf16 plan
    ///     differs from them by bf16's rounding: build it after an fp32 plan of the same graph
    ///     that was checked (the same lowering but for the products' kernels), as `Model` does.
    public init(nodes: [GraphNode], constants: [String: GraphTensor], inputs: [(name: String, shape: [Int])],
                outputs: [String], opset: Int, codes: Set<String> = [], precision: Precision = .fp32, fp32Nodes: Set<String> = [],
                verify: Bool = true, layOut: Bool = true) throws(GraphError) {
        // The check's reference run needs nothing the builder makes: it runs beside it.
        let reference = verify ? ReferenceRun(nodes: nodes, constants: constants, inputs: inputs, outputs: outputs, opset: opset) : nil
        var builder = Builder(constants: constants, opset: opset, codes: codes, precision: precision, fp32Nodes: fp32Nodes)
        try builder.build(nodes: nodes, inputs: inputs, outputs: outputs)
        inputNames = inputs.map(\.name)
        inputShapes = inputs.map(\.shape)
        outputNames = outputs
        outputShapes = outputs.map { builder.values[$0]?.shape ?? [] }
        kernels = builder.kernels
        inputCoded = builder.inputRefs.map(\.coded)
        outputCoded = builder.outputRefs.map(\.coded)
        let prepared = Self.prepare(builder, inputs: inputs.count, layOut: layOut)
        var (chosen, steps) = (prepared.chosen, prepared.steps)
        var (inputRefs, outputRefs, arenaSize) = (builder.inputRefs, builder.outputRefs, builder.arenaSize)
        laidOutSplit = prepared.split
        if let layout = prepared.layout, layout.size < arenaSize,
           let moved = Self.relocate(layout, steps: steps, inputs: inputRefs, outputs: outputRefs, chosen: chosen) {
            (steps, inputRefs, outputRefs, chosen) = moved
            arenaSize = layout.size
            laidOut = true
        } else {
            laidOut = false
        }
        self.chosen = chosen
        self.steps = steps
        self.inputRefs = inputRefs
        self.outputRefs = outputRefs
        runners = steps.map { $0.runner() }
        unretained = runners.map { Unmanaged.passUnretained($0) }
        cannotFail = !steps.contains { $0 is ReferenceStep || ($0 as? BranchStep)?.canFail == true }
        conditionalSteps = steps.reduce(0) { $0 + (($1 as? BranchStep)?.stepCount ?? 0) }
        self.arenaSize = arenaSize
        scratchSize = builder.scratchSize
        shared = builder.shared
        self.opset = opset
        self.precision = precision
        if let reference { try check(reference) }
    }

    /// The builder's steps as a plan runs them (copies nothing reads left out, outputs a Where
    /// chooses whole read where they lie), the consecutive split of a stream's runs that carry its
    /// state (every input but the first), and, with `layOut`, the arena laid out by liveness for
    /// the steps in their order and in that split's (nil: not laid out).
    static func prepare(_ builder: Builder, inputs: Int, layOut: Bool)
        -> (chosen: [Chosen?], steps: [any Step], split: Consecutive, layout: Layout?) {
        let gathered = Self.gatherBranches(Self.pruneMoves(builder.steps, outputs: builder.outputRefs), outputs: builder.outputRefs)
        let (chosen, steps) = Self.chooseOutputs(gathered, outputs: builder.outputRefs, inputs: builder.inputRefs)
        let split = Self.split(steps, inputs: builder.inputRefs, carrying: Set((0..<inputs).dropFirst()))
        guard layOut else { return (chosen, steps, split, nil) }
        let splitOrder = zip(steps.indices, split.dependent).sorted { ($0.1 ? 1 : 0, $0.0) < ($1.1 ? 1 : 0, $1.0) }.map(\.0)
        var times = [Int](repeating: 0, count: steps.count)
        for (time, k) in splitOrder.enumerated() { times[k] = time }
        let pins = builder.inputRefs + builder.outputRefs + chosen.compactMap { $0 }.flatMap { [$0.x, $0.y, $0.condition.a, $0.condition.b] }
        let layout = Layout(blocks: builder.blocks, steps: steps, orders: [Array(steps.indices), times], pinned: pins)
        return (chosen, steps, split, layout)
    }

    /// The layout by liveness a plan of the graph would take (as `init` builds it), in the
    /// builder's places; nil when its steps cannot be laid out.
    static func layout(nodes: [GraphNode], constants: [String: GraphTensor], inputs: [(name: String, shape: [Int])],
                       outputs: [String], opset: Int) throws(GraphError) -> Layout? {
        var builder = Builder(constants: constants, opset: opset, codes: [], precision: .fp32, fp32Nodes: [])
        try builder.build(nodes: nodes, inputs: inputs, outputs: outputs)
        return prepare(builder, inputs: inputs.count, layOut: true).layout
    }

    /// The steps without the copies that nothing reads: an output of a move that no later step
    /// reads and that is no output of the plan is not written (a move left with none, not run).
    /// From the last step back, so that a copy read only by a copy left out goes too.
    static func pruneMoves(_ steps: [any Step], outputs: [Ref]) -> [any Step] {
        var kept: [any Step] = []  // the later steps kept, last first
        for step in steps.reversed() {
            guard let move = step as? MoveStep else {
                kept.append(step)
                continue
            }
            let used = move.outputs.indices.filter { i in
                let out = move.outputs[i]
                return outputs.contains { $0.overlaps(out) } || kept.contains { $0.reads.contains { $0.overlaps(out) } }
            }
            if used.count == move.outputs.count {
                kept.append(move)
            } else if !used.isEmpty {
                kept.append(MoveStep(sources: move.sources,
                                     outputs: used.map { (move.outputs[$0], Array(move.runs[move.bounds[$0]..<move.bounds[$0 + 1]])) }))
            }
        }
        return kept.reversed()
    }

    /// The outputs that a Where chooses whole, and the steps without those Wheres. A Where is left
    /// out only if no other step reads its output, no later step writes what it reads, its output
    /// is no other output's place and no input's.
    static func chooseOutputs(_ steps: [any Step], outputs: [Ref], inputs: [Ref]) -> ([Chosen?], [any Step]) {
        var chosen = [Chosen?](repeating: nil, count: outputs.count)
        var dropped = Set<Int>()
        for (j, ref) in outputs.enumerated() {
            guard let k = steps.lastIndex(where: { $0.writes.contains { $0.overlaps(ref) } }), let select = steps[k] as? SelectStep,
                  select.choosesWhole, select.out == ref else { continue }
            let readElsewhere = steps.indices.contains { $0 != k && steps[$0].reads.contains { $0.overlaps(ref) } }
            let overwritten = steps[(k + 1)...].contains { later in later.writes.contains { w in select.reads.contains { w.overlaps($0) } } }
            let shared = outputs.indices.contains { $0 != j && outputs[$0].overlaps(ref) } || inputs.contains { $0.overlaps(ref) }
            guard !readElsewhere, !overwritten, !shared else { continue }
            chosen[j] = Chosen(condition: select.condition, x: select.x, y: select.y)
            dropped.insert(k)
        }
        return (chosen, steps.indices.filter { !dropped.contains($0) }.map { steps[$0] })
    }

    /// Output j of arena b, as `read` is given it: where it lies, or the X or Y its Where chose.
    @inline(__always)
    private func output(_ j: Int, _ b: Int, _ arena: (Int, Ref) -> UnsafeMutableRawBufferPointer) -> UnsafeRawBufferPointer {
        guard let c = chosen[j] else { return UnsafeRawBufferPointer(arena(b, outputRefs[j])) }
        let holds = c.condition.kind.holds(arena(b, c.condition.a).load(as: Float.self), arena(b, c.condition.b).load(as: Float.self))
        return UnsafeRawBufferPointer(arena(b, holds ? c.x : c.y))
    }

    /// Runs `streams` streams one step, each input and output in the form the plan keeps it:
    /// `fill(stream, input, bytes)` fills input `input` of stream `stream` (its values as floats,
    /// or as int8 codes where `inputCoded`); after the step `read(stream, output, bytes)` reads
    /// each output (as codes where `outputCoded`).
    public func run(streams: Int, workspace ws: inout GraphWorkspace,
                    fill: (_ stream: Int, _ input: Int, UnsafeMutableRawBufferPointer) -> Void,
                    read: (_ stream: Int, _ output: Int, UnsafeRawBufferPointer) -> Void) throws(GraphError) {
        try run(count: streams, workspace: &ws) { arena, context throws(GraphError) in
            try inputRefs.withUnsafeBufferPointer { inputs throws(GraphError) in
                try outputRefs.withUnsafeBufferPointer { outputs throws(GraphError) in
                    for b in 0..<streams {
                        for i in inputs.indices { fill(b, i, arena(b, inputs[i])) }
                    }
                    try runSteps(where: { _ in true }, context(0, streams))
                    for b in 0..<streams {
                        for j in outputs.indices { read(b, j, output(j, b, arena)) }
                    }
                }
            }
        }
    }

    /// Runs `streams` streams one step. `load(stream, input, buffer)` fills input `input` of
    /// stream `stream` (buffer of the input's size); after the step `store(stream, output,
    /// values)` reads each output. Inputs and outputs kept as codes are converted.
    public func run(streams: Int, workspace ws: inout GraphWorkspace,
                    load: (_ stream: Int, _ input: Int, UnsafeMutableBufferPointer<Float>) -> Void,
                    store: (_ stream: Int, _ output: Int, UnsafeBufferPointer<Float>) -> Void) throws(GraphError) {
        try run(streams: streams, workspace: &ws, fill: { b, i, bytes in
            Self.asFloats(bytes, coded: inputRefs[i].coded) { load(b, i, $0) }
        }, read: { b, j, bytes in
            Self.asFloats(bytes, coded: outputRefs[j].coded) { store(b, j, $0) }
        })
    }

    /// A tensor's bytes as floats for `body` to fill: in place, or (codes) through floats
    /// converted after.
    public static func asFloats(_ bytes: UnsafeMutableRawBufferPointer, coded: Bool, _ body: (UnsafeMutableBufferPointer<Float>) -> Void) {
        guard coded else { return body(bytes.bindMemory(to: Float.self)) }
        withUnsafeTemporaryAllocation(of: Float.self, capacity: bytes.count) { floats in
            floats.initialize(repeating: 0)
            body(floats)
            if let from = floats.baseAddress, let to = bytes.baseAddress {
                earshot_floats_to_codes(from, bytes.count, to.assumingMemoryBound(to: Int8.self))
            }
        }
    }

    /// A tensor's bytes as floats for `body` to read: in place, or (codes) converted.
    public static func asFloats(_ bytes: UnsafeRawBufferPointer, coded: Bool, _ body: (UnsafeBufferPointer<Float>) -> Void) {
        guard coded else { return body(UnsafeBufferPointer(start: bytes.baseAddress?.assumingMemoryBound(to: Float.self), count: bytes.count / 4)) }
        withUnsafeTemporaryAllocation(of: Float.self, capacity: bytes.count) { floats in
            if let from = bytes.baseAddress, let to = floats.baseAddress {
                earshot_codes_to_floats(from.assumingMemoryBound(to: Int8.self), bytes.count, to)
            }
            body(UnsafeBufferPointer(floats))
        }
    }

    /// How `count` consecutive steps of one stream run, when the inputs numbered in `carried`
    /// (its state) are outputs of the step before: the steps that do not depend on them
    /// (`dependent` false) run once for all `count` steps as a batch (`prepareConsecutive`); the
    /// others go step by step (`finishConsecutive`). Equal, bit for bit, to `count` runs of one
    /// stream in turn.
    public struct Consecutive: Sendable {
        let carried: Set<Int>
        /// Per step, whether it reads (through the steps before it) a carried input.
        let dependent: [Bool]
    }

    /// The split of the steps for consecutive runs that carry the inputs numbered in `carried`.
    /// An arena laid out by liveness (`Layout`) allows the split it was laid out for (every input
    /// but the first carried: a stream's state), found before the steps shared places; with
    /// another, every step goes step by step.
    public func consecutive(carrying carried: Set<Int>) -> Consecutive {
        if carried == laidOutSplit.carried { return laidOutSplit }
        guard !laidOut else { return Consecutive(carried: carried, dependent: steps.map { _ in true }) }
        return Self.split(steps, inputs: inputRefs, carrying: carried)
    }

    /// The steps that depend on the inputs numbered in `carried`, through what they read.
    static func split(_ steps: [any Step], inputs: [Ref], carrying carried: Set<Int>) -> Consecutive {
        var tainted = carried.sorted().map { inputs[$0] }
        let dependent = steps.map { step in
            let depends = step.reads.contains { r in tainted.contains { r.overlaps($0) } }
            if depends { tainted += step.writes }
            return depends
        }
        return Consecutive(carried: carried, dependent: dependent)
    }

    /// The first half of a consecutive run: the inputs not carried and the steps that do not
    /// depend on them, into `ws`. It needs nothing of the steps before, so it may run ahead,
    /// on another thread, with its own workspace.
    public func prepareConsecutive(_ split: Consecutive, count: Int, workspace ws: inout GraphWorkspace,
                                   load: (_ step: Int, _ input: Int, UnsafeMutableBufferPointer<Float>) -> Void) throws(GraphError) {
        try run(count: count, workspace: &ws) { arena, one throws(GraphError) in
            for b in 0..<count {
                for (i, ref) in inputRefs.enumerated() where !split.carried.contains(i) {
                    Self.asFloats(arena(b, ref), coded: ref.coded) { load(b, i, $0) }
                }
            }
            try runSteps(where: { !split.dependent[$0] }, one(0, count))
        }
    }

    /// The second half, on the workspace the first half filled: step by step, the carried inputs
    /// (step k's loaded after step k - 1's outputs are stored, so `load` and `store` carry the
    /// state), the steps that depend on them and the outputs.
    public func finishConsecutive(_ split: Consecutive, count: Int, workspace ws: inout GraphWorkspace,
                                  load: (_ step: Int, _ input: Int, UnsafeMutableBufferPointer<Float>) -> Void,
                                  store: (_ step: Int, _ output: Int, UnsafeBufferPointer<Float>) -> Void) throws(GraphError) {
        try run(count: count, workspace: &ws) { arena, one throws(GraphError) in
            for b in 0..<count {
                for (i, ref) in inputRefs.enumerated() where split.carried.contains(i) {
                    Self.asFloats(arena(b, ref), coded: ref.coded) { load(b, i, $0) }
                }
                try runSteps(where: { split.dependent[$0] }, one(b, 1))
                for j in outputRefs.indices { Self.asFloats(output(j, b, arena), coded: outputRefs[j].coded) { store(b, j, $0) } }
            }
        }
    }

    /// The steps `chosen` by index, in order, each through its runner: no copy of the step.
    @inline(__always)
    private func runSteps(where chosen: (Int) -> Bool, _ context: Context) throws(GraphError) {
        try unretained.withUnsafeBufferPointer { runners throws(GraphError) in
            for k in runners.indices where chosen(k) {
                if let error = runners[k]._withUnsafeGuaranteedRef({ $0.run(context) }) { throw error }
            }
        }
    }

    /// `body` with `count` arenas in `ws`: `arena(b, ref)` is ref's place in arena b (or in the
    /// constants), `context(first, n)` the context of arenas first..<first + n.
    func run(count: Int, workspace ws: inout GraphWorkspace,
                     _ body: (_ arena: (Int, Ref) -> UnsafeMutableRawBufferPointer, _ context: (Int, Int) -> Context) throws(GraphError) -> Void)
        throws(GraphError) {
        guard count > 0 else { return }
        // Grown, never shrunk: a smaller last tile of a batch then costs no zeroing when the next
        // batch's first tile needs the room again. Never empty: its address is never nil.
        ws.arena.grow(to: max(count * arenaSize, 16))
        ws.scratch.grow(to: count * scratchSize + 16)
        let stride = arenaSize
        try ws.arena.withUnsafeMutableBufferPointer { arenaBuffer throws(GraphError) in
            try ws.scratch.withUnsafeMutableBufferPointer { scratchBuffer throws(GraphError) in
                try shared.withUnsafeBufferPointer { sharedBuffer throws(GraphError) in
                    let arena = arenaBuffer.baseAddress!, scratch = scratchBuffer.baseAddress!
                    let constants = sharedBuffer.baseAddress ?? UnsafePointer(scratch)
                    try body({ b, ref in
                        ref.shared ? UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(mutating: constants) + ref.bytes.lowerBound, count: ref.bytes.count)
                            : UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(arena + b * stride) + ref.bytes.lowerBound, count: ref.bytes.count)
                    }, { first, n in
                        Context(arena: arena + first * stride, stride: stride, shared: constants, scratch: scratch, streams: n)
                    })
                }
            }
        }
    }

    /// The plan's one run on the reference run's random inputs against the reference kernels'
    /// outputs.
    private func check(_ reference: ReferenceRun) throws(GraphError) {
        let expectedOutputs = try reference.outputs()
        var ws = GraphWorkspace()
        var got: [[Float]] = Array(repeating: [], count: outputNames.count)
        try run(streams: 1, workspace: &ws, load: { _, i, buffer in
            for k in 0..<buffer.count { buffer[k] = reference.given[i][k] }
        }, store: { _, j, values in got[j] = Array(values) })
        for (j, name) in outputNames.enumerated() {
            let expected = expectedOutputs[name] ?? []
            guard expected.count == got[j].count else {
                throw .unsupported(node: name, op: "plan", reason: "the compiled graph gives \(got[j].count) values for '\(name)'; the reference kernels \(expected.count)")
            }
            for k in expected.indices {
                let (a, b) = (expected[k], got[j][k])
                if a == b || (a.isNaN && b.isNaN) { continue }  // infinities included
                guard abs(a - b) <= 1e-3 * max(1, abs(a)) else {
                    throw .unsupported(node: name, op: "plan", reason: "the compiled graph gives \(b) for '\(name)'[\(k)]; the reference kernels \(a)")
                }
            }
        }
    }
}

/// The reference kernels' outputs of a graph on random inputs, computed on another thread from
/// the moment it is made: what a plan is checked against. A graph of TFLite's integer kernels
/// takes whole numbers in the int8 range (its states hold quantized values).
struct ReferenceRun: Sendable {
    let given: [[Float]]
    private let run: Background<Result<[String: [Float]], GraphError>>

    init(nodes: [GraphNode], constants: [String: GraphTensor], inputs: [(name: String, shape: [Int])], outputs: [String], opset: Int) {
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        let integers = nodes.contains { !$0.op.isONNX }
        func random() -> Float {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let r = Int64(bitPattern: seed >> 11)
            return integers ? Float(r % 256 - 128) : Float(r % 2001 - 1000) / 2000  // -128...127; -0.5...0.5
        }
        let given = inputs.map { input in (0..<input.shape.reduce(1, *)).map { _ in random() } }
        self.given = given
        let names = inputs.map(\.name), shapes = inputs.map(\.shape)
        run = Background {
            Result { () throws(GraphError) -> [String: [Float]] in
                var values = constants
                for (i, name) in names.enumerated() { values[name] = GraphTensor(shape: shapes[i], floats: given[i]) }
                let releases = GraphNode.releases(nodes, keeping: Set(outputs))
                for (i, node) in nodes.enumerated() {
                    let outs = try GraphOps.run(node.op, node: node.name, inputs: node.inputs.map { $0.isEmpty ? nil : values[$0] },
                                                attributes: node.attributes, opset: opset, outputCount: node.outputs.count)
                    for (name, value) in zip(node.outputs, outs) where !name.isEmpty { values[name] = value }
                    for name in releases[i] { values[name] = nil }
                }
                var floats: [String: [Float]] = [:]
                for name in outputs { floats[name] = values[name]?.floats ?? [] }
                return floats
            }
        }
    }

    /// The outputs, once the run is over (waiting for it), or the error a node met.
    func outputs() throws(GraphError) -> [String: [Float]] { try run.value().get() }
}
