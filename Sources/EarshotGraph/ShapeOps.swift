/// Ops that move values around: transposes, reshapes, slices, joins, pads.
enum ShapeOps {
    static let anyType: Set<GraphDType> = [.float32, .int64, .bool]

    static func transpose(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["data"], required: 1, attributes: ["perm"])
        let x = try n.input(0, "data")
        let perm = try n.ints("perm") ?? Array((0..<x.rank).reversed())
        guard perm.count == x.rank, Set(perm) == Set(0..<x.rank) else {
            throw n.error("perm \(perm) is not a permutation of the \(x.rank) axes of data \(x.shape)")
        }
        let strides = rowMajorStrides(x.shape)
        let shape = perm.map { x.shape[$0] }
        return [x.gathered(walkOffsets(shape: shape, strides: perm.map { strides[$0] }), shape: shape)]
    }

    static func reshape(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["data", "shape"], required: 2, attributes: n.opset >= 14 ? ["allowzero"] : [])
        let x = try n.input(0, "data")
        let requested = try n.integerList(try n.input(1, "shape"), "shape")
        let allowZero = try n.int("allowzero", default: 0) != 0
        var shape: [Int] = []
        var inferred: Int?
        for (i, d) in requested.enumerated() {
            switch d {
            case -1:
                guard inferred == nil else { throw n.error("shape \(requested) has more than one -1") }
                inferred = i
                shape.append(1)
            case 0 where !allowZero:
                guard i < x.rank else {
                    throw n.error("shape \(requested) copies dimension \(i) (a 0) but data \(x.shape) has rank \(x.rank)")
                }
                shape.append(x.shape[i])
            default:
                guard d >= 0 else { throw n.error("shape \(requested) has the invalid dimension \(d)") }
                shape.append(d)
            }
        }
        if allowZero, inferred != nil, shape.contains(0) {
            throw n.error("shape \(requested) has both 0 (with allowzero) and -1")
        }
        if let inferred {
            guard let known = elementCount(shape), known > 0, x.count % known == 0 else {
                throw n.error("data \(x.shape) (\(x.count) values) does not fit shape \(requested)")
            }
            shape[inferred] = x.count / known
        }
        guard elementCount(shape) == x.count else {
            throw n.error("data \(x.shape) (\(x.count) values) does not fit shape \(requested) (\(shape))")
        }
        _ = try n.count(shape, "the output")
        return [x.reshaped(shape)]
    }

    static func flatten(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["input"], required: 1, attributes: ["axis"])
        let x = try n.input(0, "input")
        let axis = try n.int("axis", default: 1)
        guard axis >= -x.rank, axis <= x.rank else {
            throw n.error("axis \(axis) is out of range for rank \(x.rank) (\(-x.rank)...\(x.rank))")
        }
        let a = axis < 0 ? axis + x.rank : axis
        return [x.reshaped([product(x.shape[..<a]), product(x.shape[a...])])]
    }

    static func squeeze(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["data", "axes"], required: 1, attributes: [])
        let x = try n.input(0, "data")
        guard let axesTensor = try n.optionalInput(1, "axes", [.int64]) else {
            return [x.reshaped(x.shape.filter { $0 != 1 })]
        }
        let axes = Set(try n.axes(try n.integerList(axesTensor, "axes"), rank: x.rank, "axis"))
        for a in axes.sorted() where x.shape[a] != 1 {
            throw n.error("axis \(a) of data \(x.shape) has size \(x.shape[a]); only axes of size 1 can be squeezed")
        }
        return [x.reshaped(x.shape.indices.filter { !axes.contains($0) }.map { x.shape[$0] })]
    }

    static func unsqueeze(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["data", "axes"], required: 2, attributes: [])
        let x = try n.input(0, "data")
        let requested = try n.integerList(try n.input(1, "axes"), "axes")
        let rank = x.rank + requested.count
        let axes = Set(try n.axes(requested, rank: rank, "axis"))
        var shape: [Int] = []
        var next = 0
        for d in 0..<rank {
            if axes.contains(d) {
                shape.append(1)
            } else {
                shape.append(x.shape[next])
                next += 1
            }
        }
        return [x.reshaped(shape)]
    }

    static func concat(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expectVariadic(minimum: 1, attributes: ["axis"])
        let parts = try n.inputs.indices.map { (i: Int) throws(GraphError) -> GraphTensor in try n.input(i, "inputs[\(i)]") }
        let first = parts[0]
        guard first.rank > 0 else { throw n.error("input 0 is a scalar; Concat needs tensors of rank 1 or more") }
        guard let axisValue = try n.int("axis") else { throw n.error("attribute 'axis' is required") }
        let axis = try n.axis(axisValue, rank: first.rank, "axis")
        var total = 0
        for (i, p) in parts.enumerated() {
            guard p.dtype == first.dtype else {
                throw n.error("input \(i) is \(p.dtype.rawValue) but input 0 is \(first.dtype.rawValue)")
            }
            guard p.rank == first.rank,
                  p.shape.indices.allSatisfy({ $0 == axis || p.shape[$0] == first.shape[$0] }) else {
                throw n.error("input \(i) has shape \(p.shape), which does not join input 0's \(first.shape) on axis \(axis)")
            }
            total += p.shape[axis]
        }
        var shape = first.shape
        shape[axis] = total
        _ = try n.count(shape, "the output")
        let outer = product(first.shape[..<axis])
        if first.dtype == .float32 {
            var values: [Float] = []
            values.reserveCapacity(parts.reduce(0) { $0 + $1.count })
            for o in 0..<outer {
                for p in parts {
                    let block = p.count / Swift.max(outer, 1)
                    values += p.floats[(o * block)..<((o + 1) * block)]
                }
            }
            return [GraphTensor(shape: shape, floats: values)]
        }
        var values: [Int64] = []
        values.reserveCapacity(parts.reduce(0) { $0 + $1.count })
        for o in 0..<outer {
            for p in parts {
                let block = p.count / Swift.max(outer, 1)
                values += p.integers[(o * block)..<((o + 1) * block)]
            }
        }
        return [GraphTensor(shape: shape, integers: values, dtype: first.dtype)]
    }

    /// Slice (opset 13): starts, ends, axes and steps as inputs, clamped as ONNX describes.
    static func slice(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["data", "starts", "ends", "axes", "steps"], required: 3, attributes: [])
        let x = try n.input(0, "data")
        let startsT = try n.input(1, "starts", [.int64])
        let endsT = try n.input(2, "ends", [.int64])
        guard startsT.rank <= 1, endsT.rank <= 1, startsT.count == endsT.count else {
            throw n.error("starts \(startsT.shape) and ends \(endsT.shape) must be 1-D of one length")
        }
        let k = startsT.count
        var axes = Array(0..<k)
        if let t = try n.optionalInput(3, "axes", [.int64]) {
            axes = try n.integerList(t, "axes")
            guard axes.count == k else { throw n.error("axes has \(axes.count) values; starts has \(k)") }
        }
        axes = try n.axes(axes, rank: x.rank, "axis")
        var steps = [Int64](repeating: 1, count: k)
        if let t = try n.optionalInput(4, "steps", [.int64]) {
            guard t.rank <= 1, t.count == k else { throw n.error("steps has shape \(t.shape); starts has \(k) values") }
            steps = t.integers
        }
        var outShape = x.shape
        var starts = [Int](repeating: 0, count: x.rank)
        var stepOf = [Int](repeating: 1, count: x.rank)
        for (j, axis) in axes.enumerated() {
            let dim = x.shape[axis]
            let step = steps[j]
            guard step != 0 else { throw n.error("step 0 on axis \(axis)") }
            // A step longer than the axis takes at most one value, so its size does not matter past that.
            let bound = Int64(dim) + 1
            let s = Int(Swift.max(Swift.min(step, bound), -bound))
            var start = startsT.integers[j]
            var end = endsT.integers[j]
            let d = Int64(dim)
            if start < 0 { start = Swift.max(start, -d) + d }
            if end < 0 { end = Swift.max(end, -d - 1) + d }
            let count: Int
            if s > 0 {
                start = Swift.min(start, d)
                end = Swift.min(end, d)
                count = end > start ? Int((end - start + Int64(s) - 1) / Int64(s)) : 0
            } else {
                start = Swift.min(start, d - 1)
                end = Swift.min(end, d - 1)
                count = start > end ? Int((start - end + Int64(-s) - 1) / Int64(-s)) : 0
            }
            outShape[axis] = count
            starts[axis] = count > 0 ? Int(start) : 0
            stepOf[axis] = s
        }
        let strides = rowMajorStrides(x.shape)
        let base = (0..<x.rank).reduce(0) { $0 + starts[$1] * strides[$1] }
        let offsets = walkOffsets(shape: outShape, strides: (0..<x.rank).map { strides[$0] * stepOf[$0] }, base: base)
        return [x.gathered(offsets, shape: outShape)]
    }

    /// Split: by the `split` input, by `num_outputs` (opset 18; the last part smaller when the
    /// axis does not divide), or into as many equal parts as the node has outputs.
    static func split(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["input", "split"], required: 1, attributes: n.opset >= 18 ? ["axis", "num_outputs"] : ["axis"])
        let x = try n.input(0, "input")
        guard x.rank > 0 else { throw n.error("input is a scalar; Split needs an axis") }
        let axis = try n.axis(try n.int("axis", default: 0), rank: x.rank, "axis")
        let dim = x.shape[axis]
        let numOutputs = try n.int("num_outputs")
        var sizes: [Int]
        if let t = try n.optionalInput(1, "split", [.int64]) {
            guard numOutputs == nil else { throw n.error("has both the split input and the num_outputs attribute") }
            sizes = try n.integerList(t, "split")
            guard !sizes.isEmpty, sizes.allSatisfy({ $0 >= 0 && $0 <= dim }), sizes.reduce(0, +) == dim else {
                throw n.error("split \(sizes) does not cut axis \(axis) of size \(dim) (the sizes must be non-negative and add up to it)")
            }
        } else if let numOutputs {
            // More parts than values only when the node has that many outputs (parts of size 0).
            guard numOutputs >= 1, numOutputs <= dim || numOutputs == n.outputCount else {
                throw n.error("num_outputs \(numOutputs) does not fit axis \(axis) of size \(dim)")
            }
            let chunk = (dim + numOutputs - 1) / numOutputs
            sizes = [Int](repeating: chunk, count: numOutputs - 1)
            let last = dim - chunk * (numOutputs - 1)
            guard last >= 0 else { throw n.error("num_outputs \(numOutputs) does not fit axis \(axis) of size \(dim)") }
            sizes.append(last)
        } else {
            guard let parts = n.outputCount else {
                throw n.error("has neither a split input nor num_outputs: the number of outputs is needed to split equally")
            }
            guard dim % parts == 0 else { throw n.error("axis \(axis) of size \(dim) does not split into \(parts) equal parts") }
            sizes = [Int](repeating: dim / parts, count: parts)
        }
        if let outputs = n.outputCount, outputs != sizes.count {
            throw n.error("splits into \(sizes.count) parts but the node has \(outputs) outputs")
        }
        let strides = rowMajorStrides(x.shape)
        var results: [GraphTensor] = []
        var start = 0
        for size in sizes {
            var shape = x.shape
            shape[axis] = size
            results.append(x.gathered(walkOffsets(shape: shape, strides: strides, base: start * strides[axis]), shape: shape))
            start += size
        }
        return results
    }

    static func gather(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["data", "indices"], required: 2, attributes: ["axis"])
        let x = try n.input(0, "data")
        let indices = try n.input(1, "indices", [.int64])
        guard x.rank > 0 else { throw n.error("data is a scalar; Gather needs rank 1 or more") }
        let axis = try n.axis(try n.int("axis", default: 0), rank: x.rank, "axis")
        let dim = x.shape[axis]
        let shape = Array(x.shape[..<axis]) + indices.shape + Array(x.shape[(axis + 1)...])
        _ = try n.count(shape, "the output")
        var positions: [Int] = []
        positions.reserveCapacity(indices.count)
        for index in indices.integers {
            guard index >= -Int64(dim), index < Int64(dim) else {
                throw n.error("index \(index) is out of range for axis \(axis) of size \(dim) (data \(x.shape))")
            }
            positions.append(Int(index < 0 ? index + Int64(dim) : index))
        }
        let outer = product(x.shape[..<axis])
        let inner = product(x.shape[(axis + 1)...])
        var offsets: [Int] = []
        offsets.reserveCapacity(outer * positions.count * inner)
        for o in 0..<outer {
            for p in positions {
                let base = (o * dim + p) * inner
                for i in 0..<inner { offsets.append(base + i) }
            }
        }
        return [x.gathered(offsets, shape: shape)]
    }

    /// Pad: constant, reflect, edge (and wrap, opset 19) with pads (and axes, opset 18) as
    /// inputs. Negative pads crop first; the padding then reflects or repeats the cropped data,
    /// as onnxruntime does.
    static func pad(_ n: Node) throws(GraphError) -> [GraphTensor] {
        let names = n.opset >= 18 ? ["data", "pads", "constant_value", "axes"] : ["data", "pads", "constant_value"]
        try n.expect(inputs: names, required: 2, attributes: ["mode"])
        let x = try n.input(0, "data")
        let pads = try n.integerList(try n.input(1, "pads"), "pads")
        let constant = try n.optionalInput(2, "constant_value", [x.dtype]).map { (t: GraphTensor) throws(GraphError) in
            try n.scalarInput(t, "constant_value")
        }
        var axes = Array(0..<x.rank)
        if let t = try n.optionalInput(3, "axes", [.int64]) {
            axes = try n.axes(try n.integerList(t, "axes"), rank: x.rank, "axis")
        }
        guard pads.count == 2 * axes.count else {
            throw n.error("pads has \(pads.count) values; expected \(2 * axes.count) (a begin and an end for each of \(axes.count) axes)")
        }
        let mode = try n.string("mode", default: "constant")
        let modes = n.opset >= 19 ? ["constant", "reflect", "edge", "wrap"] : ["constant", "reflect", "edge"]
        guard modes.contains(mode) else { throw n.error("mode '\(mode)' is not one of \(modes.joined(separator: ", "))") }
        var begins = [Int](repeating: 0, count: x.rank)
        var ends = [Int](repeating: 0, count: x.rank)
        for (j, a) in axes.enumerated() {
            begins[a] = pads[j]
            ends[a] = pads[j + axes.count]
        }
        var shape: [Int] = []
        var plans: [(before: Int, low: Int, kept: Int)] = []
        var maps: [[Int]] = []
        for d in 0..<x.rank {
            let dim = x.shape[d]
            // A pad crops at most the whole axis and adds at most the size limit, so the sums below fit.
            guard begins[d] >= -dim, ends[d] >= -dim else {
                throw n.error("pads \(begins[d]), \(ends[d]) crop more than axis \(d) of size \(dim) holds")
            }
            guard begins[d] <= GraphOps.maxElementCount, ends[d] <= GraphOps.maxElementCount, dim + begins[d] + ends[d] >= 0 else {
                throw n.error("pads \(begins[d]), \(ends[d]) on axis \(d) of size \(dim) give an invalid size")
            }
            let size = dim + begins[d] + ends[d]
            let low = Swift.max(0, -begins[d])
            let high = dim - Swift.max(0, -ends[d])
            guard high >= low else { throw n.error("pads \(begins[d]), \(ends[d]) crop more than axis \(d) of size \(dim) holds") }
            let kept = high - low
            let before = Swift.max(0, begins[d])
            let after = Swift.max(0, ends[d])
            if before > 0 || after > 0 {
                switch mode {
                case "reflect":
                    guard before <= kept - 1, after <= kept - 1 else {
                        throw n.error("reflect pads \(before), \(after) on axis \(d) exceed its size \(kept) minus 1")
                    }
                case "edge", "wrap":
                    guard kept > 0 else { throw n.error("\(mode) pads on axis \(d), which holds no values") }
                default: break
                }
            }
            shape.append(size)
            plans.append((before, low, kept))
        }
        let total = try n.count(shape, "the output")
        guard total > 0 else { return [x.gathered([], shape: shape)] }
        for (d, (before, low, kept)) in plans.enumerated() {
            maps.append((0..<shape[d]).map { o in
                let j = o - before
                if j >= 0, j < kept { return low + j }
                switch mode {
                case "edge": return low + (j < 0 ? 0 : kept - 1)
                case "reflect": return low + (j < 0 ? -j : 2 * (kept - 1) - j)
                case "wrap": return low + ((j % kept) + kept) % kept
                default: return -1
                }
            })
        }
        let offsets = mappedOffsets(outShape: shape, inStrides: rowMajorStrides(x.shape), maps: maps)
        return [x.gathered(offsets, shape: shape, fillFloat: constant?.floats.first ?? 0, fillInteger: constant?.integers.first ?? 0)]
    }

    static func expand(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["input", "shape"], required: 2, attributes: [])
        let x = try n.input(0, "input")
        let requested = try n.integerList(try n.input(1, "shape"), "shape")
        guard requested.allSatisfy({ $0 >= 0 }) else { throw n.error("shape \(requested) has a negative dimension") }
        let shape = try n.broadcast(x.shape, requested, "input and shape")
        _ = try n.count(shape, "the output")
        return [x.gathered(broadcastOffsets(from: x.shape, to: shape), shape: shape)]
    }

    static func tile(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["input", "repeats"], required: 2, attributes: [])
        let x = try n.input(0, "input")
        let repeats = try n.integerList(try n.input(1, "repeats"), "repeats")
        guard repeats.count == x.rank else {
            throw n.error("repeats has \(repeats.count) values; input \(x.shape) has rank \(x.rank)")
        }
        guard repeats.allSatisfy({ $0 >= 0 }) else { throw n.error("repeats \(repeats) has a negative value") }
        var shape: [Int] = []
        for d in 0..<x.rank {
            let (size, overflow) = x.shape[d].multipliedReportingOverflow(by: repeats[d])
            guard !overflow else { throw n.error("repeats \(repeats) make an output too large") }
            shape.append(size)
        }
        guard try n.count(shape, "the output") > 0 else { return [x.gathered([], shape: shape)] }
        let maps = (0..<x.rank).map { d in (0..<shape[d]).map { $0 % x.shape[d] } }
        return [x.gathered(mappedOffsets(outShape: shape, inStrides: rowMajorStrides(x.shape), maps: maps), shape: shape)]
    }
}
