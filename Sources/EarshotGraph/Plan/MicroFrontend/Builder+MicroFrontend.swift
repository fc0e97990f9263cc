extension Builder {
    mutating func microFrontend(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) -> String? {
        guard inputs.count == 4, outputs.count == 4, g.outputs.count == 4, g.outputs.allSatisfy({ !$0.isEmpty }) else { return nil }
        var r: [GraphPlan.Ref] = []
        for name in g.inputs {
            guard let ref = ref(name) else { return nil }
            r.append(ref)
        }
        // Outputs get places of their own: a state's next value never overwrites what a step still reads.
        let o = outputs.map { allocate($0.count) }
        for (name, ref) in zip(g.outputs, o) { refs[name] = ref }
        scratchSize = max(scratchSize, (MicroFrontendOp.lanesScratch(count: inputs[0]?.count ?? 0) + 3) / 4)
        steps.append(MicroFrontendStep(samples: r[0], noise: r[1], pending: r[2], started: r[3], features: o[0], noiseOut: o[1],
                                       pendingOut: o[2], startedOut: o[3]))
        return "front end"
    }
}
