import Earshot
import EarshotTestSupport
import Foundation
import Testing

/// microWakeWord's int8 TFLite models (Models/sources/microwakeword, from pymicro-wakeword,
/// Apache-2.0), imported by `TFLiteImporter` and run over the features of a recording of the
/// wake phrases and other words, against TFLite's reference kernels on the same features
/// (tools/microwakeword_reference.py): every step's output equal, bit for bit.
@Suite("TFLite import: microWakeWord's models against TFLite's reference kernels")
struct MicroWakeWordTests {
    static let models = ["okay_nabu", "hey_jarvis", "alexa", "hey_mycroft"]
    static let goldens = "Tests/EarshotTests/Goldens/microwakeword"

    static func importModel(_ name: String) throws -> Model {
        var options = OnnxImporter.Options()
        options.name = name
        let (manifest, tensors) = try TFLiteImporter.importModel(path: Repo.path("Models/sources/microwakeword/\(name).tflite"), options: options)
        return try Model(manifest: manifest, tensors: tensors, name: name)
    }

    /// The recording's feature frames (40 values each) and the reference's outputs per step.
    static func reference(_ name: String) throws -> (frames: [Float], reference: [Int], library: [Int], stride: Int) {
        let frames = try Reference.float32(Repo.path("\(goldens)/features.f32"))
        let golden = try Reference.json(Repo.path("\(goldens)/\(name).json"))
        return (frames, golden["reference"] as? [Int] ?? [], golden["library"] as? [Int] ?? [], golden["stride"] as? Int ?? 0)
    }

    /// Blocks of `stride` frames, as pymicro-wakeword feeds the model.
    static func blocks(_ frames: [Float], stride: Int) -> [[Float]] {
        let size = 40 * stride
        return (0..<(frames.count / size)).map { Array(frames[($0 * size)..<(($0 + 1) * size)]) }
    }

    @Test("Every step's output equals TFLite's reference kernels", arguments: models)
    func stepsEqualReference(_ name: String) throws {
        let model = try Self.importModel(name)
        let (frames, reference, library, stride) = try Self.reference(name)
        #expect(stride == 3 && model.chunkSamples == 40 * stride)
        let blocks = Self.blocks(frames, stride: stride)
        #expect(blocks.count == reference.count && reference.count > 500)
        var state = model.makeState()
        var outputs: [Int] = []
        for block in blocks {
            let score = try model.prediction(from: block, using: &state)
            outputs.append(Int((score[0] * 256).rounded()))
            #expect(score[0] * 256 == (score[0] * 256).rounded(), "the score is the uint8 output over 256")
        }
        let differing = zip(outputs, reference).filter { $0 != $1 }.count
        let againstLibrary = zip(outputs, library).filter { $0 != $1 }
        print("microWakeWord \(name): \(outputs.count) steps; \(differing) differ from TFLite's reference kernels; "
              + "\(againstLibrary.count) from pymicro-wakeword's library (max |diff| \(againstLibrary.map { abs($0 - $1) }.max() ?? 0)/255); "
              + "peak \(outputs.max() ?? 0)/255; \(model.description.execution ?? "")")
        #expect(differing == 0)
        #expect(outputs.max() ?? 0 > 200 || name == "hey_jarvis", "the recording holds the phrase")
    }

    @Test("Detections through a stream equal pymicro-wakeword's rule on the reference outputs", arguments: models)
    func detections(_ name: String) async throws {
        let model = try Self.importModel(name)
        let (frames, _, _, frameStride) = try Self.reference(name)
        let golden = try Reference.json(Repo.path("\(Self.goldens)/\(name).json"))
        let expected = golden["detections"] as? [Int] ?? [-1]
        var options = LabelOptions(model: model)
        options.threshold = golden["probability_cutoff"] as? Double ?? 2
        options.detectionWindow = golden["sliding_window_size"] as? Int
        // The features package steps 120 values at the model's 16 kHz: 2 s of audio is 67 of its steps.
        options.refractoryMs = (golden["refractory_seconds"] as? Double ?? 0) * 1000 * Double(model.chunkSamples) / Double(160 * frameStride)
        let stream = try StreamClassifier(model: model, sourceSampleRate: model.sampleRate, options: options)
        let chunks = stride(from: 0, to: frames.count, by: 1000).map { Array(frames[$0..<min($0 + 1000, frames.count)]) }
        var found: [Int] = []
        for try await event in stream.events(for: chunks.async) {
            if case let .detected(d) = event {
                #expect(d.label == name && d.score > Float(options.threshold))
                found.append(d.sample / model.chunkSamples - 1)
            }
        }
        print("microWakeWord \(name): detections at steps \(found); the reference's \(expected)")
        #expect(found == expected)
    }
}
