import CEarshotKernels
import Foundation

/// An element-wise op of one input (and Clip's bounds), by the vectorized kernels where they have it.
struct UnaryStep: Step {
    enum Kind: Sendable {
        case relu, sigmoid, tanh, sqrt, exp, log, neg, abs, erf, softplus, sin, leakyRelu, clip
        /// x * Sigmoid(x) (swish, SiLU): a Sigmoid and the Mul of its input by it, its only reader.
        case swish

        /// The kind of op `op`; nil for an op of another family.
        init?(_ op: GraphOp) {
            switch op {
            case .relu: self = .relu
            case .sigmoid: self = .sigmoid
            case .tanh: self = .tanh
            case .sqrt: self = .sqrt
            case .exp: self = .exp
            case .log: self = .log
            case .neg: self = .neg
            case .abs: self = .abs
            case .erf: self = .erf
            case .softplus: self = .softplus
            case .sin: self = .sin
            case .leakyRelu: self = .leakyRelu
            case .clip: self = .clip
            default: return nil
            }
        }
    }

    let kind: Kind
    var x: GraphPlan.Ref
    var y: GraphPlan.Ref
    /// LeakyRelu's slope.
    let alpha: Float
    let beta: Float
    /// Clip's bounds (nil: none on that side).
    var low: GraphPlan.Ref?
    var high: GraphPlan.Ref?

    func run(_ c: Context) {
        let n = y.count
        for b in 0..<c.streams {
            let input = c.read(x, b), out = c.write(y, b)
            switch kind {
            case .relu: earshot_unary(Int32(EARSHOT_RELU), 0, input, out, n)
            case .sigmoid: earshot_unary(Int32(EARSHOT_SIGMOID), 0, input, out, n)
            // x * Sigmoid(x) in one pass: the Sigmoid's value as it gives it, then the Mul's.
            case .swish: earshot_unary(Int32(EARSHOT_SWISH), 0, input, out, n)
            case .tanh:
                out.update(from: input, count: n)
                earshot_tanh(out, n)
            case .sqrt: earshot_unary(Int32(EARSHOT_SQRT), 0, input, out, n)
            case .exp: for i in 0..<n { out[i] = Foundation.exp(input[i]) }
            case .log: earshot_unary(Int32(EARSHOT_LOG), 0, input, out, n)
            case .neg: earshot_unary(Int32(EARSHOT_NEG), 0, input, out, n)
            case .abs: earshot_unary(Int32(EARSHOT_ABS), 0, input, out, n)
            case .erf: for i in 0..<n { out[i] = Foundation.erf(input[i]) }
            case .softplus: for i in 0..<n { out[i] = Foundation.log1p(Foundation.exp(input[i])) }
            case .sin: for i in 0..<n { out[i] = Foundation.sin(input[i]) }
            case .leakyRelu: earshot_unary(Int32(EARSHOT_LEAKY_RELU), alpha, input, out, n)
            case .clip:
                let lo = low.map { c.read($0, b)[0] } ?? -.infinity, hi = high.map { c.read($0, b)[0] } ?? .infinity
                for i in 0..<n { out[i] = input[i].isNaN ? input[i] : Swift.min(Swift.max(input[i], lo), hi) }
            }
        }
    }
}

extension UnaryStep {
    var reads: [GraphPlan.Ref] { [x] + [low, high].compactMap { $0 } }
    var writes: [GraphPlan.Ref] { [y] }
}

extension UnaryStep {
    func relocated(_ move: (GraphPlan.Ref) -> GraphPlan.Ref) -> (any Step)? {
        var moved = self
        (moved.x, moved.y, moved.low, moved.high) = (move(x), move(y), low.map(move), high.map(move))
        return moved
    }
}
