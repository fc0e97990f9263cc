import CEarshotKernels
import EarshotFeatures
import Foundation

/// Compiles a graph into a `GraphPlan`'s steps (see `GraphPlan`).
struct Builder {
    typealias Ref = GraphPlan.Ref

    let constants: [String: GraphTensor]
    let opset: Int
    /// Every tensor's value in the pass on zero inputs: the shapes of all, the values of the
    /// tensors that do not depend on the inputs (`fixed`).
    var values: [String: GraphTensor] = [:]
    var fixed = Set<String>()
    var refs: [String: Ref] = [:]
    var shared: [Float] = []
    var arenaSize = 0
    var scratchSize = 0
    var steps: [any Step] = []
    var kernels: [String: String] = [:]
    var inputRefs: [Ref] = []
    var outputRefs: [Ref] = []
    /// How many times each tensor is read: by nodes, and once more if it is an output.
    var readers: [String: Int] = [:]
    /// The node that gives each tensor.
    var producers: [String: String] = [:]
    /// Tensors read only as a Where's condition.
    var conditionsOnly = Set<String>()
    /// Comparisons of floats that only a Where reads, compiled into it.
    var conditions: [String: SelectStep.Condition] = [:]
    /// Inputs and outputs the caller gives and reads as int8 codes.
    let codes: Set<String>
    /// Tensors held as codes, as floats for the steps that read floats (converted once, where the
    /// first such step reads them).
    var decoded: [String: Ref] = [:]

    /// The ops that only move values: compiled to copy runs.
    static let movers: Set<String> = [
        "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Gather", "Concat", "Split", "Pad",
        "Expand", "Tile", "Cast",
    ]

    init(constants: [String: GraphTensor], opset: Int, codes: Set<String> = []) {
        self.constants = constants
        self.opset = opset
        self.codes = codes
    }

    mutating func allocate(_ count: Int) -> Ref {
        let ref = Ref(shared: false, offset: arenaSize, count: count)
        arenaSize += (count + 15) / 16 * 16
        return ref
    }

    /// Room for `count` int8 codes (whole floats of the arena, so that every place stays aligned).
    mutating func allocateCodes(_ count: Int) -> Ref {
        let floats = (count + 3) / 4
        let ref = Ref(shared: false, offset: arenaSize * 4, count: count, coded: true)
        arenaSize += (floats + 15) / 16 * 16
        return ref
    }

    /// Where a float tensor is read from by a step that reads floats: its place in the arena (a
    /// tensor held as codes: a float copy of it), or (a value that does not depend on the inputs)
    /// the shared constants, copied there once.
    mutating func ref(_ name: String) -> Ref? {
        guard let ref = held(name) else { return nil }
        guard ref.coded else { return ref }
        if let floats = decoded[name] { return floats }
        let floats = allocate(ref.count)
        steps.append(DecodeStep(x: ref, y: floats))
        decoded[name] = floats
        return floats
    }

    /// A tensor held as codes, for a step that moves codes: where it is, or a constant whose
    /// values are all int8 as codes among the shared constants (stored once); nil otherwise.
    mutating func codes(_ name: String) -> Ref? {
        if let ref = refs[name], ref.coded || !ref.shared { return ref.coded ? ref : nil }
        let key = name + "\u{0}codes"
        if let ref = refs[key] { return ref }
        guard fixed.contains(name), let value = values[name], value.dtype == .float32,
              value.floats.allSatisfy(IntegerRanges.isInt8) else { return nil }
        let ref = Ref(shared: true, offset: shared.count * 4, count: value.count, coded: true)
        var bytes = value.floats.map { UInt8(bitPattern: Int8($0)) }
        bytes += [UInt8](repeating: 0, count: (4 - bytes.count % 4) % 4)
        shared += stride(from: 0, to: bytes.count, by: 4).map { i in
            Float(bitPattern: UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24)
        }
        refs[key] = ref
        return ref
    }

    /// Where a tensor is held, as floats or as codes, for the steps that read either.
    mutating func held(_ name: String) -> Ref? {
        if let ref = refs[name] { return ref }
        guard fixed.contains(name), let value = values[name], value.dtype == .float32 else { return nil }
        let ref = Ref(shared: true, offset: shared.count, count: value.count)
        shared += value.floats
        refs[name] = ref
        return ref
    }

    mutating func build(nodes: [GraphNode], inputs: [(name: String, shape: [Int])], outputs: [String]) throws(GraphError) {
        values = constants
        fixed = Set(constants.keys)
        for name in nodes.flatMap(\.inputs) + outputs where !name.isEmpty { readers[name, default: 0] += 1 }
        for node in nodes { for name in node.outputs { producers[name] = node.name } }
        var asCondition: [String: Int] = [:]
        for node in nodes where node.op == "Where" && !node.inputs.isEmpty { asCondition[node.inputs[0], default: 0] += 1 }
        conditionsOnly = Set(asCondition.filter { readers[$0.key] == $0.value }.keys)
        let releases = GraphNode.releases(nodes, keeping: Set(outputs))
        for input in inputs {
            guard values[input.name] == nil, input.shape.allSatisfy({ $0 >= 0 }) else {
                throw .op(node: input.name, op: "input", reason: "input '\(input.name)' is given twice or has a negative dimension in \(input.shape)")
            }
            let count = input.shape.reduce(1, *)
            values[input.name] = GraphTensor(shape: input.shape, floats: [Float](repeating: 0, count: count))
            let ref = codes.contains(input.name) ? allocateCodes(count) : allocate(count)
            refs[input.name] = ref
            inputRefs.append(ref)
        }
        for (i, node) in nodes.enumerated() {
            // Tensors no later node reads are let go (their places in the arena stay).
            defer { for name in releases[i] { values[name] = nil } }
            var inputs: [GraphTensor?] = []
            for name in node.inputs {
                guard !name.isEmpty else { inputs.append(nil); continue }
                guard let value = values[name] else {
                    throw .op(node: node.name, op: node.op, reason: "reads '\(name)', which nothing before it gives")
                }
                inputs.append(value)
            }
            let outs = try GraphOps.run(node.op, node: node.name, inputs: inputs, attributes: node.attributes, opset: opset,
                                        outputCount: node.outputs.count)
            for (name, value) in zip(node.outputs, outs) where !name.isEmpty { values[name] = value }
            let dependent = !["Shape", "Size"].contains(node.op) && node.inputs.contains { !$0.isEmpty && !fixed.contains($0) }
            guard dependent else {
                for name in node.outputs where !name.isEmpty { fixed.insert(name) }
                kernels[node.name] = "folded"
                continue
            }
            if let compiled = condition(node, inputs, outs) {
                kernels[node.name] = compiled
                continue
            }
            for (name, value) in zip(node.outputs, outs) where !name.isEmpty && value.dtype != .float32 {
                throw .unsupported(node: node.name, op: node.op,
                                   reason: "output '\(name)' is \(value.dtype.rawValue) and depends on the inputs (a compiled graph computes floats only)")
            }
            try compile(node, inputs: inputs, outputs: outs)
        }
        for name in outputs {
            guard var ref = codes.contains(name) ? held(name) : ref(name) else {
                throw .op(node: name, op: "output", reason: "output '\(name)' is not a float tensor of the graph")
            }
            if codes.contains(name) && !ref.coded {
                // Asked for as codes, computed as floats: converted after the steps.
                let coded = allocateCodes(ref.count)
                steps.append(EncodeStep(x: ref, y: coded))
                ref = coded
            }
            outputRefs.append(ref)
        }
        fuseSpectra()
        linkChannelsLast()
    }

    /// The steps that read any part of `ref` (a place in the arena).
    private func steps(reading ref: Ref) -> [Int] {
        steps.indices.filter { j in steps[j].reads.contains { $0.overlaps(ref) } }
    }

    /// Whether a graph output is read from any part of `ref`.
    private func isOutput(_ ref: Ref) -> Bool { outputRefs.contains { $0.overlaps(ref) } }

    /// An FFT step whose real and imaginary halves are only squared and summed (and perhaps the
    /// square root taken), as an exported STFT's power or magnitude is: the step writes that sum
    /// itself, and the element-wise steps go.
    private mutating func fuseSpectra() {
        var removed = Set<Int>()
        for i in steps.indices {
            guard var fft = steps[i] as? FFTConvStep, fft.output == .filters, fft.basis.part == .both, fft.items == 1, fft.bias == nil,
                  !isOutput(fft.y) else { continue }
            let half = fft.y.count / 2
            let real = Ref(shared: false, offset: fft.y.offset, count: half), imaginary = Ref(shared: false, offset: fft.y.offset + half, count: half)
            func square(of ref: Ref) -> Int? {
                let r = steps(reading: ref)
                guard r.count == 1, let step = steps[r[0]] as? BinaryStep, step.kind == .square, step.a == ref, step.mapA == nil else { return nil }
                return r[0]
            }
            guard steps(reading: fft.y).count == 2, let re = square(of: real), let im = square(of: imaginary),
                  let sq1 = steps[re] as? BinaryStep, let sq2 = steps[im] as? BinaryStep else { continue }
            let sums = steps(reading: sq1.y)
            guard !isOutput(sq1.y), !isOutput(sq2.y), sums.count == 1, steps(reading: sq2.y) == sums, let sum = steps[sums[0]] as? BinaryStep, sum.kind == .add,
                  sum.mapA == nil, sum.mapB == nil, Set([sum.a.offset, sum.b.offset]) == Set([sq1.y.offset, sq2.y.offset]) else { continue }
            var gone = [re, im, sums[0]]
            fft.output = .power
            fft.y = sum.y
            let roots = steps(reading: sum.y)
            if !isOutput(sum.y), roots.count == 1, let root = steps[roots[0]] as? UnaryStep, root.kind == .sqrt, root.x == sum.y {
                fft.output = .magnitude
                fft.y = root.y
                gone.append(roots[0])
            }
            for j in gone {
                let y = (steps[j] as? BinaryStep)?.y ?? (steps[j] as? UnaryStep)?.y
                for (tensor, ref) in refs where ref == y {
                    if let node = producers[tensor], kernels[node] == "element-wise" { kernels[node] = "with the FFT" }
                }
            }
            steps[i] = fft
            removed.formUnion(gone)
        }
        steps = steps.indices.filter { !removed.contains($0) }.map { steps[$0] }
    }

    /// A Conv whose output only the next Conv reads, both with fields taken from the input
    /// transposed to [plane][channels] (or Winograd's tiles): the first writes that layout and the
    /// second reads it as it is, with no transposes between them; so too with a pooling step
    /// between them, which then pools channels-last.
    private mutating func linkChannelsLast() {
        /// The Conv that is the only reader of `y` ([channels][plane]) and can take it channels-last.
        func onlyReader(of y: Ref, channels: Int, plane: Int) -> Int? {
            guard !isOutput(y) else { return nil }
            let readers = steps(reading: y)
            // The same tensor, not a reshaped view of it.
            guard readers.count == 1, let second = steps[readers[0]] as? ConvStep, second.x == y, second.readsChannelsLast,
                  second.groups == 1, second.items == 1, second.channels == channels,
                  second.plane == plane else { return nil }
            return readers[0]
        }
        for i in steps.indices {
            // Conv, pooling of one item, Conv: the pooling too runs channels-last.
            if var first = steps[i] as? ConvStep, first.readsChannelsLast, first.groups == 1, first.items == 1, !isOutput(first.y),
               steps(reading: first.y) == [i + 1], var pool = steps[i + 1] as? PoolStep, pool.x == first.y, pool.planes == first.outChannels,
               pool.plane == first.positions, let j = onlyReader(of: pool.y, channels: pool.planes, plane: pool.divisors.count),
               var second = steps[j] as? ConvStep {
                first.outputChannelsLast = true
                pool.channelsLast = true
                second.inputChannelsLast = true
                for (tensor, ref) in refs where ref == pool.y {
                    if let node = producers[tensor], kernels[node] == "pooling" { kernels[node] = "pooling, channels-last" }
                }
                steps[i] = first
                steps[i + 1] = pool
                steps[j] = second
            }
            if var first = steps[i] as? ConvStep, first.readsChannelsLast, first.groups == 1, first.items == 1,
               let j = onlyReader(of: first.y, channels: first.outChannels, plane: first.positions), var second = steps[j] as? ConvStep {
                first.outputChannelsLast = true
                second.inputChannelsLast = true
                steps[i] = first
                steps[j] = second
            }
            // A power or magnitude spectrum: its rows (one per position) need no transpose.
            if var fft = steps[i] as? FFTConvStep, fft.output != .filters, fft.items == 1,
               let j = onlyReader(of: fft.y, channels: fft.fft.size / 2 + 1, plane: fft.positions), var second = steps[j] as? ConvStep {
                fft.channelsLast = true
                second.inputChannelsLast = true
                steps[i] = fft
                steps[j] = second
            }
        }
    }

    private mutating func compile(_ node: GraphNode, inputs: [GraphTensor?], outputs: [GraphTensor]) throws(GraphError) {
        let compiled: String?
        switch node.op {
        case _ where Self.movers.contains(node.op): compiled = try move(node, inputs, outputs)
        case "Conv": compiled = try conv(node, inputs, outputs)
        case "MatMul", "Gemm": compiled = try dense(node, inputs, outputs)
        case "LSTM": compiled = try lstm(node, inputs, outputs)
        case "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin": compiled = try reduce(node, inputs, outputs)
        case "MaxPool", "AveragePool": compiled = try pool(node, inputs, outputs)
        case _ where UnaryStep.Kind(rawValue: node.op) != nil: compiled = unary(node, inputs, outputs)
        case _ where BinaryStep.Kind(rawValue: node.op) != nil: compiled = binary(node, inputs, outputs)
        case "Where": compiled = select(node, inputs, outputs)
        case "TFLiteConv2D", "TFLiteDepthwiseConv2D", "TFLiteFullyConnected", "TFLiteLookup", "Quantize":
            compiled = try quantized(node, inputs, outputs)
        case "MicroFrontend": compiled = microFrontend(node, inputs, outputs)
        default: compiled = nil
        }
        if let compiled {
            kernels[node.name] = compiled
            return
        }
        var sources: [ReferenceStep.Source?] = []
        for (name, value) in zip(node.inputs, inputs) {
            guard let value else { sources.append(nil); continue }
            if fixed.contains(name) {
                sources.append(.constant(value))
            } else if let ref = ref(name) {
                sources.append(.stream(ref, value.shape))
            } else {
                throw .unsupported(node: node.name, op: node.op, reason: "input '\(name)' is not a float tensor")
            }
        }
        var refs: [Ref?] = []
        for (name, value) in zip(node.outputs, outputs) {
            guard !name.isEmpty else { refs.append(nil); continue }
            let ref = allocate(value.count)
            self.refs[name] = ref
            refs.append(ref)
        }
        steps.append(ReferenceStep(node: node, inputs: sources, outputs: refs, opset: opset))
        kernels[node.name] = "reference"
    }

    // MARK: Moves

    /// An op that only moves values, run once with each float input's values numbered (then
    /// numbered plus one half): an output value that moved along with the numbers is a copy of
    /// the numbered element; one that stayed is a constant the op put there.
    private mutating func move(_ node: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        if node.op == "Cast", outputs.first?.dtype != .float32 { return nil }
        var sources: [(input: Int, base: Int, count: Int)] = []
        var total = 0
        for (i, t) in inputs.enumerated() {
            guard let t, t.dtype == .float32 else { continue }
            sources.append((i, total, t.count))
            total += t.count
        }
        guard total < 1 << 21 else { return nil }
        func numbered(_ half: Float) -> [GraphTensor?] {
            var numbered = inputs
            for s in sources {
                let shape = inputs[s.input]!.shape
                numbered[s.input] = GraphTensor(shape: shape, floats: (0..<s.count).map { Float(s.base + $0 + 1) + half })
            }
            return numbered
        }
        let first = try GraphOps.run(node.op, node: node.name, inputs: numbered(0), attributes: node.attributes, opset: opset,
                                     outputCount: node.outputs.count)
        let second = try GraphOps.run(node.op, node: node.name, inputs: numbered(0.5), attributes: node.attributes, opset: opset,
                                      outputCount: node.outputs.count)
        // Codes move as codes when a source is held so, every other is held so or is a constant of
        // int8 values, and every value filled in is one.
        var refs: [Ref] = []
        let readsCodes = sources.contains { self.refs[node.inputs[$0.input]]?.coded == true }
        if readsCodes, case let all = sources.compactMap({ codes(node.inputs[$0.input]) }), all.count == sources.count {
            refs = all
        } else {
            for s in sources {
                guard let ref = ref(node.inputs[s.input]) else { return nil }
                refs.append(ref)
            }
        }
        var moved: [(output: String, count: Int, runs: [Run])] = []
        for (j, name) in node.outputs.enumerated() where !name.isEmpty {
            let (a, b) = (first[j].floats, second[j].floats)
            guard a.count == outputs[j].count, b.count == a.count else { return nil }
            var elements: [Run] = []
            elements.reserveCapacity(a.count)
            for e in a.indices {
                if b[e] - a[e] == 0.5 {
                    let id = Int(a[e]) - 1
                    guard let s = sources.firstIndex(where: { id >= $0.base && id < $0.base + $0.count }) else { return nil }
                    elements.append(Run(dst: e, source: s, src: id - sources[s].base, count: 1, fill: 0))
                } else if a[e] == b[e] || (a[e].isNaN && b[e].isNaN) {
                    elements.append(Run(dst: e, source: -1, src: 0, count: 1, fill: a[e]))
                } else {
                    return nil
                }
            }
            moved.append((name, a.count, Run.joined(elements)))
        }
        var coded = !refs.isEmpty && refs.allSatisfy(\.coded)
        if coded, !moved.allSatisfy({ $0.runs.allSatisfy { $0.source >= 0 || IntegerRanges.isInt8($0.fill) } }) {
            // A value filled in that no code holds: the move is of floats.
            coded = false
            for (i, s) in sources.enumerated() {
                guard let ref = ref(node.inputs[s.input]) else { return nil }
                refs[i] = ref
            }
        }
        var outs: [(Ref, [Run])] = []
        var aliased = 0
        for m in moved {
            if m.runs.count == 1, let run = m.runs.first, run.source >= 0, run.count == m.count {
                // One contiguous block of one input: the output is that block, in place.
                let source = refs[run.source]
                self.refs[m.output] = Ref(shared: source.shared, offset: source.offset + run.src, count: m.count, coded: source.coded)
                aliased += 1
                continue
            }
            let ref = coded ? allocateCodes(m.count) : allocate(m.count)
            self.refs[m.output] = ref
            var runs = m.runs
            if moved.count == 1 {
                // An input of the plan that only this copy reads, landing whole in one place of
                // the output (a state before the new rows of a window): loaded there, not copied.
                for (i, source) in sources.enumerated() {
                    let name = node.inputs[source.input]
                    guard readers[name] == 1, let input = inputRefs.firstIndex(of: refs[i]),
                          inputRefs.filter({ $0 == refs[i] }).count == 1,
                          let r = runs.firstIndex(where: { $0.source == i }), runs[r].count == source.count, runs[r].src == 0,
                          !runs.contains(where: { $0.source == i && $0.dst != runs[r].dst }) else { continue }
                    let placed = Ref(shared: false, offset: ref.offset + runs[r].dst, count: source.count, coded: ref.coded)
                    inputRefs[input] = placed
                    self.refs[name] = placed
                    refs[i] = placed
                    runs.remove(at: r)
                }
            }
            outs.append((ref, runs))
        }
        if !outs.isEmpty { steps.append(MoveStep(sources: refs, outputs: outs)) }
        return outs.isEmpty ? "alias" : "copy"
    }

    // MARK: Products

    private func node(_ g: GraphNode, _ inputs: [GraphTensor?]) -> Node {
        Node(name: g.name, op: g.op, opset: opset, inputs: inputs, attributes: g.attributes, outputCount: g.outputs.count)
    }

    private mutating func conv(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
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
        let pw2 = PlaneWindow(spatial: Array(x.shape[2...]), kernel: kernel, window)
        let (height, width, kh, kw, oh, ow) = (pw2.height, pw2.width, pw2.kh, pw2.kw, pw2.oh, pw2.ow)
        let (sh, sw, dh, dw, ph, pw) = (pw2.sh, pw2.sw, pw2.dh, pw2.dw, pw2.ph, pw2.pw)
        let groupIn = channels / group, groupOut = outChannels / group
        let depth = groupIn * kh * kw, positions = oh * ow
        guard depth > 0, positions > 0, groupOut > 0, items > 0, groupIn * height * width < Int(Int32.max) else { return nil }
        // One item's and group's receptive fields [positions][depth], from its first input plane.
        var fields = [Int32](repeating: -1, count: positions * depth)
        for oy in 0..<oh {
            for ox in 0..<ow {
                for c in 0..<groupIn {
                    for i in 0..<kh {
                        for j in 0..<kw {
                            let (iy, ix) = (oy * sh - ph + i * dh, ox * sw - pw + j * dw)
                            let dst = ((oy * ow + ox) * groupIn + c) * kh * kw + i * kw + j
                            if iy >= 0 && iy < height && ix >= 0 && ix < width { fields[dst] = Int32((c * height + iy) * width + ix) }
                        }
                    }
                }
            }
        }
        if group == 1, groupIn == 1, kh == 1, dw == 1, let basis = Self.dftBasis(w.floats, size: kw, rows: outChannels),
           let fft = AlignedRealFFT.make(size: kw) {
            // The filters are a windowed DFT basis: one FFT per position instead of the product.
            let y = allocate(outputs[0].count)
            refs[g.outputs[0]] = y
            let starts = (0..<positions).map { p in fields[p * kw] }
            let inPlace = (0..<positions).allSatisfy { p in starts[p] >= 0 && (0..<kw).allSatisfy { fields[p * kw + $0] == starts[p] + Int32($0) } }
            steps.append(FFTConvStep(x: xRef, y: y, items: items, plane: height * width, positions: positions, basis: basis, fields: fields, starts: inPlace ? starts.map { Int($0) } : nil, bias: bias?.floats, fft: fft))
            scratchSize = max(scratchSize, positions * kw + 2 * kw + 4 + 2 * AlignedRealFFT.alignment + positions * (kw / 2 + 1))
            return "FFT"
        }
        if group == 1, items == 1, let winograd = Self.winograd(fields: fields, taps: kh * kw, alongRows: kh == 3, oh: oh, ow: ow, channels: channels,
                                                                outChannels: outChannels, weights: w.floats, bias: bias?.floats) {
            let y = allocate(outputs[0].count)
            refs[g.outputs[0]] = y
            let step = ConvStep(x: xRef, y: y, items: 1, channels: channels, outChannels: outChannels, plane: height * width, groups: 1,
                                groupIn: channels, groupOut: outChannels, depth: depth, positions: positions, fields: [], channelsLast: nil,
                                packed: [], bias: [nil], positionMajor: nil, winograd: winograd)
            scratchSize = max(scratchSize, step.scratch)
            steps.append(step)
            return "Winograd product"
        }
        // One group: the fields as runs of the input transposed to [plane][channels], when they
        // are long enough to beat a gather (filters then ordered [kernel row][kernel column][channel]).
        var channelsLast: [Run]?
        var filters = w.floats
        if group == 1, positions < 64 {
            var elements: [Run] = []
            elements.reserveCapacity(positions * depth)
            for oy in 0..<oh {
                for ox in 0..<ow {
                    for i in 0..<kh {
                        for j in 0..<kw {
                            let (iy, ix) = (oy * sh - ph + i * dh, ox * sw - pw + j * dw)
                            let inside = iy >= 0 && iy < height && ix >= 0 && ix < width
                            for c in 0..<channels {
                                let dst = (oy * ow + ox) * depth + (i * kw + j) * channels + c
                                elements.append(inside ? Run(dst: dst, source: 0, src: (iy * width + ix) * channels + c, count: 1, fill: 0)
                                                       : Run(dst: dst, source: -1, src: 0, count: 1, fill: 0))
                            }
                        }
                    }
                }
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
            // A block of 16 consecutive input values is read in place; the others (at the edges,
            // padding) are made at each run: a run of the input with the padding's lanes cleared,
            // or, where no run fits, gathered value by value.
            var blocks = [Int32](repeating: 0, count: panels * depth)
            var spans: [(block: Int, start: Int32, mask: UInt16)] = [], gathered: [Int] = []
            let inputCount = Int32(channels * height * width)
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
            var edges: [Int32] = []
            for (e, span) in spans.enumerated() { blocks[span.block] = -Int32(e) - 1 }
            for (e, block) in gathered.enumerated() {
                blocks[block] = -Int32(spans.count + e) - 1
                edges += index[(block * 16)..<(block * 16 + 16)]
            }
            positionMajor = .init(blocks: blocks, spanStarts: spans.map(\.start), spanMasks: spans.map(\.mask), edges: edges,
                                  filters: w.floats, bias: bias?.floats)
        }
        // The packed filters serve the other paths; the position-major one reads them unpacked.
        let packed = positionMajor != nil ? [] : (0..<group).map { gi in
            PackedMatrix(Array(filters[(gi * groupOut * depth)..<((gi + 1) * groupOut * depth)]), rows: groupOut, k: depth)
        }
        let step = ConvStep(x: xRef, y: y, items: items, channels: channels, outChannels: outChannels, plane: height * width,
                            groups: group, groupIn: groupIn, groupOut: groupOut, depth: depth, positions: positions,
                            fields: positionMajor == nil && channelsLast == nil ? fields : [], channelsLast: channelsLast, packed: packed,
                            bias: biases, positionMajor: positionMajor)
        scratchSize = max(scratchSize, step.scratch)
        steps.append(step)
        return "packed product"
    }

    /// A Conv of three taps along one axis (`alongRows`: the output's rows, else its columns) as
    /// Winograd F(4, 3), when that takes at most three quarters of the direct products: its tiles
    /// of four outputs along the axis, each tile's six inputs read from the receptive fields of
    /// channel 0 (`fields`, three a position) and checked to slide one position a tap; the
    /// filters [outChannels][channels][3] transformed (in double) to G g.
    static func winograd(fields: [Int32], taps: Int, alongRows: Bool, oh: Int, ow: Int, channels: Int, outChannels: Int,
                         weights: [Float], bias: [Float]?) -> ConvStep.Winograd? {
        let depth = channels * 3
        guard taps == 3, channels >= 4, outChannels >= 4, weights.count == outChannels * depth else { return nil }
        let (lines, length) = alongRows ? (ow, oh) : (oh, ow)
        let perLine = (length + 3) / 4
        // Six products a tile against three a direct output.
        guard 6 * perLine * 4 <= 9 * length else { return nil }
        func position(line: Int, at k: Int) -> Int { alongRows ? k * ow + line : line * ow + k }
        func field(_ p: Int, _ tap: Int) -> Int32 { fields[p * depth + tap] }
        var inputRows: [Int32] = [], outputRows: [Int32] = []
        for line in 0..<lines {
            for t in 0..<perLine {
                let first = 4 * t, valid = min(4, length - first)
                var d = [Int32](repeating: -1, count: 6)
                for j in 0..<6 {
                    // Input j is tap 0 of output j, or taps 1 and 2 of the last valid output.
                    if j < valid { d[j] = field(position(line: line, at: first + j), 0) }
                    else if j <= valid + 1 { d[j] = field(position(line: line, at: first + valid - 1), j - valid + 1) }
                }
                for o in 0..<valid {
                    for tap in 0..<3 where field(position(line: line, at: first + o), tap) != d[o + tap] { return nil }
                }
                inputRows += d
                outputRows += (0..<4).map { $0 < valid ? Int32(position(line: line, at: first + $0)) : -1 }
            }
        }
        // G g per point: g0 / 4, -(g0 + g1 + g2) / 6, -(g0 - g1 + g2) / 6, g0 / 24 + g1 / 12 + g2 / 6,
        // g0 / 24 - g1 / 12 + g2 / 6, g2.
        let rows = (outChannels + 15) / 16 * 16
        var transformed = [[Float]](repeating: [Float](repeating: 0, count: rows * channels), count: 6)
        for o in 0..<outChannels {
            for c in 0..<channels {
                let g = (0..<3).map { Double(weights[(o * channels + c) * 3 + $0]) }
                let u = [g[0] / 4, -(g[0] + g[1] + g[2]) / 6, -(g[0] - g[1] + g[2]) / 6, g[0] / 24 + g[1] / 12 + g[2] / 6,
                         g[0] / 24 - g[1] / 12 + g[2] / 6, g[2]]
                for i in 0..<6 { transformed[i][o * channels + c] = Float(u[i]) }
            }
        }
        return .init(tiles: lines * perLine, inputRows: inputRows, outputRows: outputRows,
                     filters: transformed.map { PackedMatrix($0, rows: rows, k: channels) },
                     bias: bias.map { $0 + [Float](repeating: 0, count: rows - outChannels) },
                     zeros: [Float](repeating: 0, count: channels))
    }

    /// Whether filters W [rows][size] are a windowed real DFT, to within float rounding: with
    /// F = size / 2 + 1 bins, rows k < F are window[n] cos(2 pi k n / size) and rows F + k are
    /// sign window[n] sin(2 pi k n / size) (both parts), or the F rows are the cosines alone
    /// (the real part) or the sines alone (the imaginary part), as an STFT exported as two
    /// convolutions has them.
    static func dftBasis(_ w: [Float], size: Int, rows: Int) -> FFTConvStep.Basis? {
        let bins = size / 2 + 1
        guard size >= 8, rows == 2 * bins || rows == bins, w.count == rows * size else { return nil }
        func angle(_ k: Int, _ n: Int) -> Double { 2 * Double.pi * Double((k * n) % size) / Double(size) }
        // Row 0 of the cosines is the window itself; the sines need one of their rows per sample
        // (the sines of samples 0 and size / 2 are all zero: their window value is never used).
        let cosinesFirst = rows == 2 * bins || (0..<size).contains { w[$0] != 0 }
        var window: [Float]
        var sign = 1.0
        if cosinesFirst {
            window = Array(w[0..<size])
        } else {
            var raw = [Double](repeating: 0, count: size)
            for n in 0..<size {
                let k = (0..<bins).max { abs(sin(angle($0, n))) < abs(sin(angle($1, n))) } ?? 0
                let s = sin(angle(k, n))
                if abs(s) > 0.5 { raw[n] = Double(w[k * size + n]) / s }
            }
            sign = raw.reduce(0, +) < 0 ? -1 : 1
            window = raw.map { Float(sign * $0) }
        }
        let scale = window.map { Double(abs($0)) }.max() ?? 0
        guard scale > 0, scale.isFinite else { return nil }
        let part: FFTConvStep.Part = rows == 2 * bins ? .both : cosinesFirst ? .real : .imaginary
        if part == .both {
            var correlation = 0.0
            for n in 0..<size { correlation += Double(w[(bins + 1) * size + n]) * Double(window[n]) * sin(angle(1, n)) }
            sign = correlation < 0 ? -1 : 1
        }
        let tolerance = 1e-5 * scale
        for k in 0..<bins {
            for n in 0..<size {
                let c = Double(window[n]) * cos(angle(k, n)), s = sign * Double(window[n]) * sin(angle(k, n))
                switch part {
                case .both: guard abs(Double(w[k * size + n]) - c) <= tolerance, abs(Double(w[(bins + k) * size + n]) - s) <= tolerance else { return nil }
                case .real: guard abs(Double(w[k * size + n]) - c) <= tolerance else { return nil }
                case .imaginary: guard abs(Double(w[k * size + n]) - s) <= tolerance else { return nil }
                }
            }
        }
        return FFTConvStep.Basis(window: window, sign: Float(sign), part: part)
    }

    /// MatMul by a constant 2-D matrix; Gemm with constant B, A not transposed, and a bias of one value per column.
    private mutating func dense(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        guard inputs.count >= 2, let a = inputs[0], let b = inputs[1], fixed.contains(g.inputs[1]), b.rank == 2,
              b.dtype == .float32, let aRef = ref(g.inputs[0]), a.rank >= 1 else { return nil }
        let n = node(g, inputs)
        var weight: [Float]  // [columns][k]
        var bias: [Float]? = nil
        let k: Int, columns: Int
        if g.op == "MatMul" {
            (k, columns) = (b.shape[0], b.shape[1])
            guard a.shape.last == k else { return nil }
            weight = transposed(b.floats, rows: k, columns: columns)
        } else {
            guard a.rank == 2, try n.int("transA", default: 0) == 0 else { return nil }
            let transB = try n.int("transB", default: 0) != 0
            (k, columns) = transB ? (b.shape[1], b.shape[0]) : (b.shape[0], b.shape[1])
            guard a.shape[1] == k else { return nil }
            weight = transB ? b.floats : transposed(b.floats, rows: k, columns: columns)
            let alpha = try n.float("alpha", default: 1), beta = try n.float("beta", default: 1)
            if alpha != 1 { weight = weight.map { $0 * alpha } }
            if inputs.count > 2, let c = inputs[2] {
                guard fixed.contains(g.inputs[2]), c.dtype == .float32 else { return nil }
                if c.count == columns, c.shape.last == columns, c.shape.dropLast().allSatisfy({ $0 == 1 }) {
                    bias = c.floats.map { $0 * beta }
                } else if c.count == 1 {
                    bias = [Float](repeating: c.floats[0] * beta, count: columns)
                } else {
                    return nil
                }
            }
        }
        let rows = a.count / max(k, 1)
        guard k > 0, columns > 0, outputs[0].count == rows * columns else { return nil }
        let y = allocate(outputs[0].count)
        refs[g.outputs[0]] = y
        steps.append(DenseStep(x: aRef, y: y, rows: rows, packed: PackedMatrix(weight, rows: columns, k: k), bias: bias))
        return "packed product"
    }

    private func transposed(_ m: [Float], rows: Int, columns: Int) -> [Float] {
        var t = [Float](repeating: 0, count: m.count)
        for r in 0..<rows { for c in 0..<columns { t[c * rows + r] = m[r * columns + c] } }
        return t
    }

    /// LSTM forward, layout 0, default activations, no clip or peepholes, full sequences.
    private mutating func lstm(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        guard inputs.count >= 3, let x = inputs[0], let w = inputs[1], let r = inputs[2], let xRef = ref(g.inputs[0]),
              fixed.contains(g.inputs[1]), fixed.contains(g.inputs[2]), x.rank == 3, r.rank == 3 else { return nil }
        let n = node(g, inputs)
        guard try n.string("direction", default: "forward") == "forward", try n.int("layout", default: 0) == 0,
              try n.float("clip") == nil, try n.int("input_forget", default: 0) == 0 else { return nil }
        if let names = try n.strings("activations"), names.map({ $0.lowercased() }) != ["sigmoid", "tanh", "tanh"] { return nil }
        func given(_ i: Int) -> Bool { i < inputs.count && inputs[i] != nil }
        guard !given(4), !given(7) else { return nil }
        if given(3), !fixed.contains(g.inputs[3]) { return nil }
        let (steps, batch, inputSize, hidden) = (x.shape[0], x.shape[1], x.shape[2], r.shape[2])
        guard w.shape == [1, 4 * hidden, inputSize], r.shape == [1, 4 * hidden, hidden], hidden > 0 else { return nil }
        let b = given(3) ? inputs[3]!.floats : [Float](repeating: 0, count: 8 * hidden)
        // Rows in the cell kernel's order i, f, g, o; ONNX's is i, o, f, c.
        let onnxGate = [0, 2, 3, 1]
        var input = [Float](repeating: 0, count: 4 * hidden * inputSize)
        var recurrent = [Float](repeating: 0, count: 4 * hidden * hidden)
        var bias = [Float](repeating: 0, count: 4 * hidden)
        for q in 0..<4 {
            for j in 0..<hidden {
                let row = onnxGate[q] * hidden + j, dst = q * hidden + j
                for i in 0..<inputSize { input[dst * inputSize + i] = w.floats[row * inputSize + i] }
                for i in 0..<hidden { recurrent[dst * hidden + i] = r.floats[row * hidden + i] }
                bias[dst] = b[row] + b[4 * hidden + row]
            }
        }
        var h0: Ref?, c0: Ref?
        if given(5) { guard let ref = ref(g.inputs[5]) else { return nil }; h0 = ref }
        if given(6) { guard let ref = ref(g.inputs[6]) else { return nil }; c0 = ref }
        // The input products of every step and batch row, [steps][batch][4 * hidden].
        let products = allocate(steps * batch * 4 * hidden)
        self.steps.append(DenseStep(x: xRef, y: products, rows: steps * batch, packed: PackedMatrix(input, rows: 4 * hidden, k: inputSize),
                                    bias: bias))
        var outs: [Ref?] = []
        for (j, name) in g.outputs.enumerated() {
            guard !name.isEmpty else { outs.append(nil); continue }
            let ref = allocate(outputs[j].count)
            refs[name] = ref
            outs.append(ref)
        }
        while outs.count < 3 { outs.append(nil) }
        let step = LSTMStep(inputProducts: products, h0: h0, c0: c0, y: outs[0], yh: outs[1], yc: outs[2], steps: steps, batch: batch,
                            hidden: hidden, recurrent: PackedMatrix(recurrent, rows: 4 * hidden, k: hidden))
        scratchSize = max(scratchSize, batch * (4 * hidden + 2 * hidden))
        self.steps.append(step)
        return "LSTM cell"
    }

    private mutating func reduce(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        guard let x = inputs.first ?? nil, x.dtype == .float32, let xRef = ref(g.inputs[0]),
              let (layout, _) = try Reductions.reduction(node(g, inputs), shape: x.shape),
              layout.starts.count == outputs[0].count, !layout.members.isEmpty else { return nil }
        let y = allocate(outputs[0].count)
        refs[g.outputs[0]] = y
        steps.append(ReduceStep(op: g.op, x: xRef, y: y, layout: layout))
        return "reduction"
    }

    /// MaxPool (without its Indices output) and AveragePool: each output's window as a list of
    /// input positions, taken in the reference kernel's order.
    private mutating func pool(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        guard g.outputs.count == 1 || g.outputs.dropFirst().allSatisfy(\.isEmpty), let x = inputs.first ?? nil,
              let xRef = ref(g.inputs[0]), x.rank == 3 || x.rank == 4, let kernel = try node(g, inputs).ints("kernel_shape") else { return nil }
        let n = node(g, inputs)
        let ceilMode = try n.int("ceil_mode", default: 0) != 0
        let window = try Window(n, input: Array(x.shape[2...]), kernel: kernel, pooling: true, ceilMode: ceilMode)
        let includePad = try n.int("count_include_pad", default: 0) != 0
        let pw2 = PlaneWindow(spatial: Array(x.shape[2...]), kernel: kernel, window)
        let (height, width, kh, kw, oh, ow) = (pw2.height, pw2.width, pw2.kh, pw2.kw, pw2.oh, pw2.ow)
        let (sh, sw, dh, dw, ph, pw, eh, ew) = (pw2.sh, pw2.sw, pw2.dh, pw2.dw, pw2.ph, pw2.pw, pw2.eh, pw2.ew)
        let planes = x.shape[0] * x.shape[1]
        guard oh * ow > 0, planes * oh * ow == outputs[0].count, x.count < Int(Int32.max) else { return nil }
        // One plane's windows; every plane is the same at another offset.
        var starts: [Int32] = [0], members: [Int32] = [], divisors: [Float] = []
        for oy in 0..<oh {
            for ox in 0..<ow {
                var padded = 0
                for i in 0..<kh {
                    let r = oy * sh - ph + i * dh
                    guard r >= -ph, r < height + eh else { continue }
                    for j in 0..<kw {
                        let c = ox * sw - pw + j * dw
                        guard c >= -pw, c < width + ew else { continue }
                        padded += 1
                        if r >= 0, r < height, c >= 0, c < width { members.append(Int32(r * width + c)) }
                    }
                }
                let valid = members.count - Int(starts[starts.count - 1])
                starts.append(Int32(members.count))
                divisors.append(Float(includePad ? padded : valid))
            }
        }
        let y = allocate(outputs[0].count)
        refs[g.outputs[0]] = y
        steps.append(PoolStep(max: g.op == "MaxPool", x: xRef, y: y, planes: planes, plane: height * width, starts: starts,
                                    members: members, divisors: divisors))
        return "pooling"
    }

    // MARK: Element-wise

    private mutating func unary(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) -> String? {
        guard let kind = UnaryStep.Kind(rawValue: g.op), let x = inputs.first ?? nil, x.dtype == .float32,
              let xRef = ref(g.inputs[0]) else { return nil }
        var (alpha, beta): (Float, Float) = (0, 0)
        if kind == .relu, fuse(.unary(Int32(EARSHOT_RELU), alpha: 0), reading: g.inputs[0], as: xRef, into: g.outputs[0]) {
            return "with the Conv"
        }
        if kind == .leakyRelu, case let .float(a) = g.attributes["alpha"] ?? .float(0.01),
           fuse(.unary(Int32(EARSHOT_LEAKY_RELU), alpha: a), reading: g.inputs[0], as: xRef, into: g.outputs[0]) {
            return "with the Conv"
        }
        var bounds: [Ref?] = [nil, nil]
        switch kind {
        case .leakyRelu:
            guard case let .float(a) = g.attributes["alpha"] ?? .float(0.01) else { return nil }
            alpha = a
        case .clip:
            // Bounds are inputs (opset 11 on): each a single value (fixed or computed), or omitted.
            for i in [1, 2] where i < inputs.count {
                guard let t = inputs[i] else { continue }
                guard t.count == 1, t.dtype == .float32, let r = ref(g.inputs[i]) else { return nil }
                bounds[i - 1] = r
            }
        default:
            guard inputs.count == 1 else { return nil }
        }
        let y = allocate(outputs[0].count)
        refs[g.outputs[0]] = y
        steps.append(UnaryStep(kind: kind, x: xRef, y: y, alpha: alpha, beta: beta, low: bounds[0], high: bounds[1]))
        return "element-wise"
    }

    /// Fuses an element-wise op into the Conv step just before it, when that Conv's output (or
    /// what is fused into it so far) is this op's input and nothing else reads it: the op's output
    /// is then the Conv's output, in place.
    private mutating func fuse(_ op: ConvStep.Epilogue, reading name: String, as input: Ref, into output: String) -> Bool {
        guard readers[name, default: 0] == 1, var conv = steps.last as? ConvStep, conv.y == input else { return false }
        conv.fuse(op)
        steps[steps.count - 1] = conv
        refs[output] = input
        return true
    }

    private mutating func binary(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) -> String? {
        guard var kind = BinaryStep.Kind(rawValue: g.op), inputs.count == 2, let a = inputs[0], let b = inputs[1],
              a.dtype == .float32, b.dtype == .float32, outputs[0].dtype == .float32 else { return nil }
        let shape = outputs[0].shape
        if kind == .pow, fixed.contains(g.inputs[1]), b.scalarFloat == 2 { kind = .square }
        guard let aRef = ref(g.inputs[0]), let bRef = ref(g.inputs[1]) else { return nil }
        if let op: Int32 = kind == .max ? Int32(EARSHOT_MAX) : kind == .min ? Int32(EARSHOT_MIN) : nil, a.shape == shape,
           fixed.contains(g.inputs[1]), let value = b.scalarFloat,
           fuse(.binary(op, value), reading: g.inputs[0], as: aRef, into: g.outputs[0]) {
            return "with the Conv"
        }
        let y = allocate(outputs[0].count)
        refs[g.outputs[0]] = y
        steps.append(BinaryStep(kind: kind, a: aRef, b: bRef, y: y,
                                        mapA: BinaryStep.map(a.shape, to: shape), mapB: BinaryStep.map(b.shape, to: shape)))
        return "element-wise"
    }
}

extension Builder {
    /// A comparison of two float tensors that only Wheres read (as their condition): no step of
    /// its own, the Where compares as it selects.
    mutating func condition(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) -> String? {
        guard let kind = SelectStep.Comparison(rawValue: g.op), outputs.count == 1, conditionsOnly.contains(g.outputs[0]),
              inputs.count == 2, let a = inputs[0], let b = inputs[1], a.dtype == .float32, b.dtype == .float32,
              let aRef = ref(g.inputs[0]), let bRef = ref(g.inputs[1]) else { return nil }
        let shape = outputs[0].shape
        conditions[g.outputs[0]] = .init(kind: kind, a: aRef, b: bRef, mapA: BinaryStep.map(a.shape, to: shape),
                                         mapB: BinaryStep.map(b.shape, to: shape), shape: shape)
        return "with the Where"
    }

    /// Where(condition, X, Y) on floats, its condition a comparison compiled into it.
    mutating func select(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) -> String? {
        guard inputs.count == 3, let condition = conditions[g.inputs[0]], let x = inputs[1], let y = inputs[2],
              x.dtype == .float32, y.dtype == .float32, outputs[0].dtype == .float32 else { return nil }
        let shape = outputs[0].shape
        // A choice of one whole tensor of codes or another (a state kept or replaced) stays codes.
        if x.shape == shape, y.shape == shape, condition.a.count == 1, condition.b.count == 1, refs[g.inputs[1]]?.coded == true || refs[g.inputs[2]]?.coded == true,
           let xHeld = codes(g.inputs[1]), let yHeld = codes(g.inputs[2]) {
            let out = allocateCodes(outputs[0].count)
            refs[g.outputs[0]] = out
            steps.append(SelectStep(condition: condition, conditionMap: nil, x: xHeld, y: yHeld, out: out, mapX: nil, mapY: nil))
            return "element-wise"
        }
        guard let xRef = ref(g.inputs[1]), let yRef = ref(g.inputs[2]) else { return nil }
        let out = allocate(outputs[0].count)
        refs[g.outputs[0]] = out
        steps.append(SelectStep(condition: condition, conditionMap: BinaryStep.map(condition.shape, to: shape), x: xRef, y: yRef, out: out,
                                mapX: BinaryStep.map(x.shape, to: shape), mapY: BinaryStep.map(y.shape, to: shape)))
        return "element-wise"
    }
}

/// A copy of `count` values to `dst` from element `src` of source `source`, or (source -1)
/// `count` copies of `fill`.
struct Run: Sendable {
    var dst: Int
    var source: Int
    var src: Int
    var count: Int
    var fill: Float

    /// Single-element runs in output order joined where they continue each other.
    static func joined(_ elements: [Run]) -> [Run] {
        var runs: [Run] = []
        for e in elements.sorted(by: { $0.dst < $1.dst }) {
            if var last = runs.last, last.dst + last.count == e.dst, last.source == e.source,
               e.source >= 0 ? last.src + last.count == e.src : last.fill.bitPattern == e.fill.bitPattern {
                last.count += e.count
                runs[runs.count - 1] = last
            } else {
                runs.append(e)
            }
        }
        return runs
    }

    /// Applies the runs to codes (a fill is a whole number in the int8 range): sources[i] is
    /// source i's first code.
    @inline(__always)
    static func applyCodes(_ runs: UnsafeBufferPointer<Run>, to y: UnsafeMutableRawPointer, from sources: (Int) -> UnsafeRawPointer) {
        for r in runs {
            if r.source < 0 {
                memset(y + r.dst, Int32(Int8(r.fill)), r.count)
            } else {
                (y + r.dst).copyMemory(from: sources(r.source) + r.src, byteCount: r.count)
            }
        }
    }

    /// Applies the runs: sources[i] is source i's first value.
    @inline(__always)
    static func apply(_ runs: UnsafeBufferPointer<Run>, to y: UnsafeMutablePointer<Float>, from sources: (Int) -> UnsafePointer<Float>) {
        for r in runs {
            if r.count == 1 {
                y[r.dst] = r.source < 0 ? r.fill : sources(r.source)[r.src]
            } else if r.source < 0 {
                (y + r.dst).update(repeating: r.fill, count: r.count)
            } else {
                (y + r.dst).update(from: sources(r.source) + r.src, count: r.count)
            }
        }
    }
}
