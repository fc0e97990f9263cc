import CEarshotKernels

/// A constant matrix times x: y [rows][columns] = C [rows][k] x [k][columns], as the packed
/// product of x's columns (x transposed into the scratch) and the result transposed into y.
struct TransposedDenseStep: InputOutputStep {
    var x: GraphPlan.Ref
    var y: GraphPlan.Ref
    /// C as the product's weights: [rows][k].
    let packed: PackedMatrix
    let columns: Int

    var products: Int { columns * packed.rows * packed.k }
    var bf16Products: Int { packed.precision == .bf16 ? products : 0 }

    /// The scratch the step needs, in floats.
    static func scratch(k: Int, rows: Int, columns: Int) -> Int { columns * (k + rows) }

    func run(_ c: Context) {
        let k = packed.k, rows = packed.rows
        let xt = c.scratch, yt = c.scratch + columns * k
        for s in 0..<c.streams {
            earshot_transpose(c.read(x, s), k, columns, xt)
            packed.product(xt, ldx: k, columns: columns, bias: nil, into: yt, ldy: rows)
            earshot_transpose(yt, columns, rows, c.write(y, s))
        }
    }
}

extension TransposedDenseStep {
    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }
}
