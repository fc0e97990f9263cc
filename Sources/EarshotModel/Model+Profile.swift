import EarshotGraph

extension Model {
    /// One compiled step of a graph and its time for one stream (`profile(block:runs:)`).
    public struct StepTime: Sendable {
        /// What the step runs: its kind and sizes.
        public let summary: String
        /// The median of its seconds over the runs.
        public let seconds: Double
    }

    /// Where a step's time goes: the compiled graph run `runs` times on `block` (its first values,
    /// zeros after; the states at their first values), each step timed on its own, in the order
    /// they run. Nil for a chain of layers or a graph that runs on the reference kernels.
    public func profile(block: [Float], runs: Int) throws(ModelError) -> [StepTime]? {
        guard let graph, let plan = graph.plan else { return nil }
        var workspace = GraphWorkspace()
        do {
            return try plan.profile(runs: runs, workspace: &workspace) { i, buffer in
                buffer.update(repeating: 0)
                if i == 0 {
                    for k in 0..<min(block.count, buffer.count) { buffer[k] = block[k] }
                } else {
                    let start = graph.stateOffsets[i - 1]
                    for k in 0..<min(graph.stateSizes[i - 1], buffer.count) { buffer[k] = graph.initialState[start + k] }
                }
            }.map { StepTime(summary: $0.summary, seconds: $0.seconds) }
        } catch {
            throw .layer(path: graph.path, layer: error.node, reason: "\(error)")
        }
    }
}
