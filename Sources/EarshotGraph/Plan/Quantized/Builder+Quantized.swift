extension Builder {
    /// Compiles TFLite's integer ops; nil when the node's weights or inputs do not allow it
    /// (then it runs on the reference kernel).
    mutating func quantized(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        guard let x = inputs.first ?? nil, x.dtype == .float32, !fixed.contains(g.inputs[0]), outputs.count == 1,
              let xRef = g.op == .quantize ? ref(g.inputs[0]) : held(g.inputs[0]) else { return nil }
        let n = Node(name: g.name, op: g.op, opset: opset, inputs: inputs, attributes: g.attributes, outputCount: 1)
        switch g.op {
        case .tfliteLookup:
            guard let table = try n.ints("table"), table.count == 256, let low = try n.int("low") else { return nil }
            let y = allocate(outputs[0].count)
            refs[g.outputs[0]] = y
            steps.append(LookupStep(x: xRef, y: y, table: table.map(Float.init), low: low))
            return "table"
        case .quantize:
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
        let depthwise = g.op == .tfliteDepthwiseConv2D, dense = g.op == .tfliteFullyConnected
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
            // Per group and item, [positions][kh][kw][depth]: its channels of the input, x.count in the padding.
            let field = ReceptiveField(height: height, width: width, kernel: (kh, kw), output: (oh, ow), strides: strides, dilations: dilations,
                                       pads: pads)
            for group in 0..<groups {
                for b in 0..<batch {
                    field.channelsLast(channels: depth, stride: channels, offset: b * height * width * channels + group * depth) { _, index in
                        fields.append(Int32(index ?? x.count))
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
