import Earshot
import EarshotImport
import EarshotTestSupport
import Foundation
import Testing

/// Hostile .tflite files: each is refused with a typed error that names the file, never a
/// crash; seeded mutations of a real model either import and run, or are refused so.
@Suite("Hostile TFLite input")
struct TFLiteHostileTests {
    static let model = Repo.path("Models/sources/microwakeword/okay_nabu.tflite")

    /// Reads, imports and loads `bytes` as a .tflite at `path`; the error that stopped it, or nil
    /// when a model came out (and then it ran a step).
    static func outcome(_ bytes: [UInt8], path: String) throws -> String? {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let manifest: ModelManifest, tensors: [String: Tensor]
        do {
            (manifest, tensors) = try TFLiteImporter.importModel(path: path, options: ImportOptions())
        } catch {
            return error.description
        }
        do {
            let model = try Model(manifest: manifest, tensors: tensors, name: path)
            var state = model.makeState()
            _ = try model.prediction(from: [Float](repeating: 1, count: model.chunkSamples), using: &state)
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test("Every file of Tests/Fuzz/tflite is refused with an error naming it")
    func corpus() throws {
        let folder = Repo.path("Tests/Fuzz/tflite")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".tflite") }.sorted()
        #expect(files.count >= 10)
        let scratch = try Repo.temporaryFolder()
        for file in files {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: folder + "/" + file)))
            let path = scratch.appendingPathComponent(file).path
            let error = try Self.outcome(bytes, path: path)
            #expect(error != nil, "\(file) was accepted")
            #expect(error?.contains(file) == true, "\(file): \(error ?? "")")
        }
    }

    @Test("Specific damage gets the error that says what it is")
    func specific() throws {
        let scratch = try Repo.temporaryFolder()
        func error(_ file: String) throws -> String {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Repo.path("Tests/Fuzz/tflite/\(file)"))))
            return try Self.outcome(bytes, path: scratch.appendingPathComponent(file).path) ?? ""
        }
        #expect(try error("not-a-flatbuffer.tflite").contains("TFL3"))
        #expect(try error("negative-dimension.tflite").contains("negative dimension"))
        #expect(try error("subgraph-count-huge.tflite").contains("runs past the end"))
        #expect(try error("call-once-cycle.tflite").contains("CALL_ONCE"))
        #expect(try error("unknown-operator.tflite").contains("not supported"))
        #expect(try error("input-index-out-of-range.tflite").contains("tensor index 100000"))
        #expect(try error("empty-axis-hides-huge.tflite").contains("shape [2147483647"))
        #expect(try error("weights-zero-point-huge.tflite").contains("zero point -9223372036854775808"))
        // The RELU6 bound past any integer is held in range: the import goes past that layer and
        // stops at the next one, whose concatenation now requantizes.
        #expect(try error("relu6-bound-beyond-int.tflite").contains("operator 16 'model_1/stream_7/concat'' (CONCATENATION)"))
    }

    @Test("Every prefix of a model is refused or reads as a model")
    func truncations() throws {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Self.model)))
        var refused = 0
        for length in stride(from: 0, to: bytes.count, by: 61) {
            do { _ = try TFLiteModel(bytes: Array(bytes[0..<length]), name: "cut") } catch { refused += 1 }
        }
        #expect(refused > 0)
    }

    @Test("Seeded mutations import and run, or are refused with typed errors")
    func mutations() throws {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Self.model)))
        var mutator = Mutator(random: SeededRandom.fromEnvironment())
        print("TFLite mutations: seed \(mutator.random.seed) (EARSHOT_TEST_SEED replays it)")
        let scratch = try Repo.temporaryFolder()
        let path = scratch.appendingPathComponent("mutated.tflite").path
        var (refused, ran) = (0, 0)
        for _ in 0..<300 {
            if try Self.outcome(mutator.mutate(bytes), path: path) == nil { ran += 1 } else { refused += 1 }
        }
        #expect(refused + ran == 300)
        #expect(refused > 0)
    }
}
