/// BatchNormalization at inference: each channel's values times its scale plus its shift,
/// x [items][channels][inner] (the scale and shift computed once at build, as the reference
/// kernel computes them, and applied in its order: a product, then a sum).
struct AffineStep: InputOutputStep {
    var x, y: GraphPlan.Ref
    let items, inner: Int
    let scales, shifts: [Float]

    func run(_ c: Context) {
        let channels = scales.count
        scales.withUnsafeBufferPointer { scale in
            shifts.withUnsafeBufferPointer { shift in
                for s in 0..<c.streams {
                    let input = c.read(x, s), out = c.write(y, s)
                    for item in 0..<items {
                        for ch in 0..<channels {
                            let base = (item * channels + ch) * inner, m = scale[ch], a = shift[ch]
                            for i in 0..<inner { out[base + i] = input[base + i] * m + a }
                        }
                    }
                }
            }
        }
    }
}

extension AffineStep {
    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }
}

extension Builder {
    /// BatchNormalization (inference) with constant parameters: `AffineStep`.
    mutating func batchNormalization(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        guard inputs.count == 5, let x = inputs[0], x.dtype == .float32, x.rank >= 2, g.inputs[1...].allSatisfy({ fixed.contains($0) }),
              let xRef = ref(g.inputs[0]) else { return nil }
        let channels = x.shape[1]
        let parameters = inputs[1...].map { $0?.floats ?? [] }
        guard parameters.allSatisfy({ $0.count == channels }), channels > 0 else { return nil }
        let n = node(g, inputs)
        guard try n.int("training_mode", default: 0) == 0 else { return nil }
        let epsilon = try n.float("epsilon", default: 1e-5)
        let scales = (0..<channels).map { parameters[0][$0] / (parameters[3][$0] + epsilon).squareRoot() }
        let shifts = (0..<channels).map { parameters[1][$0] - parameters[2][$0] * scales[$0] }
        let inner = x.shape[2...].reduce(1, *)
        let y = allocate(outputs[0].count)
        refs[g.outputs[0]] = y
        steps.append(AffineStep(x: xRef, y: y, items: x.shape[0], inner: inner, scales: scales, shifts: shifts))
        return "element-wise"
    }
}
