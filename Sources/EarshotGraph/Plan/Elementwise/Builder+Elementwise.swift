import CEarshotKernels

extension Builder {
    /// An element-wise op of one float input; Relu and LeakyRelu after a Conv, its only reader, go
    /// into the Conv's step (`fuse`).
    mutating func unary(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) -> String? {
        guard let kind = UnaryStep.Kind(g.op), let x = inputs.first ?? nil, x.dtype == .float32,
              let xRef = ref(g.inputs[0]) else { return nil }
        var (alpha, beta): (Float, Float) = (0, 0)
        if kind == .relu, fuse(.unary(Int32(EARSHOT_RELU), alpha: 0), reading: g.inputs[0], as: xRef, into: g.outputs[0]) {
            return "with the Conv"
        }
        if kind == .sigmoid, fuse(.unary(Int32(EARSHOT_SIGMOID), alpha: 0), reading: g.inputs[0], as: xRef, into: g.outputs[0]) {
            return "with the Conv"
        }
        if kind == .leakyRelu, case let .float(a) = g.attributes["alpha"] ?? .float(0.01),
           fuse(.unary(Int32(EARSHOT_LEAKY_RELU), alpha: a), reading: g.inputs[0], as: xRef, into: g.outputs[0]) {
            return "with the Conv"
        }
        var bounds: [Ref?] = [nil, nil]
        switch kind {
        case .leakyRelu:
            guard case let .float(a) = g.attributes["alpha"] ?? .float(0.01) else { return nil }
            alpha = a
        case .clip:
            // Bounds are inputs (opset 11 on): each a single value (fixed or computed), or omitted.
            for i in [1, 2] where i < inputs.count {
                guard let t = inputs[i] else { continue }
                guard t.count == 1, t.dtype == .float32, let r = ref(g.inputs[i]) else { return nil }
                bounds[i - 1] = r
            }
        default:
            guard inputs.count == 1 else { return nil }
        }
        let y = allocate(outputs[0].count)
        refs[g.outputs[0]] = y
        steps.append(UnaryStep(kind: kind, x: xRef, y: y, alpha: alpha, beta: beta, low: bounds[0], high: bounds[1]))
        return "element-wise"
    }

    /// An element-wise op of two float inputs; Max or Min with a constant after a Conv, its only
    /// reader, goes into the Conv's step (`fuse`).
    mutating func binary(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) -> String? {
        guard var kind = BinaryStep.Kind(g.op), inputs.count == 2, let a = inputs[0], let b = inputs[1],
              a.dtype == .float32, b.dtype == .float32, outputs[0].dtype == .float32 else { return nil }
        let shape = outputs[0].shape
        if kind == .pow, fixed.contains(g.inputs[1]), b.scalarFloat == 2 { kind = .square }
        // x * x (TFLite's square): the same kernel as Pow by 2, so an STFT's power fuses alike.
        if kind == .mul, g.inputs[0] == g.inputs[1] { kind = .square }
        guard let aRef = ref(g.inputs[0]), let bRef = ref(g.inputs[1]) else { return nil }
        if let op: Int32 = kind == .max ? Int32(EARSHOT_MAX) : kind == .min ? Int32(EARSHOT_MIN) : nil, a.shape == shape,
           fixed.contains(g.inputs[1]), let value = b.scalarFloat,
           fuse(.binary(op, value), reading: g.inputs[0], as: aRef, into: g.outputs[0]) {
            return "with the Conv"
        }
        if kind == .mul, let compiled = swish(g) { return compiled }
        let y = allocate(outputs[0].count)
        refs[g.outputs[0]] = y
        steps.append(BinaryStep(kind: kind, a: aRef, b: bRef, y: y,
                                        mapA: BinaryStep.map(a.shape, to: shape), mapB: BinaryStep.map(b.shape, to: shape)))
        return "element-wise"
    }
}

extension Builder {
    /// x * Sigmoid(x) as one step (`UnaryStep.Kind.swish`): when the last step is the Sigmoid of
    /// one of this Mul's operands, the other operand is its input, and this Mul is its only reader.
    /// The Sigmoid's step becomes the swish, writing the Mul's output in the Sigmoid's place; and
    /// when x is a Conv's output that only the Sigmoid and this Mul read, the swish goes into the
    /// Conv's step instead, in place, as its last fused op.
    mutating func swish(_ g: GraphNode) -> String? {
        guard g.inputs.count == 2, let sigmoid = steps.last as? UnaryStep, sigmoid.kind == .sigmoid,
              let k = g.inputs.firstIndex(where: { refs[$0] == sigmoid.y && readers[$0, default: 0] == 1 }),
              g.inputs[1 - k] != g.inputs[k], refs[g.inputs[1 - k]] == sigmoid.x else { return nil }
        // Only the Sigmoid and this Mul read the Conv's output, under any name (a view of it too).
        if steps.count >= 2, var conv = steps[steps.count - 2] as? ConvStep, conv.y == sigmoid.x,
           refs.filter({ $0.value.overlaps(conv.y) }).reduce(0, { $0 + readers[$1.key, default: 0] }) == 2 {
            conv.fuse(.unary(Int32(EARSHOT_SWISH), alpha: 0))
            steps.removeLast()
            steps[steps.count - 1] = conv
            refs[g.outputs[0]] = conv.y
            if let node = producers[g.inputs[k]] { kernels[node] = "with the Conv" }
            return "with the Conv"
        }
        steps[steps.count - 1] = UnaryStep(kind: .swish, x: sigmoid.x, y: sigmoid.y, alpha: 0, beta: 0, low: nil, high: nil)
        refs[g.outputs[0]] = sigmoid.y
        return "element-wise"
    }
}
