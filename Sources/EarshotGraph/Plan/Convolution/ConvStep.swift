import CEarshotKernels

/// Conv: each item's and group's receptive fields as rows, then one packed product for every
/// stream's rows, then the outputs into [N][C][positions], with the ReLU after it when fused.
struct ConvStep: InputOutputStep {
    var x: GraphPlan.Ref
    var y: GraphPlan.Ref
    let items, channels, outChannels, plane, groups, groupIn, groupOut, depth, positions: Int
    /// One item's and group's receptive fields [positions][depth]: the index of each value in
    /// the group's input planes, -1 for padding (a zero). Empty when the fields are taken
    /// channels-last or position-major.
    let fields: [Int32]
    /// One group only, fields of long runs: the input planes transposed to [plane][channels] once,
    /// then each receptive field (depth ordered [kernel row][kernel column][channel], as the
    /// packed filters are) is a few contiguous runs of it.
    let channelsLast: [Run]?
    let packed: [PackedMatrix]
    let bias: [[Float]?]
    /// Element-wise ops fused into the step, applied in order to its output (each the only
    /// reader of the value before it), as earshot_epilogue takes them: op kinds and their values.
    private(set) var epilogueKinds: [Int32] = []
    private(set) var epilogueValues: [Float] = []

    /// An element-wise op on a Conv's output as it is written: earshot_unary's op (and alpha),
    /// or earshot_binary's with a single constant second operand.
    enum Epilogue: Sendable {
        case unary(Int32, alpha: Float)
        case binary(Int32, Float)
    }

    mutating func fuse(_ op: Epilogue) {
        switch op {
        case let .unary(kind, alpha):
            epilogueKinds.append(kind)
            epilogueValues.append(alpha)
        case let .binary(kind, value):
            epilogueKinds.append(Int32(EARSHOT_EPILOGUE_BINARY) + kind)
            epilogueValues.append(value)
        }
    }
    /// The input is already [plane][channels]: written so by the Conv before, its only reader.
    var inputChannelsLast = false
    /// The output is written [positions][outChannels], for the Conv after, its only reader.
    var outputChannelsLast = false

    var reads: [GraphPlan.Ref] { [x] }

    /// With many positions and one group: the receptive fields packed as the product's rows
    /// (positions) straight from the input, and the filters as its columns, so that the product
    /// lands in [C][positions] order with no transpose.
    struct PositionMajor: Sendable {
        /// The fields as the product packs a matrix (panels of 16 positions by depth), per block of
        /// 16: where it starts in the item's input, or (negative, -e - 1) edge block e.
        let blocks: [Int32]
        /// The first edge blocks: runs of the input from these starts, the lanes whose mask bit
        /// is clear zero (padding).
        let spanStarts: [Int32]
        let spanMasks: [UInt16]
        /// The other edge blocks' values as input indices (-1: zero), 16 per block.
        let edges: [Int32]
        /// A strided Conv's input copied by stride phase (`Builder.stridePhases`): each copied
        /// value's input index (-1: zero). The blocks, spans and edges then index the copy. Empty:
        /// they index the input itself.
        let phases: [Int32]
        /// The filters [outChannels][depth] (fp32; empty in bf16).
        let filters: [Float]
        /// bf16: the filters rounded, row by row, as `earshot_conv_bf16` reads them (empty in fp32).
        /// The fields are rounded to bf16 as they are read, straight into the product's layout.
        let bf16Rows: [UInt16]
        let bias: [Float]?
    }

    private(set) var positionMajor: PositionMajor?

    /// A 3-tap correlation along one axis, one group, one item: Winograd F(4, 3) on channels-last
    /// values (six products of the channels for every four outputs instead of twelve). Each tile
    /// (four outputs along the axis) is transformed, the six transformed matrices of every stream's
    /// tiles meet the six transformed filters in six packed products, and the products are
    /// transformed back to the outputs.
    struct Winograd: Sendable {
        let tiles: Int
        /// Per tile, its six input positions (-1: padding) and its four output positions (-1: past
        /// the end, not written).
        let inputRows: [Int32]
        let outputRows: [Int32]
        /// The transformed filters G g, one [outChannels][channels] matrix for each of the six
        /// points, with zero rows up to a multiple of 8.
        let filters: [PackedMatrix]
        /// The bias, with zeros up to the filters' rows.
        let bias: [Float]?
        /// A row of zeros (padding).
        let zeros: [Float]
    }

    var winograd: Winograd? = nil

    /// One filter per channel (groups = channels = output channels): each output plane straight
    /// from its input plane, `earshot_depthwise`, with no fields laid out and no product.
    struct Depthwise: Sendable {
        let field: ReceptiveField
        /// [channels][kh][kw].
        let filters: [Float]
        let bias: [Float]?
        /// The filters [kh][kw][channels] when the planes are taken channels-last
        /// (`earshot_depthwise_last`: vector lanes over the channels, 16 or more of 2-D planes
        /// not `padded`: rows under 32, a filter that is not finite, or a stride past 2); nil:
        /// plane by plane (lanes along a row: a plane of one row, as a convolution over time, or
        /// `padded`).
        let lastFilters: [Float]?
        /// 2-D planes whose filters are all finite, at a stride of 1 or 2 along the rows, and rows of
        /// 32 or more (or fewer than 16 channels): plane by plane, each plane's rows padded in the
        /// scratch first (`earshot_depthwise_padded`, the same bits), so that nothing is transposed.
        let padded: Bool

        init(field: ReceptiveField, filters: [Float], bias: [Float]?, channels: Int) {
            (self.field, self.filters, self.bias) = (field, filters, bias)
            let taps = field.kh * field.kw
            // Rows of 32 or more fill the vectors; shorter rows of 16 channels or more go faster
            // channels-last (BirdNET's 1536-channel 6 x 16 planes: 168-214 -> 86-87 us, its 864 x
            // 6 x 16 145 -> 119-128 us, its 12 x 32 planes 107-109 us padded against 138-154).
            padded = field.height > 1 && (channels < 16 || field.width >= 32) && (field.sw == 1 || field.sw == 2) && field.dw >= 1
                && filters.allSatisfy(\.isFinite)
            guard channels >= 16, field.height > 1, !padded else {
                lastFilters = nil
                return
            }
            var last = [Float](repeating: 0, count: filters.count)
            for c in 0..<channels {
                for t in 0..<taps { last[t * channels + c] = filters[c * taps + t] }
            }
            lastFilters = last
        }
    }

    var depthwise: Depthwise? = nil

    /// Few taps (`EARSHOT_DIRECT_DEPTH` or fewer an output), one group, one item: every output
    /// straight from a padded copy of the input, its channels in vector lanes (`earshot_conv_direct`),
    /// written channels-last, the sums of the position-major product's. Built beside the
    /// position-major path, it replaces it where the output is written channels-last
    /// (`writeChannelsLast`), else it is dropped.
    struct Direct: Sendable {
        let field: ReceptiveField
        /// The filters [depth][ldw], ldw the output channels rounded up to 16 (zeros after them).
        let filters: [Float]
        let ldw: Int
        /// The bias, ldw floats (zeros after the output channels).
        let bias: [Float]?

        init(field: ReceptiveField, filters: [Float], bias: [Float]?, outChannels: Int, depth: Int) {
            self.field = field
            ldw = (outChannels + 15) / 16 * 16
            var f = [Float](repeating: 0, count: depth * ldw)
            for o in 0..<outChannels {
                for t in 0..<depth { f[t * ldw + o] = filters[o * depth + t] }
            }
            self.filters = f
            let padding = [Float](repeating: 0, count: ldw - outChannels)
            self.bias = bias.map { $0 + padding }
        }

        /// Floats of the input's padded copy.
        func copy(channels: Int) -> Int {
            let f = field
            return channels * earshot_conv_direct_rows(f.kh, f.sh, f.dh, f.oh) * earshot_conv_direct_columns(f.kw, f.sw, f.dw, f.ow)
        }
    }

    var direct: Direct? = nil

    /// Winograd: six products of every tile's channels against the output channels; otherwise
    /// every output's receptive field.
    var products: Int {
        if let w = winograd { return 6 * w.tiles * channels * outChannels }
        return items * positions * depth * outChannels
    }
    var bf16Products: Int {
        packed.first?.precision == .bf16 || positionMajor?.bf16Rows.isEmpty == false || winograd?.filters.first?.precision == .bf16 ? products : 0
    }

    /// Whether the step can read its input channels-last ([plane][channels]) as it is.
    var readsChannelsLast: Bool { positionMajor == nil && (channelsLast != nil || winograd != nil) }
    /// Whether the step can write its output channels-last ([positions][outChannels]).
    var writesChannelsLast: Bool { readsChannelsLast || direct != nil }

    /// Writes the output channels-last: the direct path where there is one, instead of the
    /// position-major one.
    mutating func writeChannelsLast() {
        outputChannelsLast = true
        if direct != nil { positionMajor = nil }
    }

    /// Keeps one path: the direct one goes where the position-major one stays.
    mutating func settle() {
        if positionMajor != nil { direct = nil }
    }

    /// Scratch floats per stream of the direct path: the input's padded copy.
    var directScratch: Int { direct.map { $0.copy(channels: channels) } ?? 0 }

    /// Scratch floats per stream.
    var scratch: Int {
        if let d = depthwise {
            let f = d.field
            if d.padded { return f.height * earshot_depthwise_padded_width(f.width, f.kw, f.sw, f.dw, f.pw, f.ow) }
            return d.lastFilters == nil ? 0 : channels * plane + outChannels * positions
        }
        if positionMajor == nil, direct != nil { return directScratch }
        if let pm = positionMajor { return pm.spanStarts.count * 16 + pm.edges.count + 16 + pm.phases.count }
        if let w = winograd {
            return 6 * w.tiles * (channels + w.filters[0].rows) + outChannels + max(channels * plane, positions * outChannels)
        }
        return items * positions * (depth + groupOut) + (channelsLast == nil ? 0 : channels * plane)
    }

    @inline(__always) func activate(_ p: UnsafeMutablePointer<Float>, _ n: Int) {
        for (kind, value) in zip(epilogueKinds, epilogueValues) {
            if kind >= EARSHOT_EPILOGUE_BINARY {
                var v = value
                earshot_binary(kind - Int32(EARSHOT_EPILOGUE_BINARY), p, 1, &v, 0, p, n)
            } else {
                earshot_unary(kind, value, p, p, n)
            }
        }
    }

    /// The epilogue (with a bias per column) for the product's call.
    @inline(__always) func withEpilogue(columnBias: [Float]?, _ body: (UnsafePointer<earshot_epilogue>) -> Void) {
        epilogueKinds.withUnsafeBufferPointer { kinds in
            epilogueValues.withUnsafeBufferPointer { values in
                func call(_ bias: UnsafePointer<Float>?) {
                    var e = earshot_epilogue(column_bias: bias, kinds: kinds.baseAddress, values: values.baseAddress, count: kinds.count)
                    body(&e)
                }
                if let columnBias { columnBias.withUnsafeBufferPointer { call($0.baseAddress) } } else { call(nil) }
            }
        }
    }

    /// `body(input, output)` for each stream's each item: its input [channels][plane] and its
    /// output [outChannels][positions].
    @inline(__always) func forEachItem(_ c: Context, _ body: (UnsafePointer<Float>, UnsafeMutablePointer<Float>) -> Void) {
        for b in 0..<c.streams {
            let input = c.read(x, b), out = c.write(y, b)
            for item in 0..<items { body(input + item * channels * plane, out + item * outChannels * positions) }
        }
    }

    func run(_ c: Context) {
        if let d = depthwise, let last = d.lastFilters {
            runDepthwiseLast(c, d, filters: last)
            return
        }
        if let d = depthwise {
            let f = d.field
            d.filters.withUnsafeBufferPointer { w in
                d.bias.withUnsafeBufferPointerOrNil { bias in
                    // In runs of channels whose output planes stay in cache, the fused ops applied to
                    // each run as soon as it is computed (each output is computed on its own).
                    let run = Swift.max(1, 4096 / positions)
                    forEachItem(c) { input, o in
                        for first in stride(from: 0, to: channels, by: run) {
                            let n = Swift.min(run, channels - first)
                            if d.padded {
                                earshot_depthwise_padded(input + first * plane, n, f.height, f.width, w.baseAddress! + first * f.kh * f.kw,
                                                         f.kh, f.kw, f.sh, f.sw, f.dh, f.dw, f.ph, f.pw, f.oh, f.ow,
                                                         bias.map { $0.baseAddress! + first }, o + first * positions, c.scratch)
                            } else {
                                earshot_depthwise(input + first * plane, n, f.height, f.width, w.baseAddress! + first * f.kh * f.kw, f.kh, f.kw,
                                                  f.sh, f.sw, f.dh, f.dw, f.ph, f.pw, f.oh, f.ow, bias.map { $0.baseAddress! + first }, o + first * positions)
                            }
                            activate(o + first * positions, n * positions)
                        }
                    }
                }
            }
            return
        }
        if let w = winograd {
            runWinograd(c, w)
            return
        }
        if positionMajor == nil, let d = direct {
            runDirect(c, d)
            return
        }
        if let pm = positionMajor {
            let edges = c.scratch, phased = c.scratch + pm.spanStarts.count * 16 + pm.edges.count + 16
            pm.blocks.withUnsafeBufferPointer { blocks in
                forEachItem(c) { input, o in
                    let itemInput: UnsafePointer<Float>
                    if pm.phases.isEmpty {
                        itemInput = input
                    } else {
                        gather(pm.phases, from: input, to: phased)
                        itemInput = UnsafePointer(phased)
                    }
                    earshot_masked_blocks(itemInput, pm.spanStarts, pm.spanMasks, pm.spanStarts.count, edges)
                    gather(pm.edges, from: itemInput, to: edges + pm.spanStarts.count * 16)
                    if pm.bf16Rows.isEmpty {
                        // The bias and the fused ops as each output is stored.
                        pm.filters.withUnsafeBufferPointer { w in
                            withEpilogue(columnBias: pm.bias) { epilogue in
                                earshot_gemm_indirect(blocks.baseAddress!, itemInput, edges, positions, depth, w.baseAddress!, depth,
                                                      outChannels, nil, o, positions, epilogue)
                            }
                        }
                    } else {
                        pm.bf16Rows.withUnsafeBufferPointer { w in
                            pm.bias.withUnsafeBufferPointerOrNil { bias in
                                earshot_conv_bf16(blocks.baseAddress!, itemInput, edges, positions, depth, w.baseAddress!, outChannels,
                                                  bias?.baseAddress, o, positions)
                            }
                        }
                        activate(o, outChannels * positions)
                    }
                }
            }
            return
        }
        let rows = c.streams * items * positions
        let fieldRows = c.scratch, products = c.scratch + rows * depth, planes = products + rows * groupOut
        for g in 0..<groups {
            for b in 0..<c.streams {
                let input = c.read(x, b)
                for item in 0..<items {
                    let source = input + (item * channels + g * groupIn) * plane, rows = fieldRows + (b * items + item) * positions * depth
                    if let runs = channelsLast {
                        if !inputChannelsLast { earshot_transpose(source, channels, plane, planes) }
                        let transposed = inputChannelsLast ? source : UnsafePointer(planes)
                        runs.withUnsafeBufferPointer { Run.apply($0, to: rows) { _ in transposed } }
                    } else {
                        gather(fields, from: source, to: rows)
                    }
                }
            }
            if groups == 1, positions == 1, items == 1 {
                // One output column per stream: straight into each stream's arena.
                packed[0].product(fieldRows, ldx: depth, columns: c.streams, bias: bias[0], into: c.write(y, 0), ldy: c.stride)
                for b in 0..<c.streams { activate(c.write(y, b), outChannels) }
                continue
            }
            packed[g].product(fieldRows, ldx: depth, columns: rows, bias: bias[g], into: products, ldy: groupOut)
            if outputChannelsLast {
                for b in 0..<c.streams {
                    let out = c.write(y, b)
                    out.update(from: products + b * positions * outChannels, count: positions * outChannels)
                    activate(out, positions * outChannels)
                }
                continue
            }
            // [positions][groupOut] to the group's channels [groupOut][positions].
            for b in 0..<c.streams {
                let out = c.write(y, b)
                for item in 0..<items {
                    let o = out + (item * outChannels + g * groupOut) * positions
                    earshot_transpose(products + (b * items + item) * positions * groupOut, positions, groupOut, o)
                    activate(o, groupOut * positions)
                }
            }
        }
    }
}

extension ConvStep {
    var writes: [GraphPlan.Ref] { [y] }

    /// The depthwise convolution channels-last: each item's planes transposed to [plane][channels],
    /// every output's channels in vector lanes, the outputs transposed back to [channels][positions],
    /// then the fused ops.
    func runDepthwiseLast(_ c: Context, _ d: Depthwise, filters: [Float]) {
        let f = d.field
        let input = c.scratch, output = c.scratch + channels * plane
        filters.withUnsafeBufferPointer { w in
            d.bias.withUnsafeBufferPointerOrNil { bias in
                forEachItem(c) { x, o in
                    earshot_transpose(x, channels, plane, input)
                    earshot_depthwise_last(input, channels, f.height, f.width, w.baseAddress!, f.kh, f.kw, f.sh, f.sw, f.dh, f.dw, f.ph, f.pw,
                                           f.oh, f.ow, bias?.baseAddress, output)
                    earshot_transpose(output, positions, outChannels, o)
                    activate(o, outChannels * positions)
                }
            }
        }
    }

    /// The direct path: each stream's outputs channels-last, with the bias and the fused ops. It
    /// runs only where the output is written channels-last (`writeChannelsLast`; `settle` drops
    /// it elsewhere), so nothing is transposed.
    func runDirect(_ c: Context, _ d: Direct) {
        let f = d.field
        d.filters.withUnsafeBufferPointer { w in
            d.bias.withUnsafeBufferPointerOrNil { bias in
                withEpilogue(columnBias: nil) { epilogue in
                    for b in 0..<c.streams {
                        earshot_conv_direct(c.read(x, b), channels, f.height, f.width, w.baseAddress!, d.ldw, outChannels, f.kh, f.kw, f.sh, f.sw,
                                            f.dh, f.dw, f.ph, f.pw, f.oh, f.ow, bias?.baseAddress, epilogue, c.write(y, b), c.scratch)
                    }
                }
            }
        }
    }

    /// Its path, its groups and fields, for a profile.
    var summary: String {
        let path = depthwise?.lastFilters != nil ? "depthwise, channels-last" : depthwise?.padded == true ? "depthwise, padded rows" : depthwise != nil ? "depthwise" : winograd != nil ? "Winograd" : positionMajor == nil && direct != nil ? "direct" : positionMajor?.phases.isEmpty == false ? "position-major, by stride phase" : positionMajor != nil ? "position-major" : channelsLast != nil ? "channels-last runs" : "gathered"
        return "Conv (\(path)): \(items) x \(channels) x \(plane) -> \(outChannels) x \(positions), \(groups) groups, depth \(depth), "
            + "\(products) multiply-adds" + (inputChannelsLast ? ", reads channels-last" : "") + (outputChannelsLast ? ", writes channels-last" : "")
    }
}

/// y[e] = x[index[e]], or 0 where the index is -1.
@inline(__always)
func gather(_ index: [Int32], from x: UnsafePointer<Float>, to y: UnsafeMutablePointer<Float>) {
    index.withUnsafeBufferPointer { idx in
        if let first = idx.baseAddress { earshot_gather(first, x, y, idx.count) }
    }
}
