import CEarshotKernels
/// c[m][n] (+)= sum over k of a[m][k] * b[k][n], each sum in float in the order k = 0, 1, ...
/// `a` is [rows][depth] and `b` [depth][columns], row-major, at the given offsets.
func multiplyMatrices(_ a: UnsafeBufferPointer<Float>, _ aOffset: Int, _ b: UnsafeBufferPointer<Float>, _ bOffset: Int,
                      rows: Int, depth: Int, columns: Int, into c: UnsafeMutableBufferPointer<Float>, _ cOffset: Int) {
    for i in 0..<rows {
        let out = cOffset + i * columns
        for k in 0..<depth {
            let scale = a[aOffset + i * depth + k]
            let row = bOffset + k * columns
            for j in 0..<columns { c[out + j] += scale * b[row + j] }
        }
    }
}

enum MatrixOps {
    /// MatMul with numpy's rules: 1-D operands gain and then lose an axis, batch axes broadcast.
    static func matMul(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["A", "B"], required: 2, attributes: [])
        let a = try n.input(0, "A", [.float32])
        let b = try n.input(1, "B", [.float32])
        guard a.rank >= 1, b.rank >= 1 else { throw n.error("inputs A \(a.shape) and B \(b.shape) must have rank 1 or more") }
        let aShape = a.rank == 1 ? [1] + a.shape : a.shape
        let bShape = b.rank == 1 ? b.shape + [1] : b.shape
        let (rows, depth) = (aShape[aShape.count - 2], aShape[aShape.count - 1])
        let (bDepth, columns) = (bShape[bShape.count - 2], bShape[bShape.count - 1])
        guard depth == bDepth else {
            throw n.error("A \(a.shape) and B \(b.shape) do not multiply: \(depth) columns against \(bDepth) rows")
        }
        let aBatch = Array(aShape.dropLast(2))
        let bBatch = Array(bShape.dropLast(2))
        let batch = try n.broadcast(aBatch, bBatch, "the batch axes of A and B")
        var outShape = batch
        if a.rank > 1 { outShape.append(rows) }
        if b.rank > 1 { outShape.append(columns) }
        let total = try n.count(batch + [rows, columns], "the output")
        let aOffsets = broadcastOffsets(from: aBatch, to: batch)
        let bOffsets = broadcastOffsets(from: bBatch, to: batch)
        var y = [Float](repeating: 0, count: total)
        a.floats.withUnsafeBufferPointer { av in
            b.floats.withUnsafeBufferPointer { bv in
                y.withUnsafeMutableBufferPointer { yv in
                    for (i, (ao, bo)) in zip(aOffsets, bOffsets).enumerated() {
                        multiplyMatrices(av, ao * rows * depth, bv, bo * depth * columns, rows: rows, depth: depth, columns: columns,
                                         into: yv, i * rows * columns)
                    }
                }
            }
        }
        return [GraphTensor(shape: outShape, floats: y)]
    }

    /// Gemm: alpha * A' B' + beta * C, A' and B' transposed when transA / transB, C broadcast to
    /// the output.
    static func gemm(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["A", "B", "C"], required: 2, attributes: ["alpha", "beta", "transA", "transB"])
        var a = try n.input(0, "A", [.float32])
        var b = try n.input(1, "B", [.float32])
        let c = try n.optionalInput(2, "C", [.float32])
        guard a.rank == 2, b.rank == 2 else { throw n.error("inputs A \(a.shape) and B \(b.shape) must be 2-D") }
        if try n.int("transA", default: 0) != 0 { a = transposed(a) }
        if try n.int("transB", default: 0) != 0 { b = transposed(b) }
        let alpha = try n.float("alpha", default: 1)
        let beta = try n.float("beta", default: 1)
        let (rows, depth, columns) = (a.shape[0], a.shape[1], b.shape[1])
        guard b.shape[0] == depth else {
            throw n.error("A' \(a.shape) and B' \(b.shape) (after transA, transB) do not multiply")
        }
        let outShape = [rows, columns]
        let total = try n.count(outShape, "the output")
        var y = [Float](repeating: 0, count: total)
        a.floats.withUnsafeBufferPointer { av in
            b.floats.withUnsafeBufferPointer { bv in
                y.withUnsafeMutableBufferPointer { yv in
                    multiplyMatrices(av, 0, bv, 0, rows: rows, depth: depth, columns: columns, into: yv, 0)
                }
            }
        }
        if let c {
            guard broadcastShape(c.shape, outShape) == outShape else {
                throw n.error("input C has shape \(c.shape), which does not broadcast to the output \(outShape)")
            }
            let offsets = broadcastOffsets(from: c.shape, to: outShape)
            for i in 0..<total { y[i] = alpha * y[i] + beta * c.floats[offsets[i]] }
        } else if alpha != 1 {
            for i in 0..<total { y[i] *= alpha }
        }
        return [GraphTensor(shape: outShape, floats: y)]
    }

    /// A 2-D tensor transposed (floats by the transpose kernel, each value moved as it is).
    static func transposed(_ t: GraphTensor) -> GraphTensor {
        let shape = [t.shape[1], t.shape[0]]
        guard t.dtype == .float32, t.count > 0 else { return t.gathered(walkOffsets(shape: shape, strides: [1, t.shape[1]]), shape: shape) }
        var y = [Float](repeating: 0, count: t.count)
        t.floats.withUnsafeBufferPointer { x in
            y.withUnsafeMutableBufferPointer { out in
                if let from = x.baseAddress, let to = out.baseAddress { earshot_transpose(from, t.shape[0], t.shape[1], to) }
            }
        }
        return GraphTensor(shape: shape, floats: y)
    }
}
