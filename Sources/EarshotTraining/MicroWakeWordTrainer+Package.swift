import EarshotFeatures
import EarshotGraph
import EarshotImport
import EarshotModel
import Foundation

extension MicroWakeWordTrainer {
    /// The trained network as the int8 package TFLiteImporter makes of a microWakeWord .tflite
    /// (so `earshot export --format microwakeword` takes it as it is): TFLite Micro's front end
    /// (`MicroFrontend`, 3 frames a step), `Quantize` to the int8 input, and per layer a ring
    /// buffer over a state (`Concat` of the state and the new step, `Slice` of its last rows as
    /// the next state, held at its first values on the front end's first step), then
    /// `TFLiteConv2D` / `TFLiteDepthwiseConv2D` / `TFLiteFullyConnected` with the codes and scales
    /// the quantization-aware training used, the logistic as TFLite's int8 table, the uint8 score
    /// dequantized (and 0 on the first step).
    static func package(name: String, network: Network, parameters: [[Float]], phrase: String,
                        record: ModelManifest.Training) throws(TrainingError) -> (ModelManifest, [String: Tensor]) {
        var g = GraphSpecBuilder()
        let c = MicroFrontend.channels
        let offsets = offsets(network)
        let used = forwardParameters(network, parameters, quantized: true)
        func affine(_ index: Int) -> FakeQuant.Affine { FakeQuant.Affine(scale: parameters[offsets[index]][0], zero: Int(parameters[offsets[index]][1])) }

        // The front end and its states.
        var states: [GraphSpec.StateSpec] = []
        var frontEndInputs = ["samples"], frontEndOutputs = ["features"]
        for (base, size) in [("front end noise", 2 * c), ("front end pending", (stride - 2) * c), ("front end started", 1)] {
            states.append(.init(input: base, output: "\(base) (next)", shape: [1, size],
                                initial: g.weight("\(base) (first values)", shape: [1, size], values: [Float](repeating: 0, count: size))))
            frontEndInputs.append(base)
            frontEndOutputs.append("\(base) (next)")
        }
        g.node("MicroFrontend", "front end", frontEndInputs, frontEndOutputs)
        let input = affine(0)
        g.node("Quantize", "quantize features", ["features"], ["input"],
               ["scale": .float(Double(input.scale)), "zero_point": .int(Int64(input.zero)), "min": .int(-128), "max": .int(127)])
        var x = g.reshape("input", [1, stride, 1, c], into: "input (NHWC)")
        var xQ = input
        let zero = g.weight("zero", shape: [1], values: [0])
        g.node("Greater", "front end started", ["front end started", zero], ["front end has started"])

        // A ring buffer of `rows` steps before `x` ([1, h, 1, channels]); the buffer with `x`.
        var streams = 0
        func ring(_ x: String, rows: Int, height: Int, channels: Int, q: FakeQuant.Affine) -> String {
            streams += 1
            let state = "state stream_\(streams)", concat = "stream_\(streams)/concat", next = "stream_\(streams)/next"
            let first = g.weight("stream_\(streams) (first values)", shape: [1, rows, 1, channels],
                                 values: [Float](repeating: Float(q.zero), count: rows * channels))
            g.node("Concat", concat, [state, x], [concat], ["axis": .int(1)])
            g.slice(concat, axis: 1, from: height, to: height + rows, into: next)
            g.node("Where", "\(next) (gated)", ["front end has started", next, first], ["\(next) (gated)"])
            states.append(.init(input: state, output: "\(next) (gated)", shape: [1, rows, 1, channels], initial: first))
            return concat
        }
        func product(_ op: String, _ label: String, x: String, filter: [Float], filterShape: [Int], bias: [Float], outputs: Int,
                     inQ: FakeQuant.Affine, outQ: FakeQuant.Affine, relu: Bool, extra: [String: GraphSpec.AttributeValue]) -> String {
            let scales = FakeQuant.filterScales(filter, channels: outputs)
            let codes = FakeQuant.filterCodes(filter, scales: scales)
            // DEPTHWISE_CONV_2D's filter is [1, kh, kw, channels]: trained as [channel][tap].
            var laid = codes.map(Float.init)
            if op == "TFLiteDepthwiseConv2D" {
                let k = filter.count / outputs
                laid = (0..<filter.count).map { i in Float(codes[(i % outputs) * k + i / outputs]) }
            }
            let w = g.weight("\(label)/filter", shape: filterShape, values: laid)
            let b = g.integers("\(label)/bias", FakeQuant.biasCodes(bias, input: inQ.scale, filter: scales), shape: [outputs])
            let (m, s) = Quantized.multipliers(input: inQ.scale, filter: scales, output: outQ.scale)
            var a: [String: GraphSpec.AttributeValue] = extra
            a["multipliers"] = .ints(m)
            a["shifts"] = .ints(s)
            a["input_offset"] = .int(Int64(-inQ.zero))
            a["output_offset"] = .int(Int64(outQ.zero))
            a["activation"] = .ints(TFLiteImporter.activationRange(relu ? 1 : 0, unsigned: false, scale: outQ.scale, zero: outQ.zero) ?? [-128, 127])
            a["input_scale"] = .float(Double(inQ.scale))
            a["output_scale"] = .float(Double(outQ.scale))
            a["filter_scales"] = .floats(scales.map(Double.init))
            g.node(op, label, [x, w, b], [label], a)
            return label
        }
        let conv: [String: GraphSpec.AttributeValue] = ["dilations": .ints([1, 1]), "pads": .ints([0, 0, 0, 0])]

        // The first convolution: the last 6 frames, stride 3.
        let firstOut = affine(3)
        let buffer = ring(x, rows: firstTaps - stride, height: stride, channels: c, q: xQ)
        // Trained as [out][tap][3 frames x 40]: CONV_2D's [out][6 frames][1][40] as it is.
        x = product("TFLiteConv2D", "conv_1", x: buffer, filter: used[offsets[1]], filterShape: [channels, firstTaps, 1, c], bias: used[offsets[1] + 1],
                    outputs: channels, inQ: xQ, outQ: firstOut, relu: true, extra: conv.merging(["strides": .ints([Int64(stride), 1])]) { $1 })
        xQ = firstOut
        var layer = 4
        for (index, taps) in blockTaps.enumerated() {
            let block = index + 1, dwQ = affine(layer + 1), pwQ = affine(layer + 4)
            let held = ring(x, rows: taps - 1, height: 1, channels: channels, q: xQ)
            x = product("TFLiteDepthwiseConv2D", "block_\(block)/depthwise", x: held, filter: used[offsets[layer]], filterShape: [1, taps, 1, channels],
                        bias: used[offsets[layer] + 1], outputs: channels, inQ: xQ, outQ: dwQ, relu: false,
                        extra: conv.merging(["strides": .ints([1, 1]), "depth_multiplier": .int(1)]) { $1 })
            x = product("TFLiteConv2D", "block_\(block)/pointwise", x: x, filter: used[offsets[layer + 2]], filterShape: [channels, 1, 1, channels],
                        bias: used[offsets[layer + 2] + 1], outputs: channels, inQ: dwQ, outQ: pwQ, relu: true,
                        extra: conv.merging(["strides": .ints([1, 1])]) { $1 })
            xQ = pwQ
            layer += 5
        }
        // The logit, its logistic (int8, 1/256), the uint8 score.
        let logitQ = affine(layer + 1)
        let flat = g.reshape(x, [1, channels], into: "flatten")
        let dense: [String: GraphSpec.AttributeValue] = ["weights_offset": .int(0)]
        let logit = product("TFLiteFullyConnected", "dense", x: flat, filter: used[offsets[layer]], filterShape: [1, channels], bias: used[offsets[layer] + 1],
                            outputs: 1, inQ: xQ, outQ: logitQ, relu: false, extra: dense)
        let sigmoid = FakeQuant.Affine(scale: 1.0 / 256, zero: -128)
        g.node("TFLiteLookup", "logistic", [logit], ["logistic"], lookup("LOGISTIC", input: logitQ, output: sigmoid, unsigned: false))
        g.node("TFLiteLookup", "output", ["logistic"], ["output"], lookup("QUANTIZE", input: sigmoid, output: .init(scale: 1.0 / 256, zero: 0), unsigned: true))
        let outZero = g.weight("output zero point", shape: [1], values: [0]), outScale = g.weight("output scale", shape: [1], values: [1.0 / 256])
        g.node("Sub", "dequantize (zero point)", ["output", outZero], ["output - zero point"])
        g.node("Mul", "dequantize (scale)", ["output - zero point", outScale], ["score"])
        g.node("Mul", "score (gated)", ["score", "front end started"], ["score (gated)"])

        var manifest = ModelManifest(name: name, source: "earshot train-wake (\(architectureName))",
                                     audio: .init(sampleRate: MicroFrontend.sampleRate, chunkSamples: stepSamples, contextSamples: contextSamples),
                                     frontEnd: .init(type: .samples, nFFT: 0, hopLength: 0), network: [],
                                     outputs: .init(activation: .none, labels: [phrase]), training: record)
        manifest.phrase = phrase
        var decision = ModelManifest.Decision()
        decision.threshold = 0.5
        decision.detectionWindow = 5
        manifest.decision = decision
        manifest.graph = g.spec(opset: 13, audioInput: "samples", audioShape: [1, stepSamples + contextSamples], scoreOutput: "score (gated)", states: states)
        return (manifest, g.tensors)
    }

    /// A TFLiteLookup node's attributes: TFLite's 256-entry table of `function` (LOGISTIC or
    /// QUANTIZE) from int8 codes, as TFLiteImporter reads the op.
    static func lookup(_ function: String, input: FakeQuant.Affine, output: FakeQuant.Affine, unsigned: Bool) -> [String: GraphSpec.AttributeValue] {
        let table = TFLiteImporter.lookupTable(function, input: (input.scale, input.zero), output: (output.scale, output.zero), low: -128,
                                               outputRange: unsigned ? (0, 255) : (-128, 127))
        return ["function": .string(function), "table": .ints(table), "low": .int(-128), "input_scale": .float(Double(input.scale)),
                "output_scale": .float(Double(output.scale)), "input_zero_point": .int(Int64(input.zero)),
                "output_zero_point": .int(Int64(output.zero)), "output_type": .string(unsigned ? "uint8" : "int8")]
    }
}
