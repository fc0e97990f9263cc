import CEarshotKernels

/// A weight matrix [rows][k] packed once, at load, for the product kernel: as floats, or (bf16
/// precision) rounded to bf16 and packed in pairs for the bf16 kernel.
package struct PackedMatrix: Sendable {
    package let rows: Int
    package let k: Int
    package let precision: Precision
    /// fp32: earshot_pack's layout. Empty for bf16.
    package let values: [Float]
    /// bf16: earshot_bf16_pack's layout. Empty for fp32.
    let halves: [UInt16]

    package init(_ weight: [Float], rows: Int, k: Int, precision: Precision = .fp32) {
        self.rows = rows
        self.k = k
        self.precision = precision
        switch precision {
        case .fp32:
            var packed = [Float](repeating: 0, count: earshot_packed_count(rows, k))
            weight.withUnsafeBufferPointer { w in
                packed.withUnsafeMutableBufferPointer { earshot_pack(w.baseAddress!, rows, k, $0.baseAddress!) }
            }
            values = packed
            halves = []
        case .bf16:
            var packed = [UInt16](repeating: 0, count: earshot_bf16_packed_count(rows, k))
            weight.withUnsafeBufferPointer { w in
                packed.withUnsafeMutableBufferPointer { earshot_bf16_pack(w.baseAddress!, rows, k, $0.baseAddress!) }
            }
            values = []
            halves = packed
        }
    }

    /// y = W x (+ bias) for `columns` columns: column j of x at x + j * ldx (k values), its
    /// outputs at y + j * ldy (rows values). Each output is summed as it would be alone.
    package func product(_ x: UnsafePointer<Float>, ldx: Int, columns: Int, bias: [Float]?, into y: UnsafeMutablePointer<Float>, ldy: Int) {
        bias.withBaseAddress { b in
            switch precision {
            case .fp32: values.withUnsafeBufferPointer { earshot_gemm_packed($0.baseAddress!, rows, k, x, ldx, columns, b, y, ldy) }
            case .bf16: halves.withUnsafeBufferPointer { earshot_gemm_bf16($0.baseAddress!, rows, k, x, ldx, columns, b, y, ldy) }
            }
        }
    }

    /// Columns side by side: x [columns][k] into y [columns][rows].
    package func product(_ x: UnsafePointer<Float>, columns: Int, bias: [Float]?, into y: UnsafeMutablePointer<Float>) {
        product(x, ldx: k, columns: columns, bias: bias, into: y, ldy: rows)
    }
}

extension Optional where Wrapped == [Float] {
    /// The array's first value's address, or nil, for a C call that takes an optional pointer.
    @inline(__always)
    func withBaseAddress<R>(_ body: (UnsafePointer<Float>?) -> R) -> R {
        switch self {
        case let .some(array): array.withUnsafeBufferPointer { body($0.baseAddress) }
        case .none: body(nil)
        }
    }
}
