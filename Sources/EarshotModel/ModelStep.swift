import CEarshotKernels
import EarshotFeatures
import EarshotGraph
import Foundation

/// One step of one stream or of a batch of streams.
extension Model {
    /// Advances one stream by one step: `block` is `chunkSamples` new samples at `sampleRate`.
    /// Returns one score per label.
    ///
    /// - Parameters:
    ///   - block: exactly `chunkSamples` finite samples at the model's rate.
    ///   - state: the stream's state (from `makeState()` or `restoreState(_:)`), advanced in place.
    /// - Returns: one score per label, in `labels` order.
    /// - Throws: `ModelError.inputSize` for a block of another length, `.nonFiniteInput` for NaN
    ///   or infinite audio, `.stateModelMismatch` for another model's state; the state is then
    ///   left as it was.
    public func prediction(from block: [Float], using state: inout ModelState) throws(ModelError) -> [Float] {
        var scores: [Float] = []
        try prediction(from: block, using: &state, into: &scores)
        return scores
    }

    /// As `prediction(from:using:)`, writing the scores into `scores` (one per label): with the
    /// same array from step to step, a step allocates no memory at all.
    public func prediction(from block: [Float], using state: inout ModelState, into scores: inout [Float]) throws(ModelError) {
        try check(block, state)
        scores.setCount(labels.count)
        if let graph, graph.cannotFail {
            // A step that always completes reads and writes the state where the stream keeps it.
            try withWorkspace { ws throws(ModelError) in
                try scores.withUnsafeMutableBufferPointer { s throws(ModelError) in
                    try graph.runCompiled(streams: 1, workspace: &ws.graph,
                                          audio: { _, buffer in Self.fill(buffer, state.context, block) },
                                          fillState: { _, i, bytes in Self.fill(graph, &state, i, into: bytes) },
                                          readState: { _, i, bytes in Self.read(graph, bytes, into: &state, i) },
                                          scores: s.baseAddress!)
                }
            }
            Self.advance(&state, by: block)
            return
        }
        if let graph {
            let context = state.context
            try withWorkspace { ws throws(ModelError) in
                // The carry in the workspace (never empty, so its address is never nil).
                var carry: [Float] = []
                swap(&carry, &ws.carries)
                defer { swap(&carry, &ws.carries) }
                carry.setCount(stateCount + 1)
                try carry.withUnsafeMutableBufferPointer { c throws(ModelError) in
                    unpack(state, to: c.baseAddress!)
                    try scores.withUnsafeMutableBufferPointer { s throws(ModelError) in
                        try graphForward(graph, streams: 1, block: { _ in block }, context: { _ in context }, carries: c.baseAddress!,
                                         scores: s.baseAddress!, workspace: &ws)
                    }
                    pack(UnsafeBufferPointer(c), into: &state)
                }
            }
            Self.advance(&state, by: block)
            return
        }
        try withWorkspace { ws in
            forwardOne(block, context: state.context, carry: &state.carry, scores: &scores, workspace: &ws)
        }
        Self.advance(&state, by: block)
    }

    func forwardOne(_ block: [Float], context: [Float], carry: inout [Float], scores: inout [Float], workspace ws: inout Workspace) {
        carry.withUnsafeMutableBufferPointer { c in
            scores.withUnsafeMutableBufferPointer { s in
                forward(streams: 1, block: { _ in block }, context: { _ in context }, carries: c.baseAddress!,
                        scores: s.baseAddress!, workspace: &ws)
            }
        }
    }

    /// Advances many streams by one step each, `blocks[i]` with `states[i]`, in one batched pass:
    /// each layer runs once for all of them (one matrix product, not one per stream). Equal,
    /// bit for bit, to calling `prediction(from:using:)` for each.
    public func predictions(from blocks: [[Float]], using states: inout [ModelState]) throws(ModelError) -> [[Float]] {
        var flat: [Float] = []
        try predictions(from: blocks, using: &states, into: &flat)
        let n = labels.count
        return (0..<blocks.count).map { Array(flat[($0 * n)..<(($0 + 1) * n)]) }
    }

    /// As `predictions(from:using:)`, writing stream i's scores at `scores[i * labels.count...]`:
    /// with the same arrays from step to step, a step allocates no memory at all. The streams go
    /// through the network `batchTile` at a time, so that a tile's activations stay in cache.
    /// A step that throws leaves every state as it was.
    public func predictions(from blocks: [[Float]], using states: inout [ModelState], into scores: inout [Float]) throws(ModelError) {
        guard blocks.count == states.count else { throw .batchSize(blocks: blocks.count, states: states.count) }
        try blocks.withUnsafeBufferPointer { bl throws(ModelError) in
            try states.withUnsafeBufferPointer { st throws(ModelError) in
                for i in bl.indices { try check(bl.baseAddress! + i, st.baseAddress! + i) }
            }
        }
        let n = labels.count, S = stateCount
        scores.setCount(blocks.count * n)
        // A graph step that always completes reads and writes each state where it lies.
        // Otherwise every stream's carry is staged side by side ([streams][stateCount]) and written
        // back only once every tile has run: a step that fails leaves every state as it was.
        let direct = graph?.cannotFail == true
        try withWorkspace { ws throws(ModelError) in
            var carries: [Float] = []
            swap(&carries, &ws.carries)
            defer { swap(&carries, &ws.carries) }
            let tile = streamsPerPass
            carries.setCount(direct ? 1 : max(blocks.count * S, 1))
            try carries.withUnsafeMutableBufferPointer { c throws(ModelError) in
                if !direct {
                    for b in 0..<blocks.count { unpack(states[b], to: c.baseAddress! + b * S) }
                }
                for start in stride(from: 0, to: blocks.count, by: tile) {
                    let count = min(tile, blocks.count - start)
                    let staged = c.baseAddress! + start * S
                    try scores.withUnsafeMutableBufferPointer { out throws(ModelError) in
                        if let graph {
                            // Through pointers: a stream's state and block are read where they lie, not copied or retained.
                            try states.withUnsafeMutableBufferPointer { stateBuffer throws(ModelError) in
                                let st = stateBuffer
                                try blocks.withUnsafeBufferPointer { bl throws(ModelError) in
                                    let audio = { (b: Int, buffer: UnsafeMutableBufferPointer<Float>) in
                                        Self.fill(buffer, context: &st[start + b], block: bl.baseAddress! + start + b)
                                    }
                                    guard !direct else {
                                        try graph.runCompiled(streams: count, workspace: &ws.graph, audio: { b, buffer in
                                            // The streams a few ahead are brought into cache while this one is filled.
                                            if start + b + Self.prefetchAhead < st.count {
                                                Self.prefetch(&st[start + b + Self.prefetchAhead])
                                            }
                                            audio(b, buffer)
                                        }, fillState: { b, i, bytes in Self.fill(graph, &st[start + b], i, into: bytes) },
                                        readState: { b, i, bytes in Self.read(graph, bytes, into: &st[start + b], i) },
                                        scores: out.baseAddress! + start * n)
                                        // Each state moves on while it is in cache (a step that cannot fail).
                                        for b in 0..<count { Self.advance(&st[start + b], by: bl[start + b]) }
                                        return
                                    }
                                    try graph.run(streams: count, workspace: &ws.graph, audio: audio,
                                                  loadState: { b, i, buffer in
                                                      buffer.baseAddress?.update(from: staged + b * S + graph.stateOffsets[i], count: buffer.count)
                                                  },
                                                  storeState: { b, i, values in
                                                      guard let from = values.baseAddress else { return }
                                                      (staged + b * S + graph.stateOffsets[i]).update(from: from, count: values.count)
                                                  }, scores: out.baseAddress! + start * n)
                                }
                            }
                        } else {
                            forward(streams: count, block: { blocks[start + $0] }, context: { states[start + $0].context },
                                    carries: staged, scores: out.baseAddress! + start * n, workspace: &ws)
                        }
                    }
                }
                if !direct {
                    for b in 0..<blocks.count { pack(UnsafeBufferPointer(start: c.baseAddress! + b * S, count: S), into: &states[b]) }
                }
            }
        }
        if !direct {
            for i in states.indices { Self.advance(&states[i], by: blocks[i]) }
        }
    }

    /// A graph's state tensor i, read from where a stream keeps it (its floats or its codes) into
    /// buffer; the state is read in place (inout: neither copied nor retained).
    static func load(_ graph: GraphProgram, _ state: inout ModelState, _ i: Int, into buffer: UnsafeMutableBufferPointer<Float>) {
        guard let to = buffer.baseAddress else { return }
        let offset = graph.storedOffsets[i]
        if graph.stateCoded[i] {
            state.codes.withUnsafeBufferPointer { from in
                from.baseAddress.map { earshot_codes_to_floats($0 + offset, buffer.count, to) }
            }
        } else {
            state.carry.withUnsafeBufferPointer { from in
                from.baseAddress.map { to.update(from: $0 + offset, count: buffer.count) }
            }
        }
    }

    /// How many streams ahead of the one it fills a batched step brings into cache.
    static let prefetchAhead = 8

    /// Brings a stream's state into cache (a hint: nothing is read or changed). Its block is
    /// in cache already: the batch's check has just read it.
    static func prefetch(_ state: inout ModelState) {
        state.codes.withUnsafeBufferPointer { earshot_prefetch($0.baseAddress, $0.count) }
        state.carry.withUnsafeBufferPointer { earshot_prefetch($0.baseAddress, $0.count * 4) }
        state.context.withUnsafeBufferPointer { earshot_prefetch($0.baseAddress, $0.count * 4) }
    }

    /// A graph's state tensor i, from where a stream keeps it (its floats or its codes) into the
    /// bytes the compiled plan reads it from (codes where the plan keeps it so, else floats); the
    /// state is read in place (inout: neither copied nor retained).
    static func fill(_ graph: GraphProgram, _ state: inout ModelState, _ i: Int, into bytes: UnsafeMutableRawBufferPointer) {
        guard let to = bytes.baseAddress else { return }
        let offset = graph.storedOffsets[i], n = graph.stateSizes[i], coded = graph.planTakesCodes[i]
        if graph.stateCoded[i] {
            state.codes.withUnsafeBufferPointer { from in
                guard let from = from.baseAddress else { return }
                if coded {
                    to.copyMemory(from: from + offset, byteCount: n)
                } else {
                    earshot_codes_to_floats(from + offset, n, to.assumingMemoryBound(to: Float.self))
                }
            }
        } else {
            state.carry.withUnsafeBufferPointer { from in
                guard let from = from.baseAddress else { return }
                if coded {
                    earshot_floats_to_codes(from + offset, n, to.assumingMemoryBound(to: Int8.self))
                } else {
                    to.copyMemory(from: from + offset, byteCount: n * 4)
                }
            }
        }
    }

    /// A graph's new values of state tensor i, from the bytes the compiled plan gives them in,
    /// written where a stream keeps it.
    static func read(_ graph: GraphProgram, _ bytes: UnsafeRawBufferPointer, into state: inout ModelState, _ i: Int) {
        guard let from = bytes.baseAddress else { return }
        let offset = graph.storedOffsets[i], n = graph.stateSizes[i], coded = graph.planGivesCodes[i]
        if graph.stateCoded[i] {
            state.codes.withUnsafeMutableBufferPointer { to in
                guard let to = to.baseAddress else { return }
                if coded {
                    UnsafeMutableRawPointer(to + offset).copyMemory(from: from, byteCount: n)
                } else {
                    earshot_floats_to_codes(from.assumingMemoryBound(to: Float.self), n, to + offset)
                }
            }
        } else {
            state.carry.withUnsafeMutableBufferPointer { to in
                guard let to = to.baseAddress else { return }
                if coded {
                    earshot_codes_to_floats(from.assumingMemoryBound(to: Int8.self), n, to + offset)
                } else {
                    UnsafeMutableRawPointer(to + offset).copyMemory(from: from, byteCount: n * 4)
                }
            }
        }
    }

    /// A graph's audio input: the stream's context, then `block` (both read in place).
    static func fill(_ buffer: UnsafeMutableBufferPointer<Float>, context state: inout ModelState, block: UnsafePointer<[Float]>) {
        state.context.withUnsafeBufferPointer { c in block.pointee.withUnsafeBufferPointer { b in fill(buffer, c, b) } }
    }

    /// A graph's new values of state tensor i, written where a stream keeps it.
    static func store(_ graph: GraphProgram, _ values: UnsafeBufferPointer<Float>, into state: inout ModelState, _ i: Int) {
        guard let from = values.baseAddress else { return }
        let offset = graph.storedOffsets[i]
        if graph.stateCoded[i] {
            state.codes.withUnsafeMutableBufferPointer { to in
                to.baseAddress.map { earshot_floats_to_codes(from, values.count, $0 + offset) }
            }
        } else {
            state.carry.withUnsafeMutableBufferPointer { to in
                to.baseAddress.map { ($0 + offset).update(from: from, count: values.count) }
            }
        }
    }

    /// A stream's state tensors as `stateCount` floats, one after another, at `to`.
    func unpack(_ state: ModelState, to: UnsafeMutablePointer<Float>) {
        guard let graph else {
            state.carry.withUnsafeBufferPointer { $0.baseAddress.map { to.update(from: $0, count: state.carry.count) } }
            return
        }
        var state = state
        for i in graph.stateSizes.indices {
            Self.load(graph, &state, i, into: UnsafeMutableBufferPointer(start: to + graph.stateOffsets[i], count: graph.stateSizes[i]))
        }
    }

    /// A stream's state tensors as `stateCount` floats, one after another.
    func unpacked(_ state: ModelState) -> [Float] {
        var values = [Float](repeating: 0, count: stateCount + 1)  // never empty: its address is never nil
        values.withUnsafeMutableBufferPointer { unpack(state, to: $0.baseAddress!) }
        values.removeLast()
        return values
    }

    /// The reverse of `unpack`: `stateCount` floats (every state tensor, one after another) into
    /// where a stream keeps them.
    func pack(_ values: UnsafeBufferPointer<Float>, into state: inout ModelState) {
        guard let from = values.baseAddress, values.count >= stateCount else { return }
        guard let graph else {
            state.carry.withUnsafeMutableBufferPointer { $0.baseAddress?.update(from: from, count: $0.count) }
            return
        }
        for i in graph.stateSizes.indices {
            Self.store(graph, UnsafeBufferPointer(start: from + graph.stateOffsets[i], count: graph.stateSizes[i]), into: &state, i)
        }
    }

    /// Streams through the graph, one step each: stream b's audio input is its context
    /// `context(b)` then its new samples `block(b)`; carries and scores as in `forward`.
    func graphForward(_ graph: GraphProgram, streams: Int, block: (Int) -> [Float], context: (Int) -> [Float],
                              carries: UnsafeMutablePointer<Float>, scores: UnsafeMutablePointer<Float>,
                              workspace ws: inout Workspace) throws(ModelError) {
        try graph.run(streams: streams, workspace: &ws.graph, audio: { b, buffer in Self.fill(buffer, context(b), block(b)) },
                      carries: carries, scores: scores)
    }

    /// Streams in one pass through the network: enough for matrix products, few enough that
    /// their activations stay in a core's cache.
    static let batchTile = 64

    /// The most bytes of activations one pass of a batched step holds over its streams.
    static let passArenaBytes = 64 << 20

    /// Streams per pass of a batched step: `batchTile`, or fewer when that many arenas of a graph
    /// would not stay in a core's cache and its weights are too few to be worth sharing that
    /// widely (a small int8 wake-word model with a large arena of activations, say), and never
    /// more than `passArenaBytes` of arenas: a network whose activations are many MB a stream
    /// runs fewer streams a pass (BirdNET's arena, laid out by liveness, is 3.4-3.6 MB for a 3 s
    /// window: 18 streams; it was 71 MB, one stream), without a workspace that grows by an arena
    /// with every stream.
    public var streamsPerPass: Int {
        guard let plan = graph?.plan else { return Self.batchTile }
        let arenaBytes = max(plan.arenaFloats * 4, 1)
        let fit = min(Self.batchTile, max(1, Self.passArenaBytes / arenaBytes))
        guard arenaBytes * Self.batchTile > 2 << 20, weightsBytes < 1 << 20 else { return fit }
        return max(1, min(fit, (2 << 20) / arenaBytes))
    }
}
