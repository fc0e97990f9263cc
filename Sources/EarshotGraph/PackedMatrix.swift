import CEarshotKernels

/// A weight matrix [rows][k] packed once, at load, for the product kernel.
package struct PackedMatrix: Sendable {
    package let rows: Int
    package let k: Int
    package let values: [Float]

    package init(_ weight: [Float], rows: Int, k: Int) {
        self.rows = rows
        self.k = k
        var packed = [Float](repeating: 0, count: earshot_packed_count(rows, k))
        weight.withUnsafeBufferPointer { w in
            packed.withUnsafeMutableBufferPointer { earshot_pack(w.baseAddress!, rows, k, $0.baseAddress!) }
        }
        values = packed
    }

    /// y = W x (+ bias) for `columns` columns: column j of x at x + j * ldx (k values), its
    /// outputs at y + j * ldy (rows values). Each output is summed as it would be alone.
    package func product(_ x: UnsafePointer<Float>, ldx: Int, columns: Int, bias: [Float]?, into y: UnsafeMutablePointer<Float>, ldy: Int) {
        values.withUnsafeBufferPointer { w in
            if let bias {
                bias.withUnsafeBufferPointer { earshot_gemm_packed(w.baseAddress!, rows, k, x, ldx, columns, $0.baseAddress!, y, ldy) }
            } else {
                earshot_gemm_packed(w.baseAddress!, rows, k, x, ldx, columns, nil, y, ldy)
            }
        }
    }

    /// Columns side by side: x [columns][k] into y [columns][rows].
    package func product(_ x: UnsafePointer<Float>, columns: Int, bias: [Float]?, into y: UnsafeMutablePointer<Float>) {
        product(x, ldx: k, columns: columns, bias: bias, into: y, ldy: rows)
    }
}
