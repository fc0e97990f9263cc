import CEarshotKernels
import EarshotFeatures
import EarshotGraph
import Foundation

/// Many consecutive steps of one stream at once (what labelling a file uses).
extension Model {
    /// Advances one stream by many consecutive steps, as calling `prediction(from:using:)` for
    /// each block in turn would (bit for bit), but faster: the layers before the first one with
    /// state (the front end, the convolutions) run once over all the blocks as a batch; only the
    /// layers from the first recurrent one on go step by step.
    public func predictions(forConsecutive blocks: [[Float]], using stream: inout ModelState) throws(ModelError) -> [[Float]] {
        for block in blocks { try check(block, stream) }
        // Work on a copy: the stream's state changes only when every block has gone through.
        var state = stream
        guard !blocks.isEmpty else { return [] }
        let c = manifest.audio.contextSamples
        var contexts: [[Float]] = []
        contexts.reserveCapacity(blocks.count)
        var context = state.context
        for block in blocks {
            contexts.append(context)
            context = Self.nextContext(context, block, count: c)
        }
        if let graph {
            var carry = unpacked(state)
            let scores = try graphConsecutive(graph, blocks, contexts: contexts, carry: &carry)
            carry.withUnsafeBufferPointer { pack($0, into: &state) }
            state.context = context
            state.steps = min(state.steps &+ blocks.count, ModelState.maxSteps)
            stream = state
            return scores
        }
        let firstStateful = layers.firstIndex { $0.stateCount > 0 } ?? layers.count
        let recurrent = firstStateful < layers.count ? layers[firstStateful].recurrent : nil
        var scores: [[Float]] = []
        scores.reserveCapacity(blocks.count)
        let window = 64
        if blocks.count < 2 * window {
            // Everything before the first layer with state: all blocks as one batch, split over the cores.
            let x = try statelessPrefix(blocks, contexts: contexts, layers: firstStateful)
            scores = rest(x, inputProducts: recurrent?.inputProducts(x), from: firstStateful, state: &state)
        } else {
            // A long run: while this thread takes window w through the recurrence, a helper thread
            // prepares the next windows (front end, stateless layers, the recurrent layer's input
            // products); this thread prepares windows too when the next one is not ready.
            let ranges = stride(from: 0, to: blocks.count, by: window).map { $0..<min($0 + window, blocks.count) }
            let windowContexts = contexts
            let windows = WindowPipeline<Prepared>(count: ranges.count) { w in
                let prefix = self.prefix(blocks[ranges[w]], contexts: windowContexts[ranges[w]], layers: firstStateful)
                return prefix.map { x in
                    let first = firstStateful < self.layers.count ? self.layers[firstStateful].recurrent : nil
                    return Prepared(x: x, inputProducts: first?.inputProducts(x))
                }
            }
            defer { windows.stop() }
            for w in ranges.indices {
                let prepared = try windows.take(w).get()
                scores += rest(prepared.x, inputProducts: prepared.inputProducts, from: firstStateful, state: &state)
            }
        }
        state.context = context
        state.steps = min(state.steps &+ blocks.count, ModelState.maxSteps)  // saturates; never traps
        stream = state
        return scores
    }

    /// Consecutive blocks of one stream through the graph, `batchTile` blocks at a time: the part
    /// that does not depend on the state runs once per tile.
    func graphConsecutive(_ graph: GraphProgram, _ blocks: [[Float]], contexts: [[Float]],
                          carry: inout [Float]) throws(ModelError) -> [[Float]] {
        let n = labels.count, tile = Self.batchTile
        let ranges = stride(from: 0, to: blocks.count, by: tile).map { $0..<min($0 + tile, blocks.count) }
        var flat = [Float](repeating: 0, count: blocks.count * n)
        @Sendable func audio(_ range: Range<Int>) -> (Int, UnsafeMutableBufferPointer<Float>) -> Void {
            { k, buffer in Self.fill(buffer, contexts[range.lowerBound + k], blocks[range.lowerBound + k]) }
        }
        // A long run: while this thread takes tile w through the steps that need the state, a
        // helper thread prepares the next tiles (the steps that do not). Workspaces go back to a
        // pool when a tile is done, so their memory is reused, not allocated tile after tile.
        let pool = tileWorkspaces
        let pipeline = ranges.count >= 2 ? WindowPipeline<GraphWorkspace>(count: ranges.count) { w in
            Result { () throws(ModelError) -> GraphWorkspace in
                var ws = pool.withLock { $0.popLast() } ?? GraphWorkspace()
                try graph.prepareConsecutive(count: ranges[w].count, workspace: &ws, audio: audio(ranges[w]))
                return ws
            }
        } : nil
        defer { pipeline?.stop() }
        carry.append(0)  // never empty, so its address is never nil
        defer { carry.removeLast() }
        try carry.withUnsafeMutableBufferPointer { c throws(ModelError) in
            try flat.withUnsafeMutableBufferPointer { out throws(ModelError) in
                for (w, range) in ranges.enumerated() {
                    var ws: GraphWorkspace
                    if let pipeline {
                        ws = try pipeline.take(w).get()
                    } else {
                        ws = pool.withLock { $0.popLast() } ?? GraphWorkspace()
                        try graph.prepareConsecutive(count: range.count, workspace: &ws, audio: audio(range))
                    }
                    try graph.finishConsecutive(count: range.count, workspace: &ws, audio: audio(range), carry: c.baseAddress!,
                                                scores: out.baseAddress! + range.lowerBound * n)
                    pool.withLock { [ws] in $0.append(ws) }
                }
            }
        }
        return (0..<blocks.count).map { Array(flat[($0 * n)..<(($0 + 1) * n)]) }
    }

    /// A graph's audio input: the context, then the block.
    static func fill(_ buffer: UnsafeMutableBufferPointer<Float>, _ context: [Float], _ block: [Float]) {
        context.withUnsafeBufferPointer { c in block.withUnsafeBufferPointer { b in fill(buffer, c, b) } }
    }

    /// The same from the values where they lie.
    static func fill(_ buffer: UnsafeMutableBufferPointer<Float>, _ context: UnsafeBufferPointer<Float>, _ block: UnsafeBufferPointer<Float>) {
        guard let start = buffer.baseAddress else { return }
        if let p = context.baseAddress { start.update(from: p, count: context.count) }
        if let p = block.baseAddress { (start + context.count).update(from: p, count: block.count) }
    }

    /// The layers from `first` on, for consecutive blocks of one stream already through the
    /// stateless prefix; `inputProducts` are those of layer `first` when it is recurrent.
    func rest(_ prefix: Activations, inputProducts: [Float]?, from first: Int, state: inout ModelState) -> [[Float]] {
        var x = prefix
        var scratch = LayerScratch()
        state.carry.withUnsafeMutableBufferPointer { carry in
            for i in first..<layers.count {
                let layer = layers[i]
                let slice = UnsafeMutableBufferPointer(rebasing: carry[stateOffsets[i]..<(stateOffsets[i] + layer.stateCount)])
                if layer.stateCount == 0 {
                    x = layer.run(x, states: .none)  // stateless: the whole batch
                } else if let recurrent = layer.recurrent {
                    // The blocks follow one another: one recurrence over all their steps in order
                    // (column b * time + t), after the input products of all steps at once.
                    let ip = (i == first ? inputProducts : nil) ?? recurrent.inputProducts(x)
                    var y = Activations(channels: recurrent.hiddenSize, time: x.time, batch: x.batch)
                    ip.withUnsafeBufferPointer { p in
                        y.values.withUnsafeMutableBufferPointer { yv in
                            recurrent.recur(inputProducts: p.baseAddress!, firstColumn: 0, time: x.columns, count: 1,
                                            states: StateRows(slice), into: yv.baseAddress!, scratch: &scratch)
                        }
                    }
                    x = y
                } else {
                    // Any other layer with state (a causal convolution): block after block.
                    x = Activations.joined((0..<x.batch).map { layer.run(x.stream($0), state: slice) })
                }
            }
        }
        let n = labels.count
        var flat = [Float](repeating: 0, count: x.batch * n)
        flat.withUnsafeMutableBufferPointer { output(&x, into: $0.baseAddress!) }
        return (0..<x.batch).map { Array(flat[($0 * n)..<(($0 + 1) * n)]) }
    }

    /// Front end and the first `count` layers (none with state) for many blocks as one batch,
    /// the blocks split between the cores.
    func statelessPrefix(_ blocks: [[Float]], contexts: [[Float]], layers count: Int) throws(ModelError) -> Activations {
        let parts = min(ProcessInfo.processInfo.activeProcessorCount, max(1, blocks.count / 16))
        let results = parallelMap(parts) { p in
            let run = partRange(p, of: parts, count: blocks.count)
            return prefix(blocks[run], contexts: contexts[run], layers: count)
        }
        return Activations.joined(try results.map { (r) throws(ModelError) in try r.get() })
    }

    /// Front end and the first `count` layers for some blocks, on this thread.
    func prefix(_ blocks: ArraySlice<[Float]>, contexts: ArraySlice<[Float]>, layers count: Int) -> Result<Activations, ModelError> {
        Result { () throws(ModelError) in
            try withWorkspace { ws in
                let first = blocks.startIndex
                guard let analyzer = ws.analyzer else { preconditionFailure("a layer network's workspace always has its analyzer") }
                frontEnd(streams: blocks.count, block: { blocks[first + $0] }, context: { contexts[first + $0] }, into: &ws.buffers[0],
                         padded: &ws.padded, analyzer: analyzer)
                let last = runLayers(0..<count, carries: nil, workspace: &ws)
                // The result leaves the workspace, which makes that buffer anew next time.
                var x = Activations.empty
                swap(&x, &ws.buffers[last])
                return x
            }
        }
    }
}
