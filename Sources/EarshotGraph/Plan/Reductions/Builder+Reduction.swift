extension Builder {
    /// ReduceMean, ReduceSum, ReduceMax, ReduceMin of floats over a precomputed layout.
    mutating func reduce(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        guard let x = inputs.first ?? nil, x.dtype == .float32, let xRef = ref(g.inputs[0]),
              let (layout, _) = try Reductions.reduction(node(g, inputs), shape: x.shape),
              layout.starts.count == outputs[0].count, !layout.members.isEmpty else { return nil }
        let y = allocate(outputs[0].count)
        refs[g.outputs[0]] = y
        steps.append(ReduceStep(op: g.op, x: xRef, y: y, layout: layout))
        return "reduction"
    }
}
