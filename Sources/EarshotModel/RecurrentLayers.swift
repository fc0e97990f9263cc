import CEarshotKernels
import EarshotGraph
import Foundation

/// The input products of a recurrent layer for every column at once: W_ih x + b_ih,
/// [columns][rows], into `out`. Only the recurrent product has to wait for the previous step.
func inputProducts(_ x: Activations, weight: PackedMatrix, bias: [Float]?, into out: inout [Float]) {
    out.setCount(weight.rows * x.columns)
    x.values.withUnsafeBufferPointer { xv in
        out.withUnsafeMutableBufferPointer { o in
            weight.product(xv.baseAddress!, columns: x.columns, bias: bias, into: o.baseAddress!)
        }
    }
}

/// W_hh h + b_hh for `count` streams: [count][rows] into `out`, each stream's h read where its
/// state keeps it.
func recurrentProducts(weight: PackedMatrix, bias: [Float]?, states: StateRows, count B: Int, into out: UnsafeMutablePointer<Float>) {
    weight.product(UnsafePointer(states[0]), ldx: states.stride, columns: B, bias: bias, into: out, ldy: weight.rows)
}

/// A recurrent layer: input products for every column at once, then a recurrence that has to
/// go step by step.
protocol RecurrentLayer: Sendable {
    var weights: RecurrentWeights { get }
    /// The bias added to the input product.
    var inputBias: [Float] { get }
    /// The recurrence over `time` steps for each of `count` streams, given the input products
    /// ([columns][gates * hidden]; stream b's step t is column firstColumn + b * time + t), into
    /// `y` ([count][time][hidden]) at column `firstColumn`.
    func recur(inputProducts: UnsafePointer<Float>, firstColumn: Int, time: Int, count: Int,
               states: StateRows, into y: UnsafeMutablePointer<Float>, scratch: inout LayerScratch)
}

/// A recurrent layer's weights, packed for the product: input [gates * hidden][input] and
/// hidden [gates * hidden][hidden].
struct RecurrentWeights: Sendable {
    let inputSize, hiddenSize, gates: Int
    let input: PackedMatrix
    let hidden: PackedMatrix

    init(gates: Int, inputSize: Int, hiddenSize: Int, weightIH: [Float], weightHH: [Float]) {
        self.gates = gates
        self.inputSize = inputSize
        self.hiddenSize = hiddenSize
        input = PackedMatrix(weightIH, rows: gates * hiddenSize, k: inputSize)
        hidden = PackedMatrix(weightHH, rows: gates * hiddenSize, k: hiddenSize)
    }

    var parameterCount: Int { gates * hiddenSize * (inputSize + hiddenSize) }
}

extension RecurrentLayer {
    var hiddenSize: Int { weights.hiddenSize }
    func inputProducts(_ x: Activations) -> [Float] {
        var out: [Float] = []
        inputProducts(x, into: &out)
        return out
    }

    func inputProducts(_ x: Activations, into out: inout [Float]) {
        EarshotModel.inputProducts(x, weight: weights.input, bias: inputBias, into: &out)
    }

    func run(_ x: Activations, into y: inout Activations, states: StateRows, scratch: inout LayerScratch) {
        inputProducts(x, into: &scratch.fields)
        y.reshape(channels: hiddenSize, time: x.time, batch: x.batch)
        var ip: [Float] = []
        swap(&ip, &scratch.fields)
        ip.withUnsafeBufferPointer { p in
            y.values.withUnsafeMutableBufferPointer { yv in
                recur(inputProducts: p.baseAddress!, firstColumn: 0, time: x.time, count: x.batch, states: states,
                      into: yv.baseAddress!, scratch: &scratch)
            }
        }
        swap(&ip, &scratch.fields)
    }
}

/// One LSTM layer over the block's steps, carrying (h, c) in the stream's state.
/// ref: torch.nn.LSTM, gate order i, f, g, o; state layout [h][c]
struct LSTM: RecurrentLayer {
    let name: String
    let weights: RecurrentWeights
    /// [4 * hidden]: bias_ih + bias_hh
    let bias: [Float]

    var inputBias: [Float] { bias }

    func recur(inputProducts ip: UnsafePointer<Float>, firstColumn: Int, time T: Int, count B: Int,
               states: StateRows, into y: UnsafeMutablePointer<Float>, scratch: inout LayerScratch) {
        let H = hiddenSize, rows = 4 * H
        scratch.gates.setCount(rows)
        scratch.part.setCount(rows * B)
        scratch.gates.withUnsafeMutableBufferPointer { g in
            scratch.part.withUnsafeMutableBufferPointer { recurrent in
                for t in 0..<T {
                    recurrentProducts(weight: weights.hidden, bias: nil, states: states, count: B, into: recurrent.baseAddress!)
                    for b in 0..<B {
                        let column = firstColumn + b * T + t, state = states[b]
                        for r in 0..<rows { g[r] = ip[column * rows + r] + recurrent[b * rows + r] }
                        earshot_lstm_cell(g.baseAddress!, H, state, state + H)
                        (y + (b * T + t) * H).update(from: state, count: H)
                    }
                }
            }
        }
    }
}

/// One GRU layer over the block's steps, carrying h in the stream's state.
/// ref: torch.nn.GRU, gate order r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
struct GRU: RecurrentLayer {
    let name: String
    let weights: RecurrentWeights
    let biasIH: [Float]
    let biasHH: [Float]

    var inputBias: [Float] { biasIH }

    func recur(inputProducts gi: UnsafePointer<Float>, firstColumn: Int, time T: Int, count B: Int,
               states: StateRows, into y: UnsafeMutablePointer<Float>, scratch: inout LayerScratch) {
        let H = hiddenSize, rows = 3 * H
        scratch.part.setCount(rows * B)
        scratch.part.withUnsafeMutableBufferPointer { ghBuffer in
            let gh = ghBuffer.baseAddress!
            for t in 0..<T {
                recurrentProducts(weight: weights.hidden, bias: biasHH, states: states, count: B, into: gh)
                for b in 0..<B {
                    let i = (firstColumn + b * T + t) * rows, r0 = b * rows, h = states[b]
                    for j in 0..<H {
                        let r = logistic(gi[i + j] + gh[r0 + j]), z = logistic(gi[i + H + j] + gh[r0 + H + j])
                        let cand = tanh(gi[i + 2 * H + j] + r * gh[r0 + 2 * H + j])
                        h[j] = (1 - z) * cand + z * h[j]
                        y[(b * T + t) * H + j] = h[j]
                    }
                }
            }
        }
    }
}

extension Layer {
    /// The layer as a recurrent one, if it is.
    var recurrent: (any RecurrentLayer)? {
        switch self {
        case let .lstm(l): return l
        case let .gru(g): return g
        default: return nil
        }
    }
}
