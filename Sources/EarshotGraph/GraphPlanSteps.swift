import CEarshotKernels
import EarshotFeatures
import Foundation

/// One compiled node of a `GraphPlan`. Steps are kept as existentials, so that running one
/// opens it in place: no copy of its arrays, no reference counting in the loop.
protocol Step: Sendable {
    func run(_ c: Context) throws(GraphError)
    /// The places the step reads.
    var reads: [GraphPlan.Ref] { get }
    /// The places the step writes.
    var writes: [GraphPlan.Ref] { get }
    /// The multiply-adds the step's product kernels run for one stream.
    var products: Int { get }
}

extension Step {
    func runner() -> StepRunner { Runner(step: self) }
    /// The multiply-adds of the outputs the step's product kernels compute for one stream, rows
    /// padded to whole panels not counted; 0 for a step that runs no product (moves, element-wise
    /// ops, FFTs, the reference kernels).
    var products: Int { 0 }
}

/// A step in a class: a call through a class reference borrows it, where a call on a struct
/// existential held in an array copies it out first (retaining every array it holds). The plan
/// calls it through `Unmanaged` (the plan holds the strong references), so that a run counts
/// no references at all. `@unchecked Sendable`: the class has no state; its only subclass holds
/// one immutable `Sendable` step.
class StepRunner: @unchecked Sendable {
    /// Runs the step; a reference kernel's failure is returned.
    func run(_ c: Context) -> GraphError? { nil }
}

private final class Runner<S: Step>: StepRunner, @unchecked Sendable {
    let step: S
    init(step: S) { self.step = step }
    override func run(_ c: Context) -> GraphError? {
        do throws(GraphError) {
            try step.run(c)
            return nil
        } catch {
            return error
        }
    }
}

struct MoveStep: Step {
    let sources: [GraphPlan.Ref]
    /// The outputs, and each one's runs: runs[bounds[i]..<bounds[i + 1]] fill outputs[i].
    let outputs: [GraphPlan.Ref]
    let bounds: [Int]
    let runs: [Run]

    init(sources: [GraphPlan.Ref], outputs: [(GraphPlan.Ref, [Run])]) {
        self.sources = sources
        self.outputs = outputs.map(\.0)
        bounds = outputs.reduce(into: [0]) { $0.append($0[$0.count - 1] + $1.1.count) }
        runs = outputs.flatMap(\.1)
    }

    var reads: [GraphPlan.Ref] { sources }

    func run(_ c: Context) {
        sources.withUnsafeBufferPointer { sources in
            runs.withUnsafeBufferPointer { runs in
                for (i, ref) in outputs.enumerated() {
                    let own = UnsafeBufferPointer(rebasing: runs[bounds[i]..<bounds[i + 1]])
                    if ref.coded {
                        // Codes from codes (the builder makes a move of codes only so).
                        for b in 0..<c.streams { Run.applyCodes(own, to: c.bytes(ref, b)) { UnsafeRawPointer(c.bytes(sources[$0], b)) } }
                    } else {
                        for b in 0..<c.streams { Run.apply(own, to: c.write(ref, b)) { c.read(sources[$0], b) } }
                    }
                }
            }
        }
    }
}

/// A tensor held as codes, as floats for the steps that read floats.
struct DecodeStep: Step {
    let x: GraphPlan.Ref
    let y: GraphPlan.Ref

    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }

    func run(_ c: Context) {
        for b in 0..<c.streams { earshot_codes_to_floats(c.bytes(x, b).assumingMemoryBound(to: Int8.self), x.count, c.write(y, b)) }
    }
}

/// Floats (whole numbers in the int8 range) as codes, for an output the caller reads as codes.
struct EncodeStep: Step {
    let x: GraphPlan.Ref
    let y: GraphPlan.Ref

    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }

    func run(_ c: Context) {
        for b in 0..<c.streams { earshot_floats_to_codes(c.read(x, b), x.count, c.bytes(y, b).assumingMemoryBound(to: Int8.self)) }
    }
}

/// Conv: each item's and group's receptive fields as rows, then one packed product for every
/// stream's rows, then the outputs into [N][C][positions], with the ReLU after it when fused.
struct ConvStep: Step {
    let x: GraphPlan.Ref
    let y: GraphPlan.Ref
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
        /// The filters [outChannels][depth].
        let filters: [Float]
        let bias: [Float]?
    }

    let positionMajor: PositionMajor?

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
        /// points, with zero rows up to a multiple of 16.
        let filters: [PackedMatrix]
        /// The bias, with zeros up to a multiple of 16.
        let bias: [Float]?
        /// A row of zeros (padding).
        let zeros: [Float]
    }

    var winograd: Winograd? = nil

    /// Winograd: six products of every tile's channels against the output channels; otherwise
    /// every output's receptive field.
    var products: Int {
        if let w = winograd { return 6 * w.tiles * channels * outChannels }
        return items * positions * depth * outChannels
    }

    /// Whether the step can read its input channels-last ([plane][channels]) as it is.
    var readsChannelsLast: Bool { positionMajor == nil && (channelsLast != nil || winograd != nil) }

    /// Scratch floats per stream.
    var scratch: Int {
        if let pm = positionMajor { return pm.spanStarts.count * 16 + pm.edges.count + 16 }
        if let w = winograd {
            return 6 * w.tiles * (channels + w.filters[0].rows) + outChannels + max(channels * plane, positions * outChannels)
        }
        return items * positions * (depth + groupOut) + (channelsLast == nil ? 0 : channels * plane)
    }

    @inline(__always) private func activate(_ p: UnsafeMutablePointer<Float>, _ n: Int) {
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
    @inline(__always) private func withEpilogue(columnBias: [Float]?, _ body: (UnsafePointer<earshot_epilogue>) -> Void) {
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

    func run(_ c: Context) {
        if let w = winograd {
            runWinograd(c, w)
            return
        }
        if let pm = positionMajor {
            let edges = c.scratch
            pm.blocks.withUnsafeBufferPointer { blocks in
                pm.filters.withUnsafeBufferPointer { w in
                    for b in 0..<c.streams {
                        let input = c.read(x, b), out = c.write(y, b)
                        for item in 0..<items {
                            let itemInput = input + item * channels * plane
                            earshot_masked_blocks(itemInput, pm.spanStarts, pm.spanMasks, pm.spanStarts.count, edges)
                            gather(pm.edges, from: itemInput, to: edges + pm.spanStarts.count * 16)
                            let o = out + item * outChannels * positions
                            // The bias and the fused ops as each output is stored.
                            withEpilogue(columnBias: pm.bias) { epilogue in
                                earshot_gemm_indirect(blocks.baseAddress!, itemInput, edges, positions, depth, w.baseAddress!, depth,
                                                      outChannels, nil, o, positions, epilogue)
                            }
                        }
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

    /// The Winograd path: every stream's tiles transformed, six products for all of them at once,
    /// then each stream's outputs (with the bias and the fused ops), channels-last or transposed
    /// to [outChannels][positions].
    private func runWinograd(_ c: Context, _ w: Winograd) {
        // The products' rows are the output channels rounded up to whole panels of 16 (zero
        // filters), so that every panel is stored whole.
        let n = c.streams * w.tiles, ldm = w.filters[0].rows
        let v = c.scratch, m = v + 6 * n * channels, sink = m + 6 * n * ldm, staging = sink + outChannels
        w.inputRows.withUnsafeBufferPointer { rows in
            w.zeros.withUnsafeBufferPointer { zeros in
                for b in 0..<c.streams {
                    var input = c.read(x, b)
                    if !inputChannelsLast {
                        earshot_transpose(input, channels, plane, staging)
                        input = UnsafePointer(staging)
                    }
                    earshot_winograd_input(input, channels, rows.baseAddress!, w.tiles, zeros.baseAddress!, v + b * w.tiles * channels, n * channels)
                }
            }
        }
        for i in 0..<6 {
            w.filters[i].product(v + i * n * channels, ldx: channels, columns: n, bias: nil, into: m + i * n * ldm, ldy: ldm)
        }
        w.outputRows.withUnsafeBufferPointer { rows in
            func write(_ bias: UnsafePointer<Float>?) {
                for b in 0..<c.streams {
                    let out = c.write(y, b)
                    earshot_winograd_output(m + b * w.tiles * ldm, n * ldm, ldm, outChannels, rows.baseAddress!, w.tiles, bias,
                                            outputChannelsLast ? out : staging, sink)
                    // The fused ops over the whole output at once, as each op alone computes them.
                    if outputChannelsLast {
                        activate(out, positions * outChannels)
                    } else {
                        activate(staging, positions * outChannels)
                        earshot_transpose(staging, positions, outChannels, out)
                    }
                }
            }
            if let bias = w.bias { bias.withUnsafeBufferPointer { write($0.baseAddress) } } else { write(nil) }
        }
    }
}

/// A Conv whose filters are a windowed DFT basis (one input channel): [cos rows; sign * sin
/// rows], or the cos rows or the sin rows alone. Each receptive field times the window, one
/// real FFT, then the real parts and the imaginary parts (signed as the filters are) to their
/// channels.
struct FFTConvStep: Step {
    /// What the step writes: the filters' outputs (real parts, then imaginary), or per bin the
    /// power re² + im² or the magnitude √(re² + im²), as the element-wise ops after it would.
    enum Output: Sendable { case filters, power, magnitude }
    /// Which parts of the spectrum the filters are: cosines and sines, or one of them.
    enum Part: Sendable { case both, real, imaginary }
    /// The filters as a DFT: the window, the sign of the sines, the parts.
    struct Basis: Sendable {
        let window: [Float]
        let sign: Float
        let part: Part
    }

    let x: GraphPlan.Ref
    var y: GraphPlan.Ref
    var output = Output.filters
    /// A power or magnitude spectrum written [positions][bins], for the Conv after, its only reader.
    var channelsLast = false
    let items, plane, positions: Int
    let basis: Basis
    /// As ConvStep's.
    let fields: [Int32]
    /// Where each position's frame starts in the input plane, when every frame is one
    /// contiguous run of it (no padding): then the frames are read in place.
    let starts: [Int]?
    let bias: [Float]?
    let fft: AlignedRealFFT

    func run(_ c: Context) {
        let size = fft.size, bins = size / 2 + 1
        let rows = c.scratch, frame = aligned(rows + positions * size), spectrum = aligned(frame + size)
        // Power or magnitude: per position a row of bins, then all rows transposed at once.
        let powers = spectrum + size + 2
        // FFTW's imaginary parts are -sum x sin; the filters give sign * sum x sin.
        let imaginary = -basis.sign
        let part = basis.part, channels = part == .both ? 2 * bins : bins
        basis.window.withUnsafeBufferPointer { w in
            for b in 0..<c.streams {
                let input = c.read(x, b), out = c.write(y, b)
                for item in 0..<items {
                    let itemInput = input + item * plane, spectra = out + item * channels * positions
                    if starts == nil { gather(fields, from: itemInput, to: rows) }
                    for p in 0..<positions {
                        let row = starts.map { itemInput + $0[p] } ?? UnsafePointer(rows + p * size)
                        earshot_binary(Int32(EARSHOT_MUL), row, 1, w.baseAddress!, 1, frame, size)
                        fft.execute(frame, spectrum)
                        switch output {
                        case .filters:
                            if part != .imaginary {
                                for k in 0..<bins { spectra[k * positions + p] = spectrum[2 * k] }
                            }
                            if part != .real {
                                let sines = spectra + (part == .both ? bins * positions : 0)
                                for k in 0..<bins { sines[k * positions + p] = imaginary * spectrum[2 * k + 1] }
                            }
                        case .power, .magnitude:
                            earshot_spectrum(spectrum, bins, output == .magnitude ? 1 : 0, (channelsLast ? spectra : powers) + p * bins, 1)
                        }
                    }
                    if output != .filters && !channelsLast { earshot_transpose(powers, positions, bins, spectra) }
                    if let bias {
                        for ch in 0..<channels { for p in 0..<positions { spectra[ch * positions + p] += bias[ch] } }
                    }
                }
            }
        }
    }
}

/// The first place at or after `p` that starts on a 64-byte boundary.
@inline(__always)
func aligned(_ p: UnsafeMutablePointer<Float>) -> UnsafeMutablePointer<Float> {
    let bytes = AlignedRealFFT.alignment * MemoryLayout<Float>.size
    return p + (bytes - Int(bitPattern: p) % bytes) % bytes / MemoryLayout<Float>.size
}

/// y[e] = x[index[e]], or 0 where the index is -1.
@inline(__always)
func gather(_ index: [Int32], from x: UnsafePointer<Float>, to y: UnsafeMutablePointer<Float>) {
    index.withUnsafeBufferPointer { idx in
        if let first = idx.baseAddress { earshot_gather(first, x, y, idx.count) }
    }
}

/// Rows of x [rows][k] times a constant matrix: y [rows][columns].
struct DenseStep: Step {
    let x: GraphPlan.Ref
    let y: GraphPlan.Ref
    let rows: Int
    let packed: PackedMatrix
    let bias: [Float]?

    var products: Int { rows * packed.rows * packed.k }

    func run(_ c: Context) {
        if rows == 1 {
            packed.product(c.read(x, 0), ldx: c.stride, columns: c.streams, bias: bias, into: c.write(y, 0), ldy: c.stride)
            return
        }
        for b in 0..<c.streams {
            packed.product(c.read(x, b), ldx: packed.k, columns: rows, bias: bias, into: c.write(y, b), ldy: packed.rows)
        }
    }
}

/// LSTM over X [steps][batch][input], given its input products W x + b for every step and
/// batch row (`inputProducts`, [steps][batch][4 * hidden], gates i, f, g, o, by a DenseStep
/// before it): per step, R h of every stream and batch row in one packed product, the input
/// products added, then the cell kernel. The input products do not wait for the state, so
/// consecutive steps of a stream take them all at once.
struct LSTMStep: Step {
    let inputProducts: GraphPlan.Ref
    let h0: GraphPlan.Ref?
    let c0: GraphPlan.Ref?
    let y: GraphPlan.Ref?
    let yh: GraphPlan.Ref?
    let yc: GraphPlan.Ref?
    let steps, batch, hidden: Int
    /// R [4 * hidden][hidden].
    let recurrent: PackedMatrix

    var products: Int { steps * batch * recurrent.rows * recurrent.k }

    func run(_ c: Context) {
        let rows = c.streams * batch, H = hidden, G = 4 * H
        let gates = c.scratch, hc = gates + rows * G
        for b in 0..<c.streams {
            for j in 0..<batch {
                let row = hc + (b * batch + j) * 2 * H
                if let h0 { row.update(from: c.read(h0, b) + j * H, count: H) } else { row.update(repeating: 0, count: H) }
                if let c0 { (row + H).update(from: c.read(c0, b) + j * H, count: H) } else { (row + H).update(repeating: 0, count: H) }
            }
        }
        for t in 0..<steps {
            recurrent.product(hc, ldx: 2 * H, columns: rows, bias: nil, into: gates, ldy: G)
            for b in 0..<c.streams {
                let products = c.read(inputProducts, b) + t * batch * G
                for j in 0..<batch {
                    let r = b * batch + j
                    earshot_binary(Int32(EARSHOT_ADD), products + j * G, 1, gates + r * G, 1, gates + r * G, G)
                    earshot_lstm_cell(gates + r * G, H, hc + r * 2 * H, hc + r * 2 * H + H)
                }
            }
            if let y {
                for b in 0..<c.streams {
                    for j in 0..<batch { (c.write(y, b) + (t * batch + j) * H).update(from: hc + (b * batch + j) * 2 * H, count: H) }
                }
            }
        }
        for b in 0..<c.streams {
            for j in 0..<batch {
                let row = hc + (b * batch + j) * 2 * H
                if let yh { (c.write(yh, b) + j * H).update(from: row, count: H) }
                if let yc { (c.write(yc, b) + j * H).update(from: row + H, count: H) }
            }
        }
    }
}

/// ReduceMean, ReduceSum, ReduceMax, ReduceMin: the reference kernel's loop on the arena.
struct ReduceStep: Step {
    let op: String
    let x: GraphPlan.Ref
    let y: GraphPlan.Ref
    let layout: ReductionLayout

    func run(_ c: Context) {
        for b in 0..<c.streams { Reductions.reduceFloats(op, c.read(x, b), layout, into: c.write(y, b)) }
    }
}

/// MaxPool and AveragePool over precomputed windows: output o of a plane takes the input
/// positions members[starts[o]..<starts[o + 1]] of that plane.
struct PoolStep: Step {
    let max: Bool
    let x: GraphPlan.Ref
    let y: GraphPlan.Ref
    let planes, plane: Int
    let starts: [Int32]
    let members: [Int32]
    let divisors: [Float]
    /// Input and output channels-last ([plane][planes]): a Conv that writes so before it, one
    /// that reads so after it, each the other's only neighbour.
    var channelsLast = false

    func run(_ c: Context) {
        starts.withUnsafeBufferPointer { st in
            members.withUnsafeBufferPointer { mb in
                divisors.withUnsafeBufferPointer { dv in
                    for b in 0..<c.streams {
                        if channelsLast {
                            earshot_pool_last(max ? 1 : 0, c.read(x, b), planes, st.baseAddress!, mb.baseAddress ?? st.baseAddress!,
                                              dv.baseAddress!, dv.count, c.write(y, b))
                        } else {
                            earshot_pool(max ? 1 : 0, c.read(x, b), planes, plane, st.baseAddress!, mb.baseAddress ?? st.baseAddress!,
                                         dv.baseAddress!, dv.count, c.write(y, b))
                        }
                    }
                }
            }
        }
    }
}

/// Where(a op b, X, Y): each output element X's where the comparison holds, else Y's. A
/// condition of one value a stream copies X or Y whole.
struct SelectStep: Step {
    enum Comparison: String, Sendable {
        case equal = "Equal", greater = "Greater", greaterOrEqual = "GreaterOrEqual", less = "Less", lessOrEqual = "LessOrEqual"

        @inline(__always) func holds(_ a: Float, _ b: Float) -> Bool {
            switch self {
            case .equal: return a == b
            case .greater: return a > b
            case .greaterOrEqual: return a >= b
            case .less: return a < b
            case .lessOrEqual: return a <= b
            }
        }
    }

    /// The comparison, over its own (broadcast) shape.
    struct Condition: Sendable {
        let kind: Comparison
        let a, b: GraphPlan.Ref
        let mapA, mapB: [Int32]?
        let shape: [Int]
    }

    let condition: Condition
    /// Per output element, the element of the condition (of X, of Y) it reads; nil when that has
    /// the output's shape (as BinaryStep's maps).
    let conditionMap: [Int32]?
    let x, y, out: GraphPlan.Ref
    let mapX, mapY: [Int32]?

    var reads: [GraphPlan.Ref] { [condition.a, condition.b, x, y] }
    var writes: [GraphPlan.Ref] { [out] }

    /// Whether it copies X or Y whole (one condition value a stream; X, Y and the output of one
    /// shape): then what it writes can be read from X or Y instead.
    var choosesWhole: Bool {
        condition.a.count == 1 && condition.b.count == 1 && mapX == nil && mapY == nil && x.count == out.count && y.count == out.count
    }

    func run(_ c: Context) {
        let n = out.count
        let single = condition.a.count == 1 && condition.b.count == 1
        for s in 0..<c.streams {
            let pa = c.read(condition.a, s), pb = c.read(condition.b, s)
            if out.coded {
                // Codes: one choice for the whole output (the builder makes no other of codes).
                let holds = condition.kind.holds(pa[0], pb[0])
                c.bytes(out, s).copyMemory(from: c.bytes(holds ? x : y, s), byteCount: n)
                continue
            }
            let px = c.read(x, s), py = c.read(y, s), po = c.write(out, s)
            if single {
                // One choice for the whole output: a copy (or a fill) of X or Y.
                let holds = condition.kind.holds(pa[0], pb[0])
                let (from, map) = holds ? (px, mapX) : (py, mapY)
                let count = holds ? x.count : y.count
                if let map, count > 1 {
                    map.withUnsafeBufferPointer { m in for i in 0..<n { po[i] = from[Int(m[i])] } }
                } else if map != nil {
                    po.update(repeating: from[0], count: n)
                } else {
                    po.update(from: from, count: n)
                }
                continue
            }
            func at(_ map: [Int32]?, _ i: Int) -> Int { map.map { Int($0[i]) } ?? i }
            for i in 0..<n {
                let k = at(conditionMap, i)
                let holds = condition.kind.holds(pa[at(condition.mapA, k)], pb[at(condition.mapB, k)])
                po[i] = holds ? px[at(mapX, i)] : py[at(mapY, i)]
            }
        }
    }
}

struct UnaryStep: Step {
    enum Kind: String, Sendable {
        case relu = "Relu", sigmoid = "Sigmoid", tanh = "Tanh", sqrt = "Sqrt", exp = "Exp", log = "Log", neg = "Neg"
        case abs = "Abs", erf = "Erf", softplus = "Softplus", leakyRelu = "LeakyRelu", clip = "Clip"
    }

    let kind: Kind
    let x: GraphPlan.Ref
    let y: GraphPlan.Ref
    /// LeakyRelu's slope.
    let alpha: Float
    let beta: Float
    /// Clip's bounds (nil: none on that side).
    let low: GraphPlan.Ref?
    let high: GraphPlan.Ref?

    func run(_ c: Context) {
        let n = y.count
        for b in 0..<c.streams {
            let input = c.read(x, b), out = c.write(y, b)
            switch kind {
            case .relu: earshot_unary(Int32(EARSHOT_RELU), 0, input, out, n)
            case .sigmoid:
                out.update(from: input, count: n)
                earshot_sigmoid(out, n)
            case .tanh:
                out.update(from: input, count: n)
                earshot_tanh(out, n)
            case .sqrt: earshot_unary(Int32(EARSHOT_SQRT), 0, input, out, n)
            case .exp: for i in 0..<n { out[i] = Foundation.exp(input[i]) }
            case .log: for i in 0..<n { out[i] = Foundation.log(input[i]) }
            case .neg: earshot_unary(Int32(EARSHOT_NEG), 0, input, out, n)
            case .abs: earshot_unary(Int32(EARSHOT_ABS), 0, input, out, n)
            case .erf: for i in 0..<n { out[i] = Foundation.erf(input[i]) }
            case .softplus: for i in 0..<n { out[i] = Foundation.log1p(Foundation.exp(input[i])) }
            case .leakyRelu: earshot_unary(Int32(EARSHOT_LEAKY_RELU), alpha, input, out, n)
            case .clip:
                let lo = low.map { c.read($0, b)[0] } ?? -.infinity, hi = high.map { c.read($0, b)[0] } ?? .infinity
                for i in 0..<n { out[i] = input[i].isNaN ? input[i] : Swift.min(Swift.max(input[i], lo), hi) }
            }
        }
    }
}

struct BinaryStep: Step {
    enum Kind: String, Sendable {
        case add = "Add", sub = "Sub", mul = "Mul", div = "Div", max = "Max", min = "Min", pow = "Pow"
        /// Pow by a fixed 2.
        case square = "Square"
    }

    let kind: Kind
    let a: GraphPlan.Ref
    let b: GraphPlan.Ref
    let y: GraphPlan.Ref
    /// Per output element, the element of a (of b) it reads; nil when a (b) has the output's
    /// shape. A one-value operand has a map of zeros.
    let mapA: [Int32]?
    let mapB: [Int32]?

    /// nil when `shape` is the output's, else the broadcast index of every output element.
    static func map(_ shape: [Int], to out: [Int]) -> [Int32]? {
        shape == out ? nil : broadcastOffsets(from: shape, to: out).map { Int32($0) }
    }

    /// The C kernel's op for add, sub, mul, div and square.
    private var kernelOp: Int32? {
        switch kind {
        case .add: return Int32(EARSHOT_ADD)
        case .sub: return Int32(EARSHOT_SUB)
        case .mul: return Int32(EARSHOT_MUL)
        case .div: return Int32(EARSHOT_DIV)
        case .square: return Int32(EARSHOT_SQUARE)
        case .max: return Int32(EARSHOT_MAX)
        case .min: return Int32(EARSHOT_MIN)
        case .pow: return nil
        }
    }

    func run(_ c: Context) {
        // Same shapes, or one operand a single value: the vectorized kernel.
        if let op = kernelOp, (mapA == nil || a.count == 1), (mapB == nil || b.count == 1) {
            for s in 0..<c.streams {
                earshot_binary(op, c.read(a, s), mapA == nil ? 1 : 0, c.read(b, s), mapB == nil ? 1 : 0, c.write(y, s), y.count)
            }
            return
        }
        switch kind {
        case .add: apply(c, +)
        case .sub: apply(c, -)
        case .mul: apply(c, *)
        case .div: apply(c, /)
        case .max: apply(c) { $0.isNaN || $1.isNaN ? .nan : Swift.max($0, $1) }
        case .min: apply(c) { $0.isNaN || $1.isNaN ? .nan : Swift.min($0, $1) }
        case .pow: apply(c) { Foundation.pow($0, $1) }
        case .square: apply(c) { x, _ in x * x }
        }
    }

    @inline(__always)
    private func apply(_ c: Context, _ f: (Float, Float) -> Float) {
        let n = y.count
        for s in 0..<c.streams {
            let pa = c.read(a, s), pb = c.read(b, s), out = c.write(y, s)
            if mapA == nil && mapB == nil {
                for i in 0..<n { out[i] = f(pa[i], pb[i]) }
            } else if mapA == nil && b.count == 1 {
                let v = pb[0]
                for i in 0..<n { out[i] = f(pa[i], v) }
            } else if mapB == nil && a.count == 1 {
                let v = pa[0]
                for i in 0..<n { out[i] = f(v, pb[i]) }
            } else {
                mapA.withUnsafeBufferPointerOrNil { ia in
                    mapB.withUnsafeBufferPointerOrNil { ib in
                        for i in 0..<n { out[i] = f(pa[ia.map { Int($0[i]) } ?? i], pb[ib.map { Int($0[i]) } ?? i]) }
                    }
                }
            }
        }
    }
}

extension Optional where Wrapped == [Int32] {
    @inline(__always)
    func withUnsafeBufferPointerOrNil<R>(_ body: (UnsafeBufferPointer<Int32>?) -> R) -> R {
        switch self {
        case let .some(array): return array.withUnsafeBufferPointer { body($0) }
        case .none: return body(nil)
        }
    }
}

/// A node the plan runs on its reference kernel: its inputs as tensors, its outputs copied back.
struct ReferenceStep: Step {
    enum Source: Sendable {
        case constant(GraphTensor)
        case stream(GraphPlan.Ref, [Int])
    }

    let node: GraphNode
    let inputs: [Source?]
    let outputs: [GraphPlan.Ref?]
    let opset: Int

    func run(_ c: Context) throws(GraphError) {
        for b in 0..<c.streams {
            let values: [GraphTensor?] = inputs.map { source in
                switch source {
                case nil: return nil
                case let .constant(t)?: return t
                case let .stream(ref, shape)?:
                    return GraphTensor(shape: shape, floats: Array(UnsafeBufferPointer(start: c.read(ref, b), count: ref.count)))
                }
            }
            let outs = try GraphOps.run(node.op, node: node.name, inputs: values, attributes: node.attributes, opset: opset,
                                        outputCount: node.outputs.count)
            for (ref, value) in zip(outputs, outs) {
                guard let ref, ref.count > 0 else { continue }
                guard value.floats.count == ref.count else {
                    throw .op(node: node.name, op: node.op, reason: "gave \(value.floats.count) values where the plan holds \(ref.count)")
                }
                value.floats.withUnsafeBufferPointer { c.write(ref, b).update(from: $0.baseAddress!, count: ref.count) }
            }
        }
    }
}

extension MoveStep { var writes: [GraphPlan.Ref] { outputs } }
extension ConvStep { var writes: [GraphPlan.Ref] { [y] } }
extension FFTConvStep {
    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }
}
extension DenseStep {
    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }
}
extension LSTMStep {
    var reads: [GraphPlan.Ref] { [inputProducts] + [h0, c0].compactMap { $0 } }
    var writes: [GraphPlan.Ref] { [y, yh, yc].compactMap { $0 } }
}
extension ReduceStep {
    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }
}
extension PoolStep {
    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }
}
extension UnaryStep {
    var reads: [GraphPlan.Ref] { [x] + [low, high].compactMap { $0 } }
    var writes: [GraphPlan.Ref] { [y] }
}
extension BinaryStep {
    var reads: [GraphPlan.Ref] { [a, b] }
    var writes: [GraphPlan.Ref] { [y] }
}

extension ReferenceStep {
    var writes: [GraphPlan.Ref] { outputs.compactMap { $0 } }
    var reads: [GraphPlan.Ref] {
        inputs.compactMap { source in
            if case let .stream(ref, _)? = source { return ref }
            return nil
        }
    }
}
