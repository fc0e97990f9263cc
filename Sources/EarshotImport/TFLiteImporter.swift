import EarshotFeatures
import EarshotGraph
import EarshotModel
import EarshotTFLite
import Foundation

/// Turns a TFLite model into an Earshot package whose integer ops follow TFLite's reference
/// kernels bit for bit. The model's resource variables (VAR_HANDLE, READ_VARIABLE,
/// ASSIGN_VARIABLE; their first values from the CALL_ONCE init subgraph) become the stream's
/// state tensors, so a stream's whole state is one explicit value. Quantized ops become
/// `TFLiteConv2D`, `TFLiteDepthwiseConv2D`, `TFLiteFullyConnected` and `TFLiteLookup` with the
/// multipliers and shifts TFLite computes when it prepares them; ops that only move values
/// (RESHAPE, CONCATENATION, STRIDED_SLICE, SPLIT_V) become ONNX's. The step takes float
/// features, quantized as the model's input says (round half to even, as pymicro-wakeword
/// does), and gives the dequantized output as the score.
public struct TFLiteImporter {
    /// A value while the graph is read: its name in the package, its value on the first step
    /// (zero features, the variables' first values) and whether it is a constant.
    struct Value {
        var name: String
        var tensor: GraphTensor
        var constant: Bool
        /// Complex values (RFFT2D's), held with a last axis of 2 (real, imaginary).
        var complex = false
    }

    let path: String
    let model: TFLiteModel
    var values: [Int: Value] = [:]
    /// Constants already written to the package, by their value's name.
    var written: [String: String] = [:]
    /// An NHWC value's twin in NCHW (by the NHWC value's name), where a convolution or pool made it:
    /// what reads it channels-first reads the twin, so the Transposes between TFLite's NHWC ops
    /// cancel (a Transpose no one reads is pruned).
    var channelsFirst: [String: Value] = [:]
    /// A zero PAD's output (by name): its input and the pads [top, left, bottom, right] a
    /// convolution that reads it takes as its own.
    var zeroPadded: [String: (source: Value, pads: [Int])] = [:]
    /// A value a RESHAPE made of a single boolean (by name): that boolean, which an IF's Where reads.
    var reshapedCondition: [String: Value] = [:]
    /// The package's graph, written as the operators are read; every name in it from `unique`.
    var builder = GraphSpecBuilder()
    /// Resource tensor index → variable key.
    private var handles: [Int: String] = [:]
    /// Variable key → its first values (from the init subgraph).
    private var initial: [String: GraphTensor] = [:]
    /// Variable key → (state input name, the tensor now holding it, its shape), in first-read order.
    private var variables: [(key: String, input: String, current: String, shape: [Int], value: GraphTensor)] = []

    /// A .tflite model as a package's manifest and tensors.
    /// - Throws: `ImportError` naming the file, operator or tensor and the reason.
    public static func importModel(path: String, options: ImportOptions) throws(ImportError) -> (manifest: ModelManifest, tensors: [String: Tensor]) {
        let model: TFLiteModel
        do { model = try TFLiteModel.read(path: path) } catch { throw .tflite(error) }
        var importer = TFLiteImporter(path: path, model: model)
        return try importer.build(options)
    }

    private init(path: String, model: TFLiteModel) {
        self.path = path
        self.model = model
    }

    private func interface(_ reason: String, _ hint: String) -> ImportError { .interface(path: path, reason: reason, hint: hint) }

    private mutating func build(_ options: ImportOptions) throws(ImportError) -> (manifest: ModelManifest, tensors: [String: Tensor]) {
        let operators = model.subgraphs.reduce(0) { $0 + $1.operators.count }
        guard operators <= GraphSpec.maxNodes else {
            throw interface("\(operators) operators, more than the limit of \(GraphSpec.maxNodes)", "a streaming model has a few hundred at most")
        }
        let graph = model.subgraphs[0]
        let inputs = graph.inputs.filter { !graph.tensors[$0].isVariable }
        guard inputs.count == 1 else {
            throw interface("the main subgraph has \(inputs.count) inputs", "a streaming model takes one input (its features); its state lives in variables")
        }
        guard graph.outputs.count == 1 else {
            throw interface("the main subgraph has \(graph.outputs.count) outputs", "a model with one output (its scores) is imported")
        }
        let input = graph.tensors[inputs[0]]
        var shape = input.shape.map { max($0, 1) }
        let microFrontend = options.frontEnd == "microfrontend"
        // A float input whose last axis is dynamic (melspectrogram.tflite's [1, -1]) takes the
        // block the options give, as the interpreter's ResizeInputTensor does.
        let resized = !microFrontend && input.type == .float32 && options.chunkSamples != nil && input.signature.last == -1 && !shape.isEmpty
        if resized, let chunk = options.chunkSamples { shape[shape.count - 1] = chunk + options.contextSamples }
        let audioName = builder.unique(microFrontend ? "samples" : "features")
        var audioShape = shape
        var featuresName = audioName
        var step = GraphTensor(shape: shape, floats: [Float](repeating: 0, count: shape.reduce(1, *)))
        // TFLite Micro's audio front end: audio in, its frames grouped as the model takes them.
        var frontEndStates: [GraphSpec.StateSpec] = []
        var startedName = ""
        if microFrontend {
            let channels = MicroFrontend.channels
            guard shape.count == 3, shape[0] == 1, shape[2] == channels, shape[1] >= 3 else {
                throw interface("input '\(input.name)' has shape \(shape)", "the microfrontend front end feeds models that take [1, frames, 40] with 3 or more frames a step")
            }
            let stride = shape[1]
            audioShape = [1, MicroFrontend.windowSamples - MicroFrontend.stepSamples + MicroFrontend.stepSamples * stride]
            var names: [String] = [audioName]
            var outs: [String] = []
            for (base, size) in [("front end noise", 2 * channels), ("front end pending", (stride - 2) * channels), ("front end started", 1)] {
                let name = builder.unique(base), next = builder.unique("\(base) (next)")
                frontEndStates.append(.init(input: name, output: next, shape: [1, size], initial: builder.weight(unique: "\(base) (first values)", GraphTensor(shape: [1, size], floats: [Float](repeating: 0, count: size)))))
                names.append(name)
                outs.append(next)
            }
            startedName = names[3]
            featuresName = builder.unique("features")
            let zeros = { (n: Int) in GraphTensor(shape: [1, n], floats: [Float](repeating: 0, count: n)) }
            step = try runAll("MicroFrontend", name: "front end", inputs: [zeros(audioShape[1]), zeros(2 * channels), zeros((stride - 2) * channels), zeros(1)],
                              attributes: [:], op: "front end", outputs: 4)[0]
            builder.node("MicroFrontend", "front end", names, [featuresName] + outs)
        }
        switch input.type {
        case .float32:
            values[inputs[0]] = Value(name: featuresName, tensor: step, constant: false)
        case .int8, .uint8:
            guard let q = input.quantization, q.scales.count == 1, q.zeroPoints.count <= 1, q.scales[0] > 0, q.scales[0].isFinite else {
                throw interface("input '\(input.name)' is \(input.type) without one scale", "the input must be float or quantized per tensor")
            }
            let (low, high) = input.type == .int8 ? (-128, 127) : (0, 255)
            let attributes: [String: GraphSpec.AttributeValue] = [
                "scale": .float(Double(q.scales[0])), "zero_point": .int(q.zeroPoints.first ?? 0), "min": .int(Int64(low)), "max": .int(Int64(high)),
            ]
            values[inputs[0]] = try apply("Quantize", "quantize features", [Value(name: featuresName, tensor: step, constant: false)],
                                          output: builder.unique(input.name), attributes: attributes, op: "input")
        default:
            throw interface("input '\(input.name)' is \(input.type)", "the input must be float32, int8 or uint8")
        }
        for (index, op) in graph.operators.enumerated() { try read(op, index: index, graph: graph) }

        // The score: the output, dequantized as the reference does ((q - zero point) * scale, in float).
        let outIndex = graph.outputs[0]
        guard var score = values[outIndex], !score.constant else { throw interface("the output does not depend on the input", "check the model") }
        let output = graph.tensors[outIndex]
        if output.type != .float32 {
            guard let q = output.quantization, q.scales.count == 1, q.scales[0].isFinite else {
                throw interface("output '\(output.name)' is \(output.type) without one scale", "the output must be float or quantized per tensor")
            }
            let zero = constant("output zero point", GraphTensor(shape: [1], floats: [Float(q.zeroPoints.first ?? 0)]))
            let scale = constant("output scale", GraphTensor(shape: [1], floats: [q.scales[0]]))
            let shifted = try apply("Sub", "dequantize (zero point)", [score, zero], output: builder.unique("\(output.name) - zero point"), op: "output")
            score = try apply("Mul", "dequantize (scale)", [shifted, scale], output: builder.unique("score"), op: "output")
        }
        // Variables written in the step are the stream's state; one only read is a constant.
        var states: [GraphSpec.StateSpec] = []
        for v in variables where v.current != v.input {
            let first = initial[v.key] ?? GraphTensor(shape: v.shape, floats: [Float](repeating: 0, count: v.shape.reduce(1, *)))
            let name = builder.weight(unique: "\(v.key) (first values)", first)
            states.append(.init(input: v.input, output: v.current, shape: v.shape, initial: name))
        }
        if microFrontend {
            // The front end's first step has no group of frames: the model's states stay at their
            // first values and the score is 0 (state = started > 0 ? next : first).
            let started = Value(name: startedName, tensor: GraphTensor(shape: [1, 1], floats: [0]), constant: false)
            let zero = constant("zero", GraphTensor(shape: [1], floats: [0]))
            let hasStarted = try apply("Greater", "front end started", [started, zero], output: builder.unique("front end has started"), op: "front end")
            for i in states.indices {
                guard let first = states[i].initial, let t = builder.tensors[first] else { continue }
                let firstValues = Value(name: first, tensor: GraphTensor(shape: t.shape, floats: t.values), constant: true)
                let next = Value(name: states[i].output, tensor: firstValues.tensor, constant: false)
                states[i].output = try apply("Where", "\(next.name) (gated)", [hasStarted, next, firstValues], output: builder.unique("\(next.name) (gated)"),
                                             op: "front end").name
            }
            score = try apply("Mul", "score (gated)", [score, started], output: builder.unique("score (gated)"), op: "front end")
            states = frontEndStates + states
        }
        builder.prune(keeping: [score.name] + states.map(\.output))
        let spec = builder.spec(opset: 13, audioInput: audioName, audioShape: audioShape, scoreOutput: score.name, states: states)
        let count = score.tensor.count
        let labels = options.labels ?? (count == 1 ? [options.name] : (0..<count).map { "class\($0)" })
        try options.checkLabels(labels, scores: count, path: path)
        let block = shape.reduce(1, *)
        var context = microFrontend ? MicroFrontend.windowSamples - MicroFrontend.stepSamples : resized ? options.contextSamples : 0
        var chunk = microFrontend ? audioShape[1] - context : block - context
        let windowed = options.windowed && !microFrontend
        if windowed {
            // A fixed-window classifier: the window is the input, hop new samples a step.
            guard shape.last == block else {
                throw interface("input '\(input.name)' has shape \(shape)", "--window takes a model whose input is one window of samples, [1, N]")
            }
            (chunk, context) = try options.window(length: block, path: path)
        }
        var manifest = options.manifest(
            source: "earshot import \(URL(fileURLWithPath: path).lastPathComponent) (TFLite schema \(model.version))",
            audio: .init(sampleRate: microFrontend ? MicroFrontend.sampleRate : options.sampleRate,
                         chunkSamples: chunk, contextSamples: context),
            frontEnd: .init(type: microFrontend || windowed ? .samples : .features, nFFT: 0, hopLength: 0), labels: labels,
            decision: options.metadata.decision)
        manifest.graph = spec
        let used = Set(spec.nodes.flatMap(\.inputs)).union(states.compactMap(\.initial))
        return (manifest, builder.tensors.filter { used.contains($0.key) })
    }

    func run(_ op: String, name: String, inputs: [GraphTensor?], attributes: [String: GraphSpec.AttributeValue] = [:],
                     op tflite: String, outputs: Int = 1) throws(ImportError) -> GraphTensor {
        try runAll(op, name: name, inputs: inputs, attributes: attributes, op: tflite, outputs: outputs)[0]
    }

    /// Adds a node of the importer's own (named `name`, on behalf of `tflite`) reading `inputs`
    /// (their names and values on the first step), runs it on those values, and gives its output.
    mutating func apply(_ op: String, _ name: String, _ inputs: [Value], output: String,
                                attributes: [String: GraphSpec.AttributeValue] = [:], op tflite: String) throws(ImportError) -> Value {
        let tensor = try run(op, name: name, inputs: inputs.map(\.tensor), attributes: attributes, op: tflite)
        builder.node(op, name, inputs.map(\.name), [output], attributes.isEmpty ? nil : attributes)
        return Value(name: output, tensor: tensor, constant: false)
    }

    /// A float constant as a weight, with its value.
    mutating func constant(_ base: String, _ t: GraphTensor) -> Value { Value(name: builder.weight(unique: base, t), tensor: t, constant: true) }

    func runAll(_ op: String, name: String, inputs: [GraphTensor?], attributes: [String: GraphSpec.AttributeValue],
                        op tflite: String, outputs: Int) throws(ImportError) -> [GraphTensor] {
        do {
            return try GraphOps.run(op, node: name, inputs: inputs, attributes: attributes.mapValues(\.graphAttribute), opset: 13, outputCount: outputs)
        } catch {
            throw .node(path: path, node: name, op: tflite, reason: error.reason, hint: "the model's shapes or quantization do not fit the op")
        }
    }

    // MARK: Operators

    mutating func read(_ op: TFLiteOperator, index: Int, graph: TFLiteSubgraph) throws(ImportError) {
        // TFLite names a fused op's output after every op fused into it, joined by ';': the first names it.
        let label = op.outputs.first.map { String(graph.tensors[$0].name.split(separator: ";").first ?? "") }.flatMap { $0.isEmpty ? nil : $0 }
            ?? "operator \(index)"
        let path = self.path
        let fail = { (reason: String, hint: String) -> ImportError in
            .node(path: path, node: "operator \(index) '\(label)'", op: op.name, reason: reason, hint: hint)
        }
        func tensor(_ i: Int) throws(ImportError) -> TFLiteTensor { try Self.operand(op, i, graph, fail) }
        /// A computed or constant input's value.
        func value(_ i: Int) throws(ImportError) -> Value {
            let t = try tensor(i)
            if let v = values[op.inputs[i]] { return v }
            guard let ints = t.integers ?? t.floats.map({ $0.map { Int64($0) } }), t.data != nil else {
                throw fail("reads '\(t.name)', which nothing produced before it", "the operators must be in order")
            }
            let g = t.type == .float32 ? GraphTensor(shape: t.shape, floats: t.floats ?? []) : GraphTensor(shape: t.shape, integers: ints)
            return Value(name: t.name, tensor: g, constant: true)
        }
        func constantInts(_ i: Int) throws(ImportError) -> [Int] {
            let t = try tensor(i)
            guard let v = t.integers, t.data != nil else { throw fail("input \(i) '\(t.name)' is not a constant", "export the model with fixed shapes") }
            return v.map { Int(clamping: $0) }
        }
        func outputTensor(_ k: Int = 0) throws(ImportError) -> TFLiteTensor {
            guard k < op.outputs.count else { throw fail("has no output \(k)", "the file is damaged") }
            return graph.tensors[op.outputs[k]]
        }
        /// Emits a node for the op's outputs and checks their shapes against the file's.
        func emit(_ kind: String, inputs: [String], values inputValues: [GraphTensor?], attributes: [String: GraphSpec.AttributeValue] = [:],
                  outputs: [Int]? = nil) throws(ImportError) {
            let outs = outputs ?? op.outputs
            let results = try runAll(kind, name: label, inputs: inputValues, attributes: attributes, op: op.name, outputs: outs.count)
            var names: [String] = []
            for (k, o) in outs.enumerated() {
                let declared = graph.tensors[o].shape
                guard declared.isEmpty || results[k].shape.reduce(1, *) == declared.reduce(1, *) else {
                    throw fail("makes \(results[k].shape) where the file declares \(declared)", "the importer and the file disagree on this op's semantics")
                }
                let name = builder.unique(graph.tensors[o].name)
                names.append(name)
                values[o] = Value(name: name, tensor: results[k], constant: false)
            }
            builder.node(kind, label, inputs, names, attributes.isEmpty ? nil : attributes)
        }

        if isFloat(op, graph) {
            try readFloat(op, label: label, graph: graph, fail: fail)
            return
        }
        switch op.name {
        case "CALL_ONCE":
            guard case let .callOnce(sub) = op.options, sub > 0, sub < model.subgraphs.count else {
                throw fail("calls a subgraph that is not there", "the file is damaged")
            }
            try readInit(model.subgraphs[sub], index: sub)
        case "VAR_HANDLE":
            guard case let .varHandle(container, shared) = op.options, let out = op.outputs.first else { throw fail("no variable name", "the file is damaged") }
            handles[out] = container.isEmpty ? shared : container + "/" + shared
        case "READ_VARIABLE":
            let key = try variable(op.inputs.first, fail)
            let out = try outputTensor()
            if let k = variables.firstIndex(where: { $0.key == key }) {
                values[op.outputs[0]] = Value(name: variables[k].current, tensor: variables[k].value, constant: false)
            } else {
                let shape = out.shape.map { max($0, 1) }
                let name = builder.unique("state \(key)")
                let first = initial[key] ?? zeros(shape)
                guard first.count == shape.reduce(1, *) else { throw fail("variable \(key) holds \(first.count) values for shape \(shape)", "the file is damaged") }
                let value = GraphTensor(shape: shape, floats: first.floats)
                variables.append((key, name, name, shape, value))
                values[op.outputs[0]] = Value(name: name, tensor: value, constant: false)
            }
        case "ASSIGN_VARIABLE":
            let key = try variable(op.inputs.first, fail)
            let v = try value(1)
            guard let k = variables.firstIndex(where: { $0.key == key }) else {
                throw fail("assigns variable \(key) before any step reads it", "the runtime keeps variables that a step reads")
            }
            guard v.tensor.count == variables[k].shape.reduce(1, *), !v.constant else {
                throw fail("assigns \(v.tensor.shape) to variable \(key) of shape \(variables[k].shape)", "a state keeps one shape")
            }
            variables[k].current = v.name
            variables[k].value = GraphTensor(shape: variables[k].shape, floats: v.tensor.floats)
        case "RESHAPE":
            let x = try value(0)
            let shape = try outputTensor().shape
            let s = builder.integers(unique: "\(label) shape", shape.map(Int64.init), shape: [shape.count])
            try emit("Reshape", inputs: [x.name, s], values: [x.tensor, GraphTensor(shape: [shape.count], integers: shape.map(Int64.init))])
        case "CONCATENATION":
            guard case let .concatenation(axis, activation) = op.options, activation == 0 else {
                throw fail("a fused activation", "export the model without one on CONCATENATION")
            }
            let out = try outputTensor()
            var names: [String] = [], tensors: [GraphTensor?] = []
            for i in op.inputs.indices {
                let t = try tensor(i)
                guard t.quantization == out.quantization || (t.quantization?.scales == out.quantization?.scales
                                                             && t.quantization?.zeroPoints == out.quantization?.zeroPoints) else {
                    throw fail("input '\(t.name)' has other quantization than the output", "concatenations that requantize are not supported")
                }
                let v = try value(i)
                names.append(try materialize(v, label))
                tensors.append(v.tensor)
            }
            try emit("Concat", inputs: names, values: tensors, attributes: ["axis": .int(Int64(axis))])
        case "STRIDED_SLICE":
            guard case let .stridedSlice(beginMask, endMask, ellipsis, newAxis, shrink, offset) = op.options else { throw fail("no options", "the file is damaged") }
            guard ellipsis == 0, newAxis == 0, !offset else { throw fail("ellipsis, new-axis masks or offset", "export the slice without them") }
            let x = try value(0)
            let dims = x.tensor.shape
            let begin = try constantInts(1), end = try constantInts(2), strides = try constantInts(3)
            guard begin.count == dims.count, end.count == dims.count, strides.count == dims.count else {
                throw fail("begin, end and strides for \(dims.count) axes", "the file is damaged")
            }
            var starts: [Int64] = [], ends: [Int64] = [], steps: [Int64] = []
            for d in dims.indices {
                guard strides[d] > 0 else { throw fail("a stride of \(strides[d])", "slices with negative or zero strides are not supported") }
                var s = beginMask & (1 << d) != 0 ? 0 : begin[d]
                if s < 0 { s += dims[d] }
                s = min(max(s, 0), dims[d])
                var e = endMask & (1 << d) != 0 ? dims[d] : end[d]
                if endMask & (1 << d) == 0 && e < 0 { e += dims[d] }
                e = min(max(e, 0), dims[d])
                if shrink & (1 << d) != 0 { e = s + 1 }
                starts.append(Int64(s)); ends.append(Int64(e)); steps.append(Int64(strides[d]))
            }
            let axes = dims.indices.map(Int64.init)
            let names = [builder.integers(unique: "\(label) starts", starts, shape: [dims.count]), builder.integers(unique: "\(label) ends", ends, shape: [dims.count]),
                         builder.integers(unique: "\(label) axes", axes, shape: [dims.count]), builder.integers(unique: "\(label) steps", steps, shape: [dims.count])]
            let consts = [starts, ends, axes, steps].map { GraphTensor(shape: [dims.count], integers: $0) }
            if shrink == 0 {
                try emit("Slice", inputs: [x.name] + names, values: [x.tensor] + consts)
            } else {
                let sliced = try run("Slice", name: label, inputs: [x.tensor] + consts, op: op.name)
                let mid = builder.unique("\(label) (before shrinking)")
                builder.node("Slice", label, [x.name] + names, [mid])
                let shape = try outputTensor().shape
                let s = builder.integers(unique: "\(label) shape", shape.map(Int64.init), shape: [shape.count])
                try emit("Reshape", inputs: [mid, s], values: [sliced, GraphTensor(shape: [shape.count], integers: shape.map(Int64.init))])
            }
        case "SPLIT_V":
            let x = try value(0)
            var sizes = try constantInts(1)
            let axisValue = try constantInts(2)
            guard axisValue.count == 1 else { throw fail("the axis is not a scalar", "the file is damaged") }
            let rank = x.tensor.rank
            let axis = axisValue[0] < 0 ? axisValue[0] + rank : axisValue[0]
            guard axis >= 0, axis < rank else { throw fail("axis \(axisValue[0]) for rank \(rank)", "the file is damaged") }
            if let rest = sizes.firstIndex(of: -1) { sizes[rest] = x.tensor.shape[axis] - sizes.filter { $0 != -1 }.reduce(0, +) }
            let split = builder.integers(unique: "\(label) sizes", sizes.map(Int64.init), shape: [sizes.count])
            try emit("Split", inputs: [x.name, split], values: [x.tensor, GraphTensor(shape: [sizes.count], integers: sizes.map(Int64.init))],
                     attributes: ["axis": .int(Int64(axis))])
        case "CONV_2D", "DEPTHWISE_CONV_2D":
            let c = try convolution(op, x: try value(0), graph: graph, fail: fail)
            try emit(c.op, inputs: c.names, values: c.inputs, attributes: c.attributes)
        case "FULLY_CONNECTED":
            let activation = try Self.fullyConnectedOptions(op, fail).activation
            let x = try value(0), w = try tensor(1)
            let out = try outputTensor()
            let (inQ, outQ) = try quantization(try tensor(0), out, fail)
            guard let wQ = w.quantization, let weights = w.integers, w.type == .int8 || w.type == .uint8, w.shape.count == 2 else {
                throw fail("weights '\(w.name)' are not constant 8-bit integers [outputs, inputs]", "import int8 models")
            }
            let outputs = w.shape[0]
            let multipliers = try multipliers(input: inQ.scale, filter: wQ.scales, output: outQ.scale, channels: outputs, fail)
            var attributes = multipliers
            attributes["input_offset"] = .int(Int64(-inQ.zero))
            let weightsZero = wQ.zeroPoints.first ?? 0
            guard (-255...255).contains(weightsZero) else {
                throw fail("weights '\(w.name)' have the zero point \(weightsZero)", "8-bit weights have a zero point in -255...255")
            }
            attributes["weights_offset"] = .int(-weightsZero)
            attributes["output_offset"] = .int(Int64(outQ.zero))
            attributes["activation"] = .ints(try activationRange(activation, out, outQ, fail))
            attributes.merge(scales(inQ, outQ, filter: wQ.scales)) { $1 }
            let wName = builder.weight(unique: "\(w.name)", GraphTensor(shape: w.shape, floats: weights.map(Float.init)))
            var names = [x.name, wName], inputs: [GraphTensor?] = [x.tensor, GraphTensor(shape: w.shape, floats: weights.map(Float.init))]
            if op.inputs.count > 2, op.inputs[2] >= 0 {
                let b = try tensor(2)
                guard let bias = b.integers, b.type == .int32 else { throw fail("bias '\(b.name)' is not constant int32", "import int8 models") }
                names.append(builder.integers(unique: b.name, bias, shape: [bias.count]))
                inputs.append(GraphTensor(shape: [bias.count], integers: bias))
            }
            try emit("TFLiteFullyConnected", inputs: names, values: inputs, attributes: attributes)
        case "LOGISTIC", "TANH", "QUANTIZE":
            let x = try value(0)
            let out = try outputTensor()
            let table = try lookupTable(op.name, try tensor(0), out, fail)
            let (inQ, outQ) = try quantization(try tensor(0), out, fail)
            var attributes = scales(inQ, outQ, filter: nil)
            attributes["table"] = .ints(table.values)
            attributes["low"] = .int(table.low)
            attributes["function"] = .string(op.name)
            attributes["input_zero_point"] = .int(Int64(inQ.zero))
            attributes["output_zero_point"] = .int(Int64(outQ.zero))
            attributes["output_type"] = .string(out.type == .uint8 ? "uint8" : "int8")
            try emit("TFLiteLookup", inputs: [x.name], values: [x.tensor], attributes: attributes)
        default:
            throw .unsupportedOp(path: path, node: "operator \(index) '\(label)'", op: op.name, format: "TFLite",
                                 reason: "the importer takes CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, LOGISTIC, TANH, QUANTIZE, RESHAPE, "
                                    + "CONCATENATION, STRIDED_SLICE, SPLIT_V and resource variables, on int8 tensors")
        }
    }

    /// Input `i` of `op`.
    static func operand(_ op: TFLiteOperator, _ i: Int, _ graph: TFLiteSubgraph, _ fail: (String, String) -> ImportError) throws(ImportError) -> TFLiteTensor {
        guard i < op.inputs.count, op.inputs[i] >= 0 else { throw fail("input \(i) is missing", "the file is damaged") }
        return graph.tensors[op.inputs[i]]
    }

    /// FULLY_CONNECTED's options (int8, float and hybrid alike); shuffled weights (a layout for
    /// some Arm kernels) are refused.
    static func fullyConnectedOptions(_ op: TFLiteOperator, _ fail: (String, String) -> ImportError)
        throws(ImportError) -> (activation: Int, keepDims: Bool, asymmetric: Bool) {
        guard case let .fullyConnected(activation, format, keepDims, asymmetric) = op.options, format == 0 else {
            throw fail("shuffled weights", "export the model with default weights")
        }
        return (activation, keepDims, asymmetric)
    }

    private func zeros(_ shape: [Int]) -> GraphTensor { GraphTensor(shape: shape, floats: [Float](repeating: 0, count: shape.reduce(1, *))) }

    private func variable(_ index: Int?, _ fail: (String, String) -> ImportError) throws(ImportError) -> String {
        guard let index, index >= 0, let key = handles[index] else { throw fail("its resource is not a VAR_HANDLE's", "the file is damaged") }
        return key
    }

    /// A constant input used where a computed tensor is expected becomes a weight.
    private mutating func materialize(_ v: Value, _ label: String) throws(ImportError) -> String {
        guard v.constant else { return v.name }
        let floats = v.tensor.dtype == .float32 ? v.tensor.floats : v.tensor.integers.map(Float.init)
        return builder.weight(unique: v.name, GraphTensor(shape: v.tensor.shape, floats: floats))
    }

    /// The init subgraph: each variable's first value.
    private mutating func readInit(_ sub: TFLiteSubgraph, index: Int) throws(ImportError) {
        var local: [Int: String] = [:]
        for (i, op) in sub.operators.enumerated() {
            func fail(_ reason: String) -> ImportError { .node(path: path, node: "subgraph \(index) operator \(i)", op: op.name, reason: reason, hint: "an init subgraph gives variables constant values") }
            switch op.name {
            case "VAR_HANDLE":
                guard case let .varHandle(container, shared) = op.options, let out = op.outputs.first else { throw fail("no variable name") }
                local[out] = container.isEmpty ? shared : container + "/" + shared
            case "ASSIGN_VARIABLE":
                guard op.inputs.count == 2, let key = local[op.inputs[0]], op.inputs[1] >= 0 else { throw fail("no variable or value") }
                let t = sub.tensors[op.inputs[1]]
                guard let v = t.integers ?? t.floats.map({ $0.map { Int64($0) } }), t.data != nil else { throw fail("the value '\(t.name)' is not a constant") }
                initial[key] = GraphTensor(shape: t.shape, floats: t.type == .float32 ? (t.floats ?? []) : v.map(Float.init))
            default:
                throw fail("not supported in an init subgraph")
            }
        }
    }

    // MARK: Quantization

    private struct Affine { var scale: Float; var zero: Int }

    private func quantization(_ input: TFLiteTensor, _ output: TFLiteTensor, _ fail: (String, String) -> ImportError) throws(ImportError) -> (Affine, Affine) {
        func one(_ t: TFLiteTensor) throws(ImportError) -> Affine {
            guard t.type == .int8 || t.type == .uint8, let q = t.quantization, q.scales.count == 1, q.scales[0] > 0, q.scales[0].isFinite,
                  let z = Int(exactly: q.zeroPoints.first ?? 0), (-255...255).contains(z) else {
                throw fail("'\(t.name)' is \(t.type), not an 8-bit tensor quantized per tensor", "import int8 models")
            }
            return Affine(scale: q.scales[0], zero: z)
        }
        return (try one(input), try one(output))
    }

    /// The scales an integer op's multipliers come from, kept on its node for `earshot export`.
    private func scales(_ input: Affine, _ output: Affine, filter: [Float]?) -> [String: GraphSpec.AttributeValue] {
        var attributes: [String: GraphSpec.AttributeValue] = ["input_scale": .float(Double(input.scale)), "output_scale": .float(Double(output.scale))]
        if let filter { attributes["filter_scales"] = .floats(filter.map(Double.init)) }
        return attributes
    }

    /// Per output channel, TFLite's multiplier and shift for input * filter / output scales.
    private func multipliers(input: Float, filter: [Float], output: Float, channels: Int, _ fail: (String, String) -> ImportError) throws(ImportError) -> [String: GraphSpec.AttributeValue] {
        guard filter.count == 1 || filter.count == channels, filter.allSatisfy({ $0 > 0 && $0.isFinite }) else {
            throw fail("\(filter.count) filter scales for \(channels) channels", "the filter must be quantized per tensor or per output channel")
        }
        let (m, s) = Quantized.multipliers(input: input, filter: filter, output: output)
        return ["multipliers": .ints(m), "shifts": .ints(s)]
    }

    /// TFLite's CalculateActivationRangeQuantized.
    private func activationRange(_ activation: Int, _ t: TFLiteTensor, _ q: Affine, _ fail: (String, String) -> ImportError) throws(ImportError) -> [Int64] {
        guard let range = Self.activationRange(activation, unsigned: t.type != .int8, scale: q.scale, zero: q.zero) else {
            throw fail("fused activation \(activation)", "the importer takes none, RELU, RELU_N1_TO_1 and RELU6")
        }
        return range
    }

    /// TFLite's CalculateActivationRangeQuantized: the codes [min, max] a fused activation
    /// (0 none, 1 RELU, 2 RELU_N1_TO_1, 3 RELU6) leaves of an 8-bit output; nil for another.
    public static func activationRange(_ activation: Int, unsigned: Bool, scale: Float, zero: Int) -> [Int64]? {
        let (qmin, qmax) = unsigned ? (0, 255) : (-128, 127)
        // Beyond int32 the bound is outside [qmin, qmax] either way: held there, not converted.
        func quantize(_ f: Float) -> Int { zero + Int(max(-4e9, min(4e9, (f / scale).rounded(.toNearestOrAwayFromZero)))) }
        switch activation {
        case 0: return [Int64(qmin), Int64(qmax)]
        case 1: return [Int64(max(qmin, quantize(0))), Int64(qmax)]
        case 2: return [Int64(max(qmin, quantize(-1))), Int64(min(qmax, quantize(1)))]
        case 3: return [Int64(max(qmin, quantize(0))), Int64(min(qmax, quantize(6)))]
        default: return nil
        }
    }

    /// A convolution's node: its op, input names and values, and attributes.
    private mutating func convolution(_ op: TFLiteOperator, x: Value, graph: TFLiteSubgraph, fail: (String, String) -> ImportError)
        throws(ImportError) -> (op: String, names: [String], inputs: [GraphTensor?], attributes: [String: GraphSpec.AttributeValue]) {
        guard case let .convolution(padding, sh, sw, dh, dw, activation, _) = op.options else { throw fail("no options", "the file is damaged") }
        let depthwise = op.name == "DEPTHWISE_CONV_2D"
        guard op.inputs.count >= 2, op.inputs[1] >= 0, !op.outputs.isEmpty else { throw fail("no filter", "the file is damaged") }
        let f = graph.tensors[op.inputs[1]]
        let out = graph.tensors[op.outputs[0]]
        let (inQ, outQ) = try quantization(graph.tensors[op.inputs[0]], out, fail)
        guard let fQ = f.quantization, let filter = f.integers, f.type == .int8, f.shape.count == 4, x.tensor.rank == 4 else {
            throw fail("filter '\(f.name)' is not a constant int8 4-D tensor", "import int8 models")
        }
        guard fQ.zeroPoints.allSatisfy({ $0 == 0 }) else { throw fail("filter zero points are not 0", "TFLite's int8 filters are symmetric") }
        let channels = depthwise ? f.shape[3] : f.shape[0]
        let (h, w) = (x.tensor.shape[1], x.tensor.shape[2])
        let (kh, kw) = (f.shape[1], f.shape[2])
        guard sh >= 1, sw >= 1, dh >= 1, dw >= 1 else { throw fail("strides \(sh)x\(sw), dilations \(dh)x\(dw)", "the file is damaged") }
        // TFLite's ComputePaddingHeightWidth: the leading pad is half the total, rounded down.
        func pads(_ size: Int, _ k: Int, _ stride: Int, _ dilation: Int) -> (Int, Int) {
            let extent = (k - 1) * dilation + 1
            let outSize = padding == 0 ? (size + stride - 1) / stride : (size - extent + stride) / stride
            let total = max((outSize - 1) * stride + extent - size, 0)
            return padding == 0 ? (total / 2, total - total / 2) : (0, 0)
        }
        let (top, bottom) = pads(h, kh, sh, dh), (left, right) = pads(w, kw, sw, dw)
        var attributes = try multipliers(input: inQ.scale, filter: fQ.scales, output: outQ.scale, channels: channels, fail)
        attributes["strides"] = .ints([Int64(sh), Int64(sw)])
        attributes["dilations"] = .ints([Int64(dh), Int64(dw)])
        attributes["pads"] = .ints([top, left, bottom, right].map(Int64.init))
        attributes["input_offset"] = .int(Int64(-inQ.zero))
        attributes["output_offset"] = .int(Int64(outQ.zero))
        attributes["activation"] = .ints(try activationRange(activation, out, outQ, fail))
        attributes.merge(scales(inQ, outQ, filter: fQ.scales)) { $1 }
        if depthwise {
            let c = x.tensor.shape[3]
            guard c > 0, channels % c == 0 else { throw fail("\(channels) output channels for \(c) input channels", "the file is damaged") }
            attributes["depth_multiplier"] = .int(Int64(channels / c))
        }
        let filterValues = GraphTensor(shape: f.shape, floats: filter.map(Float.init))
        var names = [x.name, builder.weight(unique: f.name, filterValues)], inputs: [GraphTensor?] = [x.tensor, filterValues]
        if op.inputs.count > 2, op.inputs[2] >= 0 {
            let b = graph.tensors[op.inputs[2]]
            guard let bias = b.integers, b.type == .int32, bias.count == channels else { throw fail("bias '\(b.name)' is not constant int32 per channel", "import int8 models") }
            names.append(builder.integers(unique: b.name, bias, shape: [bias.count]))
            inputs.append(GraphTensor(shape: [bias.count], integers: bias))
        }
        return (depthwise ? "TFLiteDepthwiseConv2D" : "TFLiteConv2D", names, inputs, attributes)
    }

    /// TFLite's 8-bit table for LOGISTIC and TANH (the function of every input value,
    /// computed in float as TFLite's LUT populate does) and QUANTIZE (Requantize).
    private func lookupTable(_ op: String, _ input: TFLiteTensor, _ output: TFLiteTensor,
                             _ fail: (String, String) -> ImportError) throws(ImportError) -> (values: [Int64], low: Int64) {
        let (inQ, outQ) = try quantization(input, output, fail)
        let low = input.type == .int8 ? -128 : 0
        if op == "LOGISTIC" || op == "TANH" {
            guard outQ.scale == (op == "LOGISTIC" ? 1 / 256 : 1 / 128) else {
                throw fail("output scale \(outQ.scale)", "TFLite requires \(op == "LOGISTIC" ? "1/256" : "1/128") for 8-bit \(op)")
            }
        }
        let table = Self.lookupTable(op, input: (inQ.scale, inQ.zero), output: (outQ.scale, outQ.zero), low: low,
                                     outputRange: output.type == .int8 ? (-128, 127) : (0, 255))
        return (table, Int64(low))
    }

    /// TFLite's 8-bit QUANTIZE, LOGISTIC or TANH as a table of its 256 inputs from `low`
    /// (value = scale × (code − zero)): the requantization's fixed-point multiplier, or the
    /// function rounded to the output's codes, clamped to `outputRange`.
    public static func lookupTable(_ op: String, input inQ: (scale: Float, zero: Int), output outQ: (scale: Float, zero: Int), low: Int,
                                   outputRange: (Int, Int)) -> [Int64] {
        let (qmin, qmax) = outputRange
        var table: [Int64] = []
        if op == "QUANTIZE" {
            let (multiplier, shift) = Quantized.quantizeMultiplier(Double(inQ.scale) / Double(outQ.scale))
            for v in low..<(low + 256) {
                let q = Int(Quantized.multiply(Int32(v - inQ.zero), multiplier, shift)) + outQ.zero
                table.append(Int64(min(max(q, qmin), qmax)))
            }
            return table
        }
        let inverse = 1 / outQ.scale
        for v in low..<(low + 256) {
            let x = inQ.scale * Float(v - inQ.zero)
            let y: Float = op == "LOGISTIC" ? 1 / (1 + Foundation.exp(-x)) : Foundation.tanh(x)
            let q = Int((y * inverse).rounded(.toNearestOrAwayFromZero)) + outQ.zero
            table.append(Int64(min(max(q, qmin), qmax)))
        }
        return table
    }
}
