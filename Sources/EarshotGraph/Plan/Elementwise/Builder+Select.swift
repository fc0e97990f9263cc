extension Builder {
    /// A comparison of two float tensors that only Wheres read (as their condition): no step of
    /// its own, the Where compares as it selects.
    mutating func condition(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) -> String? {
        guard let kind = SelectStep.Comparison(g.op), outputs.count == 1, conditionsOnly.contains(g.outputs[0]),
              inputs.count == 2, let a = inputs[0], let b = inputs[1], a.dtype == .float32, b.dtype == .float32,
              let aRef = ref(g.inputs[0]), let bRef = ref(g.inputs[1]) else { return nil }
        let shape = outputs[0].shape
        conditions[g.outputs[0]] = .init(kind: kind, a: aRef, b: bRef, mapA: BinaryStep.map(a.shape, to: shape),
                                         mapB: BinaryStep.map(b.shape, to: shape), shape: shape)
        return "with the Where"
    }

    /// Where(condition, X, Y) on floats, its condition a comparison compiled into it.
    mutating func select(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) -> String? {
        guard inputs.count == 3, let condition = conditions[g.inputs[0]], let x = inputs[1], let y = inputs[2],
              x.dtype == .float32, y.dtype == .float32, outputs[0].dtype == .float32 else { return nil }
        let shape = outputs[0].shape
        // A choice of one whole tensor of codes or another (a state kept or replaced) stays codes.
        if x.shape == shape, y.shape == shape, condition.a.count == 1, condition.b.count == 1, refs[g.inputs[1]]?.coded == true || refs[g.inputs[2]]?.coded == true,
           let xHeld = codes(g.inputs[1]), let yHeld = codes(g.inputs[2]) {
            let out = allocateCodes(outputs[0].count)
            refs[g.outputs[0]] = out
            steps.append(SelectStep(condition: condition, conditionMap: nil, x: xHeld, y: yHeld, out: out, mapX: nil, mapY: nil))
            return "element-wise"
        }
        guard let xRef = ref(g.inputs[1]), let yRef = ref(g.inputs[2]) else { return nil }
        let out = allocate(outputs[0].count)
        refs[g.outputs[0]] = out
        steps.append(SelectStep(condition: condition, conditionMap: BinaryStep.map(condition.shape, to: shape), x: xRef, y: yRef, out: out,
                                mapX: BinaryStep.map(x.shape, to: shape), mapY: BinaryStep.map(y.shape, to: shape)))
        return "element-wise"
    }
}
