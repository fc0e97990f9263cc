/// Rows of x [rows][k] times a constant matrix: y [rows][columns].
struct DenseStep: InputOutputStep {
    var x: GraphPlan.Ref
    var y: GraphPlan.Ref
    let rows: Int
    let packed: PackedMatrix
    let bias: [Float]?

    /// A matrix whose outputs are zero outside a band of its terms (a mel filter bank, each band a
    /// few FFT bins): per panel of 16 outputs, the product of the terms its band spans, from
    /// `start` (the zeros around it not multiplied). Then `packed` gives only the strides (its `k`
    /// terms an input row, its `rows` outputs an output row).
    struct Band: Sendable {
        /// The band's first output and first term.
        let first, start: Int
        /// Its outputs (16 or fewer) by the terms it spans.
        let packed: PackedMatrix
        let bias: [Float]?
    }

    var bands: [Band]? = nil

    var products: Int { rows * (bands.map { $0.reduce(0) { $0 + $1.packed.rows * $1.packed.k } } ?? packed.rows * packed.k) }
    var bf16Products: Int { packed.precision == .bf16 ? products : 0 }

    func run(_ c: Context) {
        if let bands {
            for b in 0..<c.streams {
                let input = c.read(x, b), out = c.write(y, b)
                for band in bands {
                    band.packed.product(input + band.start, ldx: packed.k, columns: rows, bias: band.bias, into: out + band.first, ldy: packed.rows)
                }
            }
            return
        }
        if rows == 1 {
            packed.product(c.read(x, 0), ldx: c.stride, columns: c.streams, bias: bias, into: c.write(y, 0), ldy: c.stride)
            return
        }
        for b in 0..<c.streams {
            packed.product(c.read(x, b), ldx: packed.k, columns: rows, bias: bias, into: c.write(y, b), ldy: packed.rows)
        }
    }
}

extension DenseStep {
    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }
}
