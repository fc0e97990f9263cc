import EarshotGraph
import EarshotTestSupport
import Testing

@testable import EarshotTraining

/// Quantization-aware arithmetic against the int8 kernels an exported model runs: a
/// microWakeWord layer (a depthwise convolution over time, bias, ReLU) computed in float with
/// fake-quantized input, filter and output, and the same layer as TFLite's integer kernel with
/// the codes and multipliers those scales give, agree within one step of the output's scale.
@Suite("Quantization-aware steps: the fake-quantized forward is what the int8 kernels compute")
struct FakeQuantTests {
    @Test("Scales and codes as TFLite's converter makes them: 0 exact, ranges widened to hold it, symmetric per-channel filters")
    func parameters() {
        let q = FakeQuant.activation(min: -1, max: 3)
        #expect(q.scale == Float(4) / 255)
        #expect(q.zero == -128 + 64)  // round(-128 + 1 / (4 / 255)) = round(-64.25)
        #expect(FakeQuant.fake(0, q) == 0)
        #expect(FakeQuant.code(3, q) == 127 && FakeQuant.code(-1, q) == -128 && FakeQuant.code(10, q) == 127)
        let positive = FakeQuant.activation(min: 0.5, max: 2)
        #expect(positive.zero == -128 && positive.scale == Float(2) / 255)
        #expect(FakeQuant.passes(1.9, positive) && !FakeQuant.passes(2.1, positive) && !FakeQuant.passes(-0.1, positive))
        #expect(FakeQuant.filterScales([0.5, -1.27, 0, 0, 0.254, -0.1], channels: 3) == [1.27 / 127, 1, 0.254 / 127])
        #expect(FakeQuant.filterCodes([0.5, -1.27, 0.254, -0.1], scales: [1.27 / 127, 0.254 / 127]) == [50, -127, 127, -50])
        #expect(FakeQuant.biasCodes([0.01, -0.02], input: 0.1, filter: [0.001, 0.002]) == [100, -100])
    }

    @Test("A depthwise layer over time: the fake-quantized float forward = TFLite's int8 kernel within one output step", arguments: [1, 2, 3])
    func depthwiseLayer(seed: UInt64) throws {
        var random = SeededRandom(seed: seed)
        let (time, kernel, channels) = (9, 5, 8)
        let x = (0..<(time * channels)).map { _ in Float.random(in: -0.5...2.5, using: &random) }
        let w = (0..<(kernel * channels)).map { _ in Float.random(in: -0.4...0.4, using: &random) }  // [tap][channel]
        let b = (0..<channels).map { _ in Float.random(in: -0.1...0.1, using: &random) }
        let qIn = FakeQuant.activation(min: x.min() ?? 0, max: x.max() ?? 0)
        // Per channel: the channel's taps ([channel][tap]) give its scale.
        let byChannel = (0..<channels).flatMap { c in (0..<kernel).map { w[$0 * channels + c] } }
        let scales = FakeQuant.filterScales(byChannel, channels: channels)
        let wq = (0..<(kernel * channels)).map { i in FakeQuant.filterCodes([w[i]], scales: [scales[i % channels]])[0] }
        let bq = FakeQuant.biasCodes(b, input: qIn.scale, filter: scales)
        // The float forward of the fake-quantized layer (bias at its int32 code), then ReLU.
        let outTime = time - kernel + 1
        var y = [Float](repeating: 0, count: outTime * channels)
        for t in 0..<outTime {
            for c in 0..<channels {
                var acc = Double(bq[c]) * Double(qIn.scale) * Double(scales[c])
                for k in 0..<kernel { acc += Double(FakeQuant.fake(x[(t + k) * channels + c], qIn)) * Double(Float(wq[k * channels + c]) * scales[c]) }
                y[t * channels + c] = max(0, Float(acc))
            }
        }
        let qOut = FakeQuant.activation(min: 0, max: y.max() ?? 1)
        let fakeOut = y.map { FakeQuant.fake($0, qOut) }
        // The int8 kernel: NHWC [1, T, 1, C], filter [1, K, 1, C].
        let (m, s) = Quantized.multipliers(input: qIn.scale, filter: scales, output: qOut.scale)
        let attributes: [String: GraphAttribute] = [
            "strides": .ints([1, 1]), "dilations": .ints([1, 1]), "pads": .ints([0, 0, 0, 0]), "depth_multiplier": .int(1),
            "input_offset": .int(Int64(-qIn.zero)), "output_offset": .int(Int64(qOut.zero)), "multipliers": .ints(m), "shifts": .ints(s),
            "activation": .ints([Int64(qOut.zero), 127]),
        ]
        let out = try GraphOps.run("TFLiteDepthwiseConv2D", node: "layer", inputs: [
            GraphTensor(shape: [1, time, 1, channels], floats: x.map { Float(FakeQuant.code($0, qIn)) }),
            GraphTensor(shape: [1, kernel, 1, channels], floats: wq.map(Float.init)),
            GraphTensor(shape: [channels], integers: bq),
        ], attributes: attributes, opset: 13, outputCount: 1)[0]
        let dequantized = out.floats.map { qOut.scale * ($0 - Float(qOut.zero)) }
        #expect(out.shape == [1, outTime, 1, channels])
        let worst = maxAbsDifference(dequantized, fakeOut)
        #expect(worst <= qOut.scale * 1.0001, "seed \(seed): \(worst) over a step of \(qOut.scale)")
        #expect(Set(out.floats).count > 5, "the outputs vary")
    }
}
