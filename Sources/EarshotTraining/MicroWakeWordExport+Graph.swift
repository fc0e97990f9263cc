import EarshotGraph
import EarshotModel

extension MicroWakeWordExport {
    /// An int8 tensor's quantization: value = scale * (code - zero).
    struct Affine: Equatable {
        var scale: Float
        var zero: Int64
        var unsigned = false
    }

    /// The package's graph read into a TFLite file, node by node.
    struct Writer {
        let manifest: ModelManifest
        let graph: GraphSpec
        /// Every value of the graph on a first step (constants, weights, states' first values,
        /// computed values): their shapes, and the constants' values.
        var values: [String: GraphTensor] = [:]
        /// Each int8 value's quantization.
        var quantization: [String: Affine] = [:]
        /// State input name → the state (its ungated output).
        var states: [String: (key: String, output: String, initial: GraphTensor)] = [:]
        /// Ungated output name → state input name.
        var assigned: [String: String] = [:]
        var main = TFLiteFile.Subgraph(name: "main")
        /// Value name → tensor index in `main`.
        var index: [String: Int] = [:]
        /// State input name → its VAR_HANDLE's resource tensor.
        var resources: [String: Int] = [:]
        /// The int32 constants written, by shape and value.
        var shared: [Shared: Int] = [:]

        func fail(_ reason: String) -> TrainingError {
            .model(reason: "\(manifest.name): \(reason); --format microwakeword takes a microWakeWord model (imported from its .tflite, or trained as one)")
        }

        init(manifest: ModelManifest, tensors: [String: Tensor]) throws(TrainingError) {
            self.manifest = manifest
            guard let graph = manifest.graph else { throw TrainingError.model(reason: "\(manifest.name): a model of layers, not a graph; --format microwakeword takes a microWakeWord model") }
            self.graph = graph
            let ops: Set<String> = ["MicroFrontend", "Quantize", "Reshape", "Concat", "Slice", "Split", "TFLiteConv2D", "TFLiteDepthwiseConv2D",
                                    "TFLiteFullyConnected", "TFLiteLookup", "Greater", "Where", "Sub", "Mul"]
            if let node = graph.nodes.first(where: { !ops.contains($0.op) }) {
                throw fail("node '\(node.name)' is \(node.op), which a microWakeWord model does not have (it takes Quantize, Reshape, Concat, "
                    + "Slice, Split, TFLiteConv2D, TFLiteDepthwiseConv2D, TFLiteFullyConnected and TFLiteLookup after TFLite Micro's front end)")
            }
            for (name, c) in graph.constants { values[name] = GraphTensor(shape: c.shape, integers: c.values) }
            for (name, t) in tensors { values[name] = GraphTensor(shape: t.shape, floats: t.values) }
            values[graph.audioInput] = GraphTensor(shape: graph.audioShape, floats: [Float](repeating: 0, count: graph.audioShape.reduce(1, *)))
            for s in graph.states {
                guard let first = s.initial.flatMap({ values[$0] }) else { throw fail("state '\(s.input)' has no first values") }
                values[s.input] = first
            }
            for node in graph.nodes {
                let inputs = node.inputs.map { $0.isEmpty ? nil : values[$0] }
                let outputs: [GraphTensor]
                do {
                    outputs = try GraphOps.run(node.op, node: node.name, inputs: inputs, attributes: (node.attributes ?? [:]).mapValues(\.graphAttribute),
                                               opset: graph.opset, outputCount: node.outputs.count)
                } catch { throw fail("node '\(node.name)' (\(node.op)) does not run: \(error)") }
                for (name, t) in zip(node.outputs, outputs) { values[name] = t }
            }
            try readQuantization()
            try readStates()
        }

        // MARK: Reading the package

        /// Each int8 value's scale and zero point, from the nodes that record them and through
        /// the ops that only move values.
        mutating func readQuantization() throws(TrainingError) {
            func float(_ a: [String: GraphSpec.AttributeValue], _ k: String) -> Float? {
                if case let .float(v)? = a[k] { return Float(v) }
                return nil
            }
            func int(_ a: [String: GraphSpec.AttributeValue], _ k: String) -> Int64? {
                if case let .int(v)? = a[k] { return v }
                return nil
            }
            for node in graph.nodes {
                let a = node.attributes ?? [:]
                switch node.op {
                case "Quantize":
                    guard let s = float(a, "scale") else { continue }
                    quantization[node.outputs[0]] = Affine(scale: s, zero: int(a, "zero_point") ?? 0, unsigned: (int(a, "min") ?? -128) >= 0)
                case "TFLiteConv2D", "TFLiteDepthwiseConv2D", "TFLiteFullyConnected":
                    guard let i = float(a, "input_scale"), let o = float(a, "output_scale"), let inOffset = int(a, "input_offset"),
                          let outOffset = int(a, "output_offset") else {
                        throw fail("node '\(node.name)' (\(node.op)) has no scales (input_scale, output_scale, filter_scales): import the .tflite again with this version")
                    }
                    quantization[node.inputs[0]] = quantization[node.inputs[0]] ?? Affine(scale: i, zero: -inOffset)
                    quantization[node.outputs[0]] = Affine(scale: o, zero: outOffset)
                case "TFLiteLookup":
                    guard let i = float(a, "input_scale"), let o = float(a, "output_scale"), let iz = int(a, "input_zero_point"),
                          let oz = int(a, "output_zero_point") else {
                        throw fail("node '\(node.name)' (\(node.op)) has no scales: import the .tflite again with this version")
                    }
                    quantization[node.inputs[0]] = quantization[node.inputs[0]] ?? Affine(scale: i, zero: iz)
                    var out = Affine(scale: o, zero: oz)
                    if case .string("uint8")? = a["output_type"] { out.unsigned = true }
                    quantization[node.outputs[0]] = out
                default: continue
                }
            }
            // Reshape, Concat, Slice and Split keep their input's quantization (a ring buffer's
            // state takes its concatenation's).
            var changed = true
            var rounds = 0
            while changed && rounds <= graph.nodes.count {
                changed = false
                rounds += 1
                for node in graph.nodes where ["Reshape", "Concat", "Slice", "Split"].contains(node.op) {
                    let moved = node.op == "Concat" ? node.inputs : [node.inputs[0]]
                    let known = quantization
                    guard let q = (moved + node.outputs).compactMap({ known[$0] }).first else { continue }
                    for name in moved + node.outputs where quantization[name] == nil {
                        quantization[name] = q
                        changed = true
                    }
                }
            }
        }

        /// The ring buffers: each state of the network (not the front end's) with its first
        /// values and the value assigned to it at the end of a step (seen through its gate).
        mutating func readStates() throws(TrainingError) {
            let producers = Dictionary(graph.nodes.flatMap { n in n.outputs.map { ($0, n) } }, uniquingKeysWith: { a, _ in a })
            let frontEnd = Set(graph.nodes.filter { $0.op == "MicroFrontend" }.flatMap { $0.inputs.dropFirst() })
            for s in graph.states where !frontEnd.contains(s.input) {
                var output = s.output
                // The gate `Where(started, next, first)` holds the first values on the front end's first step.
                if let gate = producers[output], gate.op == "Where", gate.inputs.count == 3, gate.inputs[2] == s.initial { output = gate.inputs[1] }
                guard let first = values[s.input] else { throw fail("state '\(s.input)' has no first values") }
                let key = s.input.hasPrefix("state ") ? String(s.input.dropFirst(6)) : s.input
                states[s.input] = (key, output, first)
                assigned[output] = s.input
                if quantization[s.input] == nil { quantization[s.input] = quantization[output] }
            }
        }

        /// The int8 value that the score dequantizes: score = (x - zero) * scale, perhaps gated.
        func quantizedScore() throws(TrainingError) -> String {
            let producers = Dictionary(graph.nodes.flatMap { n in n.outputs.map { ($0, n) } }, uniquingKeysWith: { a, _ in a })
            var name = graph.scoreOutput
            // The gate multiplies the score by the front end's "started" state.
            let frontEnd = Set(graph.nodes.filter { $0.op == "MicroFrontend" }.flatMap { $0.inputs.dropFirst() })
            if let gate = producers[name], gate.op == "Mul", let other = gate.inputs.first(where: { !frontEnd.contains($0) }),
               gate.inputs.contains(where: frontEnd.contains) { name = other }
            guard let mul = producers[name], mul.op == "Mul", let sub = producers[mul.inputs[0]], sub.op == "Sub",
                  let scale = values[mul.inputs[1]]?.floats, scale.count == 1, let zero = values[sub.inputs[1]]?.floats, zero.count == 1,
                  let q = quantization[sub.inputs[0]] else {
                throw fail("its score is not an int8 output dequantized ((q - zero point) * scale)")
            }
            guard q.scale == scale[0], Float(q.zero) == zero[0] else {
                throw fail("the score's dequantization (\(zero[0]), \(scale[0])) is not its output's quantization (\(q.zero), \(q.scale))")
            }
            return sub.inputs[0]
        }

        // MARK: Writing the file

        mutating func write() throws(TrainingError) -> TFLiteFile {
            let score = try quantizedScore()
            var initGraph = TFLiteFile.Subgraph(name: "NoOp")
            let ordered = graph.states.compactMap { s in states[s.input].map { (s.input, $0) } }
            if !ordered.isEmpty {
                main.operators.append(.init(code: Code.callOnce, version: 1, inputs: [], outputs: [],
                                            options: (103, .init([(0, .i32(1))]))))
            }
            for (input, s) in ordered {
                guard let q = quantization[input] else { throw fail("state '\(input)' has no quantization") }
                let handle = main.add(.init(name: s.key, shape: [], type: .resource))
                main.operators.append(.init(code: Code.varHandle, version: 1, inputs: [], outputs: [handle], options: varHandle(s.key)))
                resources[input] = handle
                let h = initGraph.add(.init(name: s.key + "1", shape: [], type: .resource))
                initGraph.operators.append(.init(code: Code.varHandle, version: 1, inputs: [], outputs: [h], options: varHandle(s.key)))
                let first = initGraph.add(.init(name: s.key + " (first values)", shape: s.initial.shape, type: .int8, scales: [q.scale], zeroPoints: [q.zero],
                                                data: try int8(s.initial, s.key)))
                initGraph.operators.append(.init(code: Code.assignVariable, version: 1, inputs: [h, first], outputs: []))
            }
            for node in graph.nodes { try write(node) }
            guard let input = graph.nodes.first(where: { $0.op == "Quantize" }).flatMap({ index[$0.outputs[0]] }) else {
                throw fail("its features are not quantized by a Quantize node")
            }
            guard let output = index[score] else { throw fail("its score '\(score)' is not computed by the exported ops") }
            main.inputs = [input]
            main.outputs = [output]
            return TFLiteFile(subgraphs: ordered.isEmpty ? [main] : [main, initGraph], description: "Exported by earshot export --format microwakeword.")
        }

        private func varHandle(_ key: String) -> (type: UInt8, table: FlatBufferWriter.Table) {
            (111, .init([(0, .string("")), (1, .string(key))]))
        }

        /// The tensor of a computed value (made on first use; a state's is its READ_VARIABLE).
        mutating func tensor(_ name: String) throws(TrainingError) -> Int {
            if let i = index[name] { return i }
            guard let v = values[name], let q = quantization[name] else { throw fail("value '\(name)' is not an int8 tensor") }
            let i = main.add(.init(name: name, shape: v.shape, type: q.unsigned ? .uint8 : .int8, scales: [q.scale], zeroPoints: [q.zero]))
            index[name] = i
            if let handle = resources[name] {
                main.operators.append(.init(code: Code.readVariable, version: 1, inputs: [handle], outputs: [i]))
            }
            return i
        }

        /// A new output tensor for `name`.
        mutating func output(_ name: String) throws(TrainingError) -> Int {
            guard index[name] == nil else { throw fail("value '\(name)' is computed twice") }
            return try tensor(name)
        }

        /// An int32 constant; one of the same shape and values is written once and shared (as
        /// TFLite's converter shares them), since each tensor costs the device arena a record.
        mutating func int32s(_ name: String, _ values: [Int], shape: [Int]? = nil) -> Int {
            let shape = shape ?? [values.count]
            let data = Self.littleEndian(values.map { Int32(truncatingIfNeeded: $0) })
            if let i = shared[Shared(shape: shape, data: data)] { return i }
            let i = main.add(.init(name: name, shape: shape, type: .int32, data: data))
            shared[Shared(shape: shape, data: data)] = i
            return i
        }

        struct Shared: Hashable {
            var shape: [Int]
            var data: [UInt8]
        }

        static func littleEndian(_ v: [Int32]) -> [UInt8] {
            v.flatMap { x in (0..<4).map { UInt8(truncatingIfNeeded: UInt32(bitPattern: x) >> (8 * $0)) } }
        }

        func int8(_ t: GraphTensor, _ what: String) throws(TrainingError) -> [UInt8] {
            let numbers = t.dtype == .float32 ? t.floats.map(Double.init) : t.integers.map(Double.init)
            var out: [UInt8] = []
            out.reserveCapacity(numbers.count)
            for v in numbers {
                guard v.rounded() == v, v >= -128, v <= 127 else { throw fail("'\(what)' holds \(v), not an int8 value") }
                out.append(UInt8(bitPattern: Int8(v)))
            }
            return out
        }

        func int32(_ t: GraphTensor, _ what: String) throws(TrainingError) -> [UInt8] {
            let numbers = t.dtype == .float32 ? t.floats.map(Double.init) : t.integers.map(Double.init)
            var out: [Int32] = []
            for v in numbers {
                guard v.rounded() == v, v >= Double(Int32.min), v <= Double(Int32.max) else { throw fail("'\(what)' holds \(v), not an int32 value") }
                out.append(Int32(v))
            }
            return Self.littleEndian(out)
        }

        /// schema.fbs BuiltinOperator codes.
        enum Code {
            static let concatenation: Int32 = 2, conv2D: Int32 = 3, depthwiseConv2D: Int32 = 4, fullyConnected: Int32 = 9, logistic: Int32 = 14
            static let reshape: Int32 = 22, tanh: Int32 = 28, stridedSlice: Int32 = 45, splitV: Int32 = 102, quantize: Int32 = 114
            static let callOnce: Int32 = 129, varHandle: Int32 = 142, readVariable: Int32 = 143, assignVariable: Int32 = 144
        }
    }
}
