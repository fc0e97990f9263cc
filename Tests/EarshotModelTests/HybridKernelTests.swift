import CEarshotKernels
import EarshotGraph
import EarshotTestSupport
import Testing

@Suite("Hybrid kernels: TFLite's run-time input quantization in C, bit for bit the graph op's")
struct HybridKernelTests {
    /// The graph op `TFLiteHybridQuantize` (its Swift reference kernel) on one block: the integers and the scale.
    static func reference(_ x: [Float], asymmetric: Bool) throws -> ([Float], Float) {
        let out = try GraphOps.run(.tfliteHybridQuantize, node: "q", inputs: [GraphTensor(shape: [1, x.count], floats: x)],
                                   attributes: ["axis": .int(1), "asymmetric": .int(asymmetric ? 1 : 0)], opset: 17)
        return (out[0].floats, out[1].floats[0])
    }

    /// `earshot_hybrid_quantize` on `path`: the integers and the scale.
    static func kernel(_ x: [Float], asymmetric: Bool, path: Int32) -> ([Float], Float) {
        var q = [Float](repeating: .nan, count: x.count)
        let scale = x.withUnsafeBufferPointer { xs in
            q.withUnsafeMutableBufferPointer { earshot_hybrid_quantize(xs.baseAddress, xs.count, asymmetric ? 1 : 0, path, $0.baseAddress) }
        }
        return (q, scale)
    }

    static func bits(_ v: [Float]) -> [UInt32] { v.map(\.bitPattern) }

    @Test("every path equals the Swift kernel bit for bit (sign of zero included) on random blocks of 1 to 300 values, rows of zeros, ties at .5, huge, tiny and non-finite values")
    func equalsReference() throws {
        var random = SeededRandom.fromEnvironment()
        var blocks: [[Float]] = [[], [0], [-0.0], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                                 [127, 62.5, -62.5, 0.5, -0.5, 1.5, -1.5, 2.5, 0], [2.5, -1.596, 0.7], [0.5, 1.5, -0.5],
                                 [3e38, -3e38, 1, -1], [.greatestFiniteMagnitude, -.greatestFiniteMagnitude], [.leastNonzeroMagnitude, -.leastNonzeroMagnitude, 0],
                                 [.infinity, 1, 2], [1, -.infinity, 3], [.nan, 1, 2], [1, .nan, -2], [-0.0, -0.3, -0.7, 0.3],
                                 (0..<37).map { Float($0) - 18.5 }, (0..<33).map { _ in 5 }, (0..<20).map { _ in -5 }]
        // Values whose scaled values land on halves: a block of max 127 holds its own integers and halves.
        blocks.append((0..<64).map { Float($0) * 0.5 - 16 } + [127])
        for _ in 0..<400 {
            let n = Int.random(in: 1...300, using: &random)
            let magnitude = Float(sign: .plus, exponent: Int.random(in: -30...30, using: &random), significand: 1)
            let shift: Float = Bool.random(using: &random) ? 0 : Float.random(in: -2...2, using: &random)
            blocks.append((0..<n).map { _ in (Float.random(in: -1...1, using: &random) + shift) * magnitude })
        }
        var checked = 0
        for x in blocks {
            for asymmetric in [false, true] {
                let (q, scale) = try Self.reference(x, asymmetric: asymmetric)
                for path in 0..<earshot_hybrid_paths() {
                    let (got, gotScale) = Self.kernel(x, asymmetric: asymmetric, path: path)
                    #expect(Self.bits(got) == Self.bits(q), "seed \(random.seed), path \(path), asymmetric \(asymmetric), block \(x.prefix(8))...")
                    #expect(gotScale.bitPattern == scale.bitPattern, "seed \(random.seed), path \(path), asymmetric \(asymmetric): \(gotScale) vs \(scale)")
                    checked += 1
                }
            }
        }
        #expect(checked >= 2 * blocks.count)
        // Known values: ties round away from zero, a row of zeros has scale 1.
        #expect(Self.kernel([127, 62.5, -62.5, 0], asymmetric: false, path: -1).0 == [127, 63, -63, 0])
        #expect(Self.kernel([0, 0, 0], asymmetric: true, path: -1) == ([0, 0, 0], 1))
        #expect(Self.kernel([2.5, -1.596, 0.7], asymmetric: true, path: -1) == ([156, -99, 44], 0.016062744))
    }
}

@Suite("Depthwise convolution over one column")
struct DepthwiseColumnTests {
    @Test("a plane of one column read as one row (the plan's layout for 100 x 1 planes) gives the same bits as read as a column, strides, dilations and pads included")
    func columnAsRow() {
        var random = SeededRandom(seed: 47)
        for (h, k, stride, dilation, pad) in [(100, 5, 1, 1, 2), (100, 5, 2, 1, 0), (37, 3, 1, 2, 1), (16, 7, 3, 1, 3), (5, 9, 1, 1, 4)] {
            let channels = 16, oh = (h + 2 * pad - dilation * (k - 1) - 1) / stride + 1
            let x = (0..<(channels * h)).map { _ in Float.random(in: -2...2, using: &random) }
            let w = (0..<(channels * k)).map { _ in Float.random(in: -1...1, using: &random) }
            let bias = (0..<channels).map { _ in Float.random(in: -1...1, using: &random) }
            var column = [Float](repeating: .nan, count: channels * oh), row = column
            // [channels][h][1] with a kernel [k][1], then the same memory as [channels][1][h] with a kernel [1][k].
            earshot_depthwise(x, channels, h, 1, w, k, 1, stride, 1, dilation, 1, pad, 0, oh, 1, bias, &column)
            earshot_depthwise(x, channels, 1, h, w, 1, k, 1, stride, 1, dilation, 0, pad, 1, oh, bias, &row)
            #expect(row.map(\.bitPattern) == column.map(\.bitPattern), "h \(h), k \(k), stride \(stride), dilation \(dilation), pad \(pad)")
            // And the values: output 0 of channel 0 by hand (in double; the kernel may fuse its multiply-adds).
            var sum = Double(bias[0])
            for i in 0..<k where i * dilation - pad >= 0 && i * dilation - pad < h { sum += Double(w[i]) * Double(x[i * dilation - pad]) }
            #expect(abs(Double(row[0]) - sum) <= 1e-5, "h \(h), k \(k): \(row[0]) vs \(sum)")
        }
    }
}
