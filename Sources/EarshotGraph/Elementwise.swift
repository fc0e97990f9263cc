import Foundation

/// Values of two broadcast operands, combined one by one into the broadcast shape.
func broadcastApply<A, B, R>(_ a: [A], _ aShape: [Int], _ b: [B], _ bShape: [Int], to outShape: [Int],
                             _ f: (A, B) -> R) -> [R] {
    if aShape == outShape, bShape == outShape {
        return a.withUnsafeBufferPointer { x in b.withUnsafeBufferPointer { y in (0..<x.count).map { f(x[$0], y[$0]) } } }
    }
    if aShape == outShape, b.count == 1 {
        let y = b[0]
        return a.map { f($0, y) }
    }
    if bShape == outShape, a.count == 1 {
        let x = a[0]
        return b.map { f(x, $0) }
    }
    let ao = broadcastOffsets(from: aShape, to: outShape)
    let bo = broadcastOffsets(from: bShape, to: outShape)
    return a.withUnsafeBufferPointer { x in
        b.withUnsafeBufferPointer { y in (0..<ao.count).map { f(x[ao[$0]], y[bo[$0]]) } }
    }
}

/// An int64 from a double the way an x86 CPU converts (cvttsd2si): toward zero, and the
/// "integer indefinite" value Int64.min for NaN, infinities and values out of range. This is
/// what onnxruntime gives on x86-64 for Cast and for Pow of integers.
func truncatedInt64(_ value: Double) -> Int64 {
    guard value.isFinite, value < 0x1p63, value >= -0x1p63 else { return .min }
    return Int64(value)
}

enum Elementwise {
    // MARK: Binary arithmetic

    static func arithmetic(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["A", "B"], required: 2, attributes: [])
        let a = try n.input(0, "A", [.float32, .int64])
        let b = try n.input(1, "B", [.float32, .int64])
        guard a.dtype == b.dtype else {
            throw n.error("inputs A and B have types \(a.dtype.rawValue) and \(b.dtype.rawValue); they must match")
        }
        let shape = try n.broadcast(a.shape, b.shape, "inputs A and B")
        if a.dtype == .float32 {
            let values: [Float]
            switch n.op {
            case .add: values = broadcastApply(a.floats, a.shape, b.floats, b.shape, to: shape, +)
            case .sub: values = broadcastApply(a.floats, a.shape, b.floats, b.shape, to: shape, -)
            case .mul: values = broadcastApply(a.floats, a.shape, b.floats, b.shape, to: shape, *)
            default: values = broadcastApply(a.floats, a.shape, b.floats, b.shape, to: shape, /)
            }
            return [GraphTensor(shape: shape, floats: values)]
        }
        // Integer arithmetic wraps on overflow (two's complement), as onnxruntime's does.
        let values: [Int64]
        switch n.op {
        case .add: values = broadcastApply(a.integers, a.shape, b.integers, b.shape, to: shape, &+)
        case .sub: values = broadcastApply(a.integers, a.shape, b.integers, b.shape, to: shape, &-)
        case .mul: values = broadcastApply(a.integers, a.shape, b.integers, b.shape, to: shape, &*)
        default:
            if shape.allSatisfy({ $0 > 0 }), b.integers.contains(0) {
                throw n.error("integer division by zero (input B holds 0)")
            }
            values = broadcastApply(a.integers, a.shape, b.integers, b.shape, to: shape) { x, y in
                y == 0 ? 0 : x.dividedReportingOverflow(by: y).partialValue
            }
        }
        return [GraphTensor(shape: shape, integers: values)]
    }

    /// Pow: a float or int64 base, a float or int64 exponent; the result has the base's type.
    static func pow(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["X", "Y"], required: 2, attributes: [])
        let x = try n.input(0, "X", [.float32, .int64])
        let y = try n.input(1, "Y", [.float32, .int64])
        let shape = try n.broadcast(x.shape, y.shape, "inputs X and Y")
        switch (x.dtype, y.dtype) {
        case (.float32, .float32):
            return [GraphTensor(shape: shape, floats: broadcastApply(x.floats, x.shape, y.floats, y.shape, to: shape) {
                Foundation.pow($0, $1)
            })]
        case (.float32, _):
            return [GraphTensor(shape: shape, floats: broadcastApply(x.floats, x.shape, y.integers, y.shape, to: shape) {
                Float(Foundation.pow(Double($0), Double($1)))
            })]
        case (_, .float32):
            return [GraphTensor(shape: shape, integers: broadcastApply(x.integers, x.shape, y.floats, y.shape, to: shape) {
                truncatedInt64(Foundation.pow(Double($0), Double($1)))
            })]
        default:
            return [GraphTensor(shape: shape, integers: broadcastApply(x.integers, x.shape, y.integers, y.shape, to: shape) {
                truncatedInt64(Foundation.pow(Double($0), Double($1)))
            })]
        }
    }

    /// Max and Min of one or more broadcast inputs. A NaN wins.
    static func maxMin(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expectVariadic(minimum: 1, attributes: [])
        let isMax = n.op == .max
        var result = try n.input(0, "data_0", [.float32, .int64])
        for i in 1..<n.inputs.count {
            let next = try n.input(i, "data_\(i)", [.float32, .int64])
            guard next.dtype == result.dtype else {
                throw n.error("input \(i) is \(next.dtype.rawValue) but input 0 is \(result.dtype.rawValue)")
            }
            let shape = try n.broadcast(result.shape, next.shape, "inputs 0...\(i)")
            if result.dtype == .float32 {
                result = GraphTensor(shape: shape, floats: broadcastApply(result.floats, result.shape, next.floats, next.shape, to: shape) {
                    a, b in
                    if a.isNaN || b.isNaN { return .nan }
                    return isMax ? (b > a ? b : a) : (b < a ? b : a)
                })
            } else {
                result = GraphTensor(shape: shape, integers: broadcastApply(result.integers, result.shape, next.integers, next.shape,
                                                                            to: shape) { isMax ? Swift.max($0, $1) : Swift.min($0, $1) })
            }
        }
        return [result]
    }

    // MARK: Comparison and logic

    /// The comparison op `op` (Equal, Greater, GreaterOrEqual, Less, LessOrEqual) on one type.
    private static func comparison<T: Comparable>(_ op: GraphOp) -> (T, T) -> Bool {
        switch op {
        case .equal: return (==)
        case .greater: return (>)
        case .greaterOrEqual: return (>=)
        case .less: return (<)
        default: return (<=)
        }
    }

    static func compare(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["A", "B"], required: 2, attributes: [])
        let types: Set<GraphDType> = n.op == .equal ? [.float32, .int64, .bool] : [.float32, .int64]
        let a = try n.input(0, "A", types)
        let b = try n.input(1, "B", types)
        guard a.dtype == b.dtype else {
            throw n.error("inputs A and B have types \(a.dtype.rawValue) and \(b.dtype.rawValue); they must match")
        }
        let shape = try n.broadcast(a.shape, b.shape, "inputs A and B")
        let values: [Int64]
        if a.dtype == .float32 {
            let f: (Float, Float) -> Bool = comparison(n.op)
            values = broadcastApply(a.floats, a.shape, b.floats, b.shape, to: shape) { f($0, $1) ? 1 : 0 }
        } else {
            let f: (Int64, Int64) -> Bool = comparison(n.op)
            values = broadcastApply(a.integers, a.shape, b.integers, b.shape, to: shape) { f($0, $1) ? 1 : 0 }
        }
        return [GraphTensor(shape: shape, integers: values, dtype: .bool)]
    }

    static func logical(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["A", "B"], required: 2, attributes: [])
        let a = try n.input(0, "A", [.bool])
        let b = try n.input(1, "B", [.bool])
        let shape = try n.broadcast(a.shape, b.shape, "inputs A and B")
        let isAnd = n.op == .and
        let values = broadcastApply(a.integers, a.shape, b.integers, b.shape, to: shape) { x, y -> Int64 in
            isAnd ? (x != 0 && y != 0 ? 1 : 0) : (x != 0 || y != 0 ? 1 : 0)
        }
        return [GraphTensor(shape: shape, integers: values, dtype: .bool)]
    }

    static func not(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["X"], required: 1, attributes: [])
        let x = try n.input(0, "X", [.bool])
        return [GraphTensor(shape: x.shape, integers: x.integers.map { $0 == 0 ? 1 : 0 }, dtype: .bool)]
    }

    static func `where`(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["condition", "X", "Y"], required: 3, attributes: [])
        let c = try n.input(0, "condition", [.bool])
        let x = try n.input(1, "X", [.float32, .int64, .bool])
        let y = try n.input(2, "Y", [.float32, .int64, .bool])
        guard x.dtype == y.dtype else {
            throw n.error("inputs X and Y have types \(x.dtype.rawValue) and \(y.dtype.rawValue); they must match")
        }
        let shape = try n.broadcast(try n.broadcast(c.shape, x.shape, "inputs condition and X"), y.shape, "inputs condition, X and Y")
        let co = broadcastOffsets(from: c.shape, to: shape)
        let xo = broadcastOffsets(from: x.shape, to: shape)
        let yo = broadcastOffsets(from: y.shape, to: shape)
        if x.dtype == .float32 {
            let values = (0..<co.count).map { c.integers[co[$0]] != 0 ? x.floats[xo[$0]] : y.floats[yo[$0]] }
            return [GraphTensor(shape: shape, floats: values)]
        }
        let values = (0..<co.count).map { c.integers[co[$0]] != 0 ? x.integers[xo[$0]] : y.integers[yo[$0]] }
        return [GraphTensor(shape: shape, integers: values, dtype: x.dtype)]
    }

    /// Clip: min(max(x, low), high), with low and high optional scalar inputs (a low above the
    /// high gives the high, as onnxruntime does).
    static func clip(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["input", "min", "max"], required: 1, attributes: [])
        let x = try n.input(0, "input", [.float32, .int64])
        let low = try n.optionalInput(1, "min", [x.dtype]).map { (t: GraphTensor) throws(GraphError) in try n.scalarInput(t, "min") }
        let high = try n.optionalInput(2, "max", [x.dtype]).map { (t: GraphTensor) throws(GraphError) in try n.scalarInput(t, "max") }
        if x.dtype == .float32 {
            let lo = low?.floats[0] ?? -.infinity
            let hi = high?.floats[0] ?? .infinity
            return [GraphTensor(shape: x.shape, floats: x.floats.map { v in
                if v.isNaN { return v }
                return Swift.min(Swift.max(v, lo), hi)
            })]
        }
        let lo = low?.integers[0] ?? .min
        let hi = high?.integers[0] ?? .max
        return [GraphTensor(shape: x.shape, integers: x.integers.map { Swift.min(Swift.max($0, lo), hi) })]
    }

    // MARK: Unary

    static func unary(_ n: Node) throws(GraphError) -> [GraphTensor] {
        let attributes: Set<String> = n.op == .leakyRelu ? ["alpha"] : []
        try n.expect(inputs: ["X"], required: 1, attributes: attributes)
        let integerOps: Set<GraphOp> = n.opset >= 14 ? [.neg, .abs, .relu] : [.neg, .abs]
        let x = try n.input(0, "X", integerOps.contains(n.op) ? [.float32, .int64] : [.float32])
        if x.dtype == .int64 {
            let values: [Int64]
            switch n.op {
            case .neg: values = x.integers.map { 0 &- $0 }
            case .abs: values = x.integers.map { $0 < 0 ? 0 &- $0 : $0 }
            default: values = x.integers.map { Swift.max($0, 0) }
            }
            return [GraphTensor(shape: x.shape, integers: values)]
        }
        let f: (Float) -> Float
        switch n.op {
        case .sqrt: f = { $0.squareRoot() }
        case .relu: f = { $0 > 0 ? $0 : ($0.isNaN ? $0 : 0) }
        case .leakyRelu:
            let alpha = try n.float("alpha", default: 0.01)
            f = { $0 >= 0 ? $0 : alpha * $0 }
        case .sigmoid: f = { 1 / (1 + Foundation.exp(-$0)) }
        case .tanh: f = { Foundation.tanh($0) }
        case .log: f = { Foundation.log($0) }
        case .exp: f = { Foundation.exp($0) }
        case .neg: f = { -$0 }
        case .abs: f = { Swift.abs($0) }
        case .erf: f = { Foundation.erf($0) }
        case .sin: f = { Foundation.sin($0) }
        default:
            // Softplus: log(1 + exp(x)), in the form that neither overflows nor loses small values.
            f = { v in v > 0 ? v + Foundation.log1p(Foundation.exp(-v)) : Foundation.log1p(Foundation.exp(v)) }
        }
        return [GraphTensor(shape: x.shape, floats: x.floats.map(f))]
    }
}
