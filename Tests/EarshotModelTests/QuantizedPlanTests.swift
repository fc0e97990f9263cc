import CEarshotKernels
import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotGraph
@testable import EarshotModel

/// What the builder makes of microWakeWord's int8 graphs (the bundled packages): their outputs
/// are checked against TFLite elsewhere; here, that the copies those graphs are full of are not
/// run when they need not be.
@Suite("Compiled int8 plans of the bundled wake-word models")
struct QuantizedPlanTests {
    static let models = ["okay-nabu", "hey-jarvis", "alexa", "hey-mycroft"]

    static func plan(_ name: String) throws -> GraphPlan {
        let model = try Model(contentsOf: Repo.root.appendingPathComponent("Models/\(name)"))
        return try #require(model.graph?.plan, "\(name) runs compiled")
    }

    @Test("No copy copies what another copy wrote: each channel split (a copy of the stream's concatenated window) is read in place by its depthwise convolutions",
          arguments: models)
    func splitsReadInPlace(_ name: String) throws {
        let plan = try Self.plan(name)
        let depthwise = plan.steps.filter { ($0 as? QuantizedProductStep)?.channelTaps == true }
        #expect(depthwise.count >= 4, "\(name) has \(depthwise.count) depthwise convolutions")
        for (k, step) in plan.steps.enumerated() {
            guard let move = step as? MoveStep else { continue }
            for source in move.sources {
                let writer = plan.steps[..<k].lastIndex { $0.writes.contains { $0.overlaps(source) } }
                #expect(writer.map { !(plan.steps[$0] is MoveStep) } ?? true, "\(name): the copy at step \(k) copies step \(writer ?? -1)'s copy")
            }
        }
    }

    @Test("Every value a copy writes is read by a later step or is an output of the plan", arguments: models)
    func noUnreadCopies(_ name: String) throws {
        let plan = try Self.plan(name)
        for (k, step) in plan.steps.enumerated() {
            guard let move = step as? MoveStep else { continue }
            for out in move.outputs {
                let read = plan.outputRefs.contains { $0.overlaps(out) } || plan.steps[(k + 1)...].contains { $0.reads.contains { $0.overlaps(out) } }
                #expect(read, "\(name): step \(k) writes \(out.count) values nothing reads")
            }
        }
    }

    @Test("The depthwise kernel on every int8 path, with the VNNI pair layout given, equals the plain C path: odd and even tap counts, channels in and past whole blocks of 32")
    func depthwisePairsEqualPlain() {
        var random = SeededRandom(seed: 31)
        defer { Quantized.use(nil) }
        for channels in [30, 32, 48, 64] {
            for k in [3, 4, 5] {
                let positions = 3, count = (positions + k - 1) * channels
                let x = (0..<count).map { _ in Int8.random(in: -128...127, using: &random) }
                let taps = (0..<(positions * k)).map { Int32(($0 / k + $0 % k) * channels) }
                let w = (0..<(k * channels)).map { _ in Int16.random(in: -128...127, using: &random) }
                let bias = (0..<channels).map { _ in Int32.random(in: -5000...5000, using: &random) }
                let multiplier = (0..<channels).map { _ in Int32.random(in: (1 << 30)...Int32.max, using: &random) }
                let shift = (0..<channels).map { _ in Int32.random(in: -12...(-6), using: &random) }
                let inputOffset: Int32 = 7, outputOffset: Int32 = -3
                guard let pairs = QuantizedProductStep.depthwisePairs(w, taps: taps, count: count, coded: true, k: k, channels: channels,
                                                                      bias: bias, inputOffset: inputOffset) else {
                    Issue.record("no pair layout for \(channels) channels, k \(k)")
                    continue
                }
                func run(_ path: Quantized.Path, pairs: (pairs: [Int16], base: [Int32])?) -> [Int8] {
                    Quantized.use(path)
                    var y = [Int8](repeating: 0, count: positions * channels)
                    var scratch = [Int16](repeating: 0, count: count + 1)
                    earshot_qdepthwise(x, 1, count, taps, positions, k, channels, w, bias, multiplier, shift, inputOffset, outputOffset, -128, 127,
                                       &scratch, &y, 1, pairs?.pairs, pairs?.base)
                    return y
                }
                let plain = run(.baseline, pairs: nil)
                #expect(Set(plain).count > 10, "the outputs vary")
                for path in Quantized.paths {
                    #expect(run(path, pairs: pairs) == plain, "path \(path), \(channels) channels, k \(k)")
                }
            }
        }
    }

    @Test("The product over many streams (blocks of four sharing each load of the weights on VNNI) gives each stream what it gets alone on the plain C path: 1 to 23 streams (AMX tiles of 16 full and partial), fields of 64 and 200 taps, 16 to 80 outputs, one and two positions")
    func streamsEqualAlone() {
        var random = SeededRandom(seed: 57)
        defer { Quantized.use(nil) }
        for (k, perGroup, positions) in [(64, 64, 1), (200, 64, 1), (64, 16, 2), (8, 80, 1), (12, 20, 3)] {
            let count = positions * k, outputs = positions * perGroup
            let w = (0..<(perGroup * k)).map { _ in Int16.random(in: -128...127, using: &random) }
            let bias = (0..<perGroup).map { _ in Int32.random(in: -20000...20000, using: &random) }
            let multiplier = (0..<perGroup).map { _ in Int32.random(in: (1 << 30)...Int32.max, using: &random) }
            let shift = (0..<perGroup).map { _ in Int32.random(in: -12...(-7), using: &random) }
            let inputOffset: Int32 = 11, outputOffset: Int32 = -5
            guard let quads = QuantizedProductStep.quadLayout(w, groups: 1, perGroup: perGroup, k: k, bias: bias, inputOffset: inputOffset) else {
                Issue.record("no quad layout for k \(k), \(perGroup) outputs")
                continue
            }
            let pairs = QuantizedProductStep.pairLayout(w, groups: 1, perGroup: perGroup, k: k)
            // Each stream's input and output in an arena of its own, `arena` bytes apart.
            let arena = count + outputs + 13
            for streams in [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 23] {
                var memory = (0..<(streams * arena)).map { _ in Int8.random(in: -128...127, using: &random) }
                var scratch = [Int32](repeating: 0, count: count + k + 16)
                Quantized.use(.baseline)
                let alone = (0..<streams).map { s in
                    var y = [Int8](repeating: 0, count: outputs)
                    earshot_qconv(Array(memory[(s * arena)..<(s * arena + count)]), 1, count, nil, 1, positions, k, pairs, perGroup, bias,
                                  multiplier, shift, inputOffset, outputOffset, -128, 127, &scratch, &y, 1, nil, nil)
                    return y
                }
                #expect(Set(alone.joined()).count > 20, "the outputs vary")
                for path in Quantized.paths {
                    Quantized.use(path)
                    memory.withUnsafeMutableBytes { m in
                        earshot_qconv_streams(streams, m.baseAddress, arena, 1, count, nil, 1, positions, k, pairs, perGroup, bias, multiplier,
                                              shift, inputOffset, outputOffset, -128, 127, &scratch, m.baseAddress! + count, arena, 1,
                                              quads.quads, quads.base)
                    }
                    for s in 0..<streams {
                        let got = Array(memory[(s * arena + count)..<(s * arena + count + outputs)])
                        #expect(got == alone[s], "path \(path), k \(k), \(perGroup) outputs, \(positions) positions: stream \(s) of \(streams)")
                    }
                }
            }
        }
    }

    @Test("Every depthwise convolution has its weights in pairs of taps and its offset folded, so that on VNNI it runs two taps an instruction",
          arguments: models)
    func depthwiseInPairs(_ name: String) throws {
        let plan = try Self.plan(name)
        let depthwise = plan.steps.compactMap { $0 as? QuantizedProductStep }.filter(\.channelTaps)
        #expect(depthwise.count >= 4)
        for step in depthwise {
            let blocks = (step.groups + 31) / 32
            #expect(step.depthPairs.count == (step.k + 1) / 2 * blocks * 64, "\(name): k \(step.k), \(step.groups) channels")
            #expect(step.depthBase.count == blocks * 32)
        }
    }
}
