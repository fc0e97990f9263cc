import CEarshotKernels

/// TFLite's integer kernels compiled for a plan: a convolution, depthwise convolution or fully
/// connected layer as receptive fields (input indices, found once) and int16 weights, run by
/// `earshot_qconv` with the reference kernels' requantization; a lookup table and the feature
/// quantizer element by element. Every output is what the reference kernels give.
struct QuantizedProductStep: Step {
    let x: GraphPlan.Ref
    let y: GraphPlan.Ref
    let fields: [Int32]
    let groups, positions, k, perGroup: Int
    let weights: [Int16]
    let bias, multipliers, shifts: [Int32]
    let inputOffset, outputOffset, low, high: Int32
    /// A depthwise convolution whose taps are the same for every channel: `fields` holds the
    /// taps of channel 0 and `weights` is [k][channels].
    let channelTaps: Bool
    /// One group whose position p reads x[p * k ..< (p + 1) * k] (with k even, or one position):
    /// the kernel reads the input in place instead of gathering each field.
    let contiguous: Bool
    /// Int8 weights in quads of taps and the bias with the input offset's products folded in, for
    /// the VNNI path on codes (empty when the weights or the offset do not allow it).
    let quads: [Int8]
    let base: [Int32]
    /// A depthwise convolution's weights in pairs of taps and its bias with the input offset's
    /// products folded in, for `earshot_qdepthwise`'s VNNI path (empty when it does not apply).
    let depthPairs: [Int16]
    let depthBase: [Int32]

    static func isContiguous(_ fields: [Int32], groups: Int, positions: Int, k: Int) -> Bool {
        groups == 1 && (positions == 1 || k % 2 == 0) && fields.count == positions * k && fields.indices.allSatisfy { fields[$0] == Int32($0) }
    }

    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }
    /// Int8 multiply-adds: every position's field against each output of its group.
    var products: Int { groups * positions * k * perGroup }

    /// Scratch (4-byte words) the kernels use: the input as int16 (and one zero for padding) then
    /// one receptive field in pairs; or the input as bytes (and four for padding) then one field
    /// in quads.
    var scratch: Int { max((x.count + 2) / 2 + (k + 1) / 2, (x.count + 7) / 4 + (k + 3) / 4) }

    func run(_ c: Context) {
        // In the plan's scratch (reserved by the builder, `scratch` words): nothing is allocated per step.
        let scratch = UnsafeMutableRawPointer(c.scratch)
        fields.withUnsafeBufferPointer { f in
            weights.withUnsafeBufferPointer { w in
                bias.withUnsafeBufferPointer { b in
                    multipliers.withUnsafeBufferPointer { m in
                        shifts.withUnsafeBufferPointer { s in
                            let (xCodes, yCodes): (Int32, Int32) = (x.coded ? 1 : 0, y.coded ? 1 : 0)
                            for stream in 0..<c.streams {
                                if channelTaps {
                                    depthPairs.withUnsafeBufferPointer { w2 in
                                        depthBase.withUnsafeBufferPointer { base in
                                            earshot_qdepthwise(c.bytes(x, stream), xCodes, x.count, f.baseAddress!, positions, k, groups, w.baseAddress!,
                                                               b.baseAddress!, m.baseAddress!, s.baseAddress!, inputOffset, outputOffset, low, high,
                                                               scratch.assumingMemoryBound(to: Int16.self), c.bytes(y, stream), yCodes,
                                                               w2.baseAddress, base.baseAddress)
                                        }
                                    }
                                } else {
                                    quads.withUnsafeBufferPointer { w4 in
                                        base.withUnsafeBufferPointer { base in
                                            earshot_qconv(c.bytes(x, stream), xCodes, x.count, contiguous ? nil : f.baseAddress, groups, positions, k,
                                                          w.baseAddress!, perGroup, b.baseAddress!, m.baseAddress!, s.baseAddress!, inputOffset,
                                                          outputOffset, low, high, scratch.assumingMemoryBound(to: Int32.self), c.bytes(y, stream), yCodes,
                                                          w4.baseAddress, base.baseAddress)
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Weights [O][k] as `earshot_qconv` reads them in quads of taps, and the bias with the input
    /// offset's products folded in (bias + (inputOffset - 128) × the sum of each output's weights,
    /// wrapping as the kernel's sums do); nil unless every weight is int8, there are enough outputs
    /// a group and the padding's byte (128 - inputOffset) is a byte.
    static func quadLayout(_ weights: [Int16], groups: Int, perGroup: Int, k: Int, bias: [Int32],
                           inputOffset: Int32) -> (quads: [Int8], base: [Int32])? {
        guard perGroup >= Int(EARSHOT_QCONV_FEW), (0...255).contains(128 - Int(inputOffset)),
              weights.allSatisfy({ (-128...127).contains($0) }), bias.count == groups * perGroup else { return nil }
        let quads = (k + 3) / 4, stride = (perGroup + 15) / 16 * 16
        var laid = [Int8](repeating: 0, count: groups * quads * stride * 4)
        var base = bias
        for g in 0..<groups {
            for j in 0..<perGroup {
                let o = g * perGroup + j
                var sum: Int32 = 0
                for i in 0..<k {
                    let v = weights[o * k + i]
                    laid[((g * quads + i / 4) * stride + j) * 4 + i % 4] = Int8(v)
                    sum &+= Int32(v)
                }
                base[o] = bias[o] &+ (inputOffset &- 128) &* sum
            }
        }
        return (laid, base)
    }

    /// A depthwise convolution's weights [k][channels] in the layout `earshot_qdepthwise`'s VNNI
    /// path reads (pair j of taps, block b of 32 channels at (j × blocks + b) × 64: the (w[2j][c],
    /// w[2j + 1][c]) of channels 0-3, 8-11, 16-19, 24-27 of the block, then of 4-7, 12-15, 20-23,
    /// 28-31, a missing second tap or channel 0), and the bias plus the input offset times the sum
    /// of each channel's weights (wrapping, as the kernel's sums do; 32 a block, 0 past the
    /// channels). Nil unless the input is codes and every tap lies inside it (each tap's channels
    /// below `count`: padding would add the offset's products too).
    static func depthwisePairs(_ weights: [Int16], taps: [Int32], count: Int, coded: Bool, k: Int, channels: Int, bias: [Int32],
                               inputOffset: Int32) -> (pairs: [Int16], base: [Int32])? {
        guard coded, channels > 0, weights.count == k * channels, bias.count == channels,
              taps.allSatisfy({ $0 >= 0 && Int($0) + channels <= count }) else { return nil }
        let pairs = (k + 1) / 2, blocks = (channels + 31) / 32
        let low = [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27], order = low + low.map { $0 + 4 }
        var laid = [Int16](repeating: 0, count: pairs * blocks * 64)
        for j in 0..<pairs {
            for b in 0..<blocks {
                for (q, c) in order.enumerated() where 32 * b + c < channels {
                    let at = (j * blocks + b) * 64 + 2 * q, channel = 32 * b + c
                    laid[at] = weights[2 * j * channels + channel]
                    if 2 * j + 1 < k { laid[at + 1] = weights[(2 * j + 1) * channels + channel] }
                }
            }
        }
        let base = (0..<(blocks * 32)).map { c in
            c < channels ? bias[c] &+ inputOffset &* (0..<k).reduce(Int32(0)) { $0 &+ Int32(weights[$1 * channels + c]) } : 0
        }
        return (laid, base)
    }

    /// Weights [O][k] (O = groups × perGroup) in the layout `earshot_qconv` reads: pairs of taps,
    /// each pair's outputs in rows of perGroup rounded up to 16, zeros filling the rest; with few
    /// outputs a group, the rows as they are.
    static func pairLayout(_ weights: [Int16], groups: Int, perGroup: Int, k: Int) -> [Int16] {
        guard perGroup >= Int(EARSHOT_QCONV_FEW) else { return weights }
        let pairs = (k + 1) / 2, stride = (perGroup + 15) / 16 * 16
        var laid = [Int16](repeating: 0, count: groups * pairs * stride * 2)
        for g in 0..<groups {
            for j in 0..<perGroup {
                for i in 0..<k {
                    laid[((g * pairs + i / 2) * stride + j) * 2 + i % 2] = weights[(g * perGroup + j) * k + i]
                }
            }
        }
        return laid
    }
}

extension Builder {
    /// A depthwise convolution's input of codes that the latest step writing it copied from
    /// another tensor of codes: that tensor and the taps (`fields`, of channel 0, the input's count
    /// for padding) that read the same values from it in place, each tap's `channels` values
    /// still side by side. Nil when any value was filled in, comes from elsewhere or lies apart,
    /// or when a later step writes that tensor.
    func tapsInPlace(_ x: GraphPlan.Ref, fields: [Int32], channels: Int) -> (GraphPlan.Ref, [Int32])? {
        guard x.coded, let k = steps.lastIndex(where: { $0.writes.contains { $0.overlaps(x) } }), let move = steps[k] as? MoveStep,
              let o = move.outputs.firstIndex(where: { $0.coded && $0.bytes.lowerBound <= x.bytes.lowerBound && x.bytes.upperBound <= $0.bytes.upperBound })
        else { return nil }
        let runs = move.runs[move.bounds[o]..<move.bounds[o + 1]]
        let start = x.bytes.lowerBound - move.outputs[o].bytes.lowerBound
        /// Source and index of element e of the copy's output (its runs are in output order).
        func origin(_ e: Int) -> (source: Int, index: Int)? {
            var (lo, hi) = (runs.startIndex, runs.endIndex)
            while lo < hi {
                let mid = (lo + hi) / 2
                if runs[mid].dst + runs[mid].count <= e { lo = mid + 1 } else { hi = mid }
            }
            guard lo < runs.endIndex, runs[lo].dst <= e, runs[lo].source >= 0 else { return nil }
            return (runs[lo].source, runs[lo].src + e - runs[lo].dst)
        }
        var source: Int?
        var taps: [Int32] = []
        taps.reserveCapacity(fields.count)
        var padding: [Int] = []
        for f in fields {
            if Int(f) >= x.count {
                padding.append(taps.count)
                taps.append(0)
                continue
            }
            guard let first = origin(start + Int(f)), source == nil || source == first.source, first.index <= Int(Int32.max) else { return nil }
            source = first.source
            for c in 1..<max(channels, 1) {
                guard let o = origin(start + Int(f) + c), o.source == first.source, o.index == first.index + c else { return nil }
            }
            taps.append(Int32(first.index))
        }
        guard let s = source, move.sources[s].coded, move.sources[s].count <= Int(Int32.max) else { return nil }
        let ref = move.sources[s]
        guard !steps[(k + 1)...].contains(where: { $0.writes.contains { $0.overlaps(ref) } }) else { return nil }
        for i in padding { taps[i] = Int32(ref.count) }
        return (ref, taps)
    }
}

/// `TFLiteLookup`: each value (a whole number) replaced by its table entry.
struct LookupStep: Step {
    let x: GraphPlan.Ref
    let y: GraphPlan.Ref
    let table: [Float]
    let low: Int

    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }

    func run(_ c: Context) {
        let n = y.count, lo = Float(low)
        table.withUnsafeBufferPointer { t in
            for b in 0..<c.streams {
                let out = c.write(y, b)
                if x.coded {
                    let input = UnsafeRawPointer(c.bytes(x, b))
                    for i in 0..<n {
                        let v = Int(input.load(fromByteOffset: i, as: Int8.self)) - low
                        out[i] = t[v >= 0 && v <= 255 ? v : (v > 255 ? 255 : 0)]
                    }
                    continue
                }
                let input = c.read(x, b)
                for i in 0..<n {
                    let v = input[i] - lo
                    out[i] = t[v >= 0 && v <= 255 ? Int(v) : (v > 255 ? 255 : 0)]
                }
            }
        }
    }
}

/// `Quantize`: features to the model's input integers.
struct QuantizeStep: Step {
    let x: GraphPlan.Ref
    let y: GraphPlan.Ref
    let scale, zero: Double
    let low, high: Float

    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }

    func run(_ c: Context) {
        for b in 0..<c.streams { earshot_quantize(c.read(x, b), y.count, scale, zero, low, high, c.bytes(y, b), y.coded ? 1 : 0) }
    }
}

extension Builder {
    /// Compiles TFLite's integer ops; nil when the node's weights or inputs do not allow it
    /// (then it runs on the reference kernel).
    mutating func quantized(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        guard let x = inputs.first ?? nil, x.dtype == .float32, !fixed.contains(g.inputs[0]), outputs.count == 1,
              let xRef = g.op == "Quantize" ? ref(g.inputs[0]) : held(g.inputs[0]) else { return nil }
        let n = Node(name: g.name, op: g.op, opset: opset, inputs: inputs, attributes: g.attributes, outputCount: 1)
        switch g.op {
        case "TFLiteLookup":
            guard let table = try n.ints("table"), table.count == 256, let low = try n.int("low") else { return nil }
            let y = allocate(outputs[0].count)
            refs[g.outputs[0]] = y
            steps.append(LookupStep(x: xRef, y: y, table: table.map(Float.init), low: low))
            return "table"
        case "Quantize":
            guard let scale = try n.float("scale") else { return nil }
            let (low, high) = (try n.int("min", default: -128), try n.int("max", default: 127))
            let y = Quantized.isInt8(low, high) ? allocateCodes(outputs[0].count) : allocate(outputs[0].count)
            refs[g.outputs[0]] = y
            steps.append(QuantizeStep(x: xRef, y: y, scale: Double(scale), zero: Double(try n.int("zero_point", default: 0)),
                                      low: Float(low), high: Float(high)))
            return "element-wise"
        default:
            return try quantizedProduct(g, n, x: x, xRef: xRef, inputs: inputs, output: outputs[0])
        }
    }

    private mutating func quantizedProduct(_ g: GraphNode, _ n: Node, x: GraphTensor, xRef: GraphPlan.Ref, inputs: [GraphTensor?],
                                           output: GraphTensor) throws(GraphError) -> String? {
        guard inputs.count >= 2, let w = inputs[1], fixed.contains(g.inputs[1]), w.dtype == .float32 else { return nil }
        if inputs.count > 2, inputs[2] != nil, !fixed.contains(g.inputs[2]) { return nil }
        let depthwise = g.op == "TFLiteDepthwiseConv2D", dense = g.op == "TFLiteFullyConnected"
        let outChannels = dense ? w.shape[0] : (depthwise ? w.shape[3] : w.shape[0])
        let q = try Quantized.Requantization(n, channels: outChannels)
        let bias = try Quantized.bias(n, index: 2, channels: outChannels)
        var weightsOffset: Int32 = 0
        if dense {
            let offset = try n.int("weights_offset", default: 0)
            guard Quantized.Requantization.bound.contains(offset) else { return nil }
            weightsOffset = Int32(offset)
        }
        guard w.floats.allSatisfy({ $0.rounded() == $0 && abs($0 + Float(weightsOffset)) <= 32767 }) else { return nil }
        var fields: [Int32] = [], weights: [Int16] = []
        var channelTaps = false
        let groups: Int, positions: Int, k: Int, perGroup: Int
        if dense {
            (groups, perGroup, k) = (1, outChannels, w.shape[1])
            positions = x.count / k
            fields = (0..<(positions * k)).map { Int32($0) }
            guard x.count == positions * k else { return nil }
            weights = w.floats.map { Int16($0 + Float(weightsOffset)) }
        } else {
            guard x.rank == 4, w.rank == 4 else { return nil }
            let (batch, height, width, channels) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
            let (kh, kw) = (w.shape[1], w.shape[2])
            let strides = try n.ints("strides") ?? [1, 1], dilations = try n.ints("dilations") ?? [1, 1], pads = try n.ints("pads") ?? [0, 0, 0, 0]
            guard output.rank == 4, strides.count == 2, dilations.count == 2, pads.count == 4 else { return nil }
            let (oh, ow) = (output.shape[1], output.shape[2])
            let depth = depthwise ? 1 : w.shape[3]
            groups = depthwise ? channels : channels / depth
            perGroup = outChannels / groups
            positions = batch * oh * ow
            k = kh * kw * depth
            guard groups * positions * k <= 1 << 24 else { return nil }
            fields.reserveCapacity(groups * positions * k)
            for group in 0..<groups {
                for b in 0..<batch {
                    for oy in 0..<oh {
                        for ox in 0..<ow {
                            for fy in 0..<kh {
                                for fx in 0..<kw {
                                    let iy = oy * strides[0] - pads[0] + fy * dilations[0], ix = ox * strides[1] - pads[1] + fx * dilations[1]
                                    let inside = iy >= 0 && iy < height && ix >= 0 && ix < width
                                    for c in 0..<depth {
                                        fields.append(Int32(inside ? ((b * height + iy) * width + ix) * channels + group * depth + c : x.count))
                                    }
                                }
                            }
                        }
                    }
                }
            }
            if depthwise && perGroup == 1 && (0..<groups).allSatisfy({ group in
                (0..<(positions * k)).allSatisfy { i in
                    let base = fields[i], f = fields[group * positions * k + i]
                    return base == Int32(x.count) ? f == base : f == base + Int32(group)
                }
            }) {
                // The taps of channel 0 serve every channel; the weights stay [kh * kw][O].
                fields = Array(fields[0..<(positions * k)])
                weights = w.floats.map { Int16($0) }
                channelTaps = true
            } else if depthwise {
                // [1, kh, kw, O] to [O][kh * kw].
                weights = (0..<(outChannels * k)).map { i in Int16(w.floats[(i % k) * outChannels + i / k]) }
            } else {
                weights = w.floats.map { Int16($0) }
            }
        }
        guard positions * outChannels == output.count, weights.count == outChannels * k else { return nil }
        var xRef = xRef
        if channelTaps, let (source, taps) = tapsInPlace(xRef, fields: fields, channels: groups) {
            // Read where a copy took the input from (a split of channels, say): the copy is left
            // out when nothing else reads it (`GraphPlan.pruneMoves`).
            xRef = source
            fields = taps
        }
        let y = Quantized.isInt8(Int(q.low), Int(q.high)) ? allocateCodes(output.count) : allocate(output.count)
        refs[g.outputs[0]] = y
        let quads = channelTaps || !xRef.coded ? nil
            : QuantizedProductStep.quadLayout(weights, groups: groups, perGroup: perGroup, k: k, bias: bias, inputOffset: q.inputOffset)
        let pairs = channelTaps ? QuantizedProductStep.depthwisePairs(weights, taps: fields, count: xRef.count, coded: xRef.coded, k: k,
                                                                      channels: groups, bias: bias, inputOffset: q.inputOffset) : nil
        let step = QuantizedProductStep(x: xRef, y: y, fields: fields, groups: groups, positions: positions, k: k, perGroup: perGroup,
                                        weights: channelTaps ? weights : QuantizedProductStep.pairLayout(weights, groups: groups, perGroup: perGroup, k: k), bias: bias, multipliers: q.multipliers, shifts: q.shifts.map { Int32($0) },
                                        inputOffset: q.inputOffset, outputOffset: q.outputOffset, low: q.low, high: q.high,
                                        channelTaps: channelTaps,
                                        contiguous: !channelTaps && QuantizedProductStep.isContiguous(fields, groups: groups, positions: positions, k: k),
                                        quads: quads?.quads ?? [], base: quads?.base ?? [],
                                        depthPairs: pairs?.pairs ?? [], depthBase: pairs?.base ?? [])
        steps.append(step)
        scratchSize = max(scratchSize, step.scratch)
        return channelTaps ? "int8 depthwise" : "int8 product"
    }
}
