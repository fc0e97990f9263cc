/// Rows of x [rows][k] times a constant matrix: y [rows][columns].
struct DenseStep: Step {
    let x: GraphPlan.Ref
    let y: GraphPlan.Ref
    let rows: Int
    let packed: PackedMatrix
    let bias: [Float]?

    var products: Int { rows * packed.rows * packed.k }
    var bf16Products: Int { packed.precision == .bf16 ? products : 0 }

    func run(_ c: Context) {
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
