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
