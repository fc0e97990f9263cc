import EarshotGraph
import EarshotModel
import Foundation

/// A layer the trainer fits, with the forward pass the runtime runs (same products, same
/// expressions) and its backward pass.
enum TrainingLayer: Sendable, Equatable {
    /// Causal 1-D convolution over time (kernel `taps`, stride and dilation 1), its left context
    /// zeros at stream start, as the runtime's causal conv1d; taps 1 is a linear layer.
    /// Parameters: weight [outputs][taps][inputs] (tap 0 the oldest frame), bias [outputs].
    case conv(inputs: Int, outputs: Int, taps: Int)
    case relu
    /// torch.nn.GRU, gates r, z, n. Parameters: W_ih [3H][I], W_hh [3H][H], b_ih [3H], b_hh [3H].
    case gru(inputs: Int, hidden: Int)
    /// Depthwise causal 1-D convolution over time: each channel its own `taps` taps (tap 0 the
    /// oldest frame), as microWakeWord's blocks convolve over time before a pointwise layer; the
    /// runtime's causal conv1d with groups = channels. Parameters: weight [channels][taps], bias
    /// [channels].
    case depthwise(channels: Int, taps: Int)
    /// Quantization-aware training's activation: each value rounded to its int8 code and back
    /// (`FakeQuant.fake`), the gradient through where it lies in the codes' range. Parameters:
    /// [scale, zero point], set from observed ranges, never by the optimizer (their gradient is
    /// 0, so Adam leaves them); a scale of 0 passes values as they are (float training).
    case fakeQuant(channels: Int)
    /// One logit z as the two logits of a softmax, 0 for `background` and z for the other class:
    /// softmax gives sigmoid(z), the single score microWakeWord's models output.
    case pair(background: Int)

    var parameterShapes: [[Int]] {
        switch self {
        case let .conv(i, o, k): return [[o, k, i], [o]]
        case .relu: return []
        case let .gru(i, h): return [[3 * h, i], [3 * h, h], [3 * h], [3 * h]]
        case let .depthwise(c, k): return [[c, k], [c]]
        case .fakeQuant: return [[2]]
        case .pair: return []
        }
    }

    func outputChannels(input: Int) -> Int {
        switch self {
        case let .conv(_, o, _): return o
        case .relu: return input
        case let .gru(_, h): return h
        case let .depthwise(c, _): return c
        case let .fakeQuant(c): return c
        case .pair: return 2
        }
    }

    /// Uniform in ±1/sqrt(fan in), as PyTorch initialises these layers.
    func initialParameters(_ random: inout SplitMix64) -> [[Float]] {
        switch self {
        case let .conv(i, o, k):
            let bound = 1 / Float(i * k).squareRoot()
            return [random.uniform(count: o * k * i, bound: bound), random.uniform(count: o, bound: bound)]
        case .relu, .pair: return []
        case .fakeQuant: return [[0, 0]]
        case let .depthwise(c, k):
            let bound = 1 / Float(k).squareRoot()
            return [random.uniform(count: c * k, bound: bound), random.uniform(count: c, bound: bound)]
        case let .gru(i, h):
            let bound = 1 / Float(h).squareRoot()
            return [random.uniform(count: 3 * h * i, bound: bound), random.uniform(count: 3 * h * h, bound: bound),
                    random.uniform(count: 3 * h, bound: bound), random.uniform(count: 3 * h, bound: bound)]
        }
    }
}

/// What a layer's forward pass keeps for its backward pass.
enum LayerCache {
    case conv(fields: [Float])
    case relu(input: [Float])
    case gru(GRUCache)
    case depthwise(input: [Float])
    case fakeQuant(passes: [Bool])
    case pair
}

struct GRUCache {
    var input: [Float]
    /// [time][batch][hidden] each: the state before step t, the gates, and W_hn h + b_hn.
    var previous: [Float], r: [Float], z: [Float], n: [Float], hiddenCandidate: [Float]
}

extension TrainingLayer {
    func forward(_ x: Frames, _ p: ArraySlice<[Float]>) -> (Frames, LayerCache) {
        switch self {
        case let .conv(i, o, k):
            let fields = Self.fields(x, inputs: i, taps: k)
            let y = product(PackedMatrix(p[p.startIndex], rows: o, k: k * i), fields, n: x.rows, bias: p[p.startIndex + 1])
            return (Frames(batch: x.batch, time: x.time, channels: o, values: y), .conv(fields: fields))
        case .relu:
            return (Frames(batch: x.batch, time: x.time, channels: x.channels, values: x.values.map { max($0, 0) }), .relu(input: x.values))
        case let .gru(i, h):
            return gruForward(x, inputs: i, hidden: h, p)
        case let .depthwise(c, k):
            // Channel by channel, its receptive fields times its taps: the product the
            // runtime's grouped conv1d runs for each group (the same sums in the same order).
            let w = p[p.startIndex], bias = p[p.startIndex + 1]
            var y = [Float](repeating: 0, count: x.values.count)
            var fields = [Float](repeating: 0, count: x.rows * k)
            for ch in 0..<c {
                for b in 0..<x.batch {
                    for t in 0..<x.time {
                        for tap in 0..<k {
                            let source = t - (k - 1) + tap
                            fields[(b * x.time + t) * k + tap] = source >= 0 ? x.values[(b * x.time + source) * c + ch] : 0
                        }
                    }
                }
                let out = product(PackedMatrix(Array(w[(ch * k)..<((ch + 1) * k)]), rows: 1, k: k), fields, n: x.rows, bias: [bias[ch]])
                for r in 0..<x.rows { y[r * c + ch] = out[r] }
            }
            return (Frames(batch: x.batch, time: x.time, channels: c, values: y), .depthwise(input: x.values))
        case .fakeQuant:
            let q = p[p.startIndex]
            guard q[0] > 0 else { return (x, .fakeQuant(passes: [])) }
            let affine = FakeQuant.Affine(scale: q[0], zero: Int(q[1]))
            var y = x
            for j in y.values.indices { y.values[j] = FakeQuant.fake(x.values[j], affine) }
            return (y, .fakeQuant(passes: x.values.map { FakeQuant.passes($0, affine) }))
        case let .pair(background):
            var y = Frames(batch: x.batch, time: x.time, channels: 2)
            for r in 0..<x.rows { y.values[r * 2 + 1 - background] = x.values[r] }
            return (y, .pair)
        }
    }

    /// Gradients of the parameters and of the input, given the output's gradient.
    func backward(_ dy: Frames, _ cache: LayerCache, _ p: ArraySlice<[Float]>) -> (dx: Frames, grads: [[Float]]) {
        switch (self, cache) {
        case let (.conv(i, o, k), .conv(fields)):
            let n = dy.rows
            let dW = outerSum(dy.values, fields, n: n, outputs: o, inputs: k * i)
            let db = columnSums(dy.values, n: n, width: o)
            let wT = PackedMatrix(transposed(p[p.startIndex], rows: o, cols: k * i), rows: k * i, k: o)
            let dFields = product(wT, dy.values, n: n)
            var dx = Frames(batch: dy.batch, time: dy.time, channels: i)
            // Each field row holds frames t - taps + 1 ... t: its gradient goes back to them.
            for b in 0..<dy.batch {
                for t in 0..<dy.time {
                    for tap in 0..<k {
                        let source = t - (k - 1) + tap
                        guard source >= 0 else { continue }
                        let from = ((b * dy.time + t) * k + tap) * i, to = (b * dy.time + source) * i
                        for c in 0..<i { dx.values[to + c] += dFields[from + c] }
                    }
                }
            }
            return (dx, [dW, db])
        case let (.relu, .relu(input)):
            var dx = dy
            for j in dx.values.indices where input[j] <= 0 { dx.values[j] = 0 }
            return (dx, [])
        case let (.gru(i, h), .gru(c)):
            return gruBackward(dy, c, inputs: i, hidden: h, p)
        case let (.depthwise(c, k), .depthwise(input)):
            let w = p[p.startIndex]
            var dw = [Float](repeating: 0, count: c * k), db = [Float](repeating: 0, count: c)
            var dx = Frames(batch: dy.batch, time: dy.time, channels: c)
            for b in 0..<dy.batch {
                for t in 0..<dy.time {
                    for ch in 0..<c {
                        let g = dy.values[(b * dy.time + t) * c + ch]
                        db[ch] += g
                        for tap in 0..<k where t - (k - 1) + tap >= 0 {
                            let source = (b * dy.time + t - (k - 1) + tap) * c + ch
                            dw[ch * k + tap] += g * input[source]
                            dx.values[source] += g * w[ch * k + tap]
                        }
                    }
                }
            }
            return (dx, [dw, db])
        case let (.fakeQuant, .fakeQuant(passes)):
            var dx = dy
            if !passes.isEmpty { for j in dx.values.indices where !passes[j] { dx.values[j] = 0 } }
            return (dx, [[0, 0]])
        case let (.pair(background), .pair):
            var dx = Frames(batch: dy.batch, time: dy.time, channels: 1)
            // The background's logit is the constant 0: only the other one depends on z.
            for r in 0..<dy.rows { dx.values[r] = dy.values[r * 2 + 1 - background] }
            return (dx, [])
        default:
            preconditionFailure("a layer's cache comes from its own forward pass")
        }
    }

    /// Each row's receptive field: frames t - taps + 1 ... t of its clip (zeros before the start),
    /// tap after tap, as the runtime's causal conv1d gathers them.
    static func fields(_ x: Frames, inputs i: Int, taps k: Int) -> [Float] {
        var fields = [Float](repeating: 0, count: x.rows * k * i)
        x.values.withUnsafeBufferPointer { xv in
            fields.withUnsafeMutableBufferPointer { f in
                for b in 0..<x.batch {
                    for t in 0..<x.time {
                        for tap in 0..<k {
                            let source = t - (k - 1) + tap
                            guard source >= 0 else { continue }
                            (f.baseAddress! + ((b * x.time + t) * k + tap) * i).update(from: xv.baseAddress! + (b * x.time + source) * i, count: i)
                        }
                    }
                }
            }
        }
        return fields
    }

    private func gruForward(_ x: Frames, inputs: Int, hidden H: Int, _ p: ArraySlice<[Float]>) -> (Frames, LayerCache) {
        let B = x.batch, T = x.time, rows = 3 * H
        let wih = p[p.startIndex], whh = p[p.startIndex + 1], bih = p[p.startIndex + 2], bhh = p[p.startIndex + 3]
        let gi = product(PackedMatrix(wih, rows: rows, k: inputs), x.values, n: x.rows, bias: bih)
        let hh = PackedMatrix(whh, rows: rows, k: H)
        var h = [Float](repeating: 0, count: B * H)
        var y = Frames(batch: B, time: T, channels: H)
        var cache = GRUCache(input: x.values, previous: [], r: [], z: [], n: [], hiddenCandidate: [])
        for keep in [\GRUCache.previous, \.r, \.z, \.n, \.hiddenCandidate] {
            cache[keyPath: keep] = [Float](repeating: 0, count: T * B * H)
        }
        for t in 0..<T {
            let gh = product(hh, h, n: B, bias: bhh)
            for b in 0..<B {
                let g = (b * T + t) * rows, r0 = b * rows, at = (t * B + b) * H
                for j in 0..<H {
                    // The runtime's GRU expressions, term for term.
                    let r = logistic(gi[g + j] + gh[r0 + j]), z = logistic(gi[g + H + j] + gh[r0 + H + j])
                    let cand = tanh(gi[g + 2 * H + j] + r * gh[r0 + 2 * H + j])
                    cache.previous[at + j] = h[b * H + j]
                    cache.r[at + j] = r
                    cache.z[at + j] = z
                    cache.n[at + j] = cand
                    cache.hiddenCandidate[at + j] = gh[r0 + 2 * H + j]
                    h[b * H + j] = (1 - z) * cand + z * h[b * H + j]
                    y.values[(b * T + t) * H + j] = h[b * H + j]
                }
            }
        }
        return (y, .gru(cache))
    }

    private func gruBackward(_ dy: Frames, _ c: GRUCache, inputs I: Int, hidden H: Int, _ p: ArraySlice<[Float]>) -> (dx: Frames, grads: [[Float]]) {
        let B = dy.batch, T = dy.time, rows = 3 * H, N = B * T
        let wih = p[p.startIndex], whh = p[p.startIndex + 1]
        let hhT = PackedMatrix(transposed(whh, rows: rows, cols: H), rows: H, k: rows)
        var dgi = [Float](repeating: 0, count: N * rows)  // [batch][time][3H]
        var dgh = [Float](repeating: 0, count: T * B * rows)  // [time][batch][3H]
        var dh = [Float](repeating: 0, count: B * H)
        var direct = [Float](repeating: 0, count: B * H)
        for t in stride(from: T - 1, through: 0, by: -1) {
            for b in 0..<B {
                let at = (t * B + b) * H, gi0 = (b * T + t) * rows, gh0 = (t * B + b) * rows
                for j in 0..<H {
                    let g = dy.values[(b * T + t) * H + j] + dh[b * H + j]
                    let r = c.r[at + j], z = c.z[at + j], n = c.n[at + j], prev = c.previous[at + j]
                    let dn = g * (1 - z) * (1 - n * n)
                    let dz = g * (prev - n) * z * (1 - z)
                    let dr = dn * c.hiddenCandidate[at + j] * r * (1 - r)
                    dgi[gi0 + j] = dr
                    dgi[gi0 + H + j] = dz
                    dgi[gi0 + 2 * H + j] = dn
                    dgh[gh0 + j] = dr
                    dgh[gh0 + H + j] = dz
                    dgh[gh0 + 2 * H + j] = dn * r
                    direct[b * H + j] = g * z
                }
            }
            let back = dgh.withUnsafeBufferPointer { Array($0[(t * B * rows)..<((t + 1) * B * rows)]) }
            let through = product(hhT, back, n: B)
            for k in dh.indices { dh[k] = direct[k] + through[k] }
        }
        let dWih = outerSum(dgi, c.input, n: N, outputs: rows, inputs: I)
        let dWhh = outerSum(dgh, c.previous, n: N, outputs: rows, inputs: H)
        let dbih = columnSums(dgi, n: N, width: rows), dbhh = columnSums(dgh, n: N, width: rows)
        let ihT = PackedMatrix(transposed(wih, rows: rows, cols: I), rows: I, k: rows)
        let dx = Frames(batch: B, time: T, channels: I, values: product(ihT, dgi, n: N))
        return (dx, [dWih, dWhh, dbih, dbhh])
    }
}
