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

@Suite("Hybrid integer sums: a hybrid product's int32 sums on int16 lanes")
struct HybridSumsTests {
    /// The sums as TFLite's reference kernel takes them: int32 products and sums (wrapping), then one
    /// conversion to float; y is [outputs][positions].
    static func reference(_ x: [Float], fields: [Int32]?, positions: Int, k: Int, w: [Float], outputs: Int) -> [Float] {
        var y = [Float](repeating: 0, count: outputs * positions)
        for p in 0..<positions {
            for o in 0..<outputs {
                var acc: Int32 = 0
                for i in 0..<k {
                    let at = fields.map { Int($0[p * k + i]) } ?? p * k + i
                    let v: Int32 = at < 0 ? 0 : Int32(x[at])
                    acc &+= Int32(w[o * k + i]) &* v
                }
                y[o * positions + p] = Float(acc)
            }
        }
        return y
    }

    /// `earshot_hybrid_sums` on `path`.
    static func kernel(_ x: [Float], fields: [Int32]?, positions: Int, k: Int, w: [Float], outputs: Int, path: Int32) -> [Float] {
        var packed = [Int16](repeating: 0, count: earshot_hybrid_packed_count(outputs, k))
        earshot_hybrid_pack(w, outputs, k, &packed)
        var scratch = [Int16](repeating: 0, count: earshot_hybrid_scratch_count(positions, k))
        var y = [Float](repeating: .nan, count: outputs * positions)
        if let fields {
            earshot_hybrid_sums(x, fields, positions, k, packed, outputs, positions, 1, path, &scratch, &y)
        } else {
            earshot_hybrid_sums(x, nil, positions, k, packed, outputs, positions, 1, path, &scratch, &y)
        }
        return y
    }

    @Test("every path equals int32 sums converted once to float: contiguous and gathered fields, fields listed as runs (read in place) among gathered ones, padding taps, odd depths, outputs and positions off the blocks, sums beyond 2^24")
    func equalsReference() {
        var random = SeededRandom.fromEnvironment()
        // (positions, depth, outputs, gathered): the hybrid classifier's filterbank (100 fields of
        // 160 taps, 16 outputs) and its 3-tap mix (50 x 48, 8 outputs), then shapes off the blocks.
        // The fields: none (contiguous), gathered at random, or listed runs (the filterbank's fields
        // as the plan lists them, each position's read in place), some of them gathered.
        enum Fields { case none, random, runs, mixed }
        let shapes: [(Int, Int, Int, Fields)] = [(100, 160, 16, .none), (100, 160, 16, .runs), (50, 48, 8, .random), (7, 5, 3, .random),
                                                 (1, 1, 1, .none), (9, 33, 17, .none), (13, 24, 40, .random), (3, 700, 20, .none),
                                                 (21, 37, 9, .mixed), (11, 16, 5, .runs)]
        for (positions, k, outputs, kind) in shapes {
            let count = positions * k + 5
            // The integers a hybrid input quantizes to (less the zero point: -255...255), int8 weights.
            var x = (0..<count).map { _ in Float(Int.random(in: -255...255, using: &random)) }
            if k == 700 { x = x.map { _ in 255 } }  // sums of 700 products of 255 x 127: beyond 2^24
            let w = (0..<(outputs * k)).map { _ in Float(k == 700 ? 127 : Int.random(in: -127...127, using: &random)) }
            let fields: [Int32]?
            switch kind {
            case .none: fields = nil
            case .random: fields = (0..<(positions * k)).map { _ in Int32.random(in: -1..<Int32(count), using: &random) }
            case .runs, .mixed:
                // Position p: the run from p * k + (p % 3) (within x), or for a mixed set's every
                // third position one gathered at random, and every fifth a run with a padding tap.
                fields = (0..<positions).flatMap { p -> [Int32] in
                    let run = (0..<k).map { Int32(p * k + p % 3 + $0) }
                    guard kind == .mixed else { return run }
                    if p % 3 == 1 { return (0..<k).map { _ in Int32.random(in: -1..<Int32(count), using: &random) } }
                    return p % 5 == 0 ? [-1] + run.dropFirst() : run
                }
            }
            let expected = Self.reference(x, fields: fields, positions: positions, k: k, w: w, outputs: outputs)
            if k == 700 { #expect(expected[0] == Float(700 * 255 * 127)) }
            for path in 0..<earshot_hybrid_sum_paths() {
                let got = Self.kernel(x, fields: fields, positions: positions, k: k, w: w, outputs: outputs, path: path)
                #expect(got.map(\.bitPattern) == expected.map(\.bitPattern), "seed \(random.seed), path \(path), \(positions)x\(k)x\(outputs)")
            }
        }
        // By hand: two fields of three taps, the second reading the padding once.
        let byHand = Self.kernel([1, -2, 3, 255], fields: [0, 1, 2, 3, -1, 0], positions: 2, k: 3, w: [1, 2, 3, -127, 0, 1], outputs: 2, path: -1)
        #expect(byHand == [6, 258, -124, -32_384])
    }
}
