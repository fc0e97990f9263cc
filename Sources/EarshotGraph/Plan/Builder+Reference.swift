extension Builder {
    /// A node run on its reference kernel (`ReferenceStep`): its inputs read from the constants or the
    /// arena, its outputs given places of their own.
    mutating func reference(_ node: GraphNode, inputs: [GraphTensor?], outputs: [GraphTensor]) throws(GraphError) {
        var sources: [ReferenceStep.Source?] = []
        for (name, value) in zip(node.inputs, inputs) {
            guard let value else { sources.append(nil); continue }
            if fixed.contains(name) {
                sources.append(.constant(value))
            } else if let ref = ref(name) {
                sources.append(.stream(ref, value.shape))
            } else {
                throw .unsupported(node: node.name, op: node.op.rawValue, reason: "input '\(name)' is not a float tensor")
            }
        }
        var refs: [Ref?] = []
        for (name, value) in zip(node.outputs, outputs) {
            guard !name.isEmpty else { refs.append(nil); continue }
            let ref = allocate(value.count)
            self.refs[name] = ref
            refs.append(ref)
        }
        steps.append(ReferenceStep(node: node, inputs: sources, outputs: refs, opset: opset))
        kernels[node.name] = "reference"
    }
}
