/// TFLite's run-time quantization of a hybrid op's float input (int8 weights, float activations):
/// the input is quantized to int8 each step, one scale per block of values, before the integer
/// products (ref: tensorflow/lite/kernels/internal/reference/portable_tensor_utils.cc,
/// PortableSymmetricQuantizeFloats and PortableAsymmetricQuantizeFloats; fully_connected.cc,
/// conv.cc and depthwise_conv.cc EvalHybrid*).
enum HybridQuantize {
    /// `TFLiteHybridQuantize`: X quantized block by block, a block being the values of X from axis
    /// `axis` on (FULLY_CONNECTED: a row, `axis` = rank - 1; a convolution: a batch item, `axis` = 1).
    /// `asymmetric` 0: values * 127 / max |x| rounded (half away from zero) into -127...127, the
    /// block's scale max |x| / 127 (1 for a block of zeros); 1: TFLite's nudged zero point over
    /// [min(x, 0), max(x, 0)] into -128...127, the range max - min in float, the scale and zero
    /// point from it in double.
    /// Gives Q (X's shape: the integers minus the block's zero point, as floats) and Scale
    /// (X.shape[..<axis] followed by ones, so that it broadcasts over the block).
    static func run(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["X"], required: 1, attributes: ["axis", "asymmetric"])
        let x = try n.input(0, "X", [.float32])
        let axis = try n.int("axis", default: 1)
        guard axis >= 0, axis <= x.rank else { throw n.error("attribute 'axis' \(axis) is outside 0...\(x.rank)") }
        let asymmetric = try n.int("asymmetric", default: 0) != 0
        let block = x.shape[axis...].reduce(1, *), blocks = x.shape[..<axis].reduce(1, *)
        var q = [Float](repeating: 0, count: x.count), scales = [Float](repeating: 1, count: blocks)
        if block > 0 {
            x.floats.withUnsafeBufferPointer { xs in
                q.withUnsafeMutableBufferPointer { qs in
                    for b in 0..<blocks {
                        let range = b * block..<(b + 1) * block
                        scales[b] = quantize(UnsafeBufferPointer(rebasing: xs[range]), UnsafeMutableBufferPointer(rebasing: qs[range]), asymmetric: asymmetric)
                    }
                }
            }
        }
        return [GraphTensor(shape: x.shape, floats: q), GraphTensor(shape: Array(x.shape[..<axis]) + [Int](repeating: 1, count: x.rank - axis), floats: scales)]
    }

    /// One block quantized into `q` (the integers minus the zero point, as floats); returns its scale.
    static func quantize(_ x: UnsafeBufferPointer<Float>, _ q: UnsafeMutableBufferPointer<Float>, asymmetric: Bool) -> Float {
        // std::minmax_element: the first value, then each value below the least or above the greatest.
        var low = x.first ?? 0, high = low
        for v in x {
            if v < low { low = v }
            if v > high { high = v }
        }
        if !asymmetric {
            let range = max(abs(low), abs(high))
            guard range != 0 else {
                for i in q.indices { q[i] = 0 }
                return 1
            }
            let inverse = 127 / range
            for i in x.indices { q[i] = whole(x[i] * inverse, -127, 127) }
            return range / 127
        }
        let rmin = Double(min(0, low)), rmax = Double(max(0, high))
        guard rmin != rmax, rmin.isFinite, rmax.isFinite else {
            for i in q.indices { q[i] = 0 }
            return 1
        }
        // The range is a float difference, divided in double (as TFLite's x86 and Arm kernels
        // do: their min and max are floats; a double difference moves the scale by an ulp).
        let scale = Double(max(0, high) - min(0, low)) / 255
        let fromMin = -128 - rmin / scale, fromMax = 127 - rmax / scale
        let zero = 128 + abs(rmin / scale) < 127 + abs(rmax / scale) ? fromMin : fromMax
        let offset: Float = zero <= -128 ? -128 : (zero >= 127 ? 127 : Float(zero.rounded(.toNearestOrAwayFromZero)))
        let factor = Float(scale)
        let inverse = Float(1.0 / Double(factor))
        for i in x.indices { q[i] = whole(offset + x[i] * inverse, -128, 127) - offset }
        return factor
    }

    /// `v` rounded half away from zero (TfLiteRound) and clamped to `low`...`high`; NaN to 0.
    @inline(__always)
    private static func whole(_ v: Float, _ low: Float, _ high: Float) -> Float {
        let r = v.rounded(.toNearestOrAwayFromZero)
        return r.isNaN ? 0 : min(max(r, low), high)
    }
}
