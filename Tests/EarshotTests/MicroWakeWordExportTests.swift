import Earshot
import EarshotCommandTestSupport
import EarshotFetch
import EarshotImport
import EarshotModel
import EarshotTestSupport
import EarshotTraining
import Foundation
import Testing

/// `earshot export --format microwakeword` on the shipped microWakeWord packages. What other
/// runtimes make of the exported files was recorded by tools/microwakeword_export_reference.py
/// (Goldens/microwakeword-export): TFLite's reference kernels give the published file's outputs
/// on every step from step 0, tflite-micro's smallest arena, pymicro-wakeword's detections with
/// the exported pair. These tests hold `earshot export` to the bytes those figures are of, and
/// Earshot's own import of the export to the same outputs.
@Suite("earshot export --format microwakeword: TFLite, TFLite Micro and pymicro-wakeword load the files")
struct MicroWakeWordExportTests {
    static let models = MicroWakeWordTests.models
    static let goldens = "Tests/EarshotTests/Goldens/microwakeword-export"

    static func package(_ name: String) -> URL { Repo.root.appendingPathComponent("Models/\(name.replacingOccurrences(of: "_", with: "-"))") }

    static func export(_ name: String) throws -> MicroWakeWordExport.Files {
        try MicroWakeWordExport.export(package: package(name), modelFile: "\(name).tflite")
    }

    /// The exported pair written into a temporary folder; the .tflite's path.
    static func written(_ name: String, _ files: MicroWakeWordExport.Files) throws -> String {
        let folder = try Repo.temporaryFolder()
        let tflite = folder.appendingPathComponent("\(name).tflite")
        try Data(files.tflite).write(to: tflite)
        try Data(files.json).write(to: folder.appendingPathComponent("\(name).json"))
        return tflite.path
    }

    @Test("The export is the file TFLite's reference kernels were run on, and Earshot's import of it gives their outputs on every step",
          arguments: models)
    func referenceOutputs(_ name: String) throws {
        let files = try Self.export(name)
        let golden = try Reference.json(Repo.path("\(Self.goldens)/\(name).json"))
        #expect(SHA256.hex(files.tflite) == golden["sha256"] as? String, "the bytes the goldens are of")
        #expect(files.tflite.count == golden["bytes"] as? Int)
        #expect(golden["reference_equals_published"] as? Bool == true)
        let reference = try #require(golden["reference"] as? [Int])
        // The published file's reference outputs (tools/microwakeword_reference.py) are the same.
        #expect(reference == (try MicroWakeWordTests.reference(name)).reference)

        var options = ImportOptions()
        options.metadata.name = name
        options.frontEnd = "features"
        let (manifest, tensors) = try TFLiteImporter.importModel(path: try Self.written(name, files), options: options)
        let model = try Model(manifest: manifest, tensors: tensors, name: name)
        let (frames, _, _, stride) = try MicroWakeWordTests.reference(name)
        var state = model.makeState()
        var outputs: [Int] = []
        for block in MicroWakeWordTests.blocks(frames, stride: stride) {
            outputs.append(Int((try model.prediction(from: block, using: &state)[0] * 256).rounded()))
        }
        #expect(outputs.count == reference.count && reference.count > 500)
        #expect(zip(outputs, reference).filter { $0 != $1 }.count == 0)
        #expect(outputs.max() ?? 0 > 200 || name == "hey_jarvis", "the recording holds the phrase")
    }

    @Test("earshot import of the exported pair round-trips: the same scores from audio as the package exported, the same label and rule",
          arguments: models)
    func roundTrip(_ name: String) throws {
        let shipped = try Model(contentsOf: Self.package(name))
        let path = try Self.written(name, try Self.export(name))
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent("package")
        let run = try runEarshot(["import", path, "-o", folder.path])
        #expect(run.status == 0, "\(run.err)")
        let again = try Model(contentsOf: folder)
        #expect(again.labels == shipped.labels && again.manifest.decision == shipped.manifest.decision)
        #expect(again.manifest.author == shipped.manifest.author && again.manifest.languages == shipped.manifest.languages)
        #expect(again.chunkSamples == shipped.chunkSamples && again.sampleRate == shipped.sampleRate)
        var a = shipped.makeState(), b = again.makeState()
        var steps = 0, differing = 0, peak: Float = 0
        for block in MicroWakeWordTests.blocks(of: try MicroWakeWordTests.recording(), shipped) {
            let x = try shipped.prediction(from: block, using: &a)[0], y = try again.prediction(from: block, using: &b)[0]
            if x != y { differing += 1 }
            peak = max(peak, x)
            steps += 1
        }
        #expect(steps > 500 && differing == 0 && (peak > 200 / 256 || name == "hey_jarvis"), "\(steps) steps, \(differing) differ, peak \(peak)")
    }

    @Test("The JSON is microWakeWord's version 2 manifest, as recorded; the arena holds what tflite-micro needs, within a quarter",
          arguments: models)
    func manifest(_ name: String) throws {
        let files = try Self.export(name)
        let golden = try Reference.json(Repo.path("\(Self.goldens)/\(name).json"))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(files.json)) as? [String: Any])
        let recorded = try #require(golden["manifest"] as? [String: Any])
        #expect(NSDictionary(dictionary: json).isEqual(to: recorded))
        let published = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: Repo.root.appendingPathComponent("Models/sources/microwakeword/\(name).json"))) as? [String: Any])
        for key in ["type", "wake_word", "author", "website", "trained_languages", "version"] {
            #expect((json[key] as? NSObject) == (published[key] as? NSObject), "\(key)")
        }
        #expect(json["model"] as? String == "\(name).tflite")
        let micro = try #require(json["micro"] as? [String: Any]), publishedMicro = try #require(published["micro"] as? [String: Any])
        for key in ["probability_cutoff", "feature_step_size", "sliding_window_size", "minimum_esphome_version"] {
            #expect((micro[key] as? NSObject) == (publishedMicro[key] as? NSObject), "\(key)")
        }
        let needed = try #require(golden["tflite_micro_minimum_arena"] as? Int)
        #expect(micro["tensor_arena_size"] as? Int == files.arenaBytes)
        #expect(files.arenaBytes >= needed && files.arenaBytes <= needed + needed / 4, "\(files.arenaBytes) for \(needed)")
        #expect(golden["pymicro_wakeword_detections"] as? [Int] == golden["published_pymicro_wakeword_detections"] as? [Int])
    }

    @Test("A package that is not a microWakeWord model is refused, naming it and the node; the CLI exits 65 and writes nothing")
    func refusesOthers() throws {
        #expect {
            _ = try MicroWakeWordExport.export(package: Repo.root.appendingPathComponent("Models/silero-vad"), modelFile: "x.tflite")
        } throws: { error in
            guard case let .model(reason)? = error as? TrainingError else { return false }
            return reason.hasPrefix("silero-vad: node '") && reason.contains("--format microwakeword takes a microWakeWord model")
        }
        let folder = try Repo.temporaryFolder()
        let out = folder.appendingPathComponent("x.tflite").path
        let run = try runEarshot(["export", Repo.path("Models/silero-vad"), "--format", "microwakeword", "-o", out])
        #expect(run.status == 65)
        #expect(!FileManager.default.fileExists(atPath: out) && !FileManager.default.fileExists(atPath: folder.appendingPathComponent("x.json").path))
    }
}
