import CEarshotKernels
import Foundation

/// Activations between layers for a batch of streams, column by column: a column is one step of
/// one stream, and holds all its channels contiguously: [batch][time][channels], so channel c of
/// stream b at step t is `values[(b * time + t) * channels + c]`. One stream is a batch of one.
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

    /// Columns (stream, step) one after another.
    var columns: Int { batch * time }

    /// Stream b's activations alone.
    func stream(_ b: Int) -> Activations {
        let size = time * channels
        return Activations(channels: channels, time: time, values: Array(values[(b * size)..<((b + 1) * size)]))
    }

    /// Streams one after another as one batch (all with the same channels and time).
    static func joined(_ parts: [Activations]) -> Activations {
        guard let first = parts.first else { return Activations(channels: 0, time: 0, batch: 0) }
        var values: [Float] = []
        values.reserveCapacity(parts.reduce(0) { $0 + $1.values.count })
        for p in parts { values += p.values }
        return Activations(channels: first.channels, time: first.time, batch: parts.reduce(0) { $0 + $1.batch }, values: values)
    }

    /// From values laid out [channels][time] (one stream).
    init(channelMajor values: [Float], channels: Int, time: Int) {
        var out = [Float](repeating: 0, count: values.count)
        for c in 0..<channels { for t in 0..<time { out[t * channels + c] = values[c * time + t] } }
        self.init(channels: channels, time: time, values: out)
    }
}

/// A layer with its weights, ready to run. Weights are immutable; layers with state keep their
/// carry in the stream's state.
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
            let C = x.channels, T = x.time
            for b in 0..<x.batch {
                for c in 0..<C {
                    var acc: Float = kind == .mean ? 0 : -.infinity
                    for t in 0..<T {
                        let v = x.values[(b * T + t) * C + c]
                        acc = kind == .mean ? acc + v : max(acc, v)
                    }
                    y.values[b * C + c] = kind == .mean ? acc / Float(max(T, 1)) : acc
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
        case .softmax:  // over the channels of each column
            let C = x.channels
            for j in 0..<x.columns {
                var peak = -Float.infinity
                for c in 0..<C { peak = max(peak, x.values[j * C + c]) }
                var sum: Float = 0
                for c in 0..<C {
                    let e = exp(x.values[j * C + c] - peak)
                    x.values[j * C + c] = e
                    sum += e
                }
                for c in 0..<C { x.values[j * C + c] /= sum }
            }
        }
    }
}

@inline(__always)
func logistic(_ x: Float) -> Float { 1 / (1 + exp(-x)) }

/// y = x W^T + b for every column at once: x [columns][in], W [out][in], y [columns][out].
/// Each output is W's row o against x's column j, summed as earshot_gemm_nt sums.
func columnProducts(_ x: UnsafePointer<Float>, columns n: Int, inputs k: Int, weight: [Float], outputs: Int,
                    bias: [Float]?, into y: UnsafeMutablePointer<Float>) {
    weight.withUnsafeBufferPointer { w in
        if let bias {
            bias.withUnsafeBufferPointer { b in earshot_gemm_nt(x, n, k, w.baseAddress!, outputs, nil, b.baseAddress!, y, outputs) }
        } else {
            earshot_gemm_nt(x, n, k, w.baseAddress!, outputs, nil, nil, y, outputs)
        }
    }
}

/// 1-D convolution within a block: zero padding on both ends, stride, dilation, groups; or
/// causal, with its left context carried in the state.
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
    /// The weights tap by tap, per group: [groups][outChannels / groups][kernelSize][inChannels / groups],
    /// so that a receptive field is K runs of contiguous input channels.
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
        let T = x.time, total = context + T, B = x.batch, C = inChannels
        var extended = Activations(channels: C, time: total, batch: B)
        for b in 0..<B {
            let state = states[b]
            let row = b * total * C
            for t in 0..<context { for c in 0..<C { extended.values[row + t * C + c] = state[c * context + t] } }
            for i in 0..<(T * C) { extended.values[row + context * C + i] = x.values[b * T * C + i] }
            for t in 0..<context { for c in 0..<C { state[c * context + t] = extended.values[row + (T + t) * C + c] } }
        }
        return run(extended, time: total)
    }

    /// Gathers each output column's receptive field (tap k: the input column
    /// t * stride - padding + k * dilation, its channels of the group contiguous; zeros outside),
    /// then one product for all columns.
    private func run(_ x: Activations, time T: Int) -> Activations {
        let outT = (T + 2 * padding - dilation * (kernelSize - 1) - 1) / stride + 1
        let B = x.batch
        var y = Activations(channels: outChannels, time: max(outT, 0), batch: B)
        guard outT > 0 else { return y }
        let inPerGroup = inChannels / groups, outPerGroup = outChannels / groups
        let K = kernelSize, field = inPerGroup * K, n = B * outT
        var fields = [Float](repeating: 0, count: n * field)
        var part = groups > 1 ? [Float](repeating: 0, count: n * outPerGroup) : []
        weightByTap.withUnsafeBufferPointer { w in
            x.values.withUnsafeBufferPointer { xv in
                y.values.withUnsafeMutableBufferPointer { yv in
                    fields.withUnsafeMutableBufferPointer { col in
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
                                if groups == 1 {
                                    earshot_gemm_nt(col.baseAddress!, n, field, w.baseAddress!, outChannels, nil, bv.baseAddress!,
                                                    yv.baseAddress!, outChannels)
                                } else {
                                    part.withUnsafeMutableBufferPointer { p in
                                        earshot_gemm_nt(col.baseAddress!, n, field, w.baseAddress! + first * field, outPerGroup, nil,
                                                        bv.baseAddress! + first, p.baseAddress!, outPerGroup)
                                        for j in 0..<n {
                                            (yv.baseAddress! + j * outChannels + first).update(from: p.baseAddress! + j * outPerGroup, count: outPerGroup)
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        return y
    }
}

/// y[t] = W x[t] + b at each step.
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
        x.values.withUnsafeBufferPointer { xv in
            y.values.withUnsafeMutableBufferPointer { yv in
                columnProducts(xv.baseAddress!, columns: x.columns, inputs: inFeatures, weight: weight, outputs: outFeatures,
                               bias: bias, into: yv.baseAddress!)
            }
        }
        return y
    }
}

/// The input products of a recurrent layer for every column at once: W_ih x + b_ih,
/// [columns][rows]. Only the recurrent product has to wait for the previous step.
func inputProducts(_ x: Activations, weight: [Float], rows: Int, bias: [Float]?) -> [Float] {
    var out = [Float](repeating: 0, count: rows * x.columns)
    x.values.withUnsafeBufferPointer { xv in
        out.withUnsafeMutableBufferPointer { o in
            columnProducts(xv.baseAddress!, columns: x.columns, inputs: x.channels, weight: weight, outputs: rows,
                           bias: bias, into: o.baseAddress!)
        }
    }
    return out
}

/// W_hh h + b_hh for every stream of the batch: [batch][rows].
func recurrentProducts(weight: [Float], rows: Int, hiddenSize H: Int, bias: [Float]?,
                       states: [UnsafeMutableBufferPointer<Float>], into out: inout [Float], hidden: inout [Float]) {
    let B = states.count
    hidden.withUnsafeMutableBufferPointer { h in
        for b in 0..<B { (h.baseAddress! + b * H).update(from: states[b].baseAddress!, count: H) }
    }
    hidden.withUnsafeBufferPointer { h in
        out.withUnsafeMutableBufferPointer { o in
            columnProducts(h.baseAddress!, columns: B, inputs: H, weight: weight, outputs: rows, bias: bias, into: o.baseAddress!)
        }
    }
}

/// A recurrent layer: input products for every column at once, then a recurrence that has to
/// go step by step.
protocol RecurrentLayer: Sendable {
    /// Rows of the input product (gates * hidden).
    var gateRows: Int { get }
    var weightIH: [Float] { get }
    /// The bias added to the input product.
    var inputBias: [Float] { get }
    /// The recurrence over `time` steps for each stream, given the input products
    /// ([columns][gateRows]; stream b's step t is column firstColumn + b * time + t).
    func recur(inputProducts: UnsafePointer<Float>, firstColumn: Int, time: Int,
               states: [UnsafeMutableBufferPointer<Float>]) -> Activations
}

extension RecurrentLayer {
    func inputProducts(_ x: Activations) -> [Float] {
        EarshotModel.inputProducts(x, weight: weightIH, rows: gateRows, bias: inputBias)
    }

    func run(_ x: Activations, states: [UnsafeMutableBufferPointer<Float>]) -> Activations {
        inputProducts(x).withUnsafeBufferPointer {
            recur(inputProducts: $0.baseAddress!, firstColumn: 0, time: x.time, states: states)
        }
    }
}

/// One LSTM layer over the block's steps, carrying (h, c) in the stream's state.
/// ref: torch.nn.LSTM, gate order i, f, g, o; state layout [h][c]
struct LSTM: RecurrentLayer {
    let name: String
    let inputSize, hiddenSize: Int
    /// [4 * hidden][input]
    let weightIH: [Float]
    /// [4 * hidden][hidden]
    let weightHH: [Float]
    /// [4 * hidden]: bias_ih + bias_hh
    let bias: [Float]

    var gateRows: Int { 4 * hiddenSize }
    var inputBias: [Float] { bias }

    func recur(inputProducts ip: UnsafePointer<Float>, firstColumn: Int, time T: Int,
               states: [UnsafeMutableBufferPointer<Float>]) -> Activations {
        let H = hiddenSize, B = states.count, rows = 4 * H
        var y = Activations(channels: H, time: T, batch: B)
        var recurrent = [Float](repeating: 0, count: rows * B), hidden = [Float](repeating: 0, count: B * H)
        var gates = [Float](repeating: 0, count: rows)
        for t in 0..<T {
            recurrentProducts(weight: weightHH, rows: rows, hiddenSize: H, bias: nil, states: states, into: &recurrent, hidden: &hidden)
            for b in 0..<B {
                let column = firstColumn + b * T + t
                for r in 0..<rows { gates[r] = ip[column * rows + r] + recurrent[b * rows + r] }
                earshot_lstm_cell(gates, H, states[b].baseAddress!, states[b].baseAddress! + H)
                y.values.withUnsafeMutableBufferPointer { yv in
                    (yv.baseAddress! + (b * T + t) * H).update(from: states[b].baseAddress!, count: H)
                }
            }
        }
        return y
    }
}

/// One GRU layer over the block's steps, carrying h in the stream's state.
/// ref: torch.nn.GRU, gate order r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
struct GRU: RecurrentLayer {
    let name: String
    let inputSize, hiddenSize: Int
    /// [3 * hidden][input]
    let weightIH: [Float]
    /// [3 * hidden][hidden]
    let weightHH: [Float]
    let biasIH: [Float]
    let biasHH: [Float]

    var gateRows: Int { 3 * hiddenSize }
    var inputBias: [Float] { biasIH }

    func recur(inputProducts gi: UnsafePointer<Float>, firstColumn: Int, time T: Int,
               states: [UnsafeMutableBufferPointer<Float>]) -> Activations {
        let H = hiddenSize, B = states.count, rows = 3 * H
        var y = Activations(channels: H, time: T, batch: B)
        var gh = [Float](repeating: 0, count: rows * B), hidden = [Float](repeating: 0, count: B * H)
        for t in 0..<T {
            recurrentProducts(weight: weightHH, rows: rows, hiddenSize: H, bias: biasHH, states: states, into: &gh, hidden: &hidden)
            for b in 0..<B {
                let i = (firstColumn + b * T + t) * rows, r0 = b * rows, h = states[b]
                for j in 0..<H {
                    let r = logistic(gi[i + j] + gh[r0 + j]), z = logistic(gi[i + H + j] + gh[r0 + H + j])
                    let cand = tanh(gi[i + 2 * H + j] + r * gh[r0 + 2 * H + j])
                    h[j] = (1 - z) * cand + z * h[j]
                    y.values[(b * T + t) * H + j] = h[j]
                }
            }
        }
        return y
    }
}

/// Normalises the channels of each column: (x - mean) / sqrt(var + eps) * weight + bias,
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
        let C = channels
        for j in 0..<x.columns {
            var mean: Float = 0
            for c in 0..<C { mean += x.values[j * C + c] }
            mean /= Float(C)
            var variance: Float = 0
            for c in 0..<C {
                let d = x.values[j * C + c] - mean
                variance += d * d
            }
            variance /= Float(C)
            let inv = 1 / (variance + eps).squareRoot()
            for c in 0..<C { y.values[j * C + c] = (x.values[j * C + c] - mean) * inv * weight[c] + bias[c] }
        }
        return y
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
