import EarshotGraph
import Foundation
import Testing

/// Products in bf16 (`Precision.bf16`) on every path this machine allows (AMX tiles, AVX-512 BF16,
/// portable), against a reference computed here: the same bf16 operands, summed in double.
@Suite("bf16 products", .serialized)
struct BF16Tests {
    /// Deterministic values in -1...1.
    static func values(_ count: Int, seed: UInt64) -> [Float] {
        var s = seed &* 0x9E37_79B9_7F4A_7C15 &+ 1
        return (0..<count).map { _ in
            s = s &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Float(Int64(bitPattern: s >> 11) % 20001) / 10000 - 1
        }
    }

    /// Runs `body` on each bf16 path there is, then goes back to the best.
    static func onEachPath(_ body: (Precision.Path) throws -> Void) rethrows {
        defer { Precision.use(nil) }
        for path in Precision.paths {
            #expect(Precision.use(path) == path)
            try body(path)
        }
    }

    /// Runs `plan` on `streams` streams that each take `x` as their input; the values stored,
    /// by stream and output.
    static func run(_ plan: GraphPlan, streams: Int, input x: [Float], workspace: inout GraphWorkspace) throws -> [[[Float]]] {
        var got = [[[Float]]](repeating: [[Float]](repeating: [], count: plan.outputShapes.count), count: streams)
        try plan.run(streams: streams, workspace: &workspace, load: { _, _, buffer in for i in 0..<buffer.count { buffer[i] = x[i] } },
                     store: { s, o, v in got[s][o] = Array(v) })
        return got
    }

    @Test("Rounding to bf16: to nearest, ties to even; NaN stays NaN; subnormals are zeros of their sign; past the largest, infinity")
    func rounding() {
        #expect(Precision.bf16(1) == 1)
        #expect(Precision.bf16(1 + 0x1p-8) == 1, "a tie goes to the even neighbour")
        #expect(Precision.bf16(1 + 3 * 0x1p-8) == 1 + 0x1p-6, "a tie goes to the even neighbour")
        #expect(Precision.bf16(1 + 0x1p-8 + 0x1p-20) == 1 + 0x1p-7, "above the tie: up")
        #expect(Precision.bf16(-1.00390625) == -1)
        #expect(Precision.bf16(3.14159274) == 3.140625)
        #expect(Precision.bf16(Float.leastNormalMagnitude / 2) == 0 && Precision.bf16(-Float.leastNormalMagnitude / 2).sign == .minus)
        #expect(Precision.bf16(Float.leastNormalMagnitude) == Float.leastNormalMagnitude)
        #expect(Precision.bf16(.greatestFiniteMagnitude) == .infinity && Precision.bf16(-.infinity) == -.infinity)
        #expect(Precision.bf16(.nan).isNaN)
    }

    @Test("W x in bf16 on every path: the reference's value within fp32's rounding of the sum; each column as alone; AVX-512 BF16 and portable bit for bit",
          arguments: [(37, 300, 45), (128, 64, 1), (64, 1536, 2), (200, 33, 70), (24, 72, 13)])
    func products(rows: Int, k: Int, columns: Int) throws {
        let w = Self.values(rows * k, seed: 3), x = Self.values(columns * k, seed: 5), bias = Self.values(rows, seed: 7)
        let packed = PackedMatrix(w, rows: rows, k: k, precision: .bf16)
        let (wb, xb) = (w.map(Precision.bf16), x.map(Precision.bf16))
        var expected = [Double](repeating: 0, count: columns * rows), magnitude = expected
        for t in 0..<columns {
            for r in 0..<rows {
                var sum = Double(bias[r]), size = abs(Double(bias[r]))
                for i in 0..<k {
                    sum += Double(wb[r * k + i]) * Double(xb[t * k + i])
                    size += abs(Double(wb[r * k + i]) * Double(xb[t * k + i]))
                }
                expected[t * rows + r] = sum
                magnitude[t * rows + r] = size
            }
        }
        func run(_ m: PackedMatrix, columns n: Int, from x: [Float]) -> [Float] {
            var y = [Float](repeating: .nan, count: n * m.rows)
            x.withUnsafeBufferPointer { xp in y.withUnsafeMutableBufferPointer { m.product(xp.baseAddress!, columns: n, bias: bias, into: $0.baseAddress!) } }
            return y
        }
        var byPath: [Precision.Path: [Float]] = [:]
        Self.onEachPath { path in
            let y = run(packed, columns: columns, from: x)
            let worst = zip(y, zip(expected, magnitude)).map { abs(Double($0) - $1.0) / max($1.1, 1e-30) }.max() ?? .infinity
            print("bf16 \(path.name) \(rows)x\(k) by \(columns): worst |y - reference| / sum |terms| = \(worst)")
            #expect(worst <= 1e-6, "\(path.name): \(worst)")
            // Each column alone gives what it gets in the batch.
            for t in [0, columns / 2, columns - 1] {
                let alone = run(packed, columns: 1, from: Array(x[(t * k)..<((t + 1) * k)]))
                #expect(alone == Array(y[(t * rows)..<((t + 1) * rows)]), "\(path.name): column \(t) alone")
            }
            byPath[path] = y
        }
        if let a = byPath[.portable], let b = byPath[.avx512BF16] { #expect(a == b, "the portable path gives vdpbf16ps's values") }
        // The products do round: fp32 weights and activations are further from the bf16 reference.
        let fp32 = run(PackedMatrix(w, rows: rows, k: k), columns: columns, from: x)
        let fp32Worst = zip(fp32, zip(expected, magnitude)).map { abs(Double($0) - $1.0) / max($1.1, 1e-30) }.max() ?? 0
        #expect(fp32Worst > 1e-4, "fp32 is \(fp32Worst) from the bf16 reference")
    }

    /// A Conv or MatMul compiled in bf16 against the reference kernels given the bf16-rounded
    /// input and weights, on every path; its kernel says bf16.
    /// `weightFirst`: the constant is the node's first input (a constant matrix times a computed one).
    static func compiled(op: String, input: [Int], weight: [Int], attributes: [String: GraphAttribute], bias: Int? = nil,
                         weightFirst: Bool = false) throws {
        let w = GraphTensor(shape: weight, floats: Self.values(weight.reduce(1, *), seed: 11).map { $0 * 0.5 })
        var constants = ["w": w]
        var inputs = weightFirst ? ["w", "x"] : ["x", "w"]
        if let bias {
            constants["b"] = GraphTensor(shape: [bias], floats: Self.values(bias, seed: 13))
            inputs.append("b")
        }
        let node = GraphNode(op: try GraphOp(named: op, node: "n"), name: "n", inputs: inputs, outputs: ["y"], attributes: attributes)
        let plan = try GraphPlan(nodes: [node], constants: constants, inputs: [("x", input)], outputs: ["y"], opset: 17, precision: .bf16, verify: false)
        #expect(plan.kernels["n"] == "packed product, bf16")
        #expect(plan.bf16MultiplyAdds == plan.productMultiplyAdds && plan.productMultiplyAdds > 0)
        let x = Self.values(input.reduce(1, *), seed: 17)
        var rounded = constants
        rounded["w"] = GraphTensor(shape: weight, floats: w.floats.map(Precision.bf16))
        let expected = try GraphOps.run(node.op, node: "n", inputs: inputs.map { $0 == "x" ? GraphTensor(shape: input, floats: x.map(Precision.bf16)) : rounded[$0] },
                                        attributes: attributes, opset: 17, outputCount: 1)[0].floats
        try Self.onEachPath { path in
            var ws = GraphWorkspace()
            var got: [[Float]] = [[], []]
            // Two streams in one batch, the second given the first's input: each gets the same.
            try plan.run(streams: 2, workspace: &ws, load: { _, _, buffer in for i in 0..<buffer.count { buffer[i] = x[i] } },
                         store: { s, _, v in got[s] = Array(v) })
            let worst = zip(got[0], expected).map { abs($0 - $1) / max(1, abs($1)) }.max() ?? .infinity
            print("bf16 \(path.name) \(op) \(input) * \(weight): worst relative difference \(worst)")
            #expect(got[0].count == expected.count && worst <= 2e-5, "\(path.name): \(worst)")
            #expect(got[0] == got[1])
        }
    }

    @Test("A Conv that fp32 runs as Winograd's tiles runs them in bf16 (the transformed filters and tiles rounded): on every path within bf16's rounding of the exact convolution, further from it than fp32's tiles; two streams alike; AVX-512 BF16 and portable bit for bit",
          arguments: [([1, 5, 10, 6], [7, 5, 3, 1], [1, 0, 0, 0]), ([1, 24, 1, 33], [40, 24, 1, 3], [0, 1, 0, 1])])
    func winogradConv(input: [Int], weight: [Int], pads: [Int64]) throws {
        let (channels, outs, height, width, kh, kw) = (input[1], weight[0], input[2], input[3], weight[2], weight[3])
        let w = Self.values(weight.reduce(1, *), seed: 31).map { $0 * 0.5 }, bias = Self.values(outs, seed: 37)
        let x = Self.values(input.reduce(1, *), seed: 41)
        let attributes: [String: GraphAttribute] = ["pads": .ints(pads)]
        let node = GraphNode(op: .conv, name: "n", inputs: ["x", "w", "b"], outputs: ["y"], attributes: attributes)
        let constants = ["w": GraphTensor(shape: weight, floats: w), "b": GraphTensor(shape: [outs], floats: bias)]
        func plan(_ precision: Precision) throws -> GraphPlan {
            try GraphPlan(nodes: [node], constants: constants, inputs: [("x", input)], outputs: ["y"], opset: 17, precision: precision, verify: false)
        }
        let (fp32, bf16) = (try plan(.fp32), try plan(.bf16))
        #expect(fp32.kernels["n"] == "Winograd product" && bf16.kernels["n"] == "Winograd product, bf16")
        #expect(bf16.bf16MultiplyAdds == bf16.productMultiplyAdds && bf16.productMultiplyAdds == fp32.productMultiplyAdds)
        // The exact convolution (double) and the size of its terms, output by output.
        let (top, left) = (Int(pads[0]), Int(pads[1]))
        let (oh, ow) = (height + top + Int(pads[2]) - kh + 1, width + left + Int(pads[3]) - kw + 1)
        var expected = [Double](repeating: 0, count: outs * oh * ow), magnitude = expected
        for o in 0..<outs {
            for r in 0..<oh {
                for col in 0..<ow {
                    var sum = Double(bias[o]), size = abs(Double(bias[o]))
                    for c in 0..<channels {
                        for i in 0..<kh {
                            for j in 0..<kw {
                                let (xr, xc) = (r + i - top, col + j - left)
                                guard xr >= 0, xr < height, xc >= 0, xc < width else { continue }
                                let term = Double(w[((o * channels + c) * kh + i) * kw + j]) * Double(x[(c * height + xr) * width + xc])
                                sum += term
                                size += abs(term)
                            }
                        }
                    }
                    expected[(o * oh + r) * ow + col] = sum
                    magnitude[(o * oh + r) * ow + col] = size
                }
            }
        }
        func run(_ p: GraphPlan) throws -> [[Float]] {
            var ws = GraphWorkspace()
            return try Self.run(p, streams: 2, input: x, workspace: &ws).map { $0[0] }
        }
        func worst(_ y: [Float]) -> Double {
            y.count == expected.count ? zip(y, zip(expected, magnitude)).map { abs(Double($0) - $1.0) / max($1.1, 1e-30) }.max() ?? .infinity : .infinity
        }
        let fp32Worst = worst(try run(fp32)[0])
        var byPath: [Precision.Path: [Float]] = [:]
        try Self.onEachPath { path in
            let got = try run(bf16)
            let bf16Worst = worst(got[0])
            print("bf16 \(path.name) Winograd Conv \(input) * \(weight): worst |y - exact| / sum |terms| = \(bf16Worst) (fp32's tiles: \(fp32Worst))")
            // Each operand rounded by at most 2^-9 of itself; the transforms' sums (up to 8 times
            // a value, and the tiles' signs cancelling) give a few times that of the terms' size.
            #expect(bf16Worst <= 2e-2 && bf16Worst > 10 * fp32Worst, "\(path.name): \(bf16Worst), fp32 \(fp32Worst)")
            #expect(got[0] == got[1], "\(path.name): each stream of a batch as alone")
            byPath[path] = got[0]
        }
        if let a = byPath[.portable], let b = byPath[.avx512BF16] { #expect(a == b, "the portable path gives vdpbf16ps's values") }
    }

    @Test("A plan that keeps some nodes in fp32 runs its other Winograd convolutions as direct bf16 products; without kept nodes both run Winograd's tiles in bf16")
    func winogradWithKeptNodes() throws {
        let constants = ["w1": GraphTensor(shape: [7, 5, 3, 1], floats: Self.values(105, seed: 43)),
                         "w2": GraphTensor(shape: [6, 7, 3, 1], floats: Self.values(126, seed: 47))]
        let pads: [String: GraphAttribute] = ["pads": .ints([1, 0, 1, 0])]
        let nodes = [GraphNode(op: .conv, name: "first", inputs: ["x", "w1"], outputs: ["h"], attributes: pads),
                     GraphNode(op: .conv, name: "second", inputs: ["h", "w2"], outputs: ["y"], attributes: pads)]
        func plan(fp32Nodes: Set<String>) throws -> GraphPlan {
            try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", [1, 5, 10, 6])], outputs: ["y"], opset: 17, precision: .bf16,
                          fp32Nodes: fp32Nodes, verify: false)
        }
        let (all, kept) = (try plan(fp32Nodes: []), try plan(fp32Nodes: ["first"]))
        #expect(all.kernels["first"] == "Winograd product, bf16" && all.kernels["second"] == "Winograd product, bf16")
        #expect(kept.kernels["first"] == "Winograd product" && kept.kernels["second"] == "packed product, bf16")
        #expect(kept.bf16MultiplyAdds == 60 * 6 * 7 * 3 && all.bf16MultiplyAdds == all.productMultiplyAdds)
    }

    @Test("A Conv of many positions (fp32: fields packed by position) and a grouped Conv run as bf16 products")
    func manyPositions() throws {
        try Self.compiled(op: "Conv", input: [2, 3, 12, 10], weight: [5, 3, 3, 3], attributes: ["pads": .ints([1, 1, 1, 1])], bias: 5)
        try Self.compiled(op: "Conv", input: [2, 4, 7, 6], weight: [6, 2, 3, 3], attributes: ["group": .int(2), "auto_pad": .string("SAME_UPPER")])
    }

    @Test("A Conv over many positions in bf16 reads its fields in place, rounded straight into the product's layout: on every path the reference of its bf16 operands within fp32's rounding of the sums; the bf16 product of the gathered fields bit for bit (the tiles too: the same sums with the operands' roles swapped); two streams alike",
          arguments: [(3, 5, 12, 10, 3, 1, 1), (40, 24, 9, 15, 1, 1, 0), (70, 33, 20, 20, 3, 2, 1), (16, 17, 16, 4, 1, 1, 0)])
    func positionMajorConv(channels: Int, outs: Int, height: Int, width: Int, kernel: Int, stride: Int, pad: Int) throws {
        let w = Self.values(outs * channels * kernel * kernel, seed: 19).map { $0 * 0.5 }, bias = Self.values(outs, seed: 23)
        let x = Self.values(channels * height * width, seed: 29)
        let attributes: [String: GraphAttribute] = ["pads": .ints([Int64](repeating: Int64(pad), count: 4)), "strides": .ints([Int64(stride), Int64(stride)])]
        let node = GraphNode(op: .conv, name: "n", inputs: ["x", "w", "b"], outputs: ["y"], attributes: attributes)
        let constants = ["w": GraphTensor(shape: [outs, channels, kernel, kernel], floats: w), "b": GraphTensor(shape: [outs], floats: bias)]
        let plan = try GraphPlan(nodes: [node], constants: constants, inputs: [("x", [1, channels, height, width])], outputs: ["y"], opset: 17,
                                 precision: .bf16, verify: false)
        var ws = GraphWorkspace()
        let load: (Int, UnsafeMutableBufferPointer<Float>) -> Void = { _, buffer in for i in 0..<buffer.count { buffer[i] = x[i] } }
        let summary = try plan.profile(runs: 1, workspace: &ws, load: load).first?.summary ?? ""
        #expect(plan.kernels["n"] == "packed product, bf16" && summary.contains("position-major"), "\(summary)")
        #expect(plan.bf16MultiplyAdds == plan.productMultiplyAdds)
        // Each position's field [channel][kernel row][kernel column] (zeros in the padding).
        let (oh, ow) = ((height + 2 * pad - kernel) / stride + 1, (width + 2 * pad - kernel) / stride + 1)
        let (positions, depth) = (oh * ow, channels * kernel * kernel)
        var fields = [Float](repeating: 0, count: positions * depth)
        for p in 0..<positions {
            for c in 0..<channels {
                for i in 0..<kernel {
                    for j in 0..<kernel {
                        let (r, col) = ((p / ow) * stride + i - pad, (p % ow) * stride + j - pad)
                        if r >= 0, r < height, col >= 0, col < width { fields[p * depth + (c * kernel + i) * kernel + j] = x[(c * height + r) * width + col] }
                    }
                }
            }
        }
        var expected = [Double](repeating: 0, count: outs * positions), magnitude = expected
        for o in 0..<outs {
            for p in 0..<positions {
                var sum = Double(bias[o]), size = abs(Double(bias[o]))
                for i in 0..<depth {
                    let term = Double(Precision.bf16(w[o * depth + i])) * Double(Precision.bf16(fields[p * depth + i]))
                    sum += term
                    size += abs(term)
                }
                expected[o * positions + p] = sum
                magnitude[o * positions + p] = size
            }
        }
        let packed = PackedMatrix(w, rows: outs, k: depth, precision: .bf16)
        try Self.onEachPath { path in
            let got = try Self.run(plan, streams: 2, input: x, workspace: &ws).map { $0[0] }
            let worst = zip(got[0], zip(expected, magnitude)).map { abs(Double($0) - $1.0) / max($1.1, 1e-30) }.max() ?? .infinity
            print("bf16 \(path.name) position-major Conv \(channels)x\(height)x\(width) * \(outs)x\(kernel)x\(kernel): worst |y - reference| / sum |terms| = \(worst)")
            #expect(got[0].count == outs * positions && worst <= 1e-6, "\(path.name): \(worst)")
            #expect(got[0] == got[1], "\(path.name): each stream of a batch as alone")
            // The gathered fields through the bf16 product, [positions][outs], transposed.
            var gathered = [Float](repeating: .nan, count: positions * outs)
            fields.withUnsafeBufferPointer { f in gathered.withUnsafeMutableBufferPointer { packed.product(f.baseAddress!, columns: positions, bias: bias, into: $0.baseAddress!) } }
            let transposed = (0..<(outs * positions)).map { gathered[($0 % positions) * outs + $0 / positions] }
            #expect(got[0] == transposed, "\(path.name): the gathered fields' product")
        }
    }

    @Test("MatMul by a constant matrix in bf16")
    func matMul() throws {
        try Self.compiled(op: "MatMul", input: [3, 200], weight: [200, 40], attributes: [:])
    }

    @Test("A constant matrix times a computed one (a DFT as C x) in bf16")
    func constantTimesComputed() throws {
        try Self.compiled(op: "MatMul", input: [200, 3], weight: [40, 200], attributes: [:], weightFirst: true)
    }

    @Test("Nodes kept in fp32 in a bf16 plan: their products as the fp32 plan's, bit for bit; the others in bf16; the kernels say which")
    func keptInFP32() throws {
        let constants = ["w1": GraphTensor(shape: [64, 48], floats: Self.values(64 * 48, seed: 3)),
                         "w2": GraphTensor(shape: [48, 32], floats: Self.values(48 * 32, seed: 5))]
        let nodes = [GraphNode(op: .matMul, name: "first", inputs: ["x", "w1"], outputs: ["h"]),
                     GraphNode(op: .matMul, name: "second", inputs: ["h", "w2"], outputs: ["y"])]
        func plan(_ precision: Precision, fp32Nodes: Set<String> = []) throws -> GraphPlan {
            try GraphPlan(nodes: nodes, constants: constants, inputs: [("x", [2, 64])], outputs: ["h", "y"], opset: 17, precision: precision,
                          fp32Nodes: fp32Nodes, verify: precision == .fp32)
        }
        let x = Self.values(128, seed: 7)
        func run(_ p: GraphPlan) throws -> [[Float]] {
            var ws = GraphWorkspace()
            return try Self.run(p, streams: 1, input: x, workspace: &ws)[0]
        }
        let (fp32, bf16, kept) = (try plan(.fp32), try plan(.bf16), try plan(.bf16, fp32Nodes: ["first"]))
        #expect(kept.kernels["first"] == "packed product" && kept.kernels["second"] == "packed product, bf16")
        #expect(bf16.kernels["first"] == "packed product, bf16")
        #expect(kept.bf16MultiplyAdds == 2 * 48 * 32 && kept.productMultiplyAdds == 2 * 64 * 48 + 2 * 48 * 32)
        try Self.onEachPath { path in
            let (a, b, c) = (try run(fp32), try run(bf16), try run(kept))
            #expect(c[0] == a[0], "\(path.name): the node kept in fp32 gives fp32's values")
            #expect(b[0] != a[0] && c[1] != a[1], "\(path.name): the bf16 products round")
        }
    }
}
