/// Compiles a graph into a `GraphPlan`'s steps (see `GraphPlan`): one pass over the nodes on the
/// reference kernels gives every shape and folds what does not depend on the inputs, then each
/// node is lowered to its op family's step (`compile`). A family's lowering is an extension of
/// `Builder` in the family's folder, beside its step (`Convolution/Builder+Convolution.swift` and
/// `ConvStep.swift`, ...); the passes over the finished steps are in `Builder+Fusion.swift`.
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
    /// Each place `allocate` gave, in floats, in order: they tile the arena (`GraphPlan.Layout`).
    var blocks: [Range<Int>] = []
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
    /// Conv, Gemm and MatMul outputs whose rounding a log of a large gain magnifies (`amplifiedByLog`) and products
    /// of a hybrid op's integers (`integerProducts`): computed as the product, never an FFT.
    var directProducts = Set<String>()
    /// Of them, the products of a hybrid op's integers (`integerProducts`), run on integers where
    /// they can be (`hybridConv`).
    var integerSums = Set<String>()

    /// The products' arithmetic (`Precision`).
    let precision: Precision
    /// Nodes whose products stay fp32 when `precision` is bf16 (`GraphPlan.init`'s `fp32Nodes`).
    let fp32Nodes: Set<String>

    init(constants: [String: GraphTensor], opset: Int, codes: Set<String> = [], precision: Precision = .fp32, fp32Nodes: Set<String> = []) {
        self.constants = constants
        self.opset = opset
        self.codes = codes
        self.precision = precision
        self.fp32Nodes = fp32Nodes
    }

    /// The arithmetic of `g`'s products: the plan's, except fp32 for a node kept in fp32
    /// (`fp32Nodes`) and for a Conv whose rounding a log magnifies (`directProducts`).
    func precision(of g: GraphNode) -> Precision {
        fp32Nodes.contains(g.name) || g.outputs.contains(where: directProducts.contains) ? .fp32 : precision
    }

    /// How a product step is described (`GraphPlan.kernels`): `kind`, and in bf16 when it is.
    func described(_ kind: String, _ precision: Precision) -> String { precision == .bf16 ? kind + ", bf16" : kind }

    mutating func allocate(_ count: Int) -> Ref {
        let ref = Ref(shared: false, offset: arenaSize, count: count)
        block((count + 15) / 16 * 16)
        return ref
    }

    /// Room for `count` int8 codes (whole floats of the arena, so that every place stays aligned).
    mutating func allocateCodes(_ count: Int) -> Ref {
        let floats = (count + 3) / 4
        let ref = Ref(shared: false, offset: arenaSize * 4, count: count, coded: true)
        block((floats + 15) / 16 * 16)
        return ref
    }

    private mutating func block(_ floats: Int) {
        blocks.append(arenaSize..<(arenaSize + floats))
        arenaSize += floats
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
        for node in nodes where node.op == .where && !node.inputs.isEmpty { asCondition[node.inputs[0], default: 0] += 1 }
        conditionsOnly = Set(asCondition.filter { readers[$0.key] == $0.value }.keys)
        integerSums = Self.integerProducts(nodes)
        directProducts = Self.amplifiedByLog(nodes, constants: constants).union(integerSums)
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
                    throw .op(node: node.name, op: node.op.rawValue, reason: "reads '\(name)', which nothing before it gives")
                }
                inputs.append(value)
            }
            let outs = try GraphOps.run(node.op, node: node.name, inputs: inputs, attributes: node.attributes, opset: opset,
                                        outputCount: node.outputs.count)
            for (name, value) in zip(node.outputs, outs) where !name.isEmpty { values[name] = value }
            let dependent = ![GraphOp.shape, .size].contains(node.op) && node.inputs.contains { !$0.isEmpty && !fixed.contains($0) }
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
                throw .unsupported(node: node.name, op: node.op.rawValue,
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
        fuseFFTPairs()
        fuseSpectra()
        fuseFraming()
        fuseRealPart()
        fuseMoves()
        linkChannelsLast()
    }

    /// The steps that read any part of `ref` (a place in the arena).
    func steps(reading ref: Ref) -> [Int] {
        steps.indices.filter { j in steps[j].reads.contains { $0.overlaps(ref) } }
    }

    /// Whether a graph output is read from any part of `ref`.
    func isOutput(_ ref: Ref) -> Bool { outputRefs.contains { $0.overlaps(ref) } }

    /// The node's compiled step, or (when its op has none, or its inputs do not allow it) its
    /// reference kernel's.
    private mutating func compile(_ node: GraphNode, inputs: [GraphTensor?], outputs: [GraphTensor]) throws(GraphError) {
        let compiled: String?
        switch node.op {
        case .identity, .reshape, .flatten, .squeeze, .unsqueeze, .transpose, .slice, .gather, .concat, .split, .pad, .expand, .tile,
             .cast:
            compiled = try move(node, inputs, outputs)
        case .conv:
            let hybrid = try hybridConv(node, inputs, outputs)
            compiled = hybrid != nil ? hybrid : try conv(node, inputs, outputs)
        case .matMul, .gemm: compiled = try dense(node, inputs, outputs)
        case .lstm: compiled = try lstm(node, inputs, outputs)
        case .reduceMean, .reduceSum, .reduceMax, .reduceMin: compiled = try reduce(node, inputs, outputs)
        case .maxPool, .averagePool: compiled = try pool(node, inputs, outputs)
        case .relu, .sigmoid, .tanh, .sqrt, .exp, .log, .neg, .abs, .erf, .softplus, .sin, .leakyRelu, .clip: compiled = unary(node, inputs, outputs)
        case .add, .sub, .mul, .div, .max, .min, .pow: compiled = binary(node, inputs, outputs)
        case .where: compiled = select(node, inputs, outputs)
        case .tfliteConv2D, .tfliteDepthwiseConv2D, .tfliteFullyConnected, .tfliteLookup, .quantize: compiled = try quantized(node, inputs, outputs)
        case .microFrontend: compiled = microFrontend(node, inputs, outputs)
        case .rfft: compiled = try rfft(node, inputs, outputs)
        case .tfliteHybridQuantize: compiled = try hybridQuantize(node, inputs, outputs)
        case .batchNormalization: compiled = try batchNormalization(node, inputs, outputs)
        // No compiled step: the reference kernel. (A comparison that only Wheres read is compiled
        // into them: `condition`.)
        case .and, .or, .not, .equal, .greater, .greaterOrEqual, .less, .lessOrEqual, .softmax, .layerNormalization,
             .gru, .constantOfShape, .range, .shape, .size:
            compiled = nil
        }
        if let compiled {
            kernels[node.name] = compiled
            return
        }
        try reference(node, inputs: inputs, outputs: outputs)
    }

    /// The node as its reference kernel sees it: for reading its attributes, with its errors.
    func node(_ g: GraphNode, _ inputs: [GraphTensor?]) -> Node {
        Node(name: g.name, op: g.op, opset: opset, inputs: inputs, attributes: g.attributes, outputCount: g.outputs.count)
    }
}
