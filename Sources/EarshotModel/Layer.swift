import EarshotGraph
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

    /// No values: a slot a workspace fills later.
    static let empty = Activations(channels: 0, time: 0, batch: 0, values: [])

    /// Columns (stream, step) one after another.
    var columns: Int { batch * time }

    /// Takes a new shape, keeping the storage: no allocation once the values have had this many.
    /// The values are left as they were; the caller writes every one.
    mutating func reshape(channels: Int, time: Int, batch: Int) {
        self.channels = channels
        self.time = time
        self.batch = batch
        values.setCount(channels * time * batch)
    }

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
    /// A batch norm with no conv1d or linear layer before it to fold into.
    case affine(ChannelAffine)
    case pool(Pool)
    case activation(Activation)

    enum Pool: String, Sendable {
        case mean, max
    }

    enum Activation: String, Sendable {
        case relu, sigmoid, tanh, silu, gelu, softmax
        /// ln(x + 1e-6): log-mel features from mel energies.
        case log
    }

    /// Whether a batch norm after this layer folds into its weights.
    var foldsBatchNorm: Bool {
        switch self {
        case .conv1d, .linear: return true
        default: return false
        }
    }

    var name: String {
        switch self {
        case let .conv1d(l): return l.name
        case let .linear(l): return l.name
        case let .lstm(l): return l.name
        case let .gru(l): return l.name
        case let .layerNorm(l): return l.name
        case let .affine(l): return l.name
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
        case .layerNorm, .affine, .pool, .activation: return input
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
        case let .lstm(l): return time * l.weights.parameterCount
        case let .gru(l): return time * l.weights.parameterCount
        case let .layerNorm(l): return time * l.channels * 2
        case let .affine(l): return time * l.scale.count
        case .pool, .activation: return 0
        }
    }

    var parameterCount: Int {
        switch self {
        case let .conv1d(l): return l.weight.count + l.bias.count
        case let .linear(l): return l.weight.count + l.bias.count
        case let .lstm(l): return l.weights.parameterCount + 2 * l.bias.count  // stored: bias_ih and bias_hh
        case let .gru(l): return l.weights.parameterCount + l.biasIH.count + l.biasHH.count
        case let .layerNorm(l): return 2 * l.channels
        case let .affine(l): return 4 * l.scale.count  // stored: weight, bias, running mean and variance
        case .pool, .activation: return 0
        }
    }

    /// Runs the layer on a batch, writing into `y` (reshaped, its storage reused); `states` holds
    /// each stream's carry for this layer; `scratch` is this layer's reusable working memory.
    func run(_ x: Activations, into y: inout Activations, states: StateRows, scratch: inout LayerScratch) {
        switch self {
        case let .conv1d(l): l.run(x, into: &y, states: states, scratch: &scratch)
        case let .linear(l): l.run(x, into: &y)
        case let .layerNorm(l): l.run(x, into: &y)
        case let .affine(l): l.run(x, into: &y)
        case let .lstm(l): l.run(x, into: &y, states: states, scratch: &scratch)
        case let .gru(l): l.run(x, into: &y, states: states, scratch: &scratch)
        case let .pool(kind):
            y.reshape(channels: x.channels, time: 1, batch: x.batch)
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
        case let .activation(a):
            y = x
            a.apply(&y)
        }
    }

    /// Runs the layer on a batch with new working memory; `states` holds each stream's carry.
    func run(_ x: Activations, states: StateRows) -> Activations {
        var y = Activations.empty, scratch = LayerScratch()
        run(x, into: &y, states: states, scratch: &scratch)
        return y
    }

    /// One stream.
    func run(_ x: Activations, state: UnsafeMutableBufferPointer<Float>) -> Activations {
        run(x, states: StateRows(state))
    }
}

/// Where the streams of a batch keep one layer's carry: stream b's `stride` floats apart from
/// `base`. Layers without state get rows with no base.
struct StateRows {
    let base: UnsafeMutablePointer<Float>?
    let stride: Int

    /// One stream's carry.
    init(_ carry: UnsafeMutableBufferPointer<Float>) {
        base = carry.baseAddress
        stride = carry.count
    }

    init(base: UnsafeMutablePointer<Float>?, stride: Int) {
        self.base = base
        self.stride = stride
    }

    /// For layers without state.
    static var none: StateRows { StateRows(base: nil, stride: 0) }

    /// Stream b's carry; only for layers with state.
    subscript(b: Int) -> UnsafeMutablePointer<Float> { base.unsafelyUnwrapped + b * stride }
}

/// A layer's working memory, kept from step to step so that a steady-state step allocates nothing.
struct LayerScratch {
    /// Convolution: receptive fields; recurrent layers: input products.
    var fields: [Float] = []
    /// Recurrent layers: the recurrent products.
    var part: [Float] = []
    /// Causal convolution: carried frames then input.
    var extended = Activations.empty
    /// LSTM: one stream's gates.
    var gates: [Float] = []
}


extension Layer.Activation {
    func apply(_ x: inout Activations) {
        switch self {
        case .relu: earshot_relu(&x.values, x.values.count)
        case .sigmoid: earshot_sigmoid(&x.values, x.values.count)
        case .tanh: earshot_tanh(&x.values, x.values.count)
        case .log: _ = earshot_scaled_log(&x.values, x.values.count, 1e-6, .leastNormalMagnitude, 1, 0)
        case .silu: for i in x.values.indices { x.values[i] *= logistic(x.values[i]) }
        case .gelu:  // ref: torch.nn.GELU() (erf form)
            for i in x.values.indices { x.values[i] = 0.5 * x.values[i] * (1 + erf(x.values[i] / Float(2).squareRoot())) }
        case .softmax:  // over the channels of each column
            let C = x.channels, columns = x.columns
            x.values.withUnsafeMutableBufferPointer { v in
                for j in 0..<columns { EarshotModel.softmax(UnsafeMutableBufferPointer(rebasing: v[(j * C)..<((j + 1) * C)])) }
            }
        }
    }
}

/// Softmax in place, as a softmax layer and a softmax model's scores compute it (the trainer
/// calls this very function).
package func softmax(_ x: UnsafeMutableBufferPointer<Float>) {
    var peak = -Float.infinity
    for v in x { peak = max(peak, v) }
    var sum: Float = 0
    for c in x.indices {
        let e = exp(x[c] - peak)
        x[c] = e
        sum += e
    }
    for c in x.indices { x[c] /= sum }
}

/// The logistic function as the GRU computes it (the trainer calls this very function).
@inline(__always)
package func logistic(_ x: Float) -> Float { 1 / (1 + exp(-x)) }

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
    /// Each group's weights tap by tap ([outChannels / groups][kernelSize][inChannels / groups],
    /// so that a receptive field is K runs of contiguous input channels), packed for the product.
    let packed: [PackedMatrix]

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
        let outPerGroup = outChannels / groups, field = perGroup * K
        packed = (0..<groups).map { g in
            PackedMatrix(Array(byTap[(g * outPerGroup * field)..<((g + 1) * outPerGroup * field)]), rows: outPerGroup, k: field)
        }
    }

    /// Input frames carried from step to step (causal only); state layout [inChannels][contextFrames].
    var contextFrames: Int { causal ? (kernelSize - 1) * dilation : 0 }

    func outputLength(_ input: Int) -> Int {
        (input + contextFrames + 2 * padding - dilation * (kernelSize - 1) - 1) / stride + 1
    }

    /// Runs the convolution; a causal one first puts each stream's carried frames before its
    /// input and keeps the last of them for the next step.
    func run(_ x: Activations, into y: inout Activations, states: StateRows, scratch: inout LayerScratch) {
        let context = contextFrames
        guard context > 0 else { return run(x, time: x.time, into: &y, scratch: &scratch) }
        let T = x.time, total = context + T, B = x.batch, C = inChannels
        var extended = Activations.empty
        swap(&extended, &scratch.extended)
        extended.reshape(channels: C, time: total, batch: B)
        for b in 0..<B {
            let state = states[b]
            let row = b * total * C
            for t in 0..<context { for c in 0..<C { extended.values[row + t * C + c] = state[c * context + t] } }
            for i in 0..<(T * C) { extended.values[row + context * C + i] = x.values[b * T * C + i] }
            for t in 0..<context { for c in 0..<C { state[c * context + t] = extended.values[row + (T + t) * C + c] } }
        }
        run(extended, time: total, into: &y, scratch: &scratch)
        swap(&extended, &scratch.extended)
    }

    /// Gathers each output column's receptive field (tap k: the input column
    /// t * stride - padding + k * dilation, its channels of the group contiguous; zeros outside),
    /// then one product for all columns.
    private func run(_ x: Activations, time T: Int, into y: inout Activations, scratch: inout LayerScratch) {
        let outT = (T + 2 * padding - dilation * (kernelSize - 1) - 1) / stride + 1
        let B = x.batch
        y.reshape(channels: outChannels, time: max(outT, 0), batch: B)
        guard outT > 0 else { return }
        let inPerGroup = inChannels / groups, outPerGroup = outChannels / groups
        let K = kernelSize, field = inPerGroup * K, n = B * outT
        scratch.fields.setCount(n * field)
        x.values.withUnsafeBufferPointer { xv in
            y.values.withUnsafeMutableBufferPointer { yv in
                scratch.fields.withUnsafeMutableBufferPointer { col in
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
                        // Group g's outputs: channels g * outPerGroup ..< (g + 1) * outPerGroup of each column.
                        let first = g * outPerGroup
                        bias.withUnsafeBufferPointer { bv in
                            packed[g].values.withUnsafeBufferPointer { w in
                                earshot_gemm_packed(w.baseAddress!, outPerGroup, field, col.baseAddress!, field, n, bv.baseAddress! + first,
                                                    yv.baseAddress! + first, outChannels)
                            }
                        }
                    }
                }
            }
        }
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
    let packed: PackedMatrix

    init(name: String, inFeatures: Int, outFeatures: Int, weight: [Float], bias: [Float]) {
        self.name = name
        self.inFeatures = inFeatures
        self.outFeatures = outFeatures
        self.weight = weight
        self.bias = bias
        packed = PackedMatrix(weight, rows: outFeatures, k: inFeatures)
    }

    func run(_ x: Activations, into y: inout Activations) {
        y.reshape(channels: outFeatures, time: x.time, batch: x.batch)
        x.values.withUnsafeBufferPointer { xv in
            y.values.withUnsafeMutableBufferPointer { yv in
                packed.product(xv.baseAddress!, columns: x.columns, bias: bias, into: yv.baseAddress!)
            }
        }
    }
}

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

/// y = x * scale + shift per channel (an eval-mode batch norm that stands alone).
struct ChannelAffine: Sendable {
    let name: String
    let scale: [Float]
    let shift: [Float]

    func run(_ x: Activations, into y: inout Activations) {
        y.reshape(channels: x.channels, time: x.time, batch: x.batch)
        let C = scale.count
        for j in 0..<x.columns {
            for c in 0..<C { y.values[j * C + c] = x.values[j * C + c] * scale[c] + shift[c] }
        }
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

    func run(_ x: Activations, into y: inout Activations) {
        y.reshape(channels: x.channels, time: x.time, batch: x.batch)
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
