import CEarshotKernels
import EarshotTestSupport
import Testing

@Suite("Depthwise convolution kernel")
struct DepthwiseKernelTests {
    /// Output (c, oy, ox) summed in double: the taps inside the plane, then the bias.
    static func reference(_ x: [Float], h: Int, w: Int, filters: [Float], kh: Int, kw: Int, stride: (Int, Int), dilation: (Int, Int),
                          pad: (Int, Int), bias: [Float], c: Int, oy: Int, ox: Int) -> Double {
        var sum = 0.0
        for i in 0..<kh {
            let iy = oy * stride.0 - pad.0 + i * dilation.0
            guard iy >= 0, iy < h else { continue }
            for j in 0..<kw {
                let ix = ox * stride.1 - pad.1 + j * dilation.1
                guard ix >= 0, ix < w else { continue }
                sum += Double(filters[(c * kh + i) * kw + j]) * Double(x[(c * h + iy) * w + ix])
            }
        }
        return sum + Double(bias[c])
    }

    @Test("Planes narrow and wide (rows of 64 and 16 outputs in registers, and one by one at the edges), strides 1 to 3, dilations and pads: every output equals a sum in double")
    func againstReference() {
        var random = SeededRandom(seed: 48)
        let cases: [(h: Int, w: Int, kh: Int, kw: Int, stride: (Int, Int), dilation: (Int, Int), pad: (Int, Int))] = [
            (6, 150, 3, 3, (1, 1), (1, 1), (1, 1)), (5, 150, 3, 3, (2, 2), (1, 1), (1, 1)), (4, 97, 1, 5, (1, 1), (1, 2), (0, 4)),
            (3, 200, 2, 7, (1, 3), (1, 1), (0, 3)), (7, 20, 5, 5, (1, 1), (1, 1), (2, 2)), (2, 5, 3, 3, (1, 1), (1, 1), (1, 1)),
            (1, 511, 1, 9, (1, 2), (1, 1), (0, 4)), (9, 80, 3, 1, (2, 1), (2, 1), (2, 0)), (4, 66, 3, 3, (1, 2), (1, 1), (0, 0)),
        ]
        for k in cases {
            let channels = 3
            let oh = (k.h + 2 * k.pad.0 - k.dilation.0 * (k.kh - 1) - 1) / k.stride.0 + 1
            let ow = (k.w + 2 * k.pad.1 - k.dilation.1 * (k.kw - 1) - 1) / k.stride.1 + 1
            let x = (0..<(channels * k.h * k.w)).map { _ in Float.random(in: -2...2, using: &random) }
            let filters = (0..<(channels * k.kh * k.kw)).map { _ in Float.random(in: -1...1, using: &random) }
            let bias = (0..<channels).map { _ in Float.random(in: -1...1, using: &random) }
            var y = [Float](repeating: .nan, count: channels * oh * ow)
            earshot_depthwise(x, channels, k.h, k.w, filters, k.kh, k.kw, k.stride.0, k.stride.1, k.dilation.0, k.dilation.1, k.pad.0, k.pad.1,
                              oh, ow, bias, &y)
            var worst = 0.0, at = ""
            for c in 0..<channels {
                for oy in 0..<oh {
                    for ox in 0..<ow {
                        let exact = Self.reference(x, h: k.h, w: k.w, filters: filters, kh: k.kh, kw: k.kw, stride: k.stride, dilation: k.dilation,
                                                   pad: k.pad, bias: bias, c: c, oy: oy, ox: ox)
                        let diff = abs(Double(y[(c * oh + oy) * ow + ox]) - exact)
                        if !(diff <= worst) { (worst, at) = (diff, "[\(c)][\(oy)][\(ox)] \(y[(c * oh + oy) * ow + ox]) vs \(exact)") }
                    }
                }
            }
            #expect(worst <= 1e-5, "\(k.h)x\(k.w), kernel \(k.kh)x\(k.kw), stride \(k.stride), dilation \(k.dilation), pad \(k.pad): \(at)")
        }
    }

    @Test("Channels-last (lanes over 64, 16 and single channels): the same bits as plane by plane, strides, dilations and pads included",
          arguments: [16, 67, 150])
    func channelsLast(channels: Int) {
        var random = SeededRandom(seed: UInt64(49 + channels))
        let cases: [(h: Int, w: Int, kh: Int, kw: Int, stride: (Int, Int), dilation: (Int, Int), pad: (Int, Int))] = [
            (12, 16, 3, 3, (1, 1), (1, 1), (1, 1)), (24, 16, 3, 3, (2, 2), (1, 1), (0, 0)), (6, 9, 3, 3, (2, 1), (1, 2), (1, 2)),
            (3, 8, 1, 3, (1, 1), (1, 1), (0, 1)), (5, 7, 5, 3, (1, 3), (1, 1), (2, 1)),
        ]
        for k in cases {
            let oh = (k.h + 2 * k.pad.0 - k.dilation.0 * (k.kh - 1) - 1) / k.stride.0 + 1
            let ow = (k.w + 2 * k.pad.1 - k.dilation.1 * (k.kw - 1) - 1) / k.stride.1 + 1
            let plane = k.h * k.w, taps = k.kh * k.kw, positions = oh * ow
            let x = (0..<(channels * plane)).map { _ in Float.random(in: -2...2, using: &random) }
            let filters = (0..<(channels * taps)).map { _ in Float.random(in: -1...1, using: &random) }
            let bias = (0..<channels).map { _ in Float.random(in: -1...1, using: &random) }
            var planes = [Float](repeating: .nan, count: channels * positions)
            earshot_depthwise(x, channels, k.h, k.w, filters, k.kh, k.kw, k.stride.0, k.stride.1, k.dilation.0, k.dilation.1, k.pad.0, k.pad.1,
                              oh, ow, bias, &planes)
            // The same values channels-last: x [plane][channels], filters [taps][channels].
            let xLast = (0..<(channels * plane)).map { x[($0 % channels) * plane + $0 / channels] }
            let filtersLast = (0..<(channels * taps)).map { filters[($0 % channels) * taps + $0 / channels] }
            var last = [Float](repeating: .nan, count: channels * positions)
            earshot_depthwise_last(xLast, channels, k.h, k.w, filtersLast, k.kh, k.kw, k.stride.0, k.stride.1, k.dilation.0, k.dilation.1,
                                   k.pad.0, k.pad.1, oh, ow, bias, &last)
            let back = (0..<(channels * positions)).map { last[($0 % positions) * channels + $0 / positions] }
            #expect(back.map(\.bitPattern) == planes.map(\.bitPattern), "\(channels) channels, \(k.h)x\(k.w), kernel \(k.kh)x\(k.kw), stride \(k.stride)")
            // And the values: output (0, 0) of the last channel in double.
            let c = channels - 1
            let exact = Self.reference(x, h: k.h, w: k.w, filters: filters, kh: k.kh, kw: k.kw, stride: k.stride, dilation: k.dilation, pad: k.pad,
                                       bias: bias, c: c, oy: 0, ox: 0)
            #expect(abs(Double(back[c * positions]) - exact) <= 1e-5, "\(channels) channels, \(k.h)x\(k.w): \(back[c * positions]) vs \(exact)")
        }
    }
}
