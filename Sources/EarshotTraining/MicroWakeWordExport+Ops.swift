import EarshotGraph
import EarshotImport
import EarshotModel

extension MicroWakeWordExport.Writer {
    typealias Options = (type: UInt8, table: FlatBufferWriter.Table)

    /// Writes one node of the package as TFLite operators (none for the front end, its gates
    /// and the score's dequantization), then assigns the ring buffers it computes.
    mutating func write(_ node: GraphSpec.NodeSpec) throws(TrainingError) {
        let a = node.attributes ?? [:]
        func int(_ k: String) -> Int? { if case let .int(v)? = a[k] { return Int(v) } else { return nil } }
        func constant(_ i: Int) throws(TrainingError) -> GraphTensor {
            guard i < node.inputs.count, let v = values[node.inputs[i]] else { throw fail("node '\(node.name)' has no input \(i)") }
            return v
        }
        switch node.op {
        case "MicroFrontend", "Greater", "Where", "Sub", "Mul":
            // The front end, its gates and the dequantized score are the device's (checked
            // where the states and the score are read).
            return
        case "Quantize":
            // The model's input: the front end's features as int8 codes.
            _ = try output(node.outputs[0])
        case "Reshape":
            let x = try tensor(node.inputs[0])
            guard let shape = values[node.outputs[0]]?.shape else { throw fail("node '\(node.name)' has no output") }
            let s = int32s(node.name + " shape", shape)
            let out = try output(node.outputs[0])
            main.operators.append(.init(code: Code.reshape, version: 1, inputs: [x, s], outputs: [out]))
        case "Concat":
            var inputs: [Int] = []
            for name in node.inputs { inputs.append(try tensor(name)) }
            let rank = values[node.outputs[0]]?.rank ?? 0
            let axis = (int("axis") ?? 0) < 0 ? (int("axis") ?? 0) + rank : (int("axis") ?? 0)
            let out = try output(node.outputs[0])
            main.operators.append(.init(code: Code.concatenation, version: 2, inputs: inputs, outputs: [out],
                                        options: (10, .init([(0, .i32(Int32(clamping: axis))), (1, .i8(0))]))))
        case "Slice":
            guard let shape = values[node.inputs[0]]?.shape else { throw fail("node '\(node.name)' has no input") }
            let starts = try constant(1).integers, ends = try constant(2).integers
            var axes = (0..<Int64(starts.count)).map { $0 }, steps = [Int64](repeating: 1, count: starts.count)
            if node.inputs.count > 3 { axes = try constant(3).integers }
            if node.inputs.count > 4 { steps = try constant(4).integers }
            var begin = [Int](repeating: 0, count: shape.count), end = shape, strides = [Int](repeating: 1, count: shape.count)
            for (k, axis64) in axes.enumerated() {
                let axis = Int(axis64) < 0 ? Int(axis64) + shape.count : Int(axis64)
                guard axis >= 0, axis < shape.count, k < starts.count, k < ends.count, k < steps.count, steps[k] > 0 else {
                    throw fail("node '\(node.name)' slices axis \(axis64) by \(k < steps.count ? steps[k] : 0); STRIDED_SLICE is written for steps forward")
                }
                let dim = shape[axis]
                // ONNX's Slice: negative from the end, clamped to the axis.
                func clamp(_ v: Int64) -> Int { let x = v < 0 ? Int(max(v, -Int64(dim) - 1)) + dim : Int(min(v, Int64(dim))); return max(0, min(x, dim)) }
                begin[axis] = clamp(starts[k])
                end[axis] = clamp(ends[k])
                strides[axis] = Int(steps[k])
            }
            let x = try tensor(node.inputs[0])
            let b = int32s(node.name + " begin", begin), e = int32s(node.name + " end", end), s = int32s(node.name + " strides", strides)
            let out = try output(node.outputs[0])
            main.operators.append(.init(code: Code.stridedSlice, version: 2, inputs: [x, b, e, s], outputs: [out],
                                        options: (32, .init([(0, .i32(0)), (1, .i32(0))]))))
        case "Split":
            guard let shape = values[node.inputs[0]]?.shape else { throw fail("node '\(node.name)' has no input") }
            let sizes = try constant(1).integers.map { Int($0) }
            let axis = (int("axis") ?? 0) < 0 ? (int("axis") ?? 0) + shape.count : (int("axis") ?? 0)
            let x = try tensor(node.inputs[0])
            let s = int32s(node.name + " sizes", sizes), ax = int32s(node.name + " axis", [axis], shape: [])
            var outs: [Int] = []
            for name in node.outputs { outs.append(try output(name)) }
            main.operators.append(.init(code: Code.splitV, version: 2, inputs: [x, s, ax], outputs: outs,
                                        options: (79, .init([(0, .i32(Int32(outs.count)))]))))
        case "TFLiteConv2D", "TFLiteDepthwiseConv2D", "TFLiteFullyConnected":
            try writeProduct(node, a)
        case "TFLiteLookup":
            let code: Int32, version: Int32
            switch a["function"] {
            case .string("LOGISTIC")?: (code, version) = (Code.logistic, 2)
            case .string("TANH")?: (code, version) = (Code.tanh, 2)
            case .string("QUANTIZE")?: (code, version) = (Code.quantize, 1)
            default: throw fail("node '\(node.name)' is a table of no TFLite function (import the .tflite again with this version)")
            }
            let x = try tensor(node.inputs[0])
            let out = try output(node.outputs[0])
            main.operators.append(.init(code: code, version: version, inputs: [x], outputs: [out]))
        default:
            throw fail("node '\(node.name)' is \(node.op), which has no TFLite form here")
        }
        for name in node.outputs {
            guard let state = assigned[name], let handle = resources[state] else { continue }
            main.operators.append(.init(code: Code.assignVariable, version: 1, inputs: [handle, try tensor(name)], outputs: []))
        }
    }

    /// CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED with its int8 filter (per channel or per
    /// tensor, as recorded) and int32 bias (scale input × filter, as TFLite's converter writes it).
    private mutating func writeProduct(_ node: GraphSpec.NodeSpec, _ a: [String: GraphSpec.AttributeValue]) throws(TrainingError) {
        func int(_ k: String) -> Int? { if case let .int(v)? = a[k] { return Int(v) } else { return nil } }
        func ints(_ k: String) -> [Int] { if case let .ints(v)? = a[k] { return v.map { Int($0) } } else { return [] } }
        guard case let .floats(filterScales)? = a["filter_scales"], case let .float(inScale)? = a["input_scale"],
              let outQ = quantization[node.outputs[0]], node.inputs.count >= 2, let f = values[node.inputs[1]], let x = values[node.inputs[0]] else {
            throw fail("node '\(node.name)' (\(node.op)) has no scales: import the .tflite again with this version")
        }
        let depthwise = node.op == "TFLiteDepthwiseConv2D", dense = node.op == "TFLiteFullyConnected"
        let weightsZero = Int64(-(int("weights_offset") ?? 0))
        let scales = filterScales.map { Float($0) }
        let xi = try tensor(node.inputs[0])
        let fi = main.add(.init(name: node.inputs[1], shape: f.shape, type: .int8, scales: scales,
                                zeroPoints: [Int64](repeating: weightsZero, count: scales.count), dimension: depthwise && scales.count > 1 ? f.rank - 1 : 0,
                                data: try int8(f, node.inputs[1])))
        var inputs = [xi, fi]
        if node.inputs.count > 2, let b = values[node.inputs[2]] {
            let biasScales = scales.map { Float(Double(inScale) * Double($0)) }
            inputs.append(main.add(.init(name: node.inputs[2], shape: [b.count], type: .int32, scales: biasScales,
                                         zeroPoints: [Int64](repeating: 0, count: biasScales.count), data: try int32(b, node.inputs[2]))))
        }
        // The fused activation whose range TFLite computes as the node's (none first).
        let range = ints("activation").map { Int64($0) }
        guard let activation = (0...3).first(where: { TFLiteImporter.activationRange($0, unsigned: outQ.unsigned, scale: outQ.scale, zero: Int(outQ.zero)) == range }) else {
            throw fail("node '\(node.name)' clamps its output to \(range), which no fused activation gives")
        }
        let out = try output(node.outputs[0])
        if dense {
            main.operators.append(.init(code: Code.fullyConnected, version: 4, inputs: inputs, outputs: [out],
                                        options: (8, .init([(0, .i8(Int8(activation))), (1, .i8(0)), (2, .bool(false))]))))
            return
        }
        let strides = ints("strides"), dilations = ints("dilations"), pads = ints("pads")
        guard strides.count == 2, dilations.count == 2, pads.count == 4, x.rank == 4 else { throw fail("node '\(node.name)' has no strides, dilations or pads") }
        // VALID, or SAME where the pads are TFLite's for SAME (ComputePaddingHeightWidth).
        func samePads(_ size: Int, _ k: Int, _ stride: Int, _ dilation: Int) -> (Int, Int) {
            let extent = (k - 1) * dilation + 1, outSize = (size + stride - 1) / stride
            let total = max((outSize - 1) * stride + extent - size, 0)
            return (total / 2, total - total / 2)
        }
        let (top, bottom) = samePads(x.shape[1], f.shape[1], strides[0], dilations[0]), (left, right) = samePads(x.shape[2], f.shape[2], strides[1], dilations[1])
        let padding: Int8
        if pads.allSatisfy({ $0 == 0 }) { padding = 1 } else if pads == [top, left, bottom, right] { padding = 0 } else {
            throw fail("node '\(node.name)' pads \(pads), neither VALID nor SAME")
        }
        let s: [(Int, FlatBufferWriter.Field?)] = [(0, .i8(padding)), (1, .i32(Int32(clamping: strides[1]))), (2, .i32(Int32(clamping: strides[0])))]
        if depthwise {
            let multiplier = int("depth_multiplier") ?? 1
            main.operators.append(.init(code: Code.depthwiseConv2D, version: 3, inputs: inputs, outputs: [out],
                                        options: (2, .init(s + [(3, .i32(Int32(clamping: multiplier))), (4, .i8(Int8(activation))),
                                                                (5, .i32(Int32(clamping: dilations[1]))), (6, .i32(Int32(clamping: dilations[0])))]))))
        } else {
            main.operators.append(.init(code: Code.conv2D, version: 3, inputs: inputs, outputs: [out],
                                        options: (1, .init(s + [(3, .i8(Int8(activation))), (4, .i32(Int32(clamping: dilations[1]))), (5, .i32(Int32(clamping: dilations[0])))]))))
        }
    }
}
