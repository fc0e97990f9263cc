import CEarshotKernels
import Foundation

/// LSTM and GRU with ONNX's layouts and gate orders.
enum Recurrent {
    /// The inputs and settings LSTM and GRU share, in layout 0 ([seq, batch, ...]).
    private struct Setup {
        var steps: Int
        var batch: Int
        var inputSize: Int
        var hidden: Int
        var directions: Int
        /// Per direction: whether it runs from the last step to the first.
        var reversed: [Bool]
        var x: [Float]
        var w: [Float]
        var r: [Float]
        /// [directions][2 * gates * hidden]: the input biases, then the recurrent biases.
        var bias: [Float]
        /// [directions][batch][hidden]
        var initialH: [Float]
        var clip: Float?
        var activations: [(Float) -> Float]
        var batchFirst: Bool
    }

    private static func activation(_ name: String, _ n: Node) throws(GraphError) -> (Float) -> Float {
        switch name.lowercased() {
        case "sigmoid": return { 1 / (1 + Foundation.exp(-$0)) }
        case "tanh": return { Foundation.tanh($0) }
        case "relu": return { $0 > 0 ? $0 : 0 }
        default: throw n.unsupported("activation '\(name)' (Sigmoid, Tanh and Relu only)")
        }
    }

    /// Reads X, W, R, B, sequence_lens, initial_h and the shared attributes; `gates` is 4 for LSTM, 3 for GRU.
    private static func setup(_ n: Node, gates: Int, defaultActivations: [String]) throws(GraphError) -> Setup {
        let x = try n.input(0, "X", [.float32])
        let w = try n.input(1, "W", [.float32])
        let r = try n.input(2, "R", [.float32])
        guard x.rank == 3 else { throw n.error("input X has shape \(x.shape); expected 3-D") }
        let layout = try n.int("layout", default: 0)
        guard layout == 0 || layout == 1 else { throw n.error("layout \(layout) is not 0 or 1") }
        let batchFirst = layout == 1
        let (steps, batch, inputSize) = batchFirst ? (x.shape[1], x.shape[0], x.shape[2]) : (x.shape[0], x.shape[1], x.shape[2])
        let direction = try n.string("direction", default: "forward")
        let reversed: [Bool]
        switch direction {
        case "forward": reversed = [false]
        case "reverse": reversed = [true]
        case "bidirectional": reversed = [false, true]
        default: throw n.error("direction '\(direction)' is not forward, reverse or bidirectional")
        }
        let directions = reversed.count
        guard r.rank == 3, r.shape[0] == directions, r.shape[1] == gates * r.shape[2] else {
            throw n.error("input R has shape \(r.shape); expected [\(directions), \(gates) * hidden, hidden]")
        }
        let hidden = r.shape[2]
        if let stated = try n.int("hidden_size"), stated != hidden {
            throw n.error("hidden_size \(stated) differs from R's \(hidden)")
        }
        guard w.shape == [directions, gates * hidden, inputSize] else {
            throw n.error("input W has shape \(w.shape); expected \([directions, gates * hidden, inputSize])")
        }
        var bias = [Float](repeating: 0, count: directions * 2 * gates * hidden)
        if let b = try n.optionalInput(3, "B", [.float32]) {
            guard b.shape == [directions, 2 * gates * hidden] else {
                throw n.error("input B has shape \(b.shape); expected \([directions, 2 * gates * hidden])")
            }
            bias = b.floats
        }
        if let lengths = try n.optionalInput(4, "sequence_lens", [.int64]) {
            guard lengths.shape == [batch] else {
                throw n.error("input sequence_lens has shape \(lengths.shape); expected [\(batch)]")
            }
            if let short = lengths.integers.first(where: { $0 != Int64(steps) }) {
                throw n.unsupported("sequence_lens \(short) shorter than the \(steps) steps of X (every sequence must be full)")
            }
        }
        let stateShape = batchFirst ? [batch, directions, hidden] : [directions, batch, hidden]
        var initialH = [Float](repeating: 0, count: directions * batch * hidden)
        if let h = try n.optionalInput(5, "initial_h", [.float32]) {
            guard h.shape == stateShape else { throw n.error("input initial_h has shape \(h.shape); expected \(stateShape)") }
            initialH = batchFirst ? swapOuterAxes(h.floats, batch, directions, hidden) : h.floats
        }
        let names = try n.strings("activations") ?? Array(repeating: defaultActivations, count: directions).flatMap { $0 }
        guard names.count == defaultActivations.count * directions else {
            throw n.error("activations has \(names.count) names; expected \(defaultActivations.count * directions)")
        }
        let activations = try names.map { (name: String) throws(GraphError) -> (Float) -> Float in try activation(name, n) }
        let clip = try n.float("clip")
        if let clip, !(clip > 0) { throw n.error("clip \(clip) must be positive") }
        let input = batchFirst ? swapOuterAxes(x.floats, batch, steps, inputSize) : x.floats
        return Setup(steps: steps, batch: batch, inputSize: inputSize, hidden: hidden, directions: directions, reversed: reversed,
                     x: input, w: w.floats, r: r.floats, bias: bias, initialH: initialH, clip: clip, activations: activations,
                     batchFirst: batchFirst)
    }

    /// [a][b][inner] to [b][a][inner].
    private static func swapOuterAxes(_ values: [Float], _ a: Int, _ b: Int, _ inner: Int) -> [Float] {
        var out = [Float](repeating: 0, count: values.count)
        for i in 0..<a {
            for j in 0..<b {
                for k in 0..<inner { out[(j * a + i) * inner + k] = values[(i * b + j) * inner + k] }
            }
        }
        return out
    }

    /// gates[g] = sum_i x[i] W[row g][i] + sum_j h[j] R[row g][j] + Wb[g] + Rb[g] for the rows
    /// `rows` (in W's order); `withRecurrent: false` leaves out the R term and its bias.
    private static func preActivations(_ s: Setup, direction d: Int, gates: Int, rows: Range<Int>, x: ArraySlice<Float>,
                                       h: ArraySlice<Float>, withRecurrent: Bool = true) -> [Float] {
        let wBase = d * gates * s.hidden * s.inputSize
        let rBase = d * gates * s.hidden * s.hidden
        let bBase = d * 2 * gates * s.hidden
        // Each gate row is two dot products (input and recurrent weights), in the vectorized kernel.
        let xs = Array(x), hs = Array(h)
        return s.w.withUnsafeBufferPointer { w in
            s.r.withUnsafeBufferPointer { r in
                xs.withUnsafeBufferPointer { xv in
                    hs.withUnsafeBufferPointer { hv in
                        rows.map { row in
                            var sum: Float = 0
                            if let xp = xv.baseAddress, let wp = w.baseAddress, s.inputSize > 0 {
                                sum = earshot_dot(wp + wBase + row * s.inputSize, xp, s.inputSize)
                            }
                            if withRecurrent {
                                if let hp = hv.baseAddress, let rp = r.baseAddress, s.hidden > 0 {
                                    sum += earshot_dot(rp + rBase + row * s.hidden, hp, s.hidden)
                                }
                                return sum + s.bias[bBase + row] + s.bias[bBase + gates * s.hidden + row]
                            }
                            return sum + s.bias[bBase + row]
                        }
                    }
                }
            }
        }
    }

    private static func clipped(_ value: Float, _ clip: Float?) -> Float {
        guard let clip else { return value }
        return min(max(value, -clip), clip)
    }

    /// Lays out Y [seq][directions][batch][hidden] and a state [directions][batch][hidden] for
    /// the layout asked for.
    private static func outputs(_ s: Setup, y: [Float], states: [[Float]]) -> [GraphTensor] {
        let (steps, batch, dirs, hidden) = (s.steps, s.batch, s.directions, s.hidden)
        if !s.batchFirst {
            return [GraphTensor(shape: [steps, dirs, batch, hidden], floats: y)]
                + states.map { GraphTensor(shape: [dirs, batch, hidden], floats: $0) }
        }
        var yb = [Float](repeating: 0, count: y.count)
        for t in 0..<steps {
            for d in 0..<dirs {
                for b in 0..<batch {
                    for k in 0..<hidden {
                        yb[((b * steps + t) * dirs + d) * hidden + k] = y[((t * dirs + d) * batch + b) * hidden + k]
                    }
                }
            }
        }
        return [GraphTensor(shape: [batch, steps, dirs, hidden], floats: yb)]
            + states.map { GraphTensor(shape: [batch, dirs, hidden], floats: swapOuterAxes($0, dirs, batch, hidden)) }
    }

    /// LSTM: W [dirs, 4H, I] with gates in the order i, o, f, c; optional peepholes P [dirs, 3H]
    /// (i, o, f). Outputs Y, Y_h, Y_c.
    static func lstm(_ n: Node) throws(GraphError) -> [GraphTensor] {
        let attributes: Set<String> = ["activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
                                       "input_forget", "layout"]
        try n.expect(inputs: ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"], required: 3,
                     attributes: n.opset >= 14 ? attributes : attributes.subtracting(["layout"]))
        let s = try setup(n, gates: 4, defaultActivations: ["Sigmoid", "Tanh", "Tanh"])
        guard try n.int("input_forget", default: 0) == 0 else { throw n.unsupported("input_forget 1") }
        let (hidden, batch, dirs) = (s.hidden, s.batch, s.directions)
        let stateShape = s.batchFirst ? [batch, dirs, hidden] : [dirs, batch, hidden]
        var initialC = [Float](repeating: 0, count: dirs * batch * hidden)
        if let c = try n.optionalInput(6, "initial_c", [.float32]) {
            guard c.shape == stateShape else { throw n.error("input initial_c has shape \(c.shape); expected \(stateShape)") }
            initialC = s.batchFirst ? swapOuterAxes(c.floats, batch, dirs, hidden) : c.floats
        }
        var peepholes = [Float](repeating: 0, count: dirs * 3 * hidden)
        if let p = try n.optionalInput(7, "P", [.float32]) {
            guard p.shape == [dirs, 3 * hidden] else { throw n.error("input P has shape \(p.shape); expected \([dirs, 3 * hidden])") }
            peepholes = p.floats
        }
        _ = try n.count([s.steps, dirs, batch, hidden], "output Y")
        var y = [Float](repeating: 0, count: s.steps * dirs * batch * hidden)
        var finalH = s.initialH
        var finalC = initialC
        for d in 0..<dirs {
            let (f, g, hAct) = (s.activations[3 * d], s.activations[3 * d + 1], s.activations[3 * d + 2])
            let pBase = d * 3 * hidden
            for b in 0..<batch {
                let stateBase = (d * batch + b) * hidden
                var h = Array(s.initialH[stateBase..<(stateBase + hidden)])
                var c = Array(initialC[stateBase..<(stateBase + hidden)])
                for step in 0..<s.steps {
                    let t = s.reversed[d] ? s.steps - 1 - step : step
                    let xBase = (t * batch + b) * s.inputSize
                    let z = preActivations(s, direction: d, gates: 4, rows: 0..<(4 * hidden),
                                           x: s.x[xBase..<(xBase + s.inputSize)], h: h[...])
                    for k in 0..<hidden {
                        let i = f(clipped(z[k] + peepholes[pBase + k] * c[k], s.clip))
                        let forget = f(clipped(z[2 * hidden + k] + peepholes[pBase + 2 * hidden + k] * c[k], s.clip))
                        let candidate = g(clipped(z[3 * hidden + k], s.clip))
                        c[k] = forget * c[k] + i * candidate
                        let o = f(clipped(z[hidden + k] + peepholes[pBase + hidden + k] * c[k], s.clip))
                        h[k] = o * hAct(c[k])
                    }
                    let yBase = ((t * dirs + d) * batch + b) * hidden
                    for k in 0..<hidden { y[yBase + k] = h[k] }
                }
                for k in 0..<hidden {
                    finalH[stateBase + k] = h[k]
                    finalC[stateBase + k] = c[k]
                }
            }
        }
        return outputs(s, y: y, states: [finalH, finalC])
    }

    /// GRU: W [dirs, 3H, I] with gates in the order z, r, h; linear_before_reset 0 or 1.
    /// Outputs Y and Y_h.
    static func gru(_ n: Node) throws(GraphError) -> [GraphTensor] {
        let attributes: Set<String> = ["activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
                                       "linear_before_reset", "layout"]
        try n.expect(inputs: ["X", "W", "R", "B", "sequence_lens", "initial_h"], required: 3,
                     attributes: n.opset >= 14 ? attributes : attributes.subtracting(["layout"]))
        let s = try setup(n, gates: 3, defaultActivations: ["Sigmoid", "Tanh"])
        let linearBeforeReset = try n.int("linear_before_reset", default: 0) != 0
        let (hidden, batch, dirs) = (s.hidden, s.batch, s.directions)
        _ = try n.count([s.steps, dirs, batch, hidden], "output Y")
        var y = [Float](repeating: 0, count: s.steps * dirs * batch * hidden)
        var finalH = s.initialH
        for d in 0..<dirs {
            let (f, g) = (s.activations[2 * d], s.activations[2 * d + 1])
            let rBase = d * 3 * hidden * hidden
            let bBase = d * 6 * hidden
            for b in 0..<batch {
                let stateBase = (d * batch + b) * hidden
                var h = Array(s.initialH[stateBase..<(stateBase + hidden)])
                for step in 0..<s.steps {
                    let t = s.reversed[d] ? s.steps - 1 - step : step
                    let xBase = (t * batch + b) * s.inputSize
                    let x = s.x[xBase..<(xBase + s.inputSize)]
                    let zr = preActivations(s, direction: d, gates: 3, rows: 0..<(2 * hidden), x: x, h: h[...])
                    let update = zr[..<hidden].map { f(clipped($0, s.clip)) }
                    let reset = zr[hidden...].map { f(clipped($0, s.clip)) }
                    // The candidate: x Wh + Wbh, plus the recurrent part, reset before or after R.
                    let inputPart = preActivations(s, direction: d, gates: 3, rows: (2 * hidden)..<(3 * hidden), x: x, h: h[...],
                                                   withRecurrent: false)
                    var candidate = [Float](repeating: 0, count: hidden)
                    for k in 0..<hidden {
                        let rRow = rBase + (2 * hidden + k) * hidden
                        let recurrentBias = s.bias[bBase + 5 * hidden + k]
                        var recurrent: Float = 0
                        if linearBeforeReset {
                            for j in 0..<hidden { recurrent += h[j] * s.r[rRow + j] }
                            recurrent = reset[k] * (recurrent + recurrentBias)
                        } else {
                            for j in 0..<hidden { recurrent += reset[j] * h[j] * s.r[rRow + j] }
                            recurrent += recurrentBias
                        }
                        candidate[k] = g(clipped(inputPart[k] + recurrent, s.clip))
                    }
                    for k in 0..<hidden { h[k] = (1 - update[k]) * candidate[k] + update[k] * h[k] }
                    let yBase = ((t * dirs + d) * batch + b) * hidden
                    for k in 0..<hidden { y[yBase + k] = h[k] }
                }
                for k in 0..<hidden { finalH[stateBase + k] = h[k] }
            }
        }
        return outputs(s, y: y, states: [finalH])
    }
}
