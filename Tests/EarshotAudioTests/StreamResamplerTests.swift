import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotAudio

@Suite("Stream resampler (epochs that can be snapshotted)")
struct StreamResamplerTests {
    static let pairs: [(Int, Int)] = [(44100, 16000), (8000, 16000), (48000, 16000), (22050, 16000), (11025, 16000), (16000, 16000), (16001, 16000)]

    /// Noise plus a swept tone: every frequency band carries signal.
    static func signal(_ count: Int, rate: Int, seed: UInt64) -> [Float] {
        var rng = Mix(seed: seed)
        return (0..<count).map { i in
            let t = Double(i) / Double(rate)
            return Float(0.5 * sin(2 * .pi * (200 + 1500 * t) * t)) + Float(Double(rng.next() >> 11) / Double(1 << 53) - 0.5) * 0.2
        }
    }

    static func run(_ r: StreamResampler, _ input: [Float], cuts: [Int]) throws -> [Float] {
        var out: [Float] = []
        var at = 0
        for cut in cuts.map({ min($0, input.count) }) + [input.count] where cut > at {
            out += try r.process(Array(input[at..<cut]))
            at = cut
        }
        return out
    }

    @Test("Within float rounding of one libsoxr resampler over the whole signal; same length", arguments: 0..<pairs.count)
    func closeToWhole(_ index: Int) throws {
        let (from, to) = Self.pairs[index]
        let input = Self.signal(from * 3, rate: from, seed: 7)
        let r = try StreamResampler(inputRate: from, outputRate: to)
        let out = try r.process(input) + r.finish()
        let whole = try resampleWhole(input, from: Double(from), to: Double(to))
        #expect(out.count == whole.count)
        let worst = zip(out, whole).map { abs($0 - $1) }.max() ?? 0
        #expect(worst < 2e-5, "largest difference \(worst) at \(from) -> \(to)")
    }

    @Test("Any chunking gives the same samples, bit for bit", arguments: 0..<pairs.count)
    func chunkingInvariant(_ index: Int) throws {
        let (from, to) = Self.pairs[index]
        let input = Self.signal(from * 2 + 123, rate: from, seed: 3)
        let a = try StreamResampler(inputRate: from, outputRate: to)
        let whole = try a.process(input) + a.finish()
        var rng = Mix(seed: UInt64(index))
        var cuts: [Int] = []
        var at = 0
        while at < input.count { at += 1 + Int(rng.next() % 5000); cuts.append(at) }
        let b = try StreamResampler(inputRate: from, outputRate: to)
        let cut = try Self.run(b, input, cuts: cuts) + b.finish()
        #expect(cut.map(\.bitPattern) == whole.map(\.bitPattern))
    }

    @Test("Snapshot at random points, restore into a fresh resampler: the output goes on bit for bit", arguments: 0..<pairs.count)
    func snapshotRestore(_ index: Int) throws {
        let (from, to) = Self.pairs[index]
        let input = Self.signal(from * 2, rate: from, seed: 11)
        let reference = try StreamResampler(inputRate: from, outputRate: to)
        let expected = try reference.process(input) + reference.finish()
        var rng = Mix(seed: 100 + UInt64(index))
        for _ in 0..<6 {
            let cut = Int(rng.next() % UInt64(input.count))
            let first = try StreamResampler(inputRate: from, outputRate: to)
            var out = try first.process(Array(input[..<cut]))
            let snapshot = first.snapshot
            #expect(snapshot.samples.count <= first.epochSamples + 2 * first.warmupSamples + from / 10)
            let resumed = try StreamResampler(restoring: snapshot)
            out += try resumed.process(Array(input[cut...])) + resumed.finish()
            #expect(out.map(\.bitPattern) == expected.map(\.bitPattern), "cut at \(cut) of \(from) -> \(to)")
        }
    }

    @Test("A snapshot that does not add up is refused with the reason")
    func badSnapshot() throws {
        let r = try StreamResampler(inputRate: 44100, outputRate: 16000)
        _ = try r.process(Self.signal(30000, rate: 44100, seed: 1))
        var s = r.snapshot
        s.samples.removeLast(5)
        #expect(throws: AudioError.self) { try StreamResampler(restoring: s) }
        s = r.snapshot
        s.outputCount += 1
        #expect(throws: AudioError.self) { try StreamResampler(restoring: s) }
    }
}

/// A small deterministic generator for the tests' signals and cut points.
struct Mix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
