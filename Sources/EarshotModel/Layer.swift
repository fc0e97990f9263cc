import CEarshotKernels
import Foundation

/// Activations between layers for a batch of streams: [channels][batch][time], row-major, so
/// that channel c of stream b at step t is `values[c * batch * time + b * time + t]`. One stream
/// is a batch of one: [channels][time].
struct Activations {
    var channels: Int
    var time: Int
    var batch: Int
    var values: [Float]

    init(channels: Int, time: Int, batch: Int = 1, values: [Float]) {
        self.channels = channels
        self.time = time
        self.batch = batch
        self.values = values
    }

    init(channels: Int, time: Int, batch: Int = 1) {
        self.init(channels: channels, time: time, batch: batch, values: [Float](repeating: 0, count: channels * batch * time))
    }

    /// Columns (stream, step) side by side.
    var columns: Int { batch * time }

    /// The values as [batch * time][channels]: one row per column.
    func columnMajor() -> [Float] {
        var out = [Float](repeating: 0, count: values.count)
        let n = columns
        values.withUnsafeBufferPointer { v in
            out.withUnsafeMutableBufferPointer { o in
                for c in 0..<channels { for j in 0..<n { o[j * channels + c] = v[c * n + j] } }
            }
        }
        return out
    }

    /// Stream b's activations alone ([channels][time]).
    func stream(_ b: Int) -> Activations {
        var out = Activations(channels: channels, time: time)
        for c in 0..<channels {
            let from = c * columns + b * time
            out.values.replaceSubrange((c * time)..<((c + 1) * time), with: values[from..<(from + time)])
        }
        return out
    }

    /// Streams side by side as one batch (all with the same channels and time).
    static func joined(_ parts: [Activations]) -> Activations {
        guard let first = parts.first else { return Activations(channels: 0, time: 0, batch: 0) }
        let T = first.time, B = parts.reduce(0) { $0 + $1.batch }
        var out = Activations(channels: first.channels, time: T, batch: B)
        var b0 = 0
        for p in parts {
            for c in 0..<p.channels {
                out.values.replaceSubrange((c * B * T + b0 * T)..<(c * B * T + (b0 + p.batch) * T),
                                           with: p.values[(c * p.columns)..<((c + 1) * p.columns)])
            }
            b0 += p.batch
        }
        return out
    }
}

/// A layer with its weights, ready to run. Weights are immutable; recurrent layers keep their
/// carry in the stream's state at `stateOffset`.
enum Layer: Sendable {
    case conv1d(Conv1d)
    case linear(Linear)
    case lstm(LSTM)
    case gru(GRU)
    case layerNorm(LayerNorm)
    case pool(Pool)
    case activation(Activation)

    enum Pool: String, Sendable {
        case mean, max
    }

    enum Activation: String, Sendable {
        case relu, sigmoid, tanh, silu, gelu, softmax
    }

    var name: String {
        switch self {
        case let .conv1d(l): return l.name
        case let .linear(l): return l.name
        case let .lstm(l): return l.name
        case let .gru(l): return l.name
        case let .layerNorm(l): return l.name
        case let .pool(p): return p.rawValue + "Pool"
        case let .activation(a): return a.rawValue
        }
    }

    /// Floats of state this layer carries per stream.
    var stateCount: Int {
        switch self {
        case let .lstm(l): return 2 * l.hiddenSize
        case let .gru(l): return l.hiddenSize
        case let .conv1d(c): return c.contextFrames * c.inChannels
        default: return 0
        }
    }

    func outputChannels(input: Int) -> Int {
        switch self {
        case let .conv1d(l): return l.outChannels
        case let .linear(l): return l.outFeatures
        case let .lstm(l): return l.hiddenSize
        case let .gru(l): return l.hiddenSize
        case .layerNorm, .pool, .activation: return input
        }
    }

    func outputTime(input: Int) -> Int {
        if case let .conv1d(l) = self { return l.outputLength(input) }
        if case .pool = self { return 1 }
        return input
    }

    /// Multiply-adds for one step with `time` input steps.
    func multiplyAdds(time: Int) -> Int {
        switch self {
        case let .conv1d(l): return l.outputLength(time) * l.outChannels * (l.inChannels / l.groups) * l.kernelSize
        case let .linear(l): return time * l.inFeatures * l.outFeatures
        case let .lstm(l): return time * 4 * l.hiddenSize * (l.inputSize + l.hiddenSize)
        case let .gru(l): return time * 3 * l.hiddenSize * (l.inputSize + l.hiddenSize)
        case let .layerNorm(l): return time * l.channels * 2
        case .pool, .activation: return 0
        }
    }

    var parameterCount: Int {
        switch self {
        case let .conv1d(l): return l.weight.count + l.bias.count
        case let .linear(l): return l.weight.count + l.bias.count
        case let .lstm(l): return l.weightIH.count + l.weightHH.count + 2 * l.bias.count  // stored: bias_ih and bias_hh
        case let .gru(l): return l.weightIH.count + l.weightHH.count + l.biasIH.count + l.biasHH.count
        case let .layerNorm(l): return 2 * l.channels
        case .pool, .activation: return 0
        }
    }

    /// Runs the layer on a batch; `states[b]` is stream b's carry for this layer.
    func run(_ x: Activations, states: [UnsafeMutableBufferPointer<Float>]) -> Activations {
        switch self {
        case let .conv1d(l): return l.run(x, states: states)
        case let .linear(l): return l.run(x)
        case let .layerNorm(l): return l.run(x)
        case let .lstm(l): return l.run(x, states: states)
        case let .gru(l): return l.run(x, states: states)
        case let .pool(kind):
            var y = Activations(channels: x.channels, time: 1, batch: x.batch)
            for c in 0..<x.channels {
                for b in 0..<x.batch {
                    let row = x.values[(c * x.columns + b * x.time)..<(c * x.columns + (b + 1) * x.time)]
                    y.values[c * x.batch + b] = kind == .mean ? row.reduce(0, +) / Float(max(x.time, 1)) : row.max() ?? 0
                }
            }
            return y
        case let .activation(a):
            var y = x
            a.apply(&y)
            return y
        }
    }

    /// One stream.
    func run(_ x: Activations, state: UnsafeMutableBufferPointer<Float>) -> Activations {
        run(x, states: [state])
    }
}

extension Layer.Activation {
    func apply(_ x: inout Activations) {
        switch self {
        case .relu: earshot_relu(&x.values, x.values.count)
        case .sigmoid: earshot_sigmoid(&x.values, x.values.count)
        case .tanh: earshot_tanh(&x.values, x.values.count)
        case .silu: for i in x.values.indices { x.values[i] *= logistic(x.values[i]) }
        case .gelu:  // ref: torch.nn.GELU() (erf form)
            for i in x.values.indices { x.values[i] = 0.5 * x.values[i] * (1 + erf(x.values[i] / Float(2).squareRoot())) }
        case .softmax:  // over channels, at each column (stream, step)
            let n = x.columns
            for t in 0..<n {
                var peak = -Float.infinity
                for c in 0..<x.channels { peak = max(peak, x.values[c * n + t]) }
                var sum: Float = 0
                for c in 0..<x.channels {
                    let e = exp(x.values[c * n + t] - peak)
                    x.values[c * n + t] = e
                    sum += e
                }
                for c in 0..<x.channels { x.values[c * n + t] /= sum }
            }
        }
    }
}

@inline(__always)
func logistic(_ x: Float) -> Float { 1 / (1 + exp(-x)) }

/// 1-D convolution within a block: zero padding on both ends, stride, dilation, groups.
/// ref: torch.nn.Conv1d
struct Conv1d: Sendable {
    let name: String
    let inChannels, outChannels, kernelSize, stride, padding, dilation, groups: Int
    /// Causal: no padding; the last `contextFrames` input frames of the previous step come first.
    let causal: Bool
    /// [outChannels][inChannels / groups][kernelSize]
    let weight: [Float]
    /// [outChannels]
    let bias: [Float]
    /// The weights tap by tap: [outChannels][kernelSize][inChannels / groups], so that a receptive
    /// field is K runs of contiguous input channels.
    let weightByTap: [Float]

    init(name: String, inChannels: Int, outChannels: Int, kernelSize: Int, stride: Int, padding: Int, dilation: Int,
         groups: Int, causal: Bool, weight: [Float], bias: [Float]) {
        self.name = name
        self.inChannels = inChannels
        self.outChannels = outChannels
        self.kernelSize = kernelSize
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.groups = groups
        self.causal = causal
        self.weight = weight
        self.bias = bias
        let perGroup = inChannels / groups, K = kernelSize
        var byTap = [Float](repeating: 0, count: weight.count)
        for o in 0..<outChannels {
            for c in 0..<perGroup {
                for k in 0..<K { byTap[(o * K + k) * perGroup + c] = weight[(o * perGroup + c) * K + k] }
            }
        }
        weightByTap = byTap
    }

    /// Input frames carried from step to step (causal only); state layout [inChannels][contextFrames].
    var contextFrames: Int { causal ? (kernelSize - 1) * dilation : 0 }

    func outputLength(_ input: Int) -> Int {
        (input + contextFrames + 2 * padding - dilation * (kernelSize - 1) - 1) / stride + 1
    }

    /// Runs the convolution; a causal one first puts each stream's carried frames before its
    /// input and keeps the last of them for the next step.
    func run(_ x: Activations, states: [UnsafeMutableBufferPointer<Float>]) -> Activations {
        let context = contextFrames
        guard context > 0 else { return run(x, time: x.time) }
        let T = x.time, total = context + T, B = x.batch
        var extended = Activations(channels: inChannels, time: total, batch: B)
        for b in 0..<B {
            let state = states[b]
            for c in 0..<inChannels {
                let row = c * B * total + b * total, input = c * B * T + b * T
                for t in 0..<context { extended.values[row + t] = state[c * context + t] }
                for t in 0..<T { extended.values[row + context + t] = x.values[input + t] }
                for t in 0..<context { state[c * context + t] = extended.values[row + T + t] }
            }
        }
        return run(extended, time: total)
    }

    /// Gathers each output column's receptive field ([batch * outT][inPerGroup * K], zeros where
    /// the padding is) and takes one dot product per output channel and column.
    private func run(_ x: Activations, time T: Int) -> Activations {
        let outT = (T + 2 * padding - dilation * (kernelSize - 1) - 1) / stride + 1
        let B = x.batch
        var y = Activations(channels: outChannels, time: max(outT, 0), batch: B)
        guard outT > 0 else { return y }
        let inPerGroup = inChannels / groups, outPerGroup = outChannels / groups
        let K = kernelSize, field = inPerGroup * K, n = B * outT
        // Each column's receptive field: for tap k, the input column t * stride - padding + k * dilation
        // (all its channels of the group, contiguous once the input is column-major), zeros outside.
        let inputs = x.columnMajor()  // [batch * T][inChannels]
        var columns = [Float](repeating: 0, count: n * field)
        weightByTap.withUnsafeBufferPointer { w in
            inputs.withUnsafeBufferPointer { xv in
                y.values.withUnsafeMutableBufferPointer { yv in
                    columns.withUnsafeMutableBufferPointer { col in
                        bias.withUnsafeBufferPointer { bv in
                            for g in 0..<groups {
                                for b in 0..<B {
                                    for t in 0..<outT {
                                        let row = col.baseAddress! + (b * outT + t) * field
                                        for k in 0..<K {
                                            let pos = t * stride - padding + k * dilation
                                            let dst = row + k * inPerGroup
                                            if pos >= 0 && pos < T {
                                                dst.update(from: xv.baseAddress! + (b * T + pos) * inChannels + g * inPerGroup, count: inPerGroup)
                                            } else {
                                                dst.update(repeating: 0, count: inPerGroup)
                                            }
                                        }
                                    }
                                }
                                let first = g * outPerGroup
                                earshot_gemm_nt(w.baseAddress! + first * field, outPerGroup, field, col.baseAddress!, n,
                                                bv.baseAddress! + first, yv.baseAddress! + first * n, n)
                            }
                        }
                    }
                }
            }
        }
        return y
    }
}

/// y[t] = W x[t] + b at each time step.
/// ref: torch.nn.Linear
struct Linear: Sendable {
    let name: String
    let inFeatures, outFeatures: Int
    /// [outFeatures][inFeatures]
    let weight: [Float]
    /// [outFeatures]
    let bias: [Float]

    func run(_ x: Activations) -> Activations {
        var y = Activations(channels: outFeatures, time: x.time, batch: x.batch)
        let rows = x.columnMajor()  // [batch * time][inFeatures]
        weight.withUnsafeBufferPointer { w in
            bias.withUnsafeBufferPointer { b in
                earshot_gemm_nt(w.baseAddress!, outFeatures, inFeatures, rows, x.columns, b.baseAddress!, &y.values, x.columns)
            }
        }
        return y
    }
}

/// The input products of a recurrent layer for every column (stream, step) at once:
/// W_ih x + b_ih, [rows][columns]. Only the recurrent product has to wait for the previous step.
func inputProducts(_ x: Activations, weight: [Float], rows: Int, bias: [Float]?) -> [Float] {
    let n = x.columns, inputs = x.columnMajor()
    var out = [Float](repeating: 0, count: rows * n)
    weight.withUnsafeBufferPointer { w in
        earshot_gemm_nt(w.baseAddress!, rows, x.channels, inputs, n, bias, &out, n)
    }
    return out
}

/// W_hh h + b_hh for every stream of the batch: [rows][batch].
func recurrentProducts(weight: [Float], rows: Int, hiddenSize H: Int, bias: [Float]?,
                       states: [UnsafeMutableBufferPointer<Float>], into out: inout [Float], hidden: inout [Float]) {
    let B = states.count
    for b in 0..<B { for j in 0..<H { hidden[b * H + j] = states[b][j] } }
    weight.withUnsafeBufferPointer { w in
        earshot_gemm_nt(w.baseAddress!, rows, H, hidden, B, bias, &out, B)
    }
}

/// One LSTM layer over the block's time steps, carrying (h, c) in the stream's state.
/// ref: torch.nn.LSTM, gate order i, f, g, o; state layout [h][c]
struct LSTM: Sendable {
    let name: String
    let inputSize, hiddenSize: Int
    /// [4 * hidden][input]
    let weightIH: [Float]
    /// [4 * hidden][hidden]
    let weightHH: [Float]
    /// [4 * hidden]: bias_ih + bias_hh
    let bias: [Float]

    func run(_ x: Activations, states: [UnsafeMutableBufferPointer<Float>]) -> Activations {
        let products = inputProducts(x, weight: weightIH, rows: 4 * hiddenSize, bias: bias)
        return products.withUnsafeBufferPointer {
            recur(inputProducts: $0.baseAddress!, columns: x.columns, firstColumn: 0, time: x.time, states: states)
        }
    }

    /// The recurrence over `time` steps for each stream, given the input products
    /// ([4 * hidden][columns]; stream b's step t in column firstColumn + b * time + t).
    func recur(inputProducts ip: UnsafePointer<Float>, columns ld: Int, firstColumn: Int, time T: Int,
               states: [UnsafeMutableBufferPointer<Float>]) -> Activations {
        let H = hiddenSize, B = states.count, rows = 4 * H
        var y = Activations(channels: H, time: T, batch: B)
        var recurrent = [Float](repeating: 0, count: rows * B), hidden = [Float](repeating: 0, count: B * H)
        var gates = [Float](repeating: 0, count: rows)
        for t in 0..<T {
            recurrentProducts(weight: weightHH, rows: rows, hiddenSize: H, bias: nil, states: states, into: &recurrent, hidden: &hidden)
            for b in 0..<B {
                let column = firstColumn + b * T + t
                for r in 0..<rows { gates[r] = ip[r * ld + column] + recurrent[r * B + b] }
                earshot_lstm_cell(gates, H, states[b].baseAddress!, states[b].baseAddress! + H)
                for j in 0..<H { y.values[j * B * T + b * T + t] = states[b][j] }
            }
        }
        return y
    }
}

/// One GRU layer over the block's time steps, carrying h in the stream's state.
/// ref: torch.nn.GRU, gate order r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
struct GRU: Sendable {
    let name: String
    let inputSize, hiddenSize: Int
    /// [3 * hidden][input]
    let weightIH: [Float]
    /// [3 * hidden][hidden]
    let weightHH: [Float]
    let biasIH: [Float]
    let biasHH: [Float]

    func run(_ x: Activations, states: [UnsafeMutableBufferPointer<Float>]) -> Activations {
        let products = inputProducts(x, weight: weightIH, rows: 3 * hiddenSize, bias: biasIH)
        return products.withUnsafeBufferPointer {
            recur(inputProducts: $0.baseAddress!, columns: x.columns, firstColumn: 0, time: x.time, states: states)
        }
    }

    /// The recurrence, given the input products ([3 * hidden][columns], as for LSTM.recur).
    func recur(inputProducts gi: UnsafePointer<Float>, columns ld: Int, firstColumn: Int, time T: Int,
               states: [UnsafeMutableBufferPointer<Float>]) -> Activations {
        let H = hiddenSize, B = states.count, rows = 3 * H
        var y = Activations(channels: H, time: T, batch: B)
        var gh = [Float](repeating: 0, count: rows * B), hidden = [Float](repeating: 0, count: B * H)
        for t in 0..<T {
            recurrentProducts(weight: weightHH, rows: rows, hiddenSize: H, bias: biasHH, states: states, into: &gh, hidden: &hidden)
            for b in 0..<B {
                let column = firstColumn + b * T + t, h = states[b]
                for j in 0..<H {
                    let r = logistic(gi[j * ld + column] + gh[j * B + b])
                    let z = logistic(gi[(H + j) * ld + column] + gh[(H + j) * B + b])
                    let cand = tanh(gi[(2 * H + j) * ld + column] + r * gh[(2 * H + j) * B + b])
                    h[j] = (1 - z) * cand + z * h[j]
                    y.values[j * B * T + b * T + t] = h[j]
                }
            }
        }
        return y
    }
}

/// Normalises the channels at each time step: (x - mean) / sqrt(var + eps) * weight + bias,
/// biased variance.
/// ref: torch.nn.LayerNorm(channels) over the channel axis
struct LayerNorm: Sendable {
    let name: String
    let channels: Int
    let eps: Float
    let weight: [Float]
    let bias: [Float]

    func run(_ x: Activations) -> Activations {
        var y = x
        let C = channels, T = x.columns
        for t in 0..<T {
            var mean: Float = 0
            for c in 0..<C { mean += x.values[c * T + t] }
            mean /= Float(C)
            var variance: Float = 0
            for c in 0..<C {
                let d = x.values[c * T + t] - mean
                variance += d * d
            }
            variance /= Float(C)
            let inv = 1 / (variance + eps).squareRoot()
            for c in 0..<C { y.values[c * T + t] = (x.values[c * T + t] - mean) * inv * weight[c] + bias[c] }
        }
        return y
    }
}

extension Layer {
    /// For a recurrent layer: its input products for all columns of `x` at once, and the
    /// recurrence for one stream's run of `time` steps starting at `firstColumn`.
    var recurrence: ((Activations) -> [Float], (UnsafePointer<Float>, Int, Int, Int, UnsafeMutableBufferPointer<Float>) -> Activations)? {
        switch self {
        case let .lstm(l):
            return ({ inputProducts($0, weight: l.weightIH, rows: 4 * l.hiddenSize, bias: l.bias) },
                    { l.recur(inputProducts: $0, columns: $1, firstColumn: $2, time: $3, states: [$4]) })
        case let .gru(g):
            return ({ inputProducts($0, weight: g.weightIH, rows: 3 * g.hiddenSize, bias: g.biasIH) },
                    { g.recur(inputProducts: $0, columns: $1, firstColumn: $2, time: $3, states: [$4]) })
        default:
            return nil
        }
    }
}
