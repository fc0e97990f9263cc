import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot
@testable import EarshotModel

/// ONNX models imported by `OnnxImporter` (what `earshot import` runs) and run by the graph
/// runtime, against onnxruntime's outputs (tools/silero_reference.py) and the invariants.
enum Imported {
    static let sileroSource = Repo.path("Models/sources/silero_vad.onnx")

    static func silero(rate: Int) throws -> Model {
        var options = OnnxImporter.Options()
        options.fixed = ["sr": Double(rate)]
        options.states = [("state", "stateN")]
        options.sampleRate = rate
        options.contextSamples = rate == 16000 ? 64 : 32
        options.chunkSamples = rate == 16000 ? 512 : 256
        options.labels = ["speech"]
        options.name = "silero-vad-onnx"
        let (manifest, tensors) = try OnnxImporter.importModel(path: sileroSource, options: options)
        return try Model(manifest: manifest, tensors: tensors, name: "imported silero \(rate)")
    }

    /// Imported once for the tests that only run it (nil: the import failed, which the
    /// probability test reports).
    static let silero16k: Model? = try? silero(rate: 16000)
}

@Suite("ONNX import: Silero VAD from its .onnx")
struct SileroImportTests {
    @Test("Each chunk's probability equals onnxruntime's (16 kHz and 8 kHz branches)", arguments: [16000, 8000])
    func probabilities(rate: Int) throws {
        let model = try Imported.silero(rate: rate)
        #expect(model.labels == ["speech"])
        // Compiled, every node on a compiled kernel: the STFT convolution as an FFT.
        let d = model.description
        #expect(d.execution == "compiled")
        #expect(d.layers.filter { $0.kernel == "reference" }.map(\.name) == [])
        #expect(d.layers.filter { $0.type == "Conv" }.first?.kernel == "FFT")
        let golden = try Reference.json(Repo.path("Tests/EarshotModelTests/Goldens/silero-vad-\(rate / 1000)k.json"))
        let expected = (golden["probabilities"] as? [Double] ?? []).map(Float.init)
        let audio = try AudioFile.readMono(path: Repo.path(golden["audio"] as? String ?? "")).samples
        let n = model.chunkSamples
        var state = model.makeState()
        var worst: Float = 0
        for (i, start) in stride(from: 0, to: audio.count, by: n).enumerated() {
            var block = Array(audio[start..<min(start + n, audio.count)])
            block += [Float](repeating: 0, count: n - block.count)
            let p = try model.prediction(from: block, using: &state)[0]
            worst = max(worst, abs(p - expected[i]))
        }
        #expect(expected.count == (audio.count + n - 1) / n)
        print("imported Silero at \(rate) Hz: max |diff| \(worst) against onnxruntime over \(expected.count) chunks")
        #expect(worst <= 1e-4, "max |diff| \(worst) against onnxruntime at \(rate) Hz")
    }

    @Test("The shipped Silero packages are what earshot import makes of Models/sources (scripts/import-models.sh)", arguments: [16000, 8000])
    func shipped(rate: Int) throws {
        let shipped = try Model(contentsOf: Repo.root.appendingPathComponent(rate == 16000 ? "Models/silero-vad" : "Models/silero-vad-8k"))
        let imported = try Imported.silero(rate: rate)
        #expect(shipped.contentHash == imported.contentHash)
        #expect(shipped.manifest.graph == imported.manifest.graph)
        #expect(shipped.manifest.audio == imported.manifest.audio)
        #expect(shipped.manifest.decision?.negativeThreshold == 0.35)
    }

    @Test("Segments equal the shipped Models/silero-vad's, and the state is the LSTM's two tensors")
    func segments() async throws {
        let model = try #require(Imported.silero16k)
        #expect(model.makeState().byteCount == (64 + 2 * 128) * 4)
        let path = Repo.path("AudioSamples/speech-noise-16k.wav")
        let imported = try await FileLabeler(model: model, options: LabelOptions(model: Fixtures.model)).label(path: path)
        let converted = try await FileLabeler(model: Fixtures.model).label(path: path)
        #expect(imported.segments.map(\.start) == converted.segments.map(\.start))
        #expect(imported.segments.map(\.end) == converted.segments.map(\.end))
        #expect(imported.segments.count == 6)
    }

    @Test("A batch equals its streams alone; a restored state continues as the uninterrupted stream")
    func invariants() throws {
        let model = try #require(Imported.silero16k)
        var random = SeededRandom.fromEnvironment()
        let streams = 3, steps = 12
        let blocks = (0..<streams).map { _ in (0..<steps).map { _ in random.gaussian(count: 512, deviation: 0.2) } }
        var alone = [[Float]]()
        for s in 0..<streams {
            var state = model.makeState()
            for t in 0..<steps { alone.append(try model.prediction(from: blocks[s][t], using: &state)) }
        }
        var states = (0..<streams).map { _ in model.makeState() }
        var batched = [[[Float]]](repeating: [], count: streams)
        for t in 0..<steps {
            let out = try model.predictions(from: (0..<streams).map { blocks[$0][t] }, using: &states)
            for s in 0..<streams { batched[s].append(out[s]) }
        }
        #expect(batched.flatMap { $0 } == alone, "seed \(random.seed)")
        var first = model.makeState()
        for t in 0..<6 { _ = try model.prediction(from: blocks[0][t], using: &first) }
        var restored = try model.restoreState(first.serialized())
        let rest = try model.predictions(forConsecutive: Array(blocks[0][6...]), using: &restored)
        #expect(rest == Array(alone[6..<steps]))
    }

    @Test("Consecutive blocks of a graph (the state-free part batched, tiles run ahead on another thread) equal one block at a time")
    func consecutive() throws {
        let model = try #require(Imported.silero16k)
        var random = SeededRandom.fromEnvironment()
        // The sample's speech and pauses, so that the state matters: the scores cross the threshold.
        let audio = try AudioFile.readMono(path: Repo.path("AudioSamples/speech-noise-16k.wav")).samples
        let blocks = (0..<200).map { t in Array(audio[(t * 512)..<((t + 1) * 512)]) }
        var one = model.makeState()
        let sequential = try blocks.map { try model.prediction(from: $0, using: &one) }
        #expect(Set(sequential.map { $0[0] > 0.5 }).count == 2)
        var whole = model.makeState()
        #expect(try model.predictions(forConsecutive: blocks, using: &whole) == sequential)
        #expect(whole == one)
        var runs = model.makeState()
        #expect(try inRandomRuns(blocks, maxRun: 90, model: model, state: &runs, random: &random) == sequential, "seed \(random.seed)")
        #expect(runs == one)
    }

    @Test("Inputs the importer cannot place are errors that say what to do")
    func interfaceErrors() throws {
        var options = OnnxImporter.Options()
        options.states = [("state", "stateN")]
        options.contextSamples = 64
        options.chunkSamples = 512
        #expect(throws: OnnxImporter.ImportError.self) { try OnnxImporter.importModel(path: Imported.sileroSource, options: options) }
        do {
            _ = try OnnxImporter.importModel(path: Imported.sileroSource, options: options)
        } catch {
            #expect("\(error)".contains("2 inputs could take the audio (input, sr)") && "\(error)".contains("--set"), "\(error)")
        }
        options.fixed = ["rate": 16000]
        do {
            _ = try OnnxImporter.importModel(path: Imported.sileroSource, options: options)
        } catch {
            #expect("\(error)".contains("--set rate: the model has no input 'rate'"), "\(error)")
        }
        #expect(throws: OnnxImporter.ImportError.self) {
            try OnnxImporter.importModel(path: Repo.path("AudioSamples/speech-noise-16k.wav"), options: OnnxImporter.Options())
        }
    }

    @Test("Declared shapes whose product overflows are refused as too large, not multiplied: the audio input, a state, an input --set fixes")
    func overflowingShapes() throws {
        let folder = try Repo.temporaryFolder()
        func model(audio: [Int64], state: [Int64]?) throws -> String {
            let path = folder.appendingPathComponent("shapes-\(audio.count)-\(state?.count ?? 0).onnx").path
            var inputs = [HandProto.valueInfo("audio", audio)], outputs = [HandProto.valueInfo("scores", [1, 1])]
            var nodes = [HandProto.node("ReduceMean", ["audio"], ["scores"])]
            if let state {
                inputs.append(HandProto.valueInfo("state", state))
                outputs.append(HandProto.valueInfo("stateN", state))
                nodes.append(HandProto.node("Relu", ["state"], ["stateN"]))
            }
            try Data(HandProto.model(nodes: nodes, inputs: inputs, outputs: outputs)).write(to: URL(fileURLWithPath: path))
            return path
        }
        func refusal(_ path: String, _ options: OnnxImporter.Options) -> String {
            do { _ = try OnnxImporter.importModel(path: path, options: options); return "imported" } catch { return "\(error)" }
        }
        let huge: Int64 = 1 << 32
        #expect(refusal(try model(audio: [huge, huge, 576], state: nil), OnnxImporter.Options()).contains("too large"))
        var options = OnnxImporter.Options()
        options.states = [("state", "stateN")]
        #expect(refusal(try model(audio: [1, 576], state: [huge, huge, 2]), options).contains("at most 2^24 values"))
        // An input fixed with --set whose shape overflows.
        let fixedPath = folder.appendingPathComponent("shapes-set.onnx").path
        try Data(HandProto.model(nodes: [HandProto.node("ReduceMean", ["audio"], ["scores"])],
                                 inputs: [HandProto.valueInfo("audio", [1, 576]), HandProto.valueInfo("gain", [huge, huge])],
                                 outputs: [HandProto.valueInfo("scores", [1, 1])])).write(to: URL(fileURLWithPath: fixedPath))
        var setOptions = OnnxImporter.Options()
        setOptions.fixed = ["gain": 1]
        #expect(refusal(fixedPath, setOptions).contains("--set gain: the input's shape [4294967296, 4294967296] is too large"))
    }
}

/// Protobuf's wire format, as much of it as a hand-made ONNX model needs (onnx.proto's field numbers).
enum HandProto {
    static func varint(_ value: UInt64) -> [UInt8] {
        var v = value, out: [UInt8] = []
        repeat {
            out.append(UInt8(v & 0x7F) | (v >> 7 != 0 ? 0x80 : 0))
            v >>= 7
        } while v != 0
        return out
    }
    static func int(_ field: Int, _ v: Int64) -> [UInt8] { varint(UInt64(field << 3)) + varint(UInt64(bitPattern: v)) }
    static func bytes(_ field: Int, _ b: [UInt8]) -> [UInt8] { varint(UInt64(field << 3 | 2)) + varint(UInt64(b.count)) + b }
    static func string(_ field: Int, _ s: String) -> [UInt8] { bytes(field, Array(s.utf8)) }

    /// ValueInfoProto: a float tensor of fixed dims.
    static func valueInfo(_ name: String, _ dims: [Int64]) -> [UInt8] {
        let shape = dims.flatMap { bytes(1, int(1, $0)) }
        return string(1, name) + bytes(2, bytes(1, int(1, 1) + bytes(2, shape)))
    }
    static func node(_ op: String, _ inputs: [String], _ outputs: [String]) -> [UInt8] {
        inputs.flatMap { string(1, $0) } + outputs.flatMap { string(2, $0) } + string(3, op.lowercased()) + string(4, op)
    }
    static func model(nodes: [[UInt8]], inputs: [[UInt8]], outputs: [[UInt8]]) -> [UInt8] {
        let graph = nodes.flatMap { bytes(1, $0) } + string(2, "hand") + inputs.flatMap { bytes(11, $0) } + outputs.flatMap { bytes(12, $0) }
        return int(1, 8) + bytes(8, int(2, 17)) + bytes(7, graph)
    }
}

@Suite("ONNX import: a model of every op (tools/make_op_coverage_model.py)")
struct OpCoverageTests {
    @Test("Every step's scores equal onnxruntime's, the LSTM and GRU states carried from step to step")
    func everyOp() throws {
        let folder = Repo.path("Tests/EarshotTests/Goldens/op-coverage")
        let golden = try Reference.json(folder + "/golden.json")
        var options = OnnxImporter.Options()
        options.contextSamples = golden["contextSamples"] as? Int ?? 0
        options.labels = ["a", "b", "c"]
        let (manifest, tensors) = try OnnxImporter.importModel(path: folder + "/model.onnx", options: options)
        // The states were paired by name (lstm_state → lstm_state_next, gru_state → gru_state_next).
        #expect(manifest.graph?.states.map(\.input) == ["lstm_state", "gru_state"])
        let ops = Set(manifest.graph?.nodes.map(\.op) ?? [])
        let expectedOps = Set(golden["ops"] as? [String] ?? []).subtracting(["Identity", "Cast"])  // no-ops are not kept
        #expect(ops == expectedOps, "missing \(expectedOps.subtracting(ops).sorted())")
        let model = try Model(manifest: manifest, tensors: tensors)
        var state = model.makeState()
        let chunks = (golden["chunks"] as? [[Double]] ?? []).map { $0.map(Float.init) }
        let expected = (golden["scores"] as? [[Double]] ?? []).map { $0.map(Float.init) }
        var worst: Float = 0
        for (chunk, want) in zip(chunks, expected) {
            let got = try model.prediction(from: chunk, using: &state)
            worst = max(worst, maxAbsDifference(got, want))
        }
        #expect(chunks.count == 40 && expected.count == 40)
        // Compiled; what runs on the reference kernels is what has no compiled kernel yet.
        let d = model.description
        #expect(d.execution?.hasPrefix("compiled") == true)
        let reference = Set(d.layers.filter { $0.kernel == "reference" }.map(\.type))
        #expect(reference.isSubset(of: ["Softmax", "LayerNormalization", "BatchNormalization", "GRU", "MaxPool", "AveragePool", "Where", "Erf"]),
                "\(reference.sorted())")
        print("op coverage: \(d.execution ?? "")")
        print("op coverage (\(ops.count) op types): max |diff| \(worst) against onnxruntime over \(chunks.count) steps")
        #expect(worst <= 1e-4, "max |diff| \(worst)")
    }
}

@Suite("earshot import")
struct ImportCommandTests {
    @Test("import writes a package that label runs; an existing folder needs --force")
    func importAndLabel() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let output = folder.appendingPathComponent("silero-onnx").path
        let words = ["import", "Models/sources/silero_vad.onnx", "--set", "sr=16000", "--state", "state=stateN", "--context", "64",
                     "--chunk", "512", "--labels", "speech", "--output", output]
        let imported = try runEarshot(words)
        #expect(imported.status == 0, "\(imported.err)")
        #expect(imported.out.contains("written to \(output)"), "\(imported.out)")
        let again = try runEarshot(words)
        #expect(again.status == 64 && again.err.contains("exists"))
        let labelled = try runEarshot(["label", "--format", "csv", "--model", output, "AudioSamples/speech-noise-16k.wav"])
        let reference = try runEarshot(["label", "--format", "csv", "AudioSamples/speech-noise-16k.wav"])
        #expect(labelled.status == 0, "\(labelled.err)")
        let rows = { (text: String) in text.split(separator: "\n").map { $0.split(separator: ",")[3...4].joined(separator: ",") } }
        #expect(rows(labelled.out) == rows(reference.out))
        let inspect = try runEarshot(["inspect", output])
        #expect(inspect.status == 0, "\(inspect.err)")
    }
}
