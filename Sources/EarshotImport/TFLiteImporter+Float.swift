import EarshotGraph
import EarshotModel
import EarshotTFLite

/// Float TFLite operators (float32 tensors, float16 weights through DEQUANTIZE, int32 shape
/// arithmetic) as the graph's ONNX ops, each with TFLite's semantics (ref: tensorflow/lite/kernels
/// reference_ops). TFLite's NHWC convolutions and pools run as NCHW Convs and pools between two
/// Transposes, their OHWI filters reordered once here; a fused activation is a node after its op.
/// An operator whose inputs are all constants (shape arithmetic: SHAPE, PACK, FLOOR_DIV, ...) is
/// computed here and written nowhere; what the step computes becomes nodes. Complex tensors
/// (RFFT2D's) are held with a last axis of 2 (real, imaginary).
extension TFLiteImporter {
    /// The TFLite operators read as float: every operator none of whose tensors is 8- or 16-bit
    /// integers (those stay TFLite's integer kernels), DEQUANTIZE and the hybrids (float input,
    /// 8-bit weights: TFLiteImporter+Hybrid.swift).
    func isFloat(_ op: TFLiteOperator, _ graph: TFLiteSubgraph) -> Bool {
        if op.name == "DEQUANTIZE" || isHybrid(op, graph) { return true }
        if ["CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE", "QUANTIZE"].contains(op.name) { return false }
        return (op.inputs + op.outputs).allSatisfy { $0 < 0 || ![.int8, .uint8, .int16].contains(graph.tensors[$0].type) }
    }

    /// The package's name for `v`: a constant is written to the package the first time a node reads it.
    mutating func ref(_ v: Value) -> String {
        guard v.constant else { return v.name }
        if let name = written[v.name] { return name }
        let t = v.tensor
        switch t.dtype {
        case .float32: builder.weight(v.name, t)
        case .int64: builder.integers(v.name, t.integers, shape: t.shape)
        case .bool: builder.integers(v.name, t.integers, shape: t.shape, dtype: "bool")
        }
        written[v.name] = v.name
        return v.name
    }

    /// A node of `kind` on `inputs` named after `name`; when every input is a constant, its value
    /// is computed here and no node is written.
    mutating func node(_ kind: String, _ name: String, _ inputs: [Value], attributes: [String: GraphSpec.AttributeValue] = [:],
                       outputs: Int = 1, op tflite: String) throws(ImportError) -> [Value] {
        let results = try runAll(kind, name: name, inputs: inputs.map(\.tensor), attributes: attributes, op: tflite, outputs: outputs)
        // Min with +infinity and Max with -infinity keep the other value (a clip with no bound, which a
        // package cannot hold as a weight).
        if kind == "Min" || kind == "Max", inputs.count == 2, let k = inputs.firstIndex(where: { v in
            v.constant && v.tensor.dtype == .float32 && v.tensor.floats.allSatisfy { $0 == (kind == "Min" ? Float.infinity : -Float.infinity) }
        }), inputs[1 - k].tensor.shape == results[0].shape {
            return [inputs[1 - k]]
        }
        let constant = inputs.allSatisfy(\.constant)
        let names = results.indices.map { k in builder.unique(outputs == 1 ? name : "\(name) #\(k)") }
        if !constant {
            var inputNames: [String] = []
            for v in inputs { inputNames.append(ref(v)) }
            builder.node(kind, builder.unique("\(name) (\(kind))"), inputNames, names, attributes.isEmpty ? nil : attributes)
        }
        return zip(names, results).map { Value(name: $0, tensor: $1, constant: constant) }
    }

    /// `x` transposed by `perm`; a Reshape where only axes of size 1 move (no values move).
    mutating func transposed(_ x: Value, _ perm: [Int], _ name: String, op: String) throws(ImportError) -> Value {
        let kept = perm.filter { x.tensor.shape[$0] != 1 }
        if !x.complex, kept == kept.sorted() {
            return try reshaped(x, perm.map { x.tensor.shape[$0] }, name, op: op)
        }
        return try node("Transpose", name, [x], attributes: ["perm": .ints(perm.map(Int64.init))], op: op)[0]
    }

    /// `x` (NHWC) channels-first: its twin, or a Transpose.
    mutating func toNCHW(_ x: Value, _ name: String, op: String) throws(ImportError) -> Value {
        if let twin = channelsFirst[x.name] { return twin }
        return try transposed(x, [0, 3, 1, 2], "\(name) (NCHW)", op: op)
    }

    /// `y` (NCHW) back in TFLite's NHWC, with `y` kept as its twin.
    mutating func fromNCHW(_ y: Value, _ name: String, op: String) throws(ImportError) -> Value {
        let v = try transposed(y, [0, 2, 3, 1], "\(name) (NHWC)", op: op)
        channelsFirst[v.name] = y
        return v
    }

    /// An element-wise op on values whose twins are channels-first runs on the twins: a constant
    /// operand of one value stays, one of the channels ([C] or [1, 1, 1, C]) becomes [1, C, 1, 1].
    /// Nil when an operand has no twin (the op then runs on the NHWC values).
    mutating func onTwins(_ operands: [Value], _ name: String, op: String, _ f: (inout Self, [Value]) throws(ImportError) -> Value) throws(ImportError) -> Value? {
        guard let rank4 = operands.first(where: { channelsFirst[$0.name] != nil }), rank4.tensor.rank == 4 else { return nil }
        let channels = rank4.tensor.shape[3]
        var twins: [Value] = []
        for v in operands {
            if let t = channelsFirst[v.name] {
                twins.append(t)
            } else if v.constant, v.tensor.count == 1 {
                twins.append(v)
            } else if v.constant, v.tensor.count == channels, v.tensor.shape.last == channels, v.tensor.rank <= 4 {
                twins.append(try reshaped(v, [1, channels, 1, 1], "\(name) (channels first)", op: op))
            } else {
                return nil
            }
        }
        return try fromNCHW(try f(&self, twins), name, op: op)
    }

    /// A constant of the importer's own.
    mutating func literal(_ base: String, _ t: GraphTensor) -> Value { Value(name: builder.unique(base), tensor: t, constant: true) }

    /// `x` reshaped to `shape` (a complex value keeps its last axis of 2).
    mutating func reshaped(_ x: Value, _ shape: [Int], _ name: String, op: String) throws(ImportError) -> Value {
        let full = x.complex ? shape + [2] : shape
        if x.tensor.shape == full { return x }
        let s = literal("\(name) shape", GraphTensor(shape: [full.count], integers: full.map(Int64.init)))
        var v = try node("Reshape", name, [x, s], op: op)[0]
        v.complex = x.complex
        return v
    }

    /// `x` with TFLite's fused activation `activation` applied.
    mutating func activated(_ x: Value, _ activation: Int, _ name: String, op: String, fail: (String, String) -> ImportError) throws(ImportError) -> Value {
        switch activation {
        case 0: return x
        case 1: return try node("Relu", "\(name) (relu)", [x], op: op)[0]
        case 2, 3:
            let (low, high): (Float, Float) = activation == 2 ? (-1, 1) : (0, 6)
            let lo = literal("\(name) low", GraphTensor(scalar: low)), hi = literal("\(name) high", GraphTensor(scalar: high))
            return try node("Clip", "\(name) (\(activation == 2 ? "relu_n1_to_1" : "relu6"))", [x, lo, hi], op: op)[0]
        case 4:
            // TFLite's float kernels clamp to the activation's range (CalculateActivationRange);
            // TANH has none, so the values pass as they are (FULLY_CONNECTED refuses it).
            guard op != "FULLY_CONNECTED" else { throw fail("a fused TANH", "TFLite refuses FULLY_CONNECTED with a fused TANH") }
            return x
        default: throw fail("fused activation \(activation)", "the importer takes none, RELU, RELU_N1_TO_1, RELU6 and TANH")
        }
    }

    /// An operator on float tensors.
    mutating func readFloat(_ op: TFLiteOperator, label: String, graph: TFLiteSubgraph, fail: @escaping (String, String) -> ImportError) throws(ImportError) {
        let name = op.name
        func tensor(_ i: Int) throws(ImportError) -> TFLiteTensor { try Self.operand(op, i, graph, fail) }
        /// A computed or constant input's value (constants read from the file once).
        func input(_ i: Int) throws(ImportError) -> Value {
            let t = try tensor(i)
            if let v = values[op.inputs[i]] { return v }
            if t.data == nil, t.count == 0, t.shape.contains(0) {
                // A constant of no values has no bytes (a RESHAPE to a scalar's shape []).
                let v = Value(name: builder.unique(t.name), tensor: GraphTensor(shape: t.shape, integers: []), constant: true)
                values[op.inputs[i]] = v
                return v
            }
            guard t.data != nil else { throw fail("reads '\(t.name)', which nothing produced before it", "the operators must be in order") }
            let g: GraphTensor
            switch t.type {
            case .float32: g = GraphTensor(shape: t.shape, floats: t.floats ?? [])
            case .float16: g = GraphTensor(shape: t.shape, floats: t.halves ?? [])
            case .bool: g = GraphTensor(shape: t.shape, bools: (t.data ?? []).map { $0 != 0 })
            case .int32, .int64, .int8, .uint8, .int16, .uint16, .uint32:
                guard let ints = t.integers else { throw fail("the constant '\(t.name)' cannot be read", "the file is damaged") }
                g = GraphTensor(shape: t.shape, integers: ints)
            default: throw fail("the constant '\(t.name)' is \(t.type)", "constants are float, integer or bool")
            }
            let v = Value(name: builder.unique(t.name), tensor: g, constant: true)
            values[op.inputs[i]] = v
            return v
        }
        func ints(_ i: Int) throws(ImportError) -> [Int] {
            let v = try input(i)
            guard v.constant, v.tensor.dtype != .float32 else { throw fail("input \(i) '\(try tensor(i).name)' is not a constant", "export the model with fixed shapes") }
            return v.tensor.integers.map { Int(clamping: $0) }
        }
        func set(_ k: Int, _ v: Value) throws(ImportError) {
            guard k < op.outputs.count else { throw fail("has no output \(k)", "the file is damaged") }
            values[op.outputs[k]] = v
        }
        func option<T>(_ pick: (TFLiteOptions) -> T?, _ fallback: T? = nil) throws(ImportError) -> T {
            if let v = pick(op.options) ?? fallback { return v }
            throw fail("no options", "the file is damaged")
        }
        func axis(_ a: Int, _ rank: Int) throws(ImportError) -> Int {
            let r = a < 0 ? a + rank : a
            guard r >= 0, r < max(rank, 1) else { throw fail("axis \(a) for rank \(rank)", "the file is damaged") }
            return r
        }
        func shape(_ v: Value) -> [Int] { v.complex ? Array(v.tensor.shape.dropLast()) : v.tensor.shape }
        func ints64(_ values: [Int]) -> GraphTensor { GraphTensor(shape: [values.count], integers: values.map(Int64.init)) }

        if isHybrid(op, graph) {
            let bias = op.inputs.count > 2 && op.inputs[2] >= 0 ? try input(2) : nil
            try set(0, try hybrid(op, x: try input(0), weights: try tensor(1), bias: bias, label: label, fail: fail))
            return
        }
        switch name {
        case "ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "POW", "SQUARED_DIFFERENCE":
            let a = try input(0), b = try input(1)
            let kind = ["ADD": "Add", "SUB": "Sub", "MUL": "Mul", "DIV": "Div", "MAXIMUM": "Max", "MINIMUM": "Min", "POW": "Pow", "SQUARED_DIFFERENCE": "Sub"][name] ?? name
            let compute = { (me: inout Self, operands: [Value]) throws(ImportError) -> Value in
                var v = try me.node(kind, label, operands, op: name)[0]
                if name == "SQUARED_DIFFERENCE" { v = try me.node("Mul", "\(label) squared", [v, v], op: name)[0] }
                if case let .activation(f) = op.options { v = try me.activated(v, f, label, op: name, fail: fail) }
                return v
            }
            if let v = try onTwins([a, b], label, op: name, compute) { try set(0, v) } else { try set(0, try compute(&self, [a, b])) }
        case "LOGISTIC", "TANH", "RELU", "LOG", "SQRT", "EXP", "NEG", "ABS", "SIN":
            let kind = ["LOGISTIC": "Sigmoid", "TANH": "Tanh", "RELU": "Relu", "LOG": "Log", "SQRT": "Sqrt", "EXP": "Exp", "NEG": "Neg", "ABS": "Abs", "SIN": "Sin"][name] ?? name
            let compute = { (me: inout Self, x: [Value]) throws(ImportError) -> Value in try me.node(kind, label, x, op: name)[0] }
            let x = try input(0)
            if let v = try onTwins([x], label, op: name, compute) { try set(0, v) } else { try set(0, try compute(&self, [x])) }
        case "RELU6", "RELU_N1_TO_1":
            let compute = { (me: inout Self, x: [Value]) throws(ImportError) -> Value in try me.activated(x[0], name == "RELU6" ? 3 : 2, label, op: name, fail: fail) }
            let x = try input(0)
            if let v = try onTwins([x], label, op: name, compute) { try set(0, v) } else { try set(0, try compute(&self, [x])) }
        case "LEAKY_RELU":
            let alpha = try option({ if case let .leakyRelu(a) = $0 { a } else { nil } }, Float(0))
            let compute = { (me: inout Self, x: [Value]) throws(ImportError) -> Value in
                try me.node("LeakyRelu", label, x, attributes: ["alpha": .float(Double(alpha))], op: name)[0]
            }
            let x = try input(0)
            if let v = try onTwins([x], label, op: name, compute) { try set(0, v) } else { try set(0, try compute(&self, [x])) }
        case "RSQRT":
            // ref: reference_ops rsqrt, 1 / sqrt(x).
            let root = try node("Sqrt", "\(label) (sqrt)", [try input(0)], op: name)[0]
            try set(0, try node("Div", label, [literal("\(label) one", GraphTensor(scalar: Float(1))), root], op: name)[0])
        case "SQUARE":
            let x = try input(0)
            try set(0, try node("Mul", label, [x, x], op: name)[0])
        case "L2_NORMALIZATION":
            // ref: reference_ops L2Normalization: along the last axis, x / max(sqrt(sum of x^2), 1e-6).
            let x = try input(0), rank = x.tensor.rank
            guard rank >= 1 else { throw fail("a scalar input", "L2_NORMALIZATION takes values along a last axis") }
            let squares = try node("Mul", "\(label) (squares)", [x, x], op: name)[0]
            let sum = try node("ReduceSum", "\(label) (sum)", [squares, literal("\(label) axes", ints64([rank - 1]))],
                               attributes: ["keepdims": .int(1)], op: name)[0]
            let norm = try node("Sqrt", "\(label) (norm)", [sum], op: name)[0]
            let floor = try node("Max", "\(label) (at least epsilon)", [norm, literal("\(label) epsilon", GraphTensor(scalar: Float(1e-6)))], op: name)[0]
            try set(0, try node("Div", label, [x, floor], op: name)[0])
        case "GREATER", "GREATER_EQUAL", "LESS", "LESS_EQUAL":
            let kind = ["GREATER": "Greater", "GREATER_EQUAL": "GreaterOrEqual", "LESS": "Less", "LESS_EQUAL": "LessOrEqual"][name] ?? name
            try set(0, try node(kind, label, [try input(0), try input(1)], op: name)[0])
        case "SELECT", "SELECT_V2":
            try set(0, try node("Where", label, [try input(0), try input(1), try input(2)], op: name)[0])
        case "DEQUANTIZE":
            let x = try input(0), t = try tensor(0)
            if t.type == .float16 || t.type == .float32 {
                try set(0, x)
            } else {
                // (q - zero point) * scale, per tensor or per channel along the quantized dimension.
                guard let q = t.quantization, !q.scales.isEmpty else { throw fail("'\(t.name)' has no scale", "the file is damaged") }
                let rank = x.tensor.rank, d = q.scales.count == 1 ? 0 : try axis(q.dimension, rank)
                var s = [Int](repeating: 1, count: rank)
                if q.scales.count > 1 { s[d] = q.scales.count }
                let zeros = q.zeroPoints.isEmpty ? [Float](repeating: 0, count: q.scales.count) : q.zeroPoints.map(Float.init)
                let asFloat = try node("Cast", "\(label) (as float)", [x], attributes: ["to": .int(1)], op: name)[0]
                let zero = literal("\(label) zero point", GraphTensor(shape: q.scales.count == 1 ? [] : s, floats: zeros.count == q.scales.count ? zeros : [Float](repeating: zeros.first ?? 0, count: q.scales.count)))
                let scale = literal("\(label) scale", GraphTensor(shape: q.scales.count == 1 ? [] : s, floats: q.scales))
                let shifted = try node("Sub", "\(label) - zero point", [asFloat, zero], op: name)[0]
                try set(0, try node("Mul", label, [shifted, scale], op: name)[0])
            }
        case "RESHAPE":
            let x = try input(0)
            var target: [Int]
            if op.inputs.count > 1, op.inputs[1] >= 0 { target = try ints(1) } else if case let .reshape(s) = op.options, !s.isEmpty { target = s } else {
                target = graph.tensors[op.outputs[0]].shape
            }
            let count = shape(x).reduce(1, *)
            if let k = target.firstIndex(of: -1) {
                let rest = target.enumerated().filter { $0.offset != k }.reduce(1) { $0 * $1.element }
                guard rest > 0, count % rest == 0 else { throw fail("cannot reshape \(shape(x)) to \(target)", "the file is damaged") }
                target[k] = count / rest
            }
            guard target.reduce(1, *) == count, target.allSatisfy({ $0 >= 0 }) else { throw fail("cannot reshape \(shape(x)) to \(target)", "the file is damaged") }
            let v = try reshaped(x, target, label, op: name)
            if x.tensor.dtype == .bool, x.tensor.count == 1 { reshapedCondition[v.name] = reshapedCondition[x.name] ?? x }
            try set(0, v)
        case "SQUEEZE":
            let x = try input(0), dims = shape(x)
            let listed: [Int] = try option({ if case let .squeeze(d) = $0 { d } else { nil } }, [Int]())
            let drop = try Set(listed.map { (a: Int) throws(ImportError) -> Int in try axis(a, dims.count) })
            try set(0, try reshaped(x, dims.enumerated().filter { drop.isEmpty ? $0.element != 1 : !drop.contains($0.offset) }.map(\.element), label, op: name))
        case "EXPAND_DIMS":
            let x = try input(0), dims = shape(x)
            guard let a = try ints(1).first else { throw fail("no axis", "the file is damaged") }
            let at = a < 0 ? a + dims.count + 1 : a
            guard at >= 0, at <= dims.count else { throw fail("axis \(a) for rank \(dims.count)", "the file is damaged") }
            var out = dims
            out.insert(1, at: at)
            try set(0, try reshaped(x, out, label, op: name))
        case "TRANSPOSE":
            let x = try input(0)
            var perm = try ints(1)
            if x.complex { perm.append(perm.count) }
            var v = try node("Transpose", label, [x], attributes: ["perm": .ints(perm.map(Int64.init))], op: name)[0]
            v.complex = x.complex
            try set(0, v)
        case "CONCATENATION":
            // TFLite's float CONCATENATION takes a fused activation and does not apply it (its
            // kernel has none), so neither does the import.
            let a = try option { if case let .concatenation(a, _) = $0 { a } else { nil } }
            var inputs: [Value] = []
            for i in op.inputs.indices { inputs.append(try input(i)) }
            guard let first = inputs.first else { throw fail("no inputs", "the file is damaged") }
            try set(0, try node("Concat", label, inputs, attributes: ["axis": .int(Int64(try axis(a, shape(first).count)))], op: name)[0])
        case "PACK":
            let (count, a) = try option { if case let .pack(c, a) = $0 { (c, a) } else { nil } }
            guard count == op.inputs.count, count > 0 else { throw fail("\(op.inputs.count) inputs for \(count) values", "the file is damaged") }
            var parts: [Value] = []
            for i in op.inputs.indices {
                let x = try input(i)
                var s = x.tensor.shape
                let at = a < 0 ? a + s.count + 1 : a
                guard at >= 0, at <= s.count else { throw fail("axis \(a) for rank \(s.count)", "the file is damaged") }
                s.insert(1, at: at)
                parts.append(try reshaped(x, s, "\(label) #\(i)", op: name))
            }
            let at = a < 0 ? a + parts[0].tensor.rank : a
            try set(0, try node("Concat", label, parts, attributes: ["axis": .int(Int64(at))], op: name)[0])
        case "SPLIT", "SPLIT_V":
            let x = try input(name == "SPLIT" ? 1 : 0), dims = shape(x)
            guard let a = try ints(name == "SPLIT" ? 0 : 2).first else { throw fail("no axis", "the file is damaged") }
            let ax = try axis(a, dims.count)
            var sizes: [Int]
            if name == "SPLIT" {
                let n = op.outputs.count
                guard n > 0, dims[ax] % n == 0 else { throw fail("\(dims[ax]) values in \(n) parts", "the file is damaged") }
                sizes = [Int](repeating: dims[ax] / n, count: n)
            } else {
                sizes = try ints(1)
                if let rest = sizes.firstIndex(of: -1) { sizes[rest] = dims[ax] - sizes.filter { $0 != -1 }.reduce(0, +) }
            }
            guard sizes.count == op.outputs.count, sizes.allSatisfy({ $0 >= 0 }), sizes.reduce(0, +) == dims[ax] else {
                throw fail("sizes \(sizes) of axis \(ax) (\(dims[ax]))", "the file is damaged")
            }
            // An empty part (TFLite allows them) is a constant of no values.
            var parts: [Value] = []
            var at = 0
            for (k, size) in sizes.enumerated() {
                let v = try slice(x, axes: [ax], starts: [at], ends: [at + size], steps: [1], "\(label) #\(k)", op: name)
                parts.append(v)
                at += size
            }
            for (k, v) in parts.enumerated() { try set(k, v) }
        case "SLICE":
            let x = try input(0), dims = shape(x)
            let begin = try ints(1), size = try ints(2)
            guard begin.count == dims.count, size.count == dims.count else { throw fail("begin and size for \(dims.count) axes", "the file is damaged") }
            let ends = dims.indices.map { size[$0] == -1 ? dims[$0] : begin[$0] + size[$0] }
            try set(0, try slice(x, axes: Array(dims.indices), starts: begin, ends: ends, steps: dims.map { _ in 1 }, label, op: name))
        case "STRIDED_SLICE":
            let (beginMask, endMask, ellipsis, newAxis, shrink, offset) = try option {
                if case let .stridedSlice(b, e, el, n, s, o) = $0 { (b, e, el, n, s, o) } else { nil }
            }
            guard ellipsis == 0, newAxis == 0 else { throw fail("ellipsis or new-axis masks", "export the slice without them") }
            let x = try input(0), dims = shape(x)
            let begin = try ints(1), end = try ints(2), strides = try ints(3)
            guard begin.count <= dims.count, end.count == begin.count, strides.count == begin.count else { throw fail("begin, end and strides for \(dims.count) axes", "the file is damaged") }
            var starts: [Int] = [], ends: [Int] = [], steps: [Int] = [], kept: [Int] = []
            for d in dims.indices {
                guard d < begin.count else { starts.append(0); ends.append(dims[d]); steps.append(1); kept.append(dims[d]); continue }
                let step = strides[d]
                guard step != 0 else { throw fail("a stride of 0", "the file is damaged") }
                // ref: strided_slice_logic.h StartForAxis / StopForAxis.
                func clamp(_ v: Int, _ low: Int, _ high: Int) -> Int { min(max(v, low), high) }
                var s = begin[d], e = offset ? begin[d] + end[d] : end[d]
                if beginMask & (1 << d) != 0 { s = step > 0 ? 0 : dims[d] - 1 } else {
                    if s < 0 { s += dims[d] }
                    s = step > 0 ? clamp(s, 0, dims[d]) : clamp(s, -1, dims[d] - 1)
                }
                if shrink & (1 << d) != 0 {
                    e = s + 1
                } else if endMask & (1 << d) != 0 { e = step > 0 ? dims[d] : -1 } else {
                    if e < 0 { e += dims[d] }
                    e = step > 0 ? clamp(e, 0, dims[d]) : clamp(e, -1, dims[d] - 1)
                }
                let n = step > 0 ? max(0, (e - s + step - 1) / step) : max(0, (s - e + (-step) - 1) / (-step))
                starts.append(s); ends.append(step < 0 && e == -1 ? Int(Int32.min) : e); steps.append(step)
                if shrink & (1 << d) == 0 { kept.append(n) }
            }
            let v = try slice(x, axes: Array(dims.indices), starts: starts, ends: ends, steps: steps, label, op: name)
            try set(0, try reshaped(v, kept, "\(label) (shrunk)", op: name))
        case "REVERSE_V2":
            let x = try input(0), dims = shape(x)
            let axes = try ints(1).map { (a: Int) throws(ImportError) -> Int in try axis(a, dims.count) }
            try set(0, try slice(x, axes: axes, starts: axes.map { _ in -1 }, ends: axes.map { _ in Int(Int32.min) }, steps: axes.map { _ in -1 }, label, op: name))
        case "GATHER":
            let (a, batchDims) = try option({ if case let .gather(a, b) = $0 { (a, b) } else { nil } }, (0, 0))
            guard batchDims == 0 else { throw fail("batch_dims \(batchDims)", "the importer takes GATHER with batch_dims 0") }
            let x = try input(0)
            var v = try node("Gather", label, [x, try input(1)], attributes: ["axis": .int(Int64(try axis(a, shape(x).count)))], op: name)[0]
            v.complex = x.complex
            try set(0, v)
        case "SHAPE":
            let s = shape(try input(0))
            try set(0, literal(label, ints64(s)))
        case "RANGE":
            try set(0, try node("Range", label, [try input(0), try input(1), try input(2)], op: name)[0])
        case "CAST":
            let x = try input(0), out = graph.tensors[op.outputs[0]].type
            if x.complex {
                // complex to float: the real part (ref: cast.cc copyCast of std::complex).
                let s = shape(x)
                let real = try slice(x, axes: [s.count], starts: [0], ends: [1], steps: [1], "\(label) (real)", op: name)
                try set(0, try reshaped(Value(name: real.name, tensor: real.tensor, constant: real.constant), s, label, op: name))
            } else {
                let to: Int64 = out == .float32 ? 1 : out == .bool ? 9 : 7
                try set(0, try node("Cast", label, [x], attributes: ["to": .int(to)], op: name)[0])
            }
        case "FLOOR_DIV", "REDUCE_PROD":
            // Shape arithmetic: computed here when its inputs are constants.
            let a = try input(0), b = try input(1)
            guard a.constant, b.constant else { throw fail("\(name) of values computed from the input", "the importer computes \(name) on constants only") }
            if name == "FLOOR_DIV" {
                let (x, y) = (a.tensor, b.tensor)
                guard x.count == y.count || y.count == 1 else { throw fail("shapes \(x.shape) and \(y.shape)", "the importer computes FLOOR_DIV of equal shapes or by a scalar") }
                if x.dtype == .float32 {
                    try set(0, literal(label, GraphTensor(shape: x.shape, floats: x.floats.indices.map { (x.floats[$0] / y.floats[y.count == 1 ? 0 : $0]).rounded(.down) })))
                } else {
                    let q = try x.integers.indices.map { (i: Int) throws(ImportError) -> Int64 in
                        let d = y.integers[y.count == 1 ? 0 : i]
                        guard d != 0 else { throw fail("a division by zero", "the file is damaged") }
                        let n = x.integers[i]
                        return n / d - ((n % d != 0) && ((n < 0) != (d < 0)) ? 1 : 0)
                    }
                    try set(0, literal(label, GraphTensor(shape: x.shape, integers: q)))
                }
            } else {
                let keep = try option({ if case let .reducer(k) = $0 { k } else { nil } }, false)
                let axes = Set(try ints(1).map { (v: Int) throws(ImportError) -> Int in try axis(v, a.tensor.rank) })
                guard axes.count == a.tensor.rank || a.tensor.rank <= 1 else { throw fail("REDUCE_PROD over some axes", "the importer reduces constants over every axis") }
                let shape = keep ? a.tensor.shape.map { _ in 1 } : []
                try set(0, a.tensor.dtype == .float32 ? literal(label, GraphTensor(shape: shape, floats: [a.tensor.floats.reduce(1, *)]))
                                                      : literal(label, GraphTensor(shape: shape, integers: [a.tensor.integers.reduce(1, &*)])))
            }
        case "MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN":
            let x = try input(0), rank = x.tensor.rank
            let keep = try option({ if case let .reducer(k) = $0 { k } else { nil } }, false)
            let axes = Array(Set(try ints(1).map { (v: Int) throws(ImportError) -> Int in try axis(v, rank) })).sorted()
            if axes.isEmpty {
                try set(0, x)
            } else {
                let kind = ["MEAN": "ReduceMean", "SUM": "ReduceSum", "REDUCE_MAX": "ReduceMax", "REDUCE_MIN": "ReduceMin"][name] ?? name
                let list = axes.map(Int64.init)
                if kind == "ReduceSum" {
                    try set(0, try node(kind, label, [x, literal("\(label) axes", GraphTensor(shape: [list.count], integers: list))],
                                        attributes: ["keepdims": .int(keep ? 1 : 0)], op: name)[0])
                } else if let twin = channelsFirst[x.name], rank == 4, axes.contains(1), axes.contains(2) {
                    // Over the rows and columns of values whose twin is channels-first (a squeeze-and-excite
                    // block's mean): the twin's axes, the same values in the same order, no Transpose.
                    let mapped = axes.map { Int64([0, 2, 3, 1][$0]) }.sorted()
                    let reduced = try node(kind, label, [twin], attributes: ["axes": .ints(mapped), "keepdims": .int(keep ? 1 : 0)], op: name)[0]
                    try set(0, keep ? try fromNCHW(reduced, label, op: name) : reduced)
                } else {
                    try set(0, try node(kind, label, [x], attributes: ["axes": .ints(list), "keepdims": .int(keep ? 1 : 0)], op: name)[0])
                }
            }
        case "PAD", "PADV2":
            let x = try input(0), dims = shape(x)
            let p = try ints(1)
            guard p.count == 2 * dims.count else { throw fail("\(p.count) paddings for rank \(dims.count)", "the file is damaged") }
            let pads = dims.indices.map { p[2 * $0] } + dims.indices.map { p[2 * $0 + 1] }
            var inputs = [x, literal("\(label) pads", ints64(pads))]
            var zero = true
            if name == "PADV2", op.inputs.count > 2, op.inputs[2] >= 0 {
                let c = try input(2)
                zero = c.constant && c.tensor.floats.allSatisfy { $0 == 0 }
                inputs.append(try reshaped(c, [], "\(label) value", op: name))
            }
            let v = try node("Pad", label, inputs, op: name)[0]
            try set(0, v)
            // A zero pad of the spatial axes of NHWC values: a convolution reading it pads itself.
            if zero, dims.count == 4, !x.complex, p[0] == 0, p[1] == 0, p[6] == 0, p[7] == 0 {
                zeroPadded[v.name] = (x, [p[2], p[4], p[3], p[5]])
            }
        case "BATCH_MATMUL":
            let (adjX, adjY) = try option({ if case let .batchMatMul(x, y) = $0 { (x, y) } else { nil } }, (false, false))
            func adjoint(_ v: Value, _ on: Bool, _ what: String) throws(ImportError) -> Value {
                guard on else { return v }
                let r = v.tensor.rank
                guard r >= 2 else { throw fail("\(what) has rank \(r)", "BATCH_MATMUL takes rank 2 or more") }
                let perm = Array(0..<(r - 2)) + [r - 1, r - 2]
                return try node("Transpose", "\(label) (\(what) adjoint)", [v], attributes: ["perm": .ints(perm.map(Int64.init))], op: name)[0]
            }
            let a = try adjoint(try input(0), adjX, "x"), b = try adjoint(try input(1), adjY, "y")
            try set(0, try node("MatMul", label, [a, b], op: name)[0])
        case "FULLY_CONNECTED":
            let (activation, keepDims, _) = try Self.fullyConnectedOptions(op, fail)
            let x = try input(0), w = try input(1)
            guard w.tensor.rank == 2, w.tensor.dtype == .float32 else { throw fail("weights of shape \(w.tensor.shape)", "FULLY_CONNECTED takes [outputs, inputs] float weights") }
            let (outputs, depth) = (w.tensor.shape[0], w.tensor.shape[1])
            guard depth > 0, x.tensor.count % depth == 0 else { throw fail("an input of \(x.tensor.shape) for \(depth) weights a row", "the file is damaged") }
            let rows = x.tensor.count / depth
            let flat = try reshaped(x, [rows, depth], "\(label) (rows)", op: name)
            var inputs = [flat, w]
            if op.inputs.count > 2, op.inputs[2] >= 0 { inputs.append(try input(2)) }
            var v = try node("Gemm", label, inputs, attributes: ["transB": .int(1)], op: name)[0]
            if keepDims { v = try reshaped(v, Array(x.tensor.shape.dropLast()) + [outputs], "\(label) (kept dims)", op: name) }
            try set(0, try activated(v, activation, label, op: name, fail: fail))
        case "CONV_2D", "DEPTHWISE_CONV_2D":
            try set(0, try floatConvolution(op, x: try input(0), filter: try input(1), bias: op.inputs.count > 2 && op.inputs[2] >= 0 ? try input(2) : nil,
                                            label: label, fail: fail))
        case "AVERAGE_POOL_2D", "MAX_POOL_2D":
            let (padding, sh, sw, fh, fw, activation) = try option { if case let .pool(p, a, b, c, d, f) = $0 { (p, a, b, c, d, f) } else { nil } }
            let x = try input(0)
            guard x.tensor.rank == 4 else { throw fail("input of shape \(x.tensor.shape)", "pools take NHWC input") }
            let (top, bottom) = samePads(x.tensor.shape[1], fh, sh, 1, same: padding == 0), (left, right) = samePads(x.tensor.shape[2], fw, sw, 1, same: padding == 0)
            let nchw = try toNCHW(x, label, op: name)
            var attributes: [String: GraphSpec.AttributeValue] = ["kernel_shape": .ints([Int64(fh), Int64(fw)]), "strides": .ints([Int64(sh), Int64(sw)]),
                                                                  "pads": .ints([top, left, bottom, right].map(Int64.init))]
            if name == "AVERAGE_POOL_2D" { attributes["count_include_pad"] = .int(0) }
            let pooled = try node(name == "MAX_POOL_2D" ? "MaxPool" : "AveragePool", label, [nchw], attributes: attributes, op: name)[0]
            try set(0, try fromNCHW(try activated(pooled, activation, label, op: name, fail: fail), label, op: name))
        case "RFFT2D":
            let x = try input(0), dims = shape(x)
            let lengths = try ints(1)
            guard lengths.count == 2, lengths[0] == 1, dims.count >= 2 else {
                throw fail("fft_length \(lengths)", "the importer takes RFFT2D of one row ([1, n]): a real FFT of each row")
            }
            var rows = x
            if dims[dims.count - 2] != 1 { rows = try slice(x, axes: [dims.count - 2], starts: [0], ends: [1], steps: [1], "\(label) (first row)", op: name) }
            var v = try node("RFFT", label, [rows], attributes: ["length": .int(Int64(lengths[1]))], op: name)[0]
            v.complex = true
            try set(0, v)
        case "COMPLEX_ABS", "REAL":
            let x = try input(0), dims = shape(x)
            guard x.complex else { throw fail("its input is not complex", "the file is damaged") }
            if name == "REAL" {
                let real = try slice(x, axes: [dims.count], starts: [0], ends: [1], steps: [1], "\(label) (real)", op: name)
                try set(0, try reshaped(real, dims, label, op: name))
            } else {
                let squares = try node("Mul", "\(label) (squares)", [x, x], op: name)[0]
                let sum = try node("ReduceSum", "\(label) (power)", [squares, literal("\(label) axes", ints64([dims.count]))], attributes: ["keepdims": .int(0)], op: name)[0]
                try set(0, try node("Sqrt", label, [sum], op: name)[0])
            }
        case "IF":
            try readIf(op, label: label, graph: graph, fail: fail)
        default:
            throw fail("not supported", "see docs/models.md for the TFLite operators the importer takes")
        }
    }

    /// `x` sliced along `axes` (ONNX Slice; a complex value keeps its last axis).
    mutating func slice(_ x: Value, axes: [Int], starts: [Int], ends: [Int], steps: [Int], _ name: String, op: String) throws(ImportError) -> Value {
        let n = axes.count
        func c(_ base: String, _ v: [Int]) -> Value { literal("\(name) \(base)", GraphTensor(shape: [n], integers: v.map(Int64.init))) }
        var v = try node("Slice", name, [x, c("starts", starts), c("ends", ends), c("axes", axes), c("steps", steps)], op: op)[0]
        v.complex = x.complex
        return v
    }

    /// TFLite's ComputePaddingHeightWidth: SAME pads half the total before (rounded down).
    func samePads(_ size: Int, _ k: Int, _ stride: Int, _ dilation: Int, same: Bool) -> (Int, Int) {
        guard same else { return (0, 0) }
        let extent = (k - 1) * dilation + 1
        let outSize = (size + stride - 1) / stride
        let total = max((outSize - 1) * stride + extent - size, 0)
        return (total / 2, total - total / 2)
    }

    /// A float CONV_2D or DEPTHWISE_CONV_2D (NHWC input, OHWI or 1HWO filter) as a Conv on NCHW.
    mutating func floatConvolution(_ op: TFLiteOperator, x: Value, filter: Value, bias: Value?, label: String,
                                   fail: (String, String) -> ImportError) throws(ImportError) -> Value {
        guard case let .convolution(_, _, _, _, _, activation, _) = op.options else { throw fail("no options", "the file is damaged") }
        let conv = try convolutionNCHW(op, x: x, filter: filter, bias: bias, label: label, fail: fail)
        return try fromNCHW(try activated(conv, activation, label, op: op.name, fail: fail), label, op: op.name)
    }

    /// The Conv of a CONV_2D or DEPTHWISE_CONV_2D (NHWC input, OHWI or 1HWO filter), its output
    /// channels-first ([N, C, H, W]) and without the fused activation.
    mutating func convolutionNCHW(_ op: TFLiteOperator, x: Value, filter: Value, bias: Value?, label: String,
                                  fail: (String, String) -> ImportError) throws(ImportError) -> Value {
        guard case let .convolution(padding, sh, sw, dh, dw, _, _) = op.options else { throw fail("no options", "the file is damaged") }
        let depthwise = op.name == "DEPTHWISE_CONV_2D"
        let f = filter.tensor
        guard f.rank == 4, x.tensor.rank == 4, f.dtype == .float32, filter.constant else {
            throw fail("filter of shape \(f.shape) for input \(x.tensor.shape)", "a convolution takes NHWC input and a constant 4-D filter")
        }
        guard sh >= 1, sw >= 1, dh >= 1, dw >= 1 else { throw fail("strides \(sh)x\(sw), dilations \(dh)x\(dw)", "the file is damaged") }
        let c = x.tensor.shape[3], (kh, kw) = (f.shape[1], f.shape[2])
        let outChannels = depthwise ? f.shape[3] : f.shape[0]
        let inPerGroup = depthwise ? 1 : f.shape[3]
        guard c > 0, inPerGroup > 0, c % inPerGroup == 0, outChannels % (c / inPerGroup) == 0 else {
            throw fail("\(c) input channels for filter \(f.shape)", "the file is damaged")
        }
        // OIHW from OHWI (or from depthwise's [1, H, W, O]).
        var w = [Float](repeating: 0, count: f.count)
        for o in 0..<outChannels {
            for i in 0..<inPerGroup {
                for y in 0..<kh {
                    for z in 0..<kw {
                        w[((o * inPerGroup + i) * kh + y) * kw + z] = depthwise ? f.floats[(y * kw + z) * outChannels + o] : f.floats[((o * kh + y) * kw + z) * inPerGroup + i]
                    }
                }
            }
        }
        var (top, bottom) = samePads(x.tensor.shape[1], kh, sh, dh, same: padding == 0), (left, right) = samePads(x.tensor.shape[2], kw, sw, dw, same: padding == 0)
        var source = x
        if padding == 1, let padded = zeroPadded[x.name] {
            // A zero PAD before a VALID convolution (Keras's ZeroPadding2D): the convolution's own pads.
            source = padded.source
            (top, left, bottom, right) = (padded.pads[0], padded.pads[1], padded.pads[2], padded.pads[3])
        }
        let nchw = try toNCHW(source, label, op: op.name)
        var inputs = [nchw, literal("\(label) filter (OIHW)", GraphTensor(shape: [outChannels, inPerGroup, kh, kw], floats: w))]
        if let bias { inputs.append(bias) }
        let attributes: [String: GraphSpec.AttributeValue] = [
            "strides": .ints([Int64(sh), Int64(sw)]), "dilations": .ints([Int64(dh), Int64(dw)]), "pads": .ints([top, left, bottom, right].map(Int64.init)),
            "group": .int(Int64(c / inPerGroup)), "kernel_shape": .ints([Int64(kh), Int64(kw)]),
        ]
        return try node("Conv", label, inputs, attributes: attributes, op: op.name)[0]
    }

    /// IF: both branches' subgraphs read into the graph on the operator's inputs, and the
    /// condition choosing between their outputs each step (Where); a constant condition picks one.
    mutating func readIf(_ op: TFLiteOperator, label: String, graph: TFLiteSubgraph, fail: (String, String) -> ImportError) throws(ImportError) {
        guard case let .branches(thenIndex, elseIndex) = op.options, thenIndex > 0, elseIndex > 0,
              thenIndex < model.subgraphs.count, elseIndex < model.subgraphs.count, op.inputs.count >= 1, op.inputs[0] >= 0 else {
            throw fail("branches that are not there", "the file is damaged")
        }
        guard var condition = values[op.inputs[0]] else { throw fail("its condition is not computed before it", "the operators must be in order") }
        // The condition as it was computed (a comparison that only the Where reads compiles into it).
        condition = reshapedCondition[condition.name] ?? condition
        var arguments: [Value] = []
        for i in op.inputs.indices.dropFirst() {
            guard op.inputs[i] >= 0 else { throw fail("input \(i) is missing", "the file is damaged") }
            if let v = values[op.inputs[i]] { arguments.append(v); continue }
            let t = graph.tensors[op.inputs[i]]
            guard let floats = t.floats ?? t.halves ?? t.integers?.map(Float.init) else { throw fail("input \(i) '\(t.name)' is not computed before it", "the operators must be in order") }
            arguments.append(Value(name: builder.unique(t.name), tensor: t.integers != nil ? GraphTensor(shape: t.shape, integers: t.integers ?? []) : GraphTensor(shape: t.shape, floats: floats), constant: true))
        }
        let saved = values
        var outputs: [[Value]] = []
        for index in [thenIndex, elseIndex] {
            let sub = model.subgraphs[index]
            guard sub.inputs.count == arguments.count, sub.outputs.count == op.outputs.count else {
                throw fail("subgraph \(index) takes \(sub.inputs.count) inputs and gives \(sub.outputs.count) for \(arguments.count) and \(op.outputs.count)", "the file is damaged")
            }
            values = Dictionary(uniqueKeysWithValues: zip(sub.inputs, arguments))
            for (k, o) in sub.operators.enumerated() { try read(o, index: k, graph: sub) }
            var out: [Value] = []
            for o in sub.outputs {
                guard let v = values[o] else { throw fail("subgraph \(index) does not compute its output", "the file is damaged") }
                out.append(v)
            }
            outputs.append(out)
        }
        values = saved
        for k in op.outputs.indices {
            let (a, b) = (outputs[0][k], outputs[1][k])
            if condition.constant, let c = condition.tensor.integers.first ?? condition.tensor.floats.first.map({ $0 != 0 ? 1 : 0 }) {
                values[op.outputs[k]] = c != 0 ? a : b
            } else {
                values[op.outputs[k]] = try node("Where", "\(label) #\(k)", [condition, a, b], op: "IF")[0]
            }
        }
    }
}
