import CEarshotKernels

/// TFLite's integer kernels as graph ops, following TFLite's reference kernels bit for bit
/// (int32 accumulation, the fixed-point multiplier and shift, rounding and saturation as
/// `MultiplyByQuantizedMultiplier` does them). Tensors are float32 tensors whose values are the
/// integers (every int8 and uint8 value is exact in a float); layouts are TFLite's (NHWC inputs,
/// OHWI filters, [1, H, W, O] depthwise filters, [O, K] fully connected weights). The
/// multipliers and shifts are computed by the importer from the tensors' scales, as TFLite
/// computes them when it prepares the ops.
///
/// - `TFLiteConv2D` (x, filter, bias?): attributes strides [h, w], dilations [h, w], pads
///   [top, left, bottom, right], input_offset, output_offset, multipliers, shifts (one per
///   output channel, or one), activation [min, max]; the groups follow from the input's and
///   the filter's channels.
/// - `TFLiteDepthwiseConv2D`: the same, with depth_multiplier.
/// - `TFLiteFullyConnected` (x, weights, bias?): input_offset, weights_offset, output_offset,
///   multipliers, shifts, activation; x is taken as [count / K, K].
/// - `TFLiteLookup` (x): table (256 values), low (the value of the table's first entry): what
///   TFLite computes once for 8-bit LOGISTIC, TANH and QUANTIZE.
/// - `Quantize` (x): round(x / scale + zero_point) in double precision, halves to even,
///   clamped to [min, max]: how pymicro-wakeword quantizes features for a model's input.
///
/// The products and lookups also keep the scales the importer computed them from (`scales`,
/// below), unused by the kernels, so that `earshot export` can write the model back as TFLite
/// with the tensors' own quantization (a multiplier alone does not give the scales back).
public enum Quantized {
    /// The attributes that record a product's or lookup's TFLite source, unused by the kernels:
    /// input_scale, output_scale, filter_scales (one per output channel, or one), and for a
    /// lookup function (LOGISTIC, TANH, QUANTIZE), input_zero_point, output_zero_point,
    /// output_type (int8, uint8).
    public static let scales: Set<String> = ["input_scale", "output_scale", "filter_scales", "function", "input_zero_point", "output_zero_point", "output_type"]

    /// The instruction paths the int8 products (convolutions, fully connected layers) run on;
    /// every path gives the same values, the sums wrapping as TFLite's int32 accumulators.
    public enum Path: Int32, CaseIterable, Sendable {
        /// AMX: the products over a block of streams on int8 tiles, the rest as on VNNI.
        case baseline = 0, avx512, avx512VNNI, amx

        /// The names `EARSHOT_INT8_PATH` takes.
        public var name: String { ["portable", "avx512", "vnni", "amx"][Int(rawValue)] }

        public init?(name: String) {
            guard let path = Path.allCases.first(where: { $0.name == name }) else { return nil }
            self = path
        }
    }

    /// Whether values clamped to low...high always fit an int8 code.
    static func isInt8(_ low: Int, _ high: Int) -> Bool { -128 <= low && low <= high && high <= 127 }

    /// The paths this CPU has, the best last; the one used unless another is chosen is the best,
    /// or VNNI where AMX is there too (AMX only when chosen).
    public static var paths: [Path] { Array(Path.allCases.prefix(Int(earshot_int8_paths()))) }

    /// Runs the int8 products of every plan in the process on `path` (nil: the default)
    /// and returns the path now used. For tests and benchmarks that compare the paths.
    @discardableResult
    public static func use(_ path: Path?) -> Path { Path(rawValue: earshot_int8_path(path?.rawValue ?? -1)) ?? .baseline }

    // MARK: Fixed-point arithmetic, as TFLite's reference kernels do it

    /// (a * b * 2) / 2^32 rounded, saturated: gemmlowp's SaturatingRoundingDoublingHighMul.
    @inline(__always)
    static func doublingHighMultiply(_ a: Int32, _ b: Int32) -> Int32 {
        if a == b && a == Int32.min { return Int32.max }
        let ab = Int64(a) * Int64(b)
        let nudge: Int64 = ab >= 0 ? 1 << 30 : 1 - (1 << 30)
        return Int32(truncatingIfNeeded: (ab + nudge) / (1 << 31))
    }

    /// x / 2^exponent rounded half away from zero: gemmlowp's RoundingDivideByPOT.
    @inline(__always)
    static func roundingDivide(_ x: Int32, byPowerOfTwo exponent: Int) -> Int32 {
        let mask: Int32 = exponent >= 31 ? Int32.max : (1 << Int32(exponent)) - 1
        let remainder = x & mask
        let threshold = (mask >> 1) + (x < 0 ? 1 : 0)
        return (x >> Int32(min(exponent, 31))) &+ (remainder > threshold ? 1 : 0)
    }

    /// x * multiplier * 2^shift, as TFLite's MultiplyByQuantizedMultiplier (shift > 0 scales
    /// up first, shift < 0 rounds down after).
    @inline(__always)
    public static func multiply(_ x: Int32, _ multiplier: Int32, _ shift: Int) -> Int32 {
        let left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift
        return roundingDivide(doublingHighMultiply(x &* (1 << Int32(left)), multiplier), byPowerOfTwo: right)
    }

    /// Per output channel, TFLite's multiplier and shift for input × filter / output scales
    /// (one filter scale: one of each), in the double precision TFLite prepares them in.
    public static func multipliers(input: Float, filter: [Float], output: Float) -> (multipliers: [Int64], shifts: [Int64]) {
        var m: [Int64] = [], s: [Int64] = []
        for scale in filter {
            let (multiplier, shift) = quantizeMultiplier(Double(input) * Double(scale) / Double(output))
            m.append(Int64(multiplier))
            s.append(Int64(shift))
        }
        return (m, s)
    }

    /// A real multiplier as a Q31 fixed-point number and a power of two, as TFLite's
    /// QuantizeMultiplier: multiplier * 2^(shift - 31) = value.
    public static func quantizeMultiplier(_ value: Double) -> (multiplier: Int32, shift: Int) {
        guard value != 0, value.isFinite else { return (0, 0) }
        let exponent = value.exponent + 1  // frexp: value = m * 2^exponent, m in [0.5, 1)
        let mantissa = value / Double(sign: .plus, exponent: exponent, significand: 1)
        var q = (mantissa * Double(1 << 31)).rounded(.toNearestOrAwayFromZero)
        var shift = exponent
        if q == Double(1 << 31) {
            q /= 2
            shift += 1
        }
        if shift < -31 { return (0, 0) }
        guard shift <= 31 else { return (Int32.max, 31) }
        return (Int32(q), shift)
    }

    // MARK: Parameters

    struct Requantization {
        var inputOffset: Int32
        var outputOffset: Int32
        var multipliers: [Int32]
        var shifts: [Int]
        var low: Int32
        var high: Int32

        /// Offsets and activation bounds: far past any 8- or 16-bit value, far from overflow.
        static let bound = -(1 << 16)...(1 << 16)

        init(_ n: Node, channels: Int) throws(GraphError) {
            func int32(_ name: String) throws(GraphError) -> Int32 {
                guard let v = try n.int(name) else { throw n.error("attribute '\(name)' is missing") }
                guard let i = Int32(exactly: v), Self.bound.contains(v) else { throw n.error("attribute '\(name)' \(v) is out of range") }
                return i
            }
            inputOffset = try int32("input_offset")
            outputOffset = try int32("output_offset")
            guard let m = try n.ints("multipliers"), let s = try n.ints("shifts") else {
                throw n.error("attributes 'multipliers' and 'shifts' are needed")
            }
            guard m.count == s.count, m.count == 1 || m.count == channels else {
                throw n.error("\(m.count) multipliers and \(s.count) shifts for \(channels) output channels (one each, or one)")
            }
            guard m.allSatisfy({ $0 >= 0 && $0 <= Int(Int32.max) }), s.allSatisfy({ $0 >= -31 && $0 <= 31 }) else {
                throw n.error("a multiplier outside 0...2^31-1 or a shift outside -31...31")
            }
            multipliers = (0..<channels).map { Int32(m[m.count == 1 ? 0 : $0]) }
            shifts = (0..<channels).map { s[s.count == 1 ? 0 : $0] }
            guard let range = try n.ints("activation"), range.count == 2, range[0] <= range[1], Self.bound.contains(range[0]), Self.bound.contains(range[1]) else {
                throw n.error("attribute 'activation' must be [min, max]")
            }
            low = Int32(range[0])
            high = Int32(range[1])
        }

        @inline(__always)
        func output(_ acc: Int32, channel: Int) -> Float {
            let v = Quantized.multiply(acc, multipliers[channel], shifts[channel]) &+ outputOffset
            return Float(min(max(v, low), high))
        }
    }

    /// An integer-valued float tensor's values as Int32, refusing fractions and values past 2^24.
    static func integers(_ t: GraphTensor, _ name: String, _ n: Node) throws(GraphError) -> [Int32] {
        try n.check(t, name, [.float32])
        var out = [Int32](repeating: 0, count: t.floats.count)
        for (i, v) in t.floats.enumerated() {
            guard v.rounded() == v, abs(v) <= 16_777_216 else { throw n.error("input '\(name)' holds \(v) at \(i); integer kernels take whole numbers") }
            out[i] = Int32(v)
        }
        return out
    }

    static func bias(_ n: Node, index: Int, channels: Int) throws(GraphError) -> [Int32] {
        guard let b = try n.optionalInput(index, "bias", [.int64, .float32]) else { return [Int32](repeating: 0, count: channels) }
        guard b.count == channels else { throw n.error("bias has \(b.count) values for \(channels) output channels") }
        if b.dtype == .float32 { return try integers(b, "bias", n) }
        return try b.integers.map { (v: Int64) throws(GraphError) -> Int32 in
            guard let i = Int32(exactly: v) else { throw n.error("bias value \(v) does not fit 32 bits") }
            return i
        }
    }

    // MARK: Ops

    static func conv(_ n: Node) throws(GraphError) -> [GraphTensor] {
        let depthwise = n.op == .tfliteDepthwiseConv2D
        try n.expect(inputs: ["x", "filter", "bias"], required: 2,
                     attributes: Set(["strides", "dilations", "pads", "input_offset", "output_offset", "multipliers", "shifts", "activation"]
                        + (depthwise ? ["depth_multiplier"] : [])).union(scales))
        let x = try n.input(0, "x", [.float32]), f = try n.input(1, "filter", [.float32])
        guard x.rank == 4, f.rank == 4 else { throw n.error("x \(x.shape) and filter \(f.shape) must be 4-D (NHWC and \(depthwise ? "1HWO" : "OHWI"))") }
        let (batch, height, width, channels) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let (kh, kw) = (f.shape[1], f.shape[2])
        let outChannels = depthwise ? f.shape[3] : f.shape[0]
        let multiplier = depthwise ? try n.int("depth_multiplier", default: 1) : 1
        let filterDepth = depthwise ? 1 : f.shape[3]
        guard channels >= 1, outChannels >= 1 else { throw n.error("x \(x.shape) and filter \(f.shape) need channels") }
        if depthwise {
            guard f.shape[0] == 1, (1...(1 << 16)).contains(multiplier), channels * multiplier == outChannels else {
                throw n.error("depthwise filter \(f.shape) with multiplier \(multiplier) does not fit \(channels) input channels")
            }
        } else {
            guard filterDepth >= 1, channels % filterDepth == 0, outChannels % (channels / filterDepth) == 0 else {
                throw n.error("filter \(f.shape) does not fit \(channels) input channels")
            }
        }
        let strides = try n.ints("strides") ?? [1, 1], dilations = try n.ints("dilations") ?? [1, 1], pads = try n.ints("pads") ?? [0, 0, 0, 0]
        guard strides.count == 2, dilations.count == 2, pads.count == 4, (strides + dilations).allSatisfy({ $0 >= 1 && $0 <= 1 << 16 }),
              pads.allSatisfy({ $0 >= 0 && $0 <= 1 << 16 }), kh >= 1, kw >= 1 else {
            throw n.error("strides \(strides), dilations \(dilations) and pads \(pads) must be [h, w], [h, w], [top, left, bottom, right] within range")
        }
        let spanH = height + pads[0] + pads[2] - (kh - 1) * dilations[0] - 1
        let spanW = width + pads[1] + pads[3] - (kw - 1) * dilations[1] - 1
        guard spanH >= 0, spanW >= 0 else { throw n.error("the filter \(f.shape) is larger than the padded input \(x.shape)") }
        let (oh, ow) = (spanH / strides[0] + 1, spanW / strides[1] + 1)
        let q = try Requantization(n, channels: outChannels)
        let input = try integers(x, "x", n), filter = try integers(f, "filter", n)
        let bias = try bias(n, index: 2, channels: outChannels)
        let outShape = [batch, oh, ow, outChannels]
        var out = [Float](repeating: 0, count: try n.count(outShape, "output"))
        let groups = depthwise ? 1 : channels / filterDepth
        let perGroup = depthwise ? 1 : outChannels / groups
        let field = ReceptiveField(height: height, width: width, kernel: (kh, kw), output: (oh, ow), strides: strides, dilations: dilations,
                                   pads: pads)
        for b in 0..<batch {
            for y in 0..<oh {
                for xo in 0..<ow {
                    for o in 0..<outChannels {
                        var acc: Int32 = 0
                        for fy in 0..<kh {
                            for fx in 0..<kw {
                                guard let position = field.position(y, xo, fy, fx) else { continue }
                                let base = (b * height * width + position) * channels
                                if depthwise {
                                    let v = input[base + o / multiplier] &+ q.inputOffset
                                    acc = acc &+ filter[(fy * kw + fx) * outChannels + o] &* v
                                } else {
                                    let inBase = base + (o / perGroup) * filterDepth
                                    let fBase = ((o * kh + fy) * kw + fx) * filterDepth
                                    for c in 0..<filterDepth {
                                        acc = acc &+ filter[fBase + c] &* (input[inBase + c] &+ q.inputOffset)
                                    }
                                }
                            }
                        }
                        out[((b * oh + y) * ow + xo) * outChannels + o] = q.output(acc &+ bias[o], channel: o)
                    }
                }
            }
        }
        return [GraphTensor(shape: outShape, floats: out)]
    }

    static func fullyConnected(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["x", "weights", "bias"], required: 2,
                     attributes: Set(["input_offset", "weights_offset", "output_offset", "multipliers", "shifts", "activation"]).union(scales))
        let x = try n.input(0, "x", [.float32]), w = try n.input(1, "weights", [.float32])
        guard w.rank == 2, w.shape[1] >= 1, x.count % w.shape[1] == 0 else {
            throw n.error("weights \(w.shape) must be [outputs, inputs] with inputs dividing x's \(x.count) values")
        }
        let (outputs, depth) = (w.shape[0], w.shape[1])
        let rows = x.count / depth
        let q = try Requantization(n, channels: outputs)
        let offset = try n.int("weights_offset", default: 0)
        guard Requantization.bound.contains(offset) else { throw n.error("attribute 'weights_offset' is out of range") }
        let weightsOffset = Int32(offset)
        let input = try integers(x, "x", n), weights = try integers(w, "weights", n)
        let bias = try bias(n, index: 2, channels: outputs)
        var out = [Float](repeating: 0, count: try n.count([rows, outputs], "output"))
        for r in 0..<rows {
            for o in 0..<outputs {
                var acc: Int32 = 0
                for d in 0..<depth {
                    acc = acc &+ (weights[o * depth + d] &+ weightsOffset) &* (input[r * depth + d] &+ q.inputOffset)
                }
                out[r * outputs + o] = q.output(acc &+ bias[o], channel: o)
            }
        }
        return [GraphTensor(shape: [rows, outputs], floats: out)]
    }

    static func lookup(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["x"], required: 1, attributes: Set(["table", "low"]).union(scales))
        let x = try n.input(0, "x", [.float32])
        guard let table = try n.ints("table"), table.count == 256, let low = try n.int("low"), Requantization.bound.contains(low) else {
            throw n.error("attributes 'table' (256 values) and 'low' are needed")
        }
        let values = table.map(Float.init)
        var out = [Float](repeating: 0, count: x.count)
        for (i, v) in x.floats.enumerated() {
            guard v.rounded() == v, v >= Float(low), v < Float(low + 256) else {
                throw n.error("input value \(v) at \(i) is outside the table's \(low)...\(low + 255)")
            }
            out[i] = values[Int(v) - low]
        }
        return [GraphTensor(shape: x.shape, floats: out)]
    }

    static func quantize(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["x"], required: 1, attributes: ["scale", "zero_point", "min", "max"])
        let x = try n.input(0, "x", [.float32])
        guard let scale = try n.float("scale"), scale > 0, scale.isFinite else { throw n.error("attribute 'scale' must be a positive number") }
        let zero = Double(try n.int("zero_point", default: 0))
        let low = Float(try n.int("min", default: -128)), high = Float(try n.int("max", default: 127))
        guard low <= high else { throw n.error("min \(low) is above max \(high)") }
        return [GraphTensor(shape: x.shape, floats: x.floats.map { quantize($0, scale: Double(scale), zero: zero, low: low, high: high) })]
    }

    @inline(__always)
    static func quantize(_ x: Float, scale: Double, zero: Double, low: Float, high: Float) -> Float {
        let q = (Double(x) / scale + zero).rounded(.toNearestOrEven)
        guard q.isFinite else { return x.isNaN ? low : (x > 0 ? high : low) }
        return min(max(Float(q), low), high)
    }
}
