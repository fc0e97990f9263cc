import CEarshotKernels

/// LSTM over X [steps][batch][input], given its input products W x + b for every step and
/// batch row (`inputProducts`, [steps][batch][4 * hidden], gates i, f, g, o, by a DenseStep
/// before it): per step, R h of every stream and batch row in one packed product, the input
/// products added, then the cell kernel. The input products do not wait for the state, so
/// consecutive steps of a stream take them all at once.
struct LSTMStep: Step {
    var inputProducts: GraphPlan.Ref
    var h0: GraphPlan.Ref?
    var c0: GraphPlan.Ref?
    var y: GraphPlan.Ref?
    var yh: GraphPlan.Ref?
    var yc: GraphPlan.Ref?
    let steps, batch, hidden: Int
    /// R [4 * hidden][hidden].
    let recurrent: PackedMatrix

    var products: Int { steps * batch * recurrent.rows * recurrent.k }
    var bf16Products: Int { recurrent.precision == .bf16 ? products : 0 }

    func run(_ c: Context) {
        let rows = c.streams * batch, H = hidden, G = 4 * H
        let gates = c.scratch, hc = gates + rows * G
        for b in 0..<c.streams {
            for j in 0..<batch {
                let row = hc + (b * batch + j) * 2 * H
                if let h0 { row.update(from: c.read(h0, b) + j * H, count: H) } else { row.update(repeating: 0, count: H) }
                if let c0 { (row + H).update(from: c.read(c0, b) + j * H, count: H) } else { (row + H).update(repeating: 0, count: H) }
            }
        }
        for t in 0..<steps {
            recurrent.product(hc, ldx: 2 * H, columns: rows, bias: nil, into: gates, ldy: G)
            for b in 0..<c.streams {
                let products = c.read(inputProducts, b) + t * batch * G
                for j in 0..<batch {
                    let r = b * batch + j
                    earshot_binary(Int32(EARSHOT_ADD), products + j * G, 1, gates + r * G, 1, gates + r * G, G)
                    earshot_lstm_cell(gates + r * G, H, hc + r * 2 * H, hc + r * 2 * H + H)
                }
            }
            if let y {
                for b in 0..<c.streams {
                    for j in 0..<batch { (c.write(y, b) + (t * batch + j) * H).update(from: hc + (b * batch + j) * 2 * H, count: H) }
                }
            }
        }
        for b in 0..<c.streams {
            for j in 0..<batch {
                let row = hc + (b * batch + j) * 2 * H
                if let yh { (c.write(yh, b) + j * H).update(from: row, count: H) }
                if let yc { (c.write(yc, b) + j * H).update(from: row + H, count: H) }
            }
        }
    }
}

extension LSTMStep {
    var reads: [GraphPlan.Ref] { [inputProducts] + [h0, c0].compactMap { $0 } }
    var writes: [GraphPlan.Ref] { [y, yh, yc].compactMap { $0 } }
}

extension LSTMStep {
    func relocated(_ move: (GraphPlan.Ref) -> GraphPlan.Ref) -> (any Step)? {
        var moved = self
        moved.inputProducts = move(inputProducts)
        (moved.h0, moved.c0) = (h0.map(move), c0.map(move))
        (moved.y, moved.yh, moved.yc) = (y.map(move), yh.map(move), yc.map(move))
        return moved
    }
}
