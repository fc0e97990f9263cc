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
