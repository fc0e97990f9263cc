import CEarshotKernels
import Foundation

/// The positions of a reduction: for every output value the offset where its group starts, and
/// the offsets within a group, in row-major order of the reduced axes.
struct ReductionLayout: Sendable {
    let starts: [Int]
    let members: [Int]

    /// `reduced` holds the reduced axes (non-negative, any order).
    init(shape: [Int], reduced: Set<Int>) {
        let strides = rowMajorStrides(shape)
        let kept = shape.indices.filter { !reduced.contains($0) }
        let inside = shape.indices.filter { reduced.contains($0) }
        starts = walkOffsets(shape: kept.map { shape[$0] }, strides: kept.map { strides[$0] })
        members = walkOffsets(shape: inside.map { shape[$0] }, strides: inside.map { strides[$0] })
    }
}

enum Reductions {
    /// ReduceMean, ReduceMax, ReduceSum, ReduceMin. Their axes are an input from opset 18
    /// (ReduceSum: 13) and an attribute before. Sums run in float, in the order of a plain loop
    /// over the reduced positions.
    /// The positions a Reduce* node sums over, and its output shape; nil when it changes nothing
    /// (no axes, with noop_with_empty_axes).
    static func reduction(_ n: Node, shape: [Int]) throws(GraphError) -> (ReductionLayout, [Int])? {
        var axes: [Int] = []
        if n.op == .reduceSum || n.opset >= 18 {
            if let t = try n.optionalInput(1, "axes", [.int64]) { axes = try n.integerList(t, "axes") }
        } else {
            axes = try n.ints("axes") ?? []
        }
        let keepDims = try n.int("keepdims", default: 1) != 0
        let noop = try n.int("noop_with_empty_axes", default: 0) != 0
        if axes.isEmpty {
            if noop { return nil }
            axes = Array(0..<shape.count)
        }
        let reduced = Set(try n.axes(axes, rank: shape.count, "axis"))
        var outShape: [Int] = []
        for (d, size) in shape.enumerated() {
            if !reduced.contains(d) {
                outShape.append(size)
            } else if keepDims {
                outShape.append(1)
            }
        }
        return (ReductionLayout(shape: shape, reduced: reduced), outShape)
    }

    /// A float reduction over `layout` (ReduceMax and ReduceMin keep a NaN; sums run in float,
    /// in the order of a plain loop over the reduced positions).
    static func reduceFloats(_ op: GraphOp, _ v: UnsafePointer<Float>, _ layout: ReductionLayout, into out: UnsafeMutablePointer<Float>) {
        let code = Int32(op == .reduceMax ? EARSHOT_REDUCE_MAX : op == .reduceMin ? EARSHOT_REDUCE_MIN
                         : op == .reduceMean ? EARSHOT_REDUCE_MEAN : EARSHOT_REDUCE_SUM)
        layout.starts.withUnsafeBufferPointer { starts in
            layout.members.withUnsafeBufferPointer { members in
                guard let first = starts.baseAddress, let member = members.baseAddress ?? starts.baseAddress else { return }
                earshot_reduce(code, v, first, starts.count, member, members.count, out)
            }
        }
    }

    static func reduce(_ n: Node) throws(GraphError) -> [GraphTensor] {
        let axesAsInput = n.op == .reduceSum || n.opset >= 18
        if axesAsInput {
            try n.expect(inputs: ["data", "axes"], required: 1, attributes: ["keepdims", "noop_with_empty_axes"])
        } else {
            try n.expect(inputs: ["data"], required: 1, attributes: ["axes", "keepdims"])
        }
        let x = try n.input(0, "data", [.float32, .int64])
        guard let (layout, outShape) = try reduction(n, shape: x.shape) else { return [x] }
        if outShape.contains(0) {
            return [GraphTensor(dtype: x.dtype, shape: outShape, floats: [], integers: [])]
        }
        let groupSize = layout.members.count
        if x.dtype == .float32 {
            var values = [Float](repeating: 0, count: layout.starts.count)
            x.floats.withUnsafeBufferPointer { v in
                values.withUnsafeMutableBufferPointer { out in
                    if let from = v.baseAddress, let to = out.baseAddress { reduceFloats(n.op, from, layout, into: to) }
                }
            }
            return [GraphTensor(shape: outShape, floats: values)]
        }
        if n.op == .reduceMean, groupSize == 0, !layout.starts.isEmpty {
            throw n.error("the mean of no int64 values (a reduced axis has size 0)")
        }
        let values: [Int64] = layout.starts.map { start -> Int64 in
            switch n.op {
            case .reduceMax: return layout.members.reduce(Int64.min) { Swift.max($0, x.integers[start + $1]) }
            case .reduceMin: return layout.members.reduce(Int64.max) { Swift.min($0, x.integers[start + $1]) }
            default:
                let sum = layout.members.reduce(Int64(0)) { $0 &+ x.integers[start + $1] }
                return n.op == .reduceMean ? sum / Int64(groupSize) : sum
            }
        }
        return [GraphTensor(shape: outShape, integers: values)]
    }
}

enum Normalization {
    /// Softmax (opset 13): along one axis, exp(x - max) / sum.
    static func softmax(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["input"], required: 1, attributes: ["axis"])
        let x = try n.input(0, "input", [.float32])
        guard x.rank > 0 else { throw n.error("input is a scalar; Softmax needs an axis") }
        let axis = try n.axis(try n.int("axis", default: -1), rank: x.rank, "axis")
        if x.count == 0 { return [x] }
        let size = x.shape[axis]
        let inner = product(x.shape[(axis + 1)...])
        let outer = product(x.shape[..<axis])
        var y = [Float](repeating: 0, count: x.floats.count)
        x.floats.withUnsafeBufferPointer { v in
            y.withUnsafeMutableBufferPointer { out in
                var e = [Float](repeating: 0, count: size)
                for o in 0..<outer {
                    for i in 0..<inner {
                        let base = o * size * inner + i
                        var m = -Float.infinity
                        for k in 0..<size { m = Swift.max(m, v[base + k * inner]) }
                        var sum: Float = 0
                        for k in 0..<size {
                            e[k] = Foundation.exp(v[base + k * inner] - m)
                            sum += e[k]
                        }
                        for k in 0..<size { out[base + k * inner] = e[k] / sum }
                    }
                }
            }
        }
        return [GraphTensor(shape: x.shape, floats: y)]
    }

    /// LayerNormalization (opset 17): over the axes from `axis` on; outputs Y, Mean and InvStdDev.
    static func layerNorm(_ n: Node) throws(GraphError) -> [GraphTensor] {
        guard n.opset >= 17 else { throw n.error("LayerNormalization is an op from opset 17; the model's opset is \(n.opset)") }
        try n.expect(inputs: ["X", "Scale", "B"], required: 2, attributes: ["axis", "epsilon", "stash_type"])
        let x = try n.input(0, "X", [.float32])
        let scale = try n.input(1, "Scale", [.float32])
        let bias = try n.optionalInput(2, "B", [.float32])
        guard x.rank > 0 else { throw n.error("input X is a scalar") }
        let axis = try n.axis(try n.int("axis", default: -1), rank: x.rank, "axis")
        let epsilon = try n.float("epsilon", default: 1e-5)
        let stash = try n.int("stash_type", default: 1)
        guard stash == 1 else { throw n.unsupported("stash_type \(stash) (only 1, float)") }
        let normalized = Array(x.shape[axis...])
        let size = product(normalized[...])
        let outer = product(x.shape[..<axis])
        func parameter(_ t: GraphTensor, _ name: String) throws(GraphError) -> [Int] {
            guard broadcastShape(t.shape, normalized) == normalized else {
                throw n.error("input \(name) has shape \(t.shape), which does not broadcast to the normalized shape \(normalized)")
            }
            return broadcastOffsets(from: t.shape, to: normalized)
        }
        let scaleOffsets = try parameter(scale, "Scale")
        let biasOffsets = try bias.map { (t: GraphTensor) throws(GraphError) in try parameter(t, "B") }
        var y = [Float](repeating: 0, count: x.floats.count)
        var means = [Float](repeating: 0, count: outer)
        var inverses = [Float](repeating: 0, count: outer)
        for o in 0..<outer {
            let base = o * size
            var sum: Float = 0
            for i in 0..<size { sum += x.floats[base + i] }
            let mean = sum / Float(size)
            var squares: Float = 0
            for i in 0..<size {
                let d = x.floats[base + i] - mean
                squares += d * d
            }
            let inverse = 1 / (squares / Float(size) + epsilon).squareRoot()
            for i in 0..<size {
                var v = (x.floats[base + i] - mean) * inverse * scale.floats[scaleOffsets[i]]
                if let bias, let biasOffsets { v += bias.floats[biasOffsets[i]] }
                y[base + i] = v
            }
            means[o] = mean
            inverses[o] = inverse
        }
        let statsShape = Array(x.shape[..<axis]) + [Int](repeating: 1, count: x.rank - axis)
        return [GraphTensor(shape: x.shape, floats: y), GraphTensor(shape: statsShape, floats: means),
                GraphTensor(shape: statsShape, floats: inverses)]
    }

    /// BatchNormalization in inference mode: per channel (axis 1), (x - mean) / sqrt(var + epsilon)
    /// * scale + B, as onnxruntime folds it: x * s + (B - mean * s) with s = scale / sqrt(var + epsilon).
    static func batchNorm(_ n: Node) throws(GraphError) -> [GraphTensor] {
        let attributes: Set<String> = n.opset >= 14 ? ["epsilon", "momentum", "training_mode"] : ["epsilon", "momentum"]
        try n.expect(inputs: ["X", "scale", "B", "input_mean", "input_var"], required: 5, attributes: attributes)
        let x = try n.input(0, "X", [.float32])
        guard x.rank >= 2 else { throw n.error("input X has shape \(x.shape); expected [N, C, ...]") }
        let channels = x.shape[1]
        var parameters: [[Float]] = []
        for (i, name) in ["scale", "B", "input_mean", "input_var"].enumerated() {
            let t = try n.input(i + 1, name, [.float32])
            guard t.shape == [channels] else {
                throw n.error("input \(name) has shape \(t.shape); expected [\(channels)] (the channels of X)")
            }
            parameters.append(t.floats)
        }
        let epsilon = try n.float("epsilon", default: 1e-5)
        guard try n.int("training_mode", default: 0) == 0 else {
            throw n.unsupported("training_mode 1 (inference only)")
        }
        let scales = (0..<channels).map { parameters[0][$0] / (parameters[3][$0] + epsilon).squareRoot() }
        let shifts = (0..<channels).map { parameters[1][$0] - parameters[2][$0] * scales[$0] }
        let inner = product(x.shape[2...])
        var y = x.floats
        for i in 0..<y.count {
            let c = (i / Swift.max(inner, 1)) % channels
            y[i] = y[i] * scales[c] + shifts[c]
        }
        return [GraphTensor(shape: x.shape, floats: y)]
    }
}
