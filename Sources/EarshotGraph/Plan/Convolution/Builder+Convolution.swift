import CEarshotKernels

extension Builder {
    /// Conv with constant filters (and bias), 1-D or 2-D: an FFT per position when the filters are a
    /// windowed DFT (unless a log of a large gain reads it: `amplifiedByLog`), Winograd's tiles for three taps along one axis, else the receptive fields
    /// (gathered, runs of the input channels-last, or position-major blocks read in place) and the
    /// packed product. Nil when the filters depend on the inputs.
    mutating func conv(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        guard inputs.count >= 2, let x = inputs[0], let w = inputs[1], fixed.contains(g.inputs[1]), let xRef = ref(g.inputs[0]) else { return nil }
        let bias = inputs.count > 2 ? inputs[2] : nil
        if bias != nil, !fixed.contains(g.inputs[2]) { return nil }
        let n = node(g, inputs)
        let spatial = x.rank - 2
        guard spatial == 1 || spatial == 2 else { return nil }
        let kernel = Array(w.shape[2...])
        let window = try Window(n, input: Array(x.shape[2...]), kernel: kernel, pooling: false, ceilMode: false)
        let group = try n.int("group", default: 1)
        let (items, channels, outChannels) = (x.shape[0], x.shape[1], w.shape[0])
        let field = ReceptiveField(spatial: Array(x.shape[2...]), kernel: kernel, window)
        let (height, width, kh, kw, oh, ow) = (field.height, field.width, field.kh, field.kw, field.oh, field.ow)
        let groupIn = channels / group, groupOut = outChannels / group
        let depth = groupIn * kh * kw, positions = oh * ow
        guard depth > 0, positions > 0, groupOut > 0, items > 0, groupIn * height * width < Int(Int32.max) else { return nil }
        // One item's and group's receptive fields [positions][depth], from its first input plane.
        let fields = field.channelsFirstMap(channels: groupIn)
        if group == 1, groupIn == 1, kh == 1, field.dw == 1, !directProducts.contains(g.outputs[0]),
           let compiled = fftConv(g, x: xRef, output: outputs[0], items: items, plane: height * width, fields: fields, size: kw, filters: w, bias: bias) {
            return compiled
        }
        // In bf16 (except where a log magnifies its rounding or the node is kept in fp32) Winograd's
        // six products run in bf16 too: the transformed filters and tiles are what is rounded, a few
        // times the direct product's rounding. A plan that keeps some nodes in fp32 chose its bf16
        // nodes by the direct product's rounding (openWakeWord's packages), so its bf16 nodes run
        // the direct product.
        let precision = self.precision(of: g)
        if group == 1, items == 1, !directProducts.contains(g.outputs[0]), precision == .fp32 || fp32Nodes.isEmpty, let winograd = Self.winograd(fields: fields, taps: kh * kw, alongRows: kh == 3, oh: oh, ow: ow, channels: channels,
                                                                outChannels: outChannels, weights: w.floats, bias: bias?.floats, precision: precision) {
            let y = allocate(outputs[0].count)
            refs[g.outputs[0]] = y
            let step = ConvStep(x: xRef, y: y, items: 1, channels: channels, outChannels: outChannels, plane: height * width, groups: 1,
                                groupIn: channels, groupOut: outChannels, depth: depth, positions: positions, fields: [], channelsLast: nil,
                                packed: [], bias: [nil], positionMajor: nil, winograd: winograd)
            scratchSize = max(scratchSize, step.scratch)
            steps.append(step)
            return described("Winograd product", precision)
        }
        // One filter per channel: each output plane from its input plane, no fields laid out. In
        // bf16 too: a product of one row a channel would fill one lane of sixteen (and its few
        // multiply-adds stay fp32).
        if group == channels, outChannels == channels {
            let y = allocate(outputs[0].count)
            refs[g.outputs[0]] = y
            var step = ConvStep(x: xRef, y: y, items: items, channels: channels, outChannels: outChannels, plane: height * width, groups: group,
                                groupIn: 1, groupOut: 1, depth: depth, positions: positions, fields: [], channelsLast: nil,
                                packed: [], bias: [nil], positionMajor: nil)
            let depthwise = ConvStep.Depthwise(field: field.oneRow, filters: w.floats, bias: bias?.floats, channels: channels)
            step.depthwise = depthwise
            scratchSize = max(scratchSize, step.scratch)
            steps.append(step)
            return depthwise.padded ? "depthwise, padded rows" : depthwise.lastFilters != nil ? "depthwise, channels-last" : "depthwise"
        }
        // One group: the fields as runs of the input transposed to [plane][channels], when they
        // are long enough to beat a gather (filters then ordered [kernel row][kernel column][channel]).
        var channelsLast: [Run]?
        var filters = w.floats
        if group == 1, positions < 64 {
            var elements: [Run] = []
            elements.reserveCapacity(positions * depth)
            field.channelsLast(channels: channels, stride: channels) { e, index in
                elements.append(index.map { Run(dst: e, source: 0, src: $0, count: 1, fill: 0) } ?? Run(dst: e, source: -1, src: 0, count: 1, fill: 0))
            }
            let runs = Run.joined(elements)
            if runs.count * 8 <= positions * depth {
                channelsLast = runs
                for o in 0..<outChannels {
                    for c in 0..<channels {
                        for i in 0..<kh {
                            for j in 0..<kw { filters[o * depth + (i * kw + j) * channels + c] = w.floats[((o * channels + c) * kh + i) * kw + j] }
                        }
                    }
                }
            }
        }
        let biases = (0..<group).map { gi in bias.map { Array($0.floats[(gi * groupOut)..<((gi + 1) * groupOut)]) } }
        let y = allocate(outputs[0].count)
        refs[g.outputs[0]] = y
        var positionMajor: ConvStep.PositionMajor?
        if group == 1, positions >= 64, earshot_packed_count(positions, depth) < 1 << 28 {
            // The fields packed as the product packs a matrix: panel q, depth i, lane l holds
            // position 16 q + l's value i.
            let panels = (positions + 15) / 16
            var index = [Int32](repeating: -1, count: panels * depth * 16)
            for q in 0..<panels {
                for i in 0..<depth {
                    for l in 0..<16 where q * 16 + l < positions { index[(q * depth + i) * 16 + l] = fields[(q * 16 + l) * depth + i] }
                }
            }
            var layout = Self.blocks(index, panels: panels, depth: depth, inputCount: Int32(channels * height * width))
            // Strided: neighbouring outputs read every sh-th row and sw-th column, so few blocks
            // are runs of the input. Copied by stride phase first (each channel's rows and columns
            // of one remainder together), their fields are runs of the copy.
            var phases: [Int32] = []
            if field.sh > 1 || field.sw > 1 {
                let (copy, at) = Self.stridePhases(channels: channels, height: height, width: width, sh: field.sh, sw: field.sw)
                let phased = Self.blocks(index.map { $0 < 0 ? -1 : at[Int($0)] }, panels: panels, depth: depth, inputCount: Int32(copy.count))
                if phased.edges.count * 2 <= layout.edges.count { (layout, phases) = (phased, copy) }
            }
            let (blocks, spans, edges) = (layout.blocks, layout.spans, layout.edges)
            var rows: [UInt16] = []
            if precision == .bf16 {
                rows = [UInt16](repeating: 0, count: earshot_bf16_rows_count(outChannels, depth))
                w.floats.withUnsafeBufferPointer { f in rows.withUnsafeMutableBufferPointer { earshot_bf16_pack_rows(f.baseAddress!, outChannels, depth, $0.baseAddress!) } }
            }
            positionMajor = .init(blocks: blocks, spanStarts: spans.map(\.start), spanMasks: spans.map(\.mask), edges: edges, phases: phases,
                                  filters: precision == .bf16 ? [] : w.floats, bf16Rows: rows, bias: bias?.floats)
        }
        // The packed filters serve the other paths; the position-major one reads them unpacked.
        let packed = positionMajor != nil ? [] : (0..<group).map { gi in
            PackedMatrix(Array(filters[(gi * groupOut * depth)..<((gi + 1) * groupOut * depth)]), rows: groupOut, k: depth, precision: precision)
        }
        var step = ConvStep(x: xRef, y: y, items: items, channels: channels, outChannels: outChannels, plane: height * width,
                            groups: group, groupIn: groupIn, groupOut: groupOut, depth: depth, positions: positions,
                            fields: positionMajor == nil && channelsLast == nil ? fields : [], channelsLast: channelsLast, packed: packed,
                            bias: biases, positionMajor: positionMajor)
        // Few taps an output (a first layer over a spectrogram): the direct path too, which
        // `linkChannelsLast` takes where the Conv after reads channels-last (its only gain: written
        // position-major it costs that Conv a transpose; otherwise it is slower).
        if positionMajor != nil, items == 1, depth <= Int(EARSHOT_DIRECT_DEPTH) {
            step.direct = ConvStep.Direct(field: field, filters: w.floats, bias: bias?.floats, outChannels: outChannels, depth: depth)
        }
        scratchSize = max(scratchSize, step.scratch, step.directScratch)
        steps.append(step)
        return described("packed product", precision)
    }

    /// The position-major product's blocks of 16 lanes of `index` (panels x depth blocks of input
    /// indices, -1 for padding): a block of 16 consecutive input values is read in place; the
    /// others (at the edges, padding) are made at each run: a run of the input with the padding's
    /// lanes cleared (`spans`), or, where no run fits, gathered value by value (`edges`: their
    /// lanes' input indices, 16 a block). An edge block's entry in `blocks` is -e - 1: spans first,
    /// then gathered.
    static func blocks(_ index: [Int32], panels: Int, depth: Int, inputCount: Int32)
        -> (blocks: [Int32], spans: [(block: Int, start: Int32, mask: UInt16)], edges: [Int32]) {
        var blocks = [Int32](repeating: 0, count: panels * depth)
        var spans: [(block: Int, start: Int32, mask: UInt16)] = [], gathered: [Int] = []
        for block in 0..<(panels * depth) {
            let lanes = index[(block * 16)..<(block * 16 + 16)]
            guard let (l, first) = lanes.enumerated().first(where: { $0.element >= 0 }) else {
                gathered.append(block)
                continue
            }
            let start = first - Int32(l)
            let inRun = lanes.enumerated().allSatisfy { $0.element < 0 || $0.element == start + Int32($0.offset) }
            if inRun, lanes.allSatisfy({ $0 >= 0 }) {
                blocks[block] = start
            } else if inRun, start >= 0, start + 16 <= inputCount {
                let mask = lanes.enumerated().reduce(UInt16(0)) { $0 | ($1.element >= 0 ? UInt16(1) << UInt16($1.offset) : 0) }
                spans.append((block, start, mask))
            } else {
                gathered.append(block)
            }
        }
        for (e, span) in spans.enumerated() { blocks[span.block] = -Int32(e) - 1 }
        for (e, block) in gathered.enumerated() { blocks[block] = -Int32(spans.count + e) - 1 }
        return (blocks, spans, gathered.flatMap { index[($0 * 16)..<($0 * 16 + 16)] })
    }

    /// An input [channels][height][width] copied by stride phase: channel c's rows of remainder py
    /// (mod sh) and columns of remainder px (mod sw) as one plane [height / sh][width / sw] (rounded
    /// up), the planes [c][py][px]. `copy`: each copied value's input index (-1: a place past the
    /// input's last row or column, zero); `at`: each input value's place in the copy.
    static func stridePhases(channels: Int, height: Int, width: Int, sh: Int, sw: Int) -> (copy: [Int32], at: [Int32]) {
        let (rows, columns) = ((height + sh - 1) / sh, (width + sw - 1) / sw)
        var copy = [Int32](repeating: -1, count: channels * sh * sw * rows * columns)
        var at = [Int32](repeating: 0, count: channels * height * width)
        for c in 0..<channels {
            for y in 0..<height {
                for x in 0..<width {
                    let place = (((c * sh + y % sh) * sw + x % sw) * rows + y / sh) * columns + x / sw
                    let source = (c * height + y) * width + x
                    (copy[place], at[source]) = (Int32(source), Int32(place))
                }
            }
        }
        return (copy, at)
    }

    /// Fuses an element-wise op into the Conv step just before it, when that Conv's output (or
    /// what is fused into it so far) is this op's input and nothing else reads it: the op's output
    /// is then the Conv's output, in place.
    mutating func fuse(_ op: ConvStep.Epilogue, reading name: String, as input: Ref, into output: String) -> Bool {
        guard readers[name, default: 0] == 1, var conv = steps.last as? ConvStep, conv.y == input else { return false }
        conv.fuse(op)
        steps[steps.count - 1] = conv
        refs[output] = input
        return true
    }
}
