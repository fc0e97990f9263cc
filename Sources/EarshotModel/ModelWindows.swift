/// Consecutive steps of a window classifier split between threads: a step that depends only on
/// its window (the context and the new block) can run anywhere once its window is known.
extension Model {
    /// Whether a step depends on nothing but its window: the stream's state is its context alone
    /// (no recurrent or front-end values carried, no int8 codes), as for a model imported with
    /// `--window/--hop`. Any other model's steps must run one after another.
    public var stepsAreWindows: Bool { carryCount == 0 && codeCount == 0 }

    /// Advances one stream by many consecutive steps, as `predictions(forConsecutive:using:)`
    /// does (bit for bit: each step's scores, and the state after them), with the steps split
    /// into `threads` runs of consecutive blocks that go through the model at once, each from a
    /// state primed with the window before its first block (so no step is run twice or thrown
    /// away). A model whose steps are not windows (`stepsAreWindows`), one thread or one block:
    /// `predictions(forConsecutive:using:)` itself.
    public func predictions(forWindows blocks: [[Float]], using stream: inout ModelState, threads: Int) throws(ModelError) -> [[Float]] {
        let parts = min(threads, blocks.count)
        guard stepsAreWindows, parts > 1 else { return try predictions(forConsecutive: blocks, using: &stream) }
        for block in blocks { try check(block, stream) }
        let c = manifest.audio.contextSamples
        // Run p starts from the window its first block follows: the context after the blocks before it.
        var starts: [ModelState] = []
        var context = stream.context
        for p in 0..<parts {
            var start = stream
            start.context = context
            starts.append(start)
            for b in partRange(p, of: parts, count: blocks.count) { context = Self.nextContext(context, blocks[b], count: c) }
        }
        let primed = starts
        let runs = parallelMap(parts) { p in
            Result { () throws(ModelError) -> [[Float]] in
                var state = primed[p]
                return try self.predictions(forConsecutive: Array(blocks[partRange(p, of: parts, count: blocks.count)]), using: &state)
            }
        }
        var scores: [[Float]] = []
        scores.reserveCapacity(blocks.count)
        for run in runs { scores += try run.get() }
        // The state changes only once every run has gone through.
        stream.context = context
        stream.steps = min(stream.steps &+ blocks.count, ModelState.maxSteps)
        return scores
    }
}
