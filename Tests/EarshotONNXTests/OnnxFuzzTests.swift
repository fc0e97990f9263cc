import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotONNX

/// Seeded mutations of the fixtures, as coverage-blind fuzzers make them. Every outcome must be
/// a model or an OnnxError (the typed throws make that a compile-time fact; these tests show
/// that no input traps, hangs, or gives a model that breaks its own invariants).
@Suite("ONNX fuzzing (seeded mutations)")
struct OnnxFuzzTests {
    /// EARSHOT_FUZZ_ITERATIONS scales the budget, as for the other fuzz tests.
    static let iterations = 10 * (ProcessInfo.processInfo.environment["EARSHOT_FUZZ_ITERATIONS"].flatMap(Int.init) ?? 300)

    static let interesting32: [UInt32] = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0x0010_0000]

    /// One to four mutations: bit flips, bytes set to edge values, 32-bit fields set to
    /// extremes, endless varints, cuts, truncation, repeated runs, random bytes inserted.
    static func mutate(_ input: [UInt8], _ random: inout SeededRandom) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            guard !bytes.isEmpty else { return [UInt8.random(in: 0...255, using: &random)] }
            let at = Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<9, using: &random) {
            case 0: bytes[at] ^= 1 << UInt8.random(in: 0..<8, using: &random)
            case 1: bytes[at] = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0x0A, 0x12, 0x3A].randomElement(using: &random) ?? 0
            case 2:
                let value = interesting32.randomElement(using: &random) ?? 0
                for i in 0..<4 where at + i < bytes.count { bytes[at + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(i))) }
            case 3: bytes.insert(contentsOf: [UInt8](repeating: 0xFF, count: Int.random(in: 9...12, using: &random)), at: at)
            case 4: bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...64, using: &random)))
            case 5: bytes = Array(bytes[0..<at])
            case 6:
                let run = Array(bytes[at..<min(bytes.count, at + Int.random(in: 1...32, using: &random))])
                bytes.insert(contentsOf: run, at: Int.random(in: 0...bytes.count, using: &random))
            case 7: bytes[at] = UInt8.random(in: 0...255, using: &random)
            default:
                bytes.insert(contentsOf: (0..<Int.random(in: 1...16, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }, at: at)
            }
        }
        return bytes
    }

    /// What a model read from any bytes must hold: every tensor's count is the product of its
    /// dims and exactly one of its value arrays holds that many values.
    static func invariantsHold(_ graph: OnnxGraph) -> Bool {
        func tensorHolds(_ tensor: OnnxTensor) -> Bool {
            guard tensor.dims.allSatisfy({ $0 >= 0 }) else { return false }
            let product = tensor.dims.reduce(1) { $0.multipliedReportingOverflow(by: $1).partialValue }
            let values = (tensor.floats?.count ?? 0) + (tensor.integers?.count ?? 0)
            return product == tensor.count && values == tensor.count && (tensor.floats == nil) != (tensor.integers == nil)
        }
        func attributeHolds(_ attribute: OnnxAttribute) -> Bool {
            switch attribute {
            case let .tensor(tensor): return tensorHolds(tensor)
            case let .tensors(tensors): return tensors.allSatisfy(tensorHolds)
            case let .graph(graph): return invariantsHold(graph)
            case let .graphs(graphs): return graphs.allSatisfy(invariantsHold)
            default: return true
            }
        }
        return graph.initializers.allSatisfy(tensorHolds) && graph.nodes.allSatisfy { $0.attributes.values.allSatisfy(attributeHolds) }
    }

    static func decode(_ bytes: [UInt8]) -> Result<OnnxModel, OnnxError> {
        Result { () throws(OnnxError) in try OnnxModel(bytes: bytes, name: "fuzz.onnx") }
    }

    @Test("Random mutations of the fixtures give a model or an OnnxError")
    func mutations() throws {
        var random = SeededRandom.fromEnvironment()
        let seed = random.seed
        let seeds = try Fixtures.names.map(Fixtures.bytes)
        var models = 0, errors = 0
        var slowest: Duration = .zero
        let clock = ContinuousClock()
        for iteration in 0..<Self.iterations {
            let input = Self.mutate(seeds[iteration % seeds.count], &random)
            var result: Result<OnnxModel, OnnxError>?
            let elapsed = clock.measure { result = Self.decode(input) }
            slowest = max(slowest, elapsed)
            switch result {
            case let .success(model)?:
                models += 1
                #expect(Self.invariantsHold(model.graph), "seed \(seed), iteration \(iteration): a model breaking its invariants")
            case let .failure(error)?:
                errors += 1
                #expect(error.description.hasPrefix("fuzz.onnx: "), "seed \(seed), iteration \(iteration): \(error)")
            case nil:
                Issue.record("seed \(seed), iteration \(iteration): no result")
            }
        }
        #expect(models + errors == Self.iterations, "seed \(seed)")
        #expect(errors > 0 && models > 0, "seed \(seed): \(models) models, \(errors) errors; the mutations should give both")
        #expect(slowest < .milliseconds(500), "seed \(seed): the slowest input took \(slowest)")
    }

    @Test("Every truncation and every byte set to 0x00 or 0xFF, in every fixture")
    func exhaustive() throws {
        for name in Fixtures.names {
            let bytes = try Fixtures.bytes(name)
            var truncatedModels = 0
            for length in 0..<bytes.count {
                if case let .success(model) = Self.decode(Array(bytes[0..<length])) {
                    truncatedModels += 1
                    #expect(Self.invariantsHold(model.graph), "\(name) cut to \(length) bytes")
                }
            }
            // A cut ends inside the graph unless the graph comes first and the cut falls
            // between the fields after it: only a few cuts can give a model.
            #expect(truncatedModels < 40, "\(name): \(truncatedModels) truncations read as models")
            for index in bytes.indices {
                for value: UInt8 in [0x00, 0xFF] where bytes[index] != value {
                    var mutated = bytes
                    mutated[index] = value
                    if case let .success(model) = Self.decode(mutated) {
                        #expect(Self.invariantsHold(model.graph), "\(name): byte \(index) set to \(value)")
                    }
                }
            }
        }
    }
}
