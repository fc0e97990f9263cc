extension Builder {
    /// MatMul by a constant 2-D matrix; Gemm with constant B, A not transposed, and a bias of one value per column.
    mutating func dense(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        // A constant matrix times a computed one (a DFT exported as C x; C's leading axes broadcast
        // over one x, so they stack as rows): the product of x's columns.
        if g.op == .matMul, inputs.count == 2, let c = inputs[0], let x = inputs[1], fixed.contains(g.inputs[0]), !fixed.contains(g.inputs[1]),
           c.rank >= 2, x.rank == 2, c.dtype == .float32, x.dtype == .float32, c.shape[c.rank - 1] == x.shape[0], c.count > 0, x.count > 0,
           outputs[0].count == c.count / x.shape[0] * x.shape[1], let xRef = ref(g.inputs[1]) {
            let (rows, k, columns) = (c.count / x.shape[0], x.shape[0], x.shape[1])
            if !directProducts.contains(g.outputs[0]),
               let compiled = fftOfColumns(g, x: xRef, output: outputs[0], basis: c.floats, rows: rows, size: k, columns: columns) {
                return compiled
            }
            let y = allocate(outputs[0].count)
            refs[g.outputs[0]] = y
            let precision = self.precision(of: g)
            steps.append(TransposedDenseStep(x: xRef, y: y, packed: PackedMatrix(c.floats, rows: rows, k: k, precision: precision), columns: columns))
            scratchSize = max(scratchSize, TransposedDenseStep.scratch(k: k, rows: rows, columns: columns))
            return described("packed product", precision)
        }
        guard inputs.count >= 2, let a = inputs[0], let b = inputs[1], fixed.contains(g.inputs[1]), b.rank == 2,
              b.dtype == .float32, let aRef = ref(g.inputs[0]), a.rank >= 1 else { return nil }
        let n = node(g, inputs)
        var weight: [Float]  // [columns][k]
        var bias: [Float]? = nil
        let k: Int, columns: Int
        if g.op == .matMul {
            (k, columns) = (b.shape[0], b.shape[1])
            guard a.shape.last == k else { return nil }
            weight = transposed(b.floats, rows: k, columns: columns)
        } else {
            guard a.rank == 2, try n.int("transA", default: 0) == 0 else { return nil }
            let transB = try n.int("transB", default: 0) != 0
            (k, columns) = transB ? (b.shape[1], b.shape[0]) : (b.shape[0], b.shape[1])
            guard a.shape[1] == k else { return nil }
            weight = transB ? b.floats : transposed(b.floats, rows: k, columns: columns)
            let alpha = try n.float("alpha", default: 1), beta = try n.float("beta", default: 1)
            if alpha != 1 { weight = weight.map { $0 * alpha } }
            if inputs.count > 2, let c = inputs[2] {
                guard fixed.contains(g.inputs[2]), c.dtype == .float32 else { return nil }
                if c.count == columns, c.shape.last == columns, c.shape.dropLast().allSatisfy({ $0 == 1 }) {
                    bias = c.floats.map { $0 * beta }
                } else if c.count == 1 {
                    bias = [Float](repeating: c.floats[0] * beta, count: columns)
                } else {
                    return nil
                }
            }
        }
        let rows = a.count / max(k, 1)
        guard k > 0, columns > 0, outputs[0].count == rows * columns else { return nil }
        if bias?.allSatisfy({ $0 == 0 }) ?? true, !directProducts.contains(g.outputs[0]),
           let compiled = fftProduct(g, x: aRef, output: outputs[0], rows: rows, size: k, weight: weight, columns: columns) {
            return compiled
        }
        let y = allocate(outputs[0].count)
        refs[g.outputs[0]] = y
        let precision = self.precision(of: g)
        var step = DenseStep(x: aRef, y: y, rows: rows, packed: PackedMatrix(weight, rows: columns, k: k, precision: precision), bias: bias)
        if precision == .fp32, rows > 1, let bands = Self.bands(weight, outputs: columns, k: k, bias: bias) {
            step.bands = bands
            steps.append(step)
            return "packed product, banded"
        }
        steps.append(step)
        return described("packed product", precision)
    }

    /// The bands of `weight` [outputs][k], per panel of 16 outputs the terms from its first nonzero
    /// weight to its last, when together they span at most half of the terms (a mel filter bank);
    /// otherwise nil. Only zero weights are left out, so each output is the same sum of the same
    /// products, in blocks that start at its band.
    static func bands(_ weight: [Float], outputs: Int, k: Int, bias: [Float]?) -> [DenseStep.Band]? {
        var bands: [(first: Int, count: Int, start: Int, end: Int)] = []
        for first in stride(from: 0, to: outputs, by: 16) {
            let count = min(16, outputs - first)
            var start = k, end = 0
            for o in first..<(first + count) {
                let row = weight[(o * k)..<(o * k + k)]
                if let lo = row.firstIndex(where: { $0 != 0 }), let hi = row.lastIndex(where: { $0 != 0 }) {
                    start = min(start, lo - o * k)
                    end = max(end, hi - o * k + 1)
                }
            }
            if start >= end { (start, end) = (0, 1) }  // all zeros: one term, to keep the product's shape
            bands.append((first, count, start, end))
        }
        guard bands.reduce(0, { $0 + $1.end - $1.start }) * 2 <= bands.count * k else { return nil }
        return bands.map { band in
            var w = [Float](repeating: 0, count: band.count * (band.end - band.start))
            for o in 0..<band.count {
                for i in band.start..<band.end { w[o * (band.end - band.start) + i - band.start] = weight[(band.first + o) * k + i] }
            }
            return DenseStep.Band(first: band.first, start: band.start, packed: PackedMatrix(w, rows: band.count, k: band.end - band.start),
                                  bias: bias.map { Array($0[band.first..<(band.first + band.count)]) })
        }
    }

    private func transposed(_ m: [Float], rows: Int, columns: Int) -> [Float] {
        var t = [Float](repeating: 0, count: m.count)
        for r in 0..<rows { for c in 0..<columns { t[c * rows + r] = m[r * columns + c] } }
        return t
    }
}
