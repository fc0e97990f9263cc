/// The number of values of a shape, or nil when a dimension is negative or the product overflows.
package func elementCount(_ shape: [Int]) -> Int? {
    guard !shape.contains(where: { $0 < 0 }) else { return nil }
    if shape.contains(0) { return 0 }
    var count = 1
    for d in shape {
        let (product, overflow) = count.multipliedReportingOverflow(by: d)
        guard !overflow else { return nil }
        count = product
    }
    return count
}

/// The number of values of a shape when it is within the kernels' limit: no negative dimension,
/// and the product of the dimensions, zeros counted as ones, at most `GraphOps.maxElementCount`,
/// so that every product of some of its dimensions fits too (an empty tensor cannot hide a
/// huge axis). nil otherwise.
package func boundedCount(_ shape: [Int]) -> Int? {
    guard elementCount(shape.map { max($0, 1) }).map({ $0 <= GraphOps.maxElementCount }) == true else { return nil }
    return elementCount(shape)
}

/// Row-major strides of a shape whose value count is known to fit.
func rowMajorStrides(_ shape: [Int]) -> [Int] {
    var strides = [Int](repeating: 1, count: shape.count)
    var s = 1
    for d in stride(from: shape.count - 1, through: 0, by: -1) {
        strides[d] = s
        s *= max(shape[d], 1)
    }
    return strides
}

/// The product of shape[range] (the shape's count is known to fit).
func product(_ shape: ArraySlice<Int>) -> Int { shape.reduce(1, *) }

/// The shape two shapes broadcast to with numpy's rules, or nil.
func broadcastShape(_ a: [Int], _ b: [Int]) -> [Int]? {
    let rank = max(a.count, b.count)
    var out = [Int](repeating: 1, count: rank)
    for i in 0..<rank {
        let da = i < rank - a.count ? 1 : a[i - (rank - a.count)]
        let db = i < rank - b.count ? 1 : b[i - (rank - b.count)]
        if da == db || db == 1 {
            out[i] = da
        } else if da == 1 {
            out[i] = db
        } else {
            return nil
        }
    }
    return out
}

/// The offset of every position of `shape`, walked in row-major order, in a buffer whose axes
/// step by `strides`, starting at `base`.
func walkOffsets(shape: [Int], strides: [Int], base: Int = 0) -> [Int] {
    guard let total = elementCount(shape), total > 0 else { return [] }
    var offsets = [Int](repeating: 0, count: total)
    let rank = shape.count
    if rank == 0 {
        offsets[0] = base
        return offsets
    }
    var index = [Int](repeating: 0, count: rank)
    var offset = base
    let last = rank - 1
    let innerCount = shape[last]
    let innerStride = strides[last]
    var i = 0
    offsets.withUnsafeMutableBufferPointer { out in
        while i < total {
            var o = offset
            for _ in 0..<innerCount {
                out[i] = o
                o += innerStride
                i += 1
            }
            // Carry into the outer axes.
            var d = last - 1
            while d >= 0 {
                index[d] += 1
                offset += strides[d]
                if index[d] < shape[d] { break }
                offset -= strides[d] * shape[d]
                index[d] = 0
                d -= 1
            }
        }
    }
    return offsets
}

/// For every position of `outShape` (row-major), the offset of the value it takes from a tensor
/// of shape `inShape` that broadcasts to it.
func broadcastOffsets(from inShape: [Int], to outShape: [Int]) -> [Int] {
    let rank = outShape.count
    let padded = [Int](repeating: 1, count: rank - inShape.count) + inShape
    let inStrides = rowMajorStrides(padded)
    let strides = (0..<rank).map { padded[$0] == 1 ? 0 : inStrides[$0] }
    return walkOffsets(shape: outShape, strides: strides)
}

/// For every position of `outShape` (row-major), the offset in a tensor with `inStrides` (same
/// rank) when axis d takes input index `maps[d][i]` at output index i; -1 where any axis maps
/// to -1 (a value no input holds).
func mappedOffsets(outShape: [Int], inStrides: [Int], maps: [[Int]]) -> [Int] {
    guard let total = elementCount(outShape), total > 0 else { return [] }
    let rank = outShape.count
    var offsets = [Int](repeating: 0, count: total)
    if rank == 0 { return offsets }
    var index = [Int](repeating: 0, count: rank)
    for i in 0..<total {
        var offset = 0
        var outside = false
        for d in 0..<rank {
            let m = maps[d][index[d]]
            if m < 0 { outside = true }
            offset += m * inStrides[d]
        }
        offsets[i] = outside ? -1 : offset
        var d = rank - 1
        while d >= 0 {
            index[d] += 1
            if index[d] < outShape[d] { break }
            index[d] = 0
            d -= 1
        }
    }
    return offsets
}

extension GraphTensor {
    /// A tensor of `shape` whose value i is this tensor's value at `offsets[i]`, or `fill`
    /// (a float or an integer, by the type) where the offset is -1.
    func gathered(_ offsets: [Int], shape: [Int], fillFloat: Float = 0, fillInteger: Int64 = 0) -> GraphTensor {
        switch dtype {
        case .float32:
            let values = floats.withUnsafeBufferPointer { x in offsets.map { $0 < 0 ? fillFloat : x[$0] } }
            return GraphTensor(dtype: .float32, shape: shape, floats: values, integers: [])
        case .int64, .bool:
            let values = integers.withUnsafeBufferPointer { x in offsets.map { $0 < 0 ? fillInteger : x[$0] } }
            return GraphTensor(dtype: dtype, shape: shape, floats: [], integers: values)
        }
    }

    /// The same values with another shape.
    func reshaped(_ shape: [Int]) -> GraphTensor {
        var copy = self
        copy.shape = shape
        return copy
    }
}
