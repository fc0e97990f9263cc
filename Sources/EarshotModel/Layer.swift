import CEarshotKernels
import Foundation

/// Activations between layers: [channels][time], row-major.
struct Activations {
    var channels: Int
    var time: Int
    var values: [Float]

    init(channels: Int, time: Int, values: [Float]) {
        self.channels = channels
        self.time = time
        self.values = values
    }

    init(channels: Int, time: Int) {
        self.init(channels: channels, time: time, values: [Float](repeating: 0, count: channels * time))
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

    func run(_ x: Activations, state: UnsafeMutableBufferPointer<Float>) -> Activations {
        switch self {
        case let .conv1d(l): return l.run(x, state: state)
        case let .linear(l): return l.run(x)
        case let .layerNorm(l): return l.run(x)
        case let .pool(kind):
            var y = Activations(channels: x.channels, time: 1)
            for c in 0..<x.channels {
                let row = x.values[(c * x.time)..<((c + 1) * x.time)]
                y.values[c] = kind == .mean ? row.reduce(0, +) / Float(max(x.time, 1)) : row.max() ?? 0
            }
            return y
        case let .lstm(l): return l.run(x, state: state)
        case let .gru(l): return l.run(x, state: state)
        case let .activation(a):
            var y = x
            a.apply(&y)
            return y
        }
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
        case .softmax:  // over channels, at each time step
            for t in 0..<x.time {
                var peak = -Float.infinity
                for c in 0..<x.channels { peak = max(peak, x.values[c * x.time + t]) }
                var sum: Float = 0
                for c in 0..<x.channels {
                    let e = exp(x.values[c * x.time + t] - peak)
                    x.values[c * x.time + t] = e
                    sum += e
                }
                for c in 0..<x.channels { x.values[c * x.time + t] /= sum }
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

    /// Input frames carried from step to step (causal only); state layout [inChannels][contextFrames].
    var contextFrames: Int { causal ? (kernelSize - 1) * dilation : 0 }

    func outputLength(_ input: Int) -> Int {
        (input + contextFrames + 2 * padding - dilation * (kernelSize - 1) - 1) / stride + 1
    }

    /// Runs the convolution; a causal one first puts the carried frames before the input and
    /// keeps the last of them for the next step.
    func run(_ x: Activations, state: UnsafeMutableBufferPointer<Float>) -> Activations {
        let context = contextFrames
        guard context > 0 else { return run(x) }
        let T = x.time, total = context + T
        var extended = Activations(channels: inChannels, time: total)
        for c in 0..<inChannels {
            for t in 0..<context { extended.values[c * total + t] = state[c * context + t] }
            for t in 0..<T { extended.values[c * total + context + t] = x.values[c * T + t] }
            for t in 0..<context { state[c * context + t] = extended.values[c * total + T + t] }
        }
        return run(extended, withContext: false)
    }

    /// Gathers each output step's receptive field ([outT][inPerGroup * K], zeros where the
    /// padding is) and takes one dot product per output channel and step.
    func run(_ x: Activations, withContext: Bool = true) -> Activations {
        let outT = withContext ? outputLength(x.time) : outputLength(x.time - contextFrames)
        var y = Activations(channels: outChannels, time: max(outT, 0))
        guard outT > 0 else { return y }
        let inPerGroup = inChannels / groups, outPerGroup = outChannels / groups
        let T = x.time, K = kernelSize, field = inPerGroup * K
        var columns = [Float](repeating: 0, count: outT * field)
        weight.withUnsafeBufferPointer { w in
            x.values.withUnsafeBufferPointer { xv in
                y.values.withUnsafeMutableBufferPointer { yv in
                    columns.withUnsafeMutableBufferPointer { col in
                        for g in 0..<groups {
                            earshot_im2col(xv.baseAddress! + g * inPerGroup * T, inPerGroup, T, K, stride, padding,
                                           dilation, outT, col.baseAddress!)
                            let first = g * outPerGroup
                            bias.withUnsafeBufferPointer { b in
                                earshot_gemm_nt(w.baseAddress! + first * field, outPerGroup, field, col.baseAddress!, outT,
                                                b.baseAddress! + first, yv.baseAddress! + first * outT, outT)
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
        var y = Activations(channels: outFeatures, time: x.time)
        let columns = x.timeMajor()  // [time][inFeatures]
        weight.withUnsafeBufferPointer { w in
            bias.withUnsafeBufferPointer { b in
                earshot_gemm_nt(w.baseAddress!, outFeatures, inFeatures, columns, x.time, b.baseAddress!, &y.values, x.time)
            }
        }
        return y
    }
}

extension Activations {
    /// The values as [time][channels].
    func timeMajor() -> [Float] {
        var out = [Float](repeating: 0, count: values.count)
        for c in 0..<channels { for t in 0..<time { out[t * channels + c] = values[c * time + t] } }
        return out
    }
}

/// The two products of a recurrent layer at one step: input = W_ih x_t + b_ih and
/// recurrent = W_hh h + b_hh (rows: gates * hidden).
func recurrentProducts(
    input x: [Float], hidden h: UnsafeMutableBufferPointer<Float>, weightIH: [Float], weightHH: [Float],
    biasIH: [Float]?, biasHH: [Float]?, inputProduct: inout [Float], recurrentProduct: inout [Float]
) {
    let rows = inputProduct.count
    let hidden = Array(h)  // h is updated from these products: read it before
    weightIH.withUnsafeBufferPointer { wi in
        weightHH.withUnsafeBufferPointer { wh in
            earshot_gemv(wi.baseAddress!, rows, x.count, x, biasIH, &inputProduct)
            earshot_gemv(wh.baseAddress!, rows, hidden.count, hidden, biasHH, &recurrentProduct)
        }
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

    func run(_ x: Activations, state: UnsafeMutableBufferPointer<Float>) -> Activations {
        let H = hiddenSize, I = inputSize
        var y = Activations(channels: H, time: x.time)
        var gates = [Float](repeating: 0, count: 4 * H), recurrent = [Float](repeating: 0, count: 4 * H)
        let inputs = x.timeMajor()
        for t in 0..<x.time {
            recurrentProducts(input: Array(inputs[(t * I)..<((t + 1) * I)]), hidden: UnsafeMutableBufferPointer(rebasing: state[0..<H]),
                              weightIH: weightIH, weightHH: weightHH, biasIH: bias, biasHH: nil,
                              inputProduct: &gates, recurrentProduct: &recurrent)
            for r in 0..<(4 * H) { gates[r] += recurrent[r] }
            earshot_lstm_cell(gates, H, state.baseAddress!, state.baseAddress! + H)
            for j in 0..<H { y.values[j * x.time + t] = state[j] }
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

    func run(_ x: Activations, state: UnsafeMutableBufferPointer<Float>) -> Activations {
        let H = hiddenSize, I = inputSize
        var y = Activations(channels: H, time: x.time)
        var gi = [Float](repeating: 0, count: 3 * H), gh = [Float](repeating: 0, count: 3 * H)
        let inputs = x.timeMajor()
        for t in 0..<x.time {
            recurrentProducts(input: Array(inputs[(t * I)..<((t + 1) * I)]), hidden: UnsafeMutableBufferPointer(rebasing: state[0..<H]),
                              weightIH: weightIH, weightHH: weightHH, biasIH: biasIH, biasHH: biasHH,
                              inputProduct: &gi, recurrentProduct: &gh)
            for j in 0..<H {
                let r = logistic(gi[j] + gh[j]), z = logistic(gi[H + j] + gh[H + j])
                let n = tanh(gi[2 * H + j] + r * gh[2 * H + j])
                state[j] = (1 - z) * n + z * state[j]
                y.values[j * x.time + t] = state[j]
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
        let C = channels, T = x.time
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
