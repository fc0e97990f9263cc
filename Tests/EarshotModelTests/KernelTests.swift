import EarshotGraph
import Foundation
import CEarshotKernels
import EarshotTestSupport
import Testing
@testable import EarshotModel

@Suite("Kernels")
struct KernelTests {
    @Test("The transpose: whole 16 x 16 blocks in registers and ragged rows and columns, wide and tall, each value moved to its place, bits kept")
    func transpose() {
        var random = SeededRandom(seed: 47)
        let shapes = [(1, 1), (1, 40), (40, 1), (15, 15), (16, 16), (17, 33), (33, 17), (32, 48), (72, 384), (384, 72), (50, 70), (5, 200)]
        for (rows, cols) in shapes {
            let x = (0..<(rows * cols)).map { _ in Float.random(in: -1000...1000, using: &random) }
            var y = [Float](repeating: .nan, count: rows * cols)
            earshot_transpose(x, rows, cols, &y)
            var wrong = 0, first = ""
            for r in 0..<rows {
                for c in 0..<cols where y[c * rows + r].bitPattern != x[r * cols + c].bitPattern {
                    if wrong == 0 { first = "[\(c)][\(r)] \(y[c * rows + r]) vs \(x[r * cols + c])" }
                    wrong += 1
                }
            }
            #expect(wrong == 0, "\(rows) x \(cols): \(wrong) values misplaced, first \(first)")
        }
    }

    @Test("Max and Min: NaN from either operand; on a tie of +0 and -0 the first operand, as TFLite and onnxruntime (std::max, std::min) give it; in vector runs and value by value alike")
    func maxMin() {
        let a: [Float] = [0, -0.0, 1, -2, .nan, 3, 5, -0.0, 0, 7], b: [Float] = [-0.0, 0, 1, 4, 2, .nan, -5, -0.0, 0, -7]
        for (op, pick) in [(EARSHOT_MAX, { (p: Float, q: Float) in q > p ? q : p }), (EARSHOT_MIN, { (p: Float, q: Float) in q < p ? q : p })] {
            var y = [Float](repeating: 1, count: a.count)
            earshot_binary(Int32(op), a, 1, b, 1, &y, a.count)
            for i in a.indices {
                var one = Float(1)
                earshot_binary(Int32(op), [a[i]], 0, [b[i]], 0, &one, 1)
                #expect(one.bitPattern == y[i].bitPattern || (one.isNaN && y[i].isNaN), "\(op) \(a[i]), \(b[i]): alone \(one), in a run \(y[i])")
                if a[i].isNaN || b[i].isNaN {
                    #expect(y[i].isNaN, "\(op) \(a[i]), \(b[i])")
                } else {
                    #expect(y[i].bitPattern == pick(a[i], b[i]).bitPattern, "\(op) \(a[i]), \(b[i]): \(y[i])")
                }
            }
        }
    }

    @Test("Reductions: sums and means one chain per output in member order, maxima and minima keeping a NaN and the first of +0 and -0, every value bit for bit a plain loop's, contiguous or strided, in vectors and tails")
    func reductions() {
        var random = SeededRandom(seed: 59)
        // (outputs, count, stride of members, output stride)
        let layouts = [(1, 144000, 1, 0), (288, 384, 1, 384), (13, 40, 1, 40), (9, 31, 1, 31), (6, 100, 6, 1), (1, 0, 1, 0), (17, 1, 1, 1)]
        for (outputs, count, step, spacing) in layouts {
            let starts = (0..<outputs).map { $0 * spacing }, members = (0..<count).map { $0 * step }
            let size = max(1, (outputs - 1) * spacing + (count - 1) * step + 1)
            var x = (0..<size).map { _ in Float.random(in: -100...100, using: &random) }
            for variant in 0..<4 {
                if variant == 1, size > 5 { x[size / 2] = .nan; x[size - 3] = -.nan }
                if variant == 2 { x = x.map { $0.isNaN ? -1 : -abs($0) - 1 }; x[size - 1] = 0; x[0] = -0.0; if size > 16 { x[0] = -2; x[1] = 0; x[16] = -0.0 } }
                if variant == 3 { x = x.map { $0.isNaN || $0 == 0 ? 1 : abs($0) }; x[0] = -0.0; x[size - 1] = 0 }
                for op in [EARSHOT_REDUCE_SUM, EARSHOT_REDUCE_MEAN, EARSHOT_REDUCE_MAX, EARSHOT_REDUCE_MIN].map(Int32.init) {
                    let (isMax, isSum) = (op == Int32(EARSHOT_REDUCE_MAX), op == Int32(EARSHOT_REDUCE_SUM) || op == Int32(EARSHOT_REDUCE_MEAN))
                    var y = [Float](repeating: 7, count: outputs)
                    earshot_reduce(op, x, starts, outputs, members.isEmpty ? starts : members, count, &y)
                    for o in 0..<outputs {
                        var m: Float = isMax ? -.infinity : .infinity, sum: Float = 0
                        for r in members {
                            let e = x[starts[o] + r]
                            sum += e
                            if (isMax ? e > m : e < m) || e.isNaN { m = e }
                        }
                        let expected = op == Int32(EARSHOT_REDUCE_SUM) ? sum : op == Int32(EARSHOT_REDUCE_MEAN) ? sum / Float(count) : m
                        // A sum's NaN: which operand's NaN an addition passes on is not fixed.
                        let same = y[o].bitPattern == expected.bitPattern || (isSum && y[o].isNaN && expected.isNaN)
                        #expect(same, "op \(op), \(outputs) x \(count) by \(step), variant \(variant), output \(o): \(y[o]) vs \(expected)")
                    }
                }
            }
        }
    }

    @Test("Pooling over regular windows (pairs, as BirdNET's 1 x 2 pools; and threes, overlapping fours) equals the listed windows' kernel bit for bit: maxima keeping the first of a tie and a NaN where it stands, averages with their -0, vectors and tails")
    func regularPooling() {
        var random = SeededRandom(seed: 61)
        // (stride, width, outputs per plane, planes)
        for (stride, width, outputs, planes) in [(2, 2, 95, 3), (2, 2, 16, 1), (2, 2, 7, 2), (3, 3, 21, 2), (2, 4, 19, 2)] {
            let plane = (outputs - 1) * stride + width
            var x = (0..<(plane * planes)).map { _ in Float.random(in: -10...10, using: &random) }
            for i in Swift.stride(from: 0, to: x.count, by: 11) { x[i] = -0.0 }
            for i in Swift.stride(from: 5, to: x.count, by: 13) { x[i] = 0 }
            for i in Swift.stride(from: 7, to: x.count, by: 29) { x[i] = .nan }
            for i in Swift.stride(from: 8, to: x.count, by: 31) { x[i] = x[i - 1] }
            var starts: [Int32] = [0], members: [Int32] = []
            for k in 0..<outputs {
                members += (0..<width).map { Int32(k * stride + $0) }
                starts.append(Int32(members.count))
            }
            let divisors = (0..<outputs).map { Float($0 % 5 == 4 ? 0 : width - $0 % 2) }
            for max in [Int32(1), 0] {
                var listed = [Float](repeating: 7, count: outputs * planes), regular = listed
                earshot_pool(max, x, planes, plane, starts, members, divisors, outputs, &listed)
                earshot_pool_regular(max, x, planes, plane, stride, width, divisors, outputs, &regular)
                let differ = zip(listed, regular).filter { $0.bitPattern != $1.bitPattern && !(max == 0 && $0.isNaN && $1.isNaN) }.count
                #expect(differ == 0, "max \(max), stride \(stride), width \(width), \(outputs) outputs: \(differ) differ")
            }
        }
    }

    @Test("Sigmoid and swish: each value within 1e-6 of the exact one, relative, and the same bits wherever it lies in a run (16 lanes, 8 lanes or the tail)")
    func sigmoidAnywhere() {
        var random = SeededRandom(seed: 67)
        let x = (0..<61).map { _ in Float.random(in: -30...30, using: &random) } + [0, -0.0, 88, -88, 100, -100, 1e-30]
        for op in [EARSHOT_SIGMOID, EARSHOT_SWISH].map(Int32.init) {
            var alone = [Float](repeating: 0, count: x.count)
            for i in x.indices { earshot_unary(op, 0, [x[i]], &alone[i], 1) }
            for shift in 0..<17 {
                // The values after `shift` others: each falls on another lane, or into the tail.
                let run = [Float](repeating: 0.5, count: shift) + x
                var y = [Float](repeating: .nan, count: run.count)
                earshot_unary(op, 0, run, &y, run.count)
                let moved = x.indices.filter { y[shift + $0].bitPattern != alone[$0].bitPattern }
                #expect(moved.isEmpty, "op \(op), after \(shift) values: \(moved.map { x[$0] })")
            }
            for (v, got) in zip(x, alone) {
                let s = 1 / (1 + exp(-Double(v))), exact = op == Int32(EARSHOT_SWISH) ? Double(v) * s : s
                // Past |x| = 87 the exponential is held at e^87: a sigmoid of -100 is 6e-39, not 4e-44.
                #expect(abs(Double(got) - exact) <= 1e-6 * abs(exact) + 1e-36, "op \(op), \(v): \(got) vs \(exact)")
            }
        }
    }

    @Test("The FFT steps' conversions: a frame to double (the window's product exact, or rounded to float as a Mul gives it, or no window), bins back to float (every one, or every other: the real parts), and complex bins split into real and scaled imaginary parts at a stride, each part optional")
    func fftConversions() {
        var random = SeededRandom(seed: 83)
        let n = 37
        let x = (0..<n).map { _ in Float.random(in: -3...3, using: &random) }, w = (0..<n).map { _ in Float.random(in: 0...1, using: &random) }
        var exact = [Double](repeating: .nan, count: n), rounded = exact, plain = exact
        earshot_windowed_doubles(x, w, n, 0, &exact)
        earshot_windowed_doubles(x, w, n, 1, &rounded)
        earshot_windowed_doubles(x, nil, n, 1, &plain)
        #expect(exact == (0..<n).map { Double(x[$0]) * Double(w[$0]) })
        #expect(rounded == (0..<n).map { Double(x[$0] * w[$0]) })
        #expect(plain == x.map(Double.init))
        // The exact product keeps what rounding to float loses.
        #expect(zip(exact, rounded).contains { $0 != $1 })
        let d = (0..<(2 * n)).map { _ in Double.random(in: -1e3...1e3, using: &random) }
        var all = [Float](repeating: .nan, count: 2 * n), reals = [Float](repeating: .nan, count: n)
        earshot_round_doubles(d, 2 * n, 1, &all)
        earshot_round_doubles(d, n, 2, &reals)
        #expect(all == d.map(Float.init))
        #expect(reals == (0..<n).map { Float(d[2 * $0]) })
        let bins = 9, stride = 3
        let c = (0..<(2 * bins)).map { _ in Float.random(in: -5...5, using: &random) }
        var re = [Float](repeating: 7, count: bins * stride), im = re, imOnly = re
        earshot_split_complex(c, bins, &re, &im, -1, stride)
        earshot_split_complex(c, bins, nil, &imOnly, 2, stride)
        for k in 0..<bins {
            #expect(re[k * stride] == c[2 * k] && im[k * stride] == -c[2 * k + 1] && imOnly[k * stride] == 2 * c[2 * k + 1], "bin \(k)")
            // Only the strided places are written.
            #expect(re[k * stride + 1] == 7 && im[k * stride + 2] == 7)
        }
    }

    @Test("Log: within 1 ulp of a double-precision log over positive normal values from 1e-38 to 3e38, and around 1 and the halving point sqrt(2); logf's values where the vector form does not apply (zero, negative, subnormal, infinite, NaN); each value the same bits wherever it lies in a run")
    func logarithm() {
        var random = SeededRandom(seed: 59)
        let spread = (0..<4000).map { _ in Float(pow(10, Double.random(in: -37.9...38.5, using: &random))) }
        let near = (0..<4000).map { i in Float.random(in: 0.5...2, using: &random) * (i % 2 == 0 ? 1 : 1.4142135 / 1.25) }
        let x = spread + near + [1, 1.4142135, 1.4142137, 0.70710677, 0.7071068, .leastNormalMagnitude, .greatestFiniteMagnitude, 0.99999994, 1.0000001]
        var y = [Float](repeating: .nan, count: x.count)
        earshot_unary(Int32(EARSHOT_LOG), 0, x, &y, x.count)
        var worst: (ulps: Double, at: Float) = (0, 0)
        for (v, got) in zip(x, y) {
            let exact = log(Double(v)), ulps = abs(Double(got) - exact) / Double(Float(exact).ulp)
            if ulps > worst.ulps { worst = (ulps, v) }
        }
        #expect(worst.ulps <= 1, "ln(\(worst.at)) off by \(worst.ulps) ulp")
        for start in 0..<17 {
            let run = Array(x[start..<(start + 61)])
            var part = [Float](repeating: .nan, count: run.count)
            earshot_unary(Int32(EARSHOT_LOG), 0, run, &part, run.count)
            #expect(part.map(\.bitPattern) == y[start..<(start + 61)].map(\.bitPattern), "a run from \(start)")
        }
        let special: [Float] = [0, -0.0, -1, -.infinity, .infinity, .nan, .leastNonzeroMagnitude, .leastNormalMagnitude / 2]
        var sy = [Float](repeating: 0, count: special.count + 3)
        earshot_unary(Int32(EARSHOT_LOG), 0, [2, 3, 4] + special, &sy, special.count + 3)
        for (i, v) in special.enumerated() {
            let expected = Foundation.log(v), got = sy[i + 3]
            #expect(got.bitPattern == expected.bitPattern || (got.isNaN && expected.isNaN), "ln(\(v)): \(got) vs \(expected)")
        }
    }

    @Test("Depthwise convolution channels-last, and plane by plane over padded rows, equal the plane-by-plane kernel bit for bit (zeros and a NaN among the values): 3 x 3 taps (their filters held in registers over padded rows; 64, 16 and single channels channels-last; inside the plane and at its edges), strides, pads, dilation and 5 x 5 taps, with and without a bias")
    func depthwiseLast() {
        var random = SeededRandom(seed: 71)
        // (channels, h, w, kh, kw, sh, sw, dh, dw, ph, pw)
        let cases = [(20, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1), (48, 12, 32, 3, 3, 2, 2, 1, 1, 0, 0), (33, 6, 16, 3, 3, 1, 2, 1, 1, 1, 1),
                     (16, 5, 5, 3, 3, 1, 1, 2, 2, 2, 2), (24, 6, 7, 5, 5, 1, 1, 1, 1, 2, 2), (5, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1),
                     (72, 8, 12, 3, 3, 2, 2, 1, 1, 0, 1), (29, 5, 9, 3, 3, 1, 1, 1, 1, 1, 1)]
        for (channels, h, w, kh, kw, sh, sw, dh, dw, ph, pw) in cases {
            let oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1, ow = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1
            // Zeros (whose products with negative filters are -0) and a NaN among the values.
            var x = (0..<(channels * h * w)).map { _ in Float.random(in: -2...2, using: &random) }
            for i in Swift.stride(from: 0, to: x.count, by: 3) { x[i] = 0 }
            x[x.count / 2] = .nan
            let filters = (0..<(channels * kh * kw)).map { _ in Float.random(in: -1...1, using: &random) }
            let bias = (0..<channels).map { _ in Float.random(in: -1...1, using: &random) }
            var xLast = [Float](repeating: 0, count: x.count), filtersLast = [Float](repeating: 0, count: filters.count)
            earshot_transpose(x, channels, h * w, &xLast)
            earshot_transpose(filters, channels, kh * kw, &filtersLast)
            for withBias in [true, false] {
                var planes = [Float](repeating: .nan, count: channels * oh * ow), last = planes, lastPlanes = planes
                earshot_depthwise(x, channels, h, w, filters, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow, withBias ? bias : nil, &planes)
                earshot_depthwise_last(xLast, channels, h, w, filtersLast, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow, withBias ? bias : nil, &last)
                earshot_transpose(last, oh * ow, channels, &lastPlanes)
                let differ = zip(planes, lastPlanes).filter { $0.bitPattern != $1.bitPattern }.count
                #expect(differ == 0, "\(channels) channels, \(h) x \(w), \(kh) x \(kw) taps, bias \(withBias): \(differ) of \(planes.count) differ")
                // Rows padded in the scratch: the same bits.
                var padded = [Float](repeating: .nan, count: planes.count)
                var scratch = [Float](repeating: .nan, count: h * earshot_depthwise_padded_width(w, kw, sw, dw, pw, ow))
                earshot_depthwise_padded(x, channels, h, w, filters, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow, withBias ? bias : nil, &padded, &scratch)
                let differPadded = zip(planes, padded).filter { $0.bitPattern != $1.bitPattern && !($0.isNaN && $1.isNaN) }.count
                #expect(differPadded == 0, "padded rows: \(channels) channels, \(h) x \(w), \(kh) x \(kw) taps, bias \(withBias): \(differPadded) differ")
            }
        }
    }

    @Test("Pow: within 1e-6 of a double-precision power, relative, over bases from 1e-30 to 1e30 and exponents from -3 to 3, and over the vector exponential's whole reach (|b ln a| up to 10); powf's special values; every value the same, bit for bit, in a run of any length, by a fixed exponent or by one per value")
    func power() {
        var random = SeededRandom(seed: 53)
        let n = 203
        let a = (0..<n).map { _ in Float(pow(10, Double.random(in: -30...30, using: &random))) }
        let b = (0..<n).map { _ in Float.random(in: -3...3, using: &random) }
        var y = [Float](repeating: .nan, count: n)
        earshot_binary(Int32(EARSHOT_POW), a, 1, b, 1, &y, n)
        for i in 0..<n {
            let exact = pow(Double(a[i]), Double(b[i]))
            guard exact > 1e-37, exact < 1e37 else { continue }
            #expect(abs(Double(y[i]) - exact) <= 1e-6 * exact, "\(a[i]) ^ \(b[i]): \(y[i]) vs \(exact)")
        }
        // Exponents spread over the whole reach of the vector exponential (|b ln a| up to 10),
        // its edges included, where the draws above mostly fall beyond it.
        let reach = (0..<n).map { i in i < 4 ? [-10, -9.999, 9.999, 10][i] : Double.random(in: -10...10, using: &random) }
        let ra = (0..<n).map { _ in Float(pow(10, Double.random(in: -30...30, using: &random))) }.map { $0 == 1 ? 2 : $0 }
        let rb = zip(reach, ra).map { Float($0 / log(Double($1))) }
        var ry = [Float](repeating: .nan, count: n)
        earshot_binary(Int32(EARSHOT_POW), ra, 1, rb, 1, &ry, n)
        for i in 0..<n {
            let exact = pow(Double(ra[i]), Double(rb[i]))
            #expect(abs(Double(ry[i]) - exact) <= 1e-6 * exact, "\(ra[i]) ^ \(rb[i]): \(ry[i]) vs \(exact)")
        }
        // Runs of every length and start, a fixed exponent: each value as in the whole run.
        let e: Float = 0.3078
        var whole = [Float](repeating: .nan, count: n)
        earshot_binary(Int32(EARSHOT_POW), a, 1, [e], 0, &whole, n)
        for (start, count) in [(0, 1), (3, 7), (5, 8), (11, 17), (100, 103)] {
            var part = [Float](repeating: .nan, count: count)
            earshot_binary(Int32(EARSHOT_POW), Array(a[start..<(start + count)]), 1, [e], 0, &part, count)
            #expect(part.map(\.bitPattern) == whole[start..<(start + count)].map(\.bitPattern), "\(start) + \(count)")
        }
        // Where the exponential does not apply, powf's value.
        let special: [(Float, Float)] = [(0, 0.5), (0, -1), (-0.0, 3), (-2, 2), (-2, 0.5), (.infinity, 0.5), (.infinity, -1),
                                         (-.infinity, 3), (.nan, 1), (2, .nan), (1, .nan), (Float.leastNormalMagnitude / 8, 0.5), (1e30, 10), (3, 0), (1, 7)]
        let sa = special.map(\.0), sb = special.map(\.1)
        var sy = [Float](repeating: 0, count: special.count)
        earshot_binary(Int32(EARSHOT_POW), sa, 1, sb, 1, &sy, special.count)
        for (i, (p, q)) in special.enumerated() {
            let expected = Foundation.pow(p, q)
            #expect(sy[i].bitPattern == expected.bitPattern || (sy[i].isNaN && expected.isNaN), "\(p) ^ \(q): \(sy[i]) vs \(expected)")
        }
    }

    @Test("The packed product: every shape against a double-precision sum, and each column equal, bit for bit, to that column alone (a last panel of 8 rows or fewer, 24 or 72 rows, takes 8-lane tiles)")
    func packedProduct() {
        var random = SeededRandom(seed: 41)
        for (rows, k) in [1, 8, 15, 16, 17, 24, 72, 80, 97, 130].flatMap({ r in [1, 7, 33, 129, 300].map { (r, $0) } }) {
            let w = (0..<(rows * k)).map { _ in Float.random(in: -1...1, using: &random) }
            let bias = (0..<rows).map { _ in Float.random(in: -1...1, using: &random) }
            let packed = PackedMatrix(w, rows: rows, k: k)
            for n in [1, 2, 3, 5, 6, 7, 13] {
                let x = (0..<(n * k)).map { _ in Float.random(in: -1...1, using: &random) }
                var y = [Float](repeating: .nan, count: n * rows)
                x.withUnsafeBufferPointer { xv in
                    y.withUnsafeMutableBufferPointer { packed.product(xv.baseAddress!, columns: n, bias: bias, into: $0.baseAddress!) }
                }
                for j in 0..<n {
                    var alone = [Float](repeating: .nan, count: rows)
                    x.withUnsafeBufferPointer { xv in
                        alone.withUnsafeMutableBufferPointer { packed.product(xv.baseAddress! + j * k, columns: 1, bias: bias, into: $0.baseAddress!) }
                    }
                    #expect(Array(y[(j * rows)..<((j + 1) * rows)]) == alone, "rows \(rows) k \(k) n \(n) column \(j)")
                    for r in 0..<rows {
                        let exact = (0..<k).reduce(Double(bias[r])) { $0 + Double(w[r * k + $1]) * Double(x[j * k + $1]) }
                        #expect(abs(Double(y[j * rows + r]) - exact) <= 1e-5 * Double(k), "rows \(rows) k \(k) n \(n) [\(j)][\(r)]")
                    }
                }
            }
        }
    }

    @Test("A long product sums in blocks of 128 terms: over a head's 1536 inputs its error is a part of one float chain's",
          arguments: [(-0.05, 0.05, 2.0), (0.0, 0.05, 4.0)])
    func longProduct(_ low: Float, _ high: Float, _ gain: Double) {
        // As openWakeWord's hey_mycroft head: 16 embeddings of 96 (values of one sign up to 50)
        // into small weights, of both signs or of one (the partial sums then grow all along).
        var random = SeededRandom(seed: 43)
        let rows = 64, k = 1536
        let w = (0..<(rows * k)).map { _ in Float.random(in: low...high, using: &random) }
        let x = (0..<k).map { _ in Float.random(in: 0...50, using: &random) }
        var y = [Float](repeating: .nan, count: rows)
        x.withUnsafeBufferPointer { xv in
            y.withUnsafeMutableBufferPointer { PackedMatrix(w, rows: rows, k: k).product(xv.baseAddress!, columns: 1, bias: nil, into: $0.baseAddress!) }
        }
        var kernel = 0.0, chain = 0.0
        for r in 0..<rows {
            let exact = (0..<k).reduce(0.0) { $0 + Double(w[r * k + $1]) * Double(x[$1]) }
            let sequential = (0..<k).reduce(Float(0)) { $0 + w[r * k + $1] * x[$1] }
            kernel += abs(Double(y[r]) - exact)
            chain += abs(Double(sequential) - exact)
        }
        print("a 1536-term product, weights in \(low)...\(high): mean |error| \(kernel / Double(rows)) in blocks, \(chain / Double(rows)) as one chain")
        #expect(kernel * gain < chain)
    }

    @Test("Requantization on each int8 path equals TFLite's MultiplyByQuantizedMultiplier, offset and clamped: saturation, rounding and the tail included")
    func requantization() {
        var random = SeededRandom(seed: 23)
        let edges: [Int32] = [.min, .min + 1, -(1 << 30), -1, 0, 1, 1 << 30, .max - 1, .max]
        let multipliers: [Int32] = [.min, 1 << 30, (1 << 30) + 1, .max]
        // 1001 values: a tail that is not a whole vector, every edge against every edge multiplier.
        var acc: [Int32] = [], multiplier: [Int32] = [], shift: [Int32] = []
        for a in edges { for m in multipliers { for s: Int32 in [-40, -31, -7, -1, 0, 1, 3] { acc.append(a); multiplier.append(m); shift.append(s) } } }
        while acc.count < 1001 {
            acc.append(Int32.random(in: .min ... .max, using: &random))
            multiplier.append(Bool.random(using: &random) ? Int32.random(in: (1 << 30) ... .max, using: &random) : Int32.random(in: .min ... .max, using: &random))
            shift.append(Int32.random(in: -33...6, using: &random))
        }
        // Exact halves of the rounding shift: where half away from zero and half up differ.
        acc[990] = 3 << 20; multiplier[990] = 1 << 30; shift[990] = -2
        acc[991] = -(3 << 20); multiplier[991] = 1 << 30; shift[991] = -2
        for (offset, lo, hi) in [(Int32(-5), Int32(-128), Int32(127)), (17, -100, 90)] {
            let expected = acc.indices.map { i -> Int8 in
                let v = Quantized.multiply(acc[i], multiplier[i], Int(shift[i])) &+ offset
                return Int8(min(max(v, lo), hi))
            }
            for path in 0..<earshot_int8_paths() {
                var y = [Int8](repeating: 0, count: acc.count)
                earshot_requantize_many(acc, acc.count, multiplier, shift, offset, lo, hi, path, &y)
                let wrong = acc.indices.filter { y[$0] != expected[$0] }
                #expect(wrong.isEmpty, "path \(path), offset \(offset): \(wrong.count) differ, first at \(wrong.first.map { "acc \(acc[$0]) multiplier \(multiplier[$0]) shift \(shift[$0]): \(y[$0]) not \(expected[$0])" } ?? "")")
            }
        }
    }

    @Test("The first NaN or infinity is found wherever it is, in vectors and in the tail")
    func firstNonFinite() {
        for n in 1...40 {
            let clean = [Float](repeating: 0.5, count: n)
            #expect(earshot_first_nonfinite(clean, n) == -1)
            for bad in 0..<n {
                for value in [Float.nan, .infinity, -.infinity] {
                    var x = clean
                    x[bad] = value
                    if bad + 1 < n { x[n - 1] = .nan }  // a later one must not hide the first
                    #expect(earshot_first_nonfinite(x, n) == bad, "n \(n) at \(bad)")
                }
            }
        }
    }

    @Test("16-bit little-endian samples decode at any alignment and length, each exactly its value times the scale")
    func pcm16Decode() {
        var random = SeededRandom(seed: 7)
        let bytes = (0..<(2 * 100 + 1)).map { _ in UInt8.random(in: 0...255, using: &random) } + [0x00, 0x80, 0xFF, 0x7F]
        for start in [0, 1] {
            for n in [0, 1, 15, 16, 17, 33, 100] {
                var out = [Float](repeating: .nan, count: n + 1)
                bytes.withUnsafeBufferPointer { b in earshot_pcm16_decode(b.baseAddress! + start, n, 1 / 32768, &out) }
                for i in 0..<n {
                    let v = Int16(bitPattern: UInt16(bytes[start + 2 * i]) | UInt16(bytes[start + 2 * i + 1]) << 8)
                    #expect(out[i] == Float(v) / 32768, "start \(start) n \(n) at \(i)")
                }
                #expect(out[n].isNaN, "nothing written past n")
            }
        }
        var extremes = [Float](repeating: 0, count: 2)
        let ends: [UInt8] = [0x00, 0x80, 0xFF, 0x7F]
        ends.withUnsafeBufferPointer { earshot_pcm16_decode($0.baseAddress!, 2, 1 / 32768, &extremes) }
        #expect(extremes == [-1, Float(32767) / 32768])
    }
}
