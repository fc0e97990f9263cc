import CEarshotKernels

/// A Conv of whole-number weights on a hybrid op's integers (`Builder.integerProducts`): TFLite's
/// int32 sums on int16 lanes (`earshot_hybrid_sums`: AVX-512 VNNI, AVX-512 or plain C), each
/// converted to float, where the float product would sum the same whole numbers in fp32. The
/// same bits while the sums stay below 2^24 (the fp32 product's sums are exact there), and
/// TFLite's own beyond (its int32 sum rounded once to float).
struct HybridProductStep: InputOutputStep {
    var x: GraphPlan.Ref
    /// NCHW: [items][outChannels][positions].
    var y: GraphPlan.Ref
    let items, channels, plane, outChannels, positions, depth: Int
    /// One item's receptive fields [positions][depth] in its NCHW planes (-1: padding); empty when
    /// field p is x[p * depth ..< (p + 1) * depth].
    let fields: [Int32]
    /// The weights packed by `earshot_hybrid_pack`.
    let packed: [Int16]

    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }
    var products: Int { items * positions * depth * outChannels }
    var summary: String { "hybrid integer product \(positions)x\(depth)x\(outChannels)" }
    /// Scratch (4-byte words): the fields as int16 pairs.
    var scratch: Int { (earshot_hybrid_scratch_count(positions, depth) + 1) / 2 }

    func run(_ c: Context) {
        let rows = UnsafeMutableRawPointer(c.scratch).assumingMemoryBound(to: Int16.self)
        fields.withUnsafeBufferPointer { f in
            packed.withUnsafeBufferPointer { w in
                for stream in 0..<c.streams {
                    let xs = c.read(x, stream), ys = c.write(y, stream)
                    // An empty array's buffer has an address too: no fields is nil.
                    let map = fields.isEmpty ? nil : f.baseAddress
                    for item in 0..<items {
                        earshot_hybrid_sums(xs + item * channels * plane, map, positions, depth, w.baseAddress, outChannels,
                                            positions, 1, -1, rows, ys + item * outChannels * positions)
                    }
                }
            }
        }
    }
}

extension Builder {
    /// A Conv of one group and no bias whose input is a hybrid op's integers and whose filters are
    /// whole numbers an int16 holds (TFLite's int8 weights): `HybridProductStep`. Nil otherwise.
    mutating func hybridConv(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        guard integerSums.contains(g.outputs[0]), inputs.count == 2, let x = inputs[0], let w = inputs[1], x.dtype == .float32,
              w.dtype == .float32, fixed.contains(g.inputs[1]), !fixed.contains(g.inputs[0]),
              w.floats.allSatisfy({ $0.rounded() == $0 && abs($0) <= 32767 }), let xRef = ref(g.inputs[0]) else { return nil }
        let n = node(g, inputs)
        let spatial = x.rank - 2
        guard spatial == 1 || spatial == 2, try n.int("group", default: 1) == 1, w.rank == x.rank, w.shape[1] == x.shape[1] else { return nil }
        let kernel = Array(w.shape[2...])
        let window = try Window(n, input: Array(x.shape[2...]), kernel: kernel, pooling: false, ceilMode: false)
        let field = ReceptiveField(spatial: Array(x.shape[2...]), kernel: kernel, window)
        let (items, channels, outChannels) = (x.shape[0], x.shape[1], w.shape[0])
        let depth = channels * field.kh * field.kw, positions = field.oh * field.ow, plane = field.height * field.width
        guard depth > 0, positions > 0, outChannels > 0, items > 0, channels * plane < Int(Int32.max),
              outputs[0].count == items * outChannels * positions else { return nil }
        let map = field.channelsFirstMap(channels: channels)
        let contiguous = map.indices.allSatisfy { map[$0] == Int32($0) }
        var packed = [Int16](repeating: 0, count: earshot_hybrid_packed_count(outChannels, depth))
        w.floats.withUnsafeBufferPointer { f in
            packed.withUnsafeMutableBufferPointer { p in earshot_hybrid_pack(f.baseAddress, outChannels, depth, p.baseAddress) }
        }
        let y = allocate(outputs[0].count)
        refs[g.outputs[0]] = y
        let step = HybridProductStep(x: xRef, y: y, items: items, channels: channels, plane: plane, outChannels: outChannels, positions: positions,
                                     depth: depth, fields: contiguous ? [] : map, packed: packed)
        scratchSize = max(scratchSize, step.scratch)
        steps.append(step)
        return "hybrid integer product"
    }
}
