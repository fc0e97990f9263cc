import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot
import EarshotImport
@testable import EarshotModel

/// ONNX models imported by `OnnxImporter` (what `earshot import` runs) and run by the graph
/// runtime, against onnxruntime's outputs (tools/silero_reference.py) and the invariants.
enum Imported {
    static let sileroSource = Repo.path("Models/sources/silero_vad.onnx")

    static func silero(rate: Int) throws -> Model {
        var options = ImportOptions()
        options.fixed = ["sr": Double(rate)]
        options.states = [("state", "stateN")]
        options.sampleRate = rate
        options.contextSamples = rate == 16000 ? 64 : 32
        options.chunkSamples = rate == 16000 ? 512 : 256
        options.metadata.labels = ["speech"]
        options.metadata.name = "silero-vad-onnx"
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
        var options = ImportOptions()
        options.states = [("state", "stateN")]
        options.contextSamples = 64
        options.chunkSamples = 512
        #expect(throws: ImportError.self) { try OnnxImporter.importModel(path: Imported.sileroSource, options: options) }
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
        #expect(throws: ImportError.self) {
            try OnnxImporter.importModel(path: Repo.path("AudioSamples/speech-noise-16k.wav"), options: ImportOptions())
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
        func refusal(_ path: String, _ options: ImportOptions) -> String {
            do { _ = try OnnxImporter.importModel(path: path, options: options); return "imported" } catch { return "\(error)" }
        }
        let huge: Int64 = 1 << 32
        #expect(refusal(try model(audio: [huge, huge, 576], state: nil), ImportOptions()).contains("too large"))
        var options = ImportOptions()
        options.states = [("state", "stateN")]
        #expect(refusal(try model(audio: [1, 576], state: [huge, huge, 2]), options).contains("at most 2^24 values"))
        // An input fixed with --set whose shape overflows.
        let fixedPath = folder.appendingPathComponent("shapes-set.onnx").path
        try Data(HandProto.model(nodes: [HandProto.node("ReduceMean", ["audio"], ["scores"])],
                                 inputs: [HandProto.valueInfo("audio", [1, 576]), HandProto.valueInfo("gain", [huge, huge])],
                                 outputs: [HandProto.valueInfo("scores", [1, 1])])).write(to: URL(fileURLWithPath: fixedPath))
        var setOptions = ImportOptions()
        setOptions.fixed = ["gain": 1]
        #expect(refusal(fixedPath, setOptions).contains("--set gain: the input's shape [4294967296, 4294967296] is too large"))
    }
}

@Suite("Import errors: each names the input file once, with its exit code")
struct ImportErrorTests {
    /// The error `OnnxImporter` gives for a hand-made model, or "imported".
    static func refusal(_ bytes: [UInt8], named name: String, options: ImportOptions = .init()) throws -> String {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent(name).path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        do { _ = try OnnxImporter.importModel(path: path, options: options); return "imported" } catch {
            return "\(error)".replacingOccurrences(of: folder.path + "/", with: "")
        }
    }

    static let floatOnly = "which the runtime cannot take there; export it as FLOAT (audio, features, states and scores are float "
        + "tensors; fixed inputs may also be integers)"

    @Test("An audio input of STRING, BOOL or COMPLEX64 is refused naming it and its type (it imported as 0 nodes); so are such states and scores")
    func elementTypes() throws {
        for (type, name) in [(8, "STRING"), (9, "BOOL"), (14, "COMPLEX64")] {
            let bytes = HandProto.model(nodes: [HandProto.node("Identity", ["audio"], ["scores"])],
                                        inputs: [HandProto.valueInfo("audio", [1, 512], type: Int64(type))],
                                        outputs: [HandProto.valueInfo("scores", [1, 512], type: Int64(type))])
            #expect(try Self.refusal(bytes, named: "m.onnx") == "m.onnx: the audio input 'audio' is of type \(name), \(Self.floatOnly)")
        }
        // A state pair whose input, or whose output, is BOOL; a score output of STRING.
        var options = ImportOptions()
        options.states = [("state", "stateN")]
        for (inputType, outputType, role, name) in [(9, 1, "state input", "state"), (1, 9, "state output", "stateN")] as [(Int64, Int64, String, String)] {
            let bytes = HandProto.model(nodes: [HandProto.node("ReduceMean", ["audio"], ["scores"]), HandProto.node("Identity", ["state"], ["stateN"])],
                                        inputs: [HandProto.valueInfo("audio", [1, 512]), HandProto.valueInfo("state", [1, 4], type: inputType)],
                                        outputs: [HandProto.valueInfo("scores", [1, 1]), HandProto.valueInfo("stateN", [1, 4], type: outputType)])
            #expect(try Self.refusal(bytes, named: "s.onnx", options: options) == "s.onnx: the \(role) '\(name)' is of type BOOL, \(Self.floatOnly)")
        }
        let stringScores = HandProto.model(nodes: [HandProto.node("ReduceMean", ["audio"], ["scores"])], inputs: [HandProto.valueInfo("audio", [1, 512])],
                                           outputs: [HandProto.valueInfo("scores", [1, 1], type: 8)])
        #expect(try Self.refusal(stringScores, named: "o.onnx") == "o.onnx: the score output 'scores' is of type STRING, \(Self.floatOnly)")
        // Integer scores too (the runtime's scores are floats), named against the .onnx, not the package.
        let intScores = HandProto.model(nodes: [HandProto.node("ReduceMean", ["audio"], ["scores"])], inputs: [HandProto.valueInfo("audio", [1, 512])],
                                        outputs: [HandProto.valueInfo("scores", [1, 1], type: 7)])
        #expect(try Self.refusal(intScores, named: "i.onnx") == "i.onnx: the score output 'scores' is of type INT64, \(Self.floatOnly)")
        // An integer input fixed with --set is taken.
        var fixed = ImportOptions()
        fixed.fixed = ["gain": 2]
        let intFixed = HandProto.model(nodes: [HandProto.node("ReduceMean", ["audio"], ["scores"])],
                                       inputs: [HandProto.valueInfo("audio", [1, 512]), HandProto.valueInfo("gain", [1], type: 7)],
                                       outputs: [HandProto.valueInfo("scores", [1, 1])])
        #expect(try Self.refusal(intFixed, named: "f.onnx", options: fixed) == "imported")
        let stringFixed = HandProto.model(nodes: [HandProto.node("ReduceMean", ["audio"], ["scores"])],
                                          inputs: [HandProto.valueInfo("audio", [1, 512]), HandProto.valueInfo("gain", [1], type: 8)],
                                          outputs: [HandProto.valueInfo("scores", [1, 1])])
        #expect(try Self.refusal(stringFixed, named: "f.onnx", options: fixed) == "f.onnx: the input fixed by --set 'gain' is of type STRING, \(Self.floatOnly)")
    }

    @Test("A value two nodes write is reported against the .onnx, naming the value and both nodes (it was said of the package being written)")
    func duplicatedOutput() throws {
        let bytes = HandProto.model(nodes: [HandProto.node("Relu", ["audio"], ["x"]), HandProto.node("Sigmoid", ["audio"], ["x"]),
                                            HandProto.node("ReduceMean", ["x"], ["scores"])],
                                    inputs: [HandProto.valueInfo("audio", [1, 512])], outputs: [HandProto.valueInfo("scores", [1, 1])])
        let expected = "node 'sigmoid' (Sigmoid): its output 'x' is already written by node 'relu' (Relu); "
            + "ONNX names every value once: the file is damaged or was edited wrongly"
        #expect(try Self.refusal(bytes, named: "dup.onnx") == "dup.onnx: " + expected)
        // A node that writes over a graph input.
        let overInput = HandProto.model(nodes: [HandProto.node("Relu", ["audio"], ["audio"]), HandProto.node("ReduceMean", ["audio"], ["scores"])],
                                        inputs: [HandProto.valueInfo("audio", [1, 512])], outputs: [HandProto.valueInfo("scores", [1, 1])])
        #expect(try Self.refusal(overInput, named: "in.onnx") == "in.onnx: node 'relu' (Relu): its output 'audio' is already written by "
                + "a graph input or initializer; ONNX names every value once: the file is damaged or was edited wrongly")
        // Through the command line: the input file named, not the output package; exit 65.
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let input = folder.appendingPathComponent("dup.onnx").path, output = folder.appendingPathComponent("package").path
        try Data(bytes).write(to: URL(fileURLWithPath: input))
        let run = try runEarshot(["import", input, "-o", output])
        #expect(run.status == 65 && run.err == "earshot: \(input): \(expected)\n", "\(run.err)")
        #expect(!FileManager.default.fileExists(atPath: output))
    }

    @Test("import exits 66 for a missing model and 65 for a damaged or unsupported one (it exited 1), each naming the file once")
    func exitCodes() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        func run(_ name: String, _ bytes: [UInt8]?) throws -> (status: Int32, err: String, path: String) {
            let path = folder.appendingPathComponent(name).path
            if let bytes { try Data(bytes).write(to: URL(fileURLWithPath: path)) }
            let r = try runEarshot(["import", path, "-o", folder.appendingPathComponent("out-" + name).path])
            return (r.status, r.err, path)
        }
        for name in ["missing.onnx", "missing.tflite"] {
            let r = try run(name, nil)
            #expect(r.status == 66 && r.err == "earshot: \(r.path): no such file\n", "\(r.err)")
        }
        let text = Array("not a model\n".utf8)
        let onnx = try run("damaged.onnx", text)
        #expect(onnx.status == 65 && onnx.err == "earshot: \(onnx.path): not a valid ONNX model: model: field 13 has the invalid wire type 6 at byte 1\n", "\(onnx.err)")
        let tflite = try run("damaged.tflite", text)
        #expect(tflite.status == 65 && tflite.err == "earshot: \(tflite.path): not a valid TFLite model: file: no TFLite identifier \"TFL3\" "
                + "(is it a .tflite file?) (at byte 4)\n", "\(tflite.err)")
        // A model the importer does not support (an op without a kernel): 65 too.
        let unsupported = try run("op.onnx", HandProto.model(nodes: [HandProto.node("NoSuchOp", ["audio"], ["scores"])],
                                                              inputs: [HandProto.valueInfo("audio", [1, 512])], outputs: [HandProto.valueInfo("scores", [1, 1])]))
        // It names the op, the node and the page of the models and ops the importers take.
        #expect(unsupported.status == 65 && unsupported.err == "earshot: \(unsupported.path): node 'nosuchop': the ONNX op NoSuchOp is not supported "
                + "(the runtime has no kernel for it); docs/models.md (in Earshot's source) lists the models and ops earshot import takes\n",
                "\(unsupported.err)")
    }

    @Test("train names a damaged validation stream and truth file once (they read 'x.wav: x.wav: ...' and 'x.csv: channel 0: x.csv: ...')")
    func trainMessages() throws {
        let root = try toneFolder(files: 4)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let notAudio = root + "/stream.wav", truth = root + "/truth.csv", badTruth = root + "/bad-truth.csv"
        try "not audio".write(toFile: notAudio, atomically: true, encoding: .utf8)
        try "start,end,label\n0,1,low\n".write(toFile: truth, atomically: true, encoding: .utf8)
        try "start,end,label\nsoon,1,low\n".write(toFile: badTruth, atomically: true, encoding: .utf8)
        let audio = try run(["train", "--data", root, "--output", root + "/m1", "--epochs", "1", "--validation-stream", notAudio, "--validation-truth", truth])
        #expect(audio.status != 0 && audio.last == "earshot: \(notAudio): not an audio file libsndfile can read (Format not recognised.)", "\(audio.last)")
        let good = root + "/high/s0_high_0.wav"
        let csv = try run(["train", "--data", root, "--output", root + "/m2", "--epochs", "1", "--validation-stream", good, "--validation-truth", badTruth])
        #expect(csv.status != 0 && csv.last == "earshot: \(badTruth): line 2: expected start,end,label in seconds", "\(csv.last)")
    }

    @Test("A model of more nodes than GraphSpec.maxNodes is refused before it is read, naming the file and the count (100,000 Relu nodes took 812 MB to import)")
    func nodeLimit() throws {
        let n = GraphSpec.maxNodes + 1
        let expected = "relu.onnx: \(n) nodes (those of If, Loop and Scan bodies counted), more than the limit of \(GraphSpec.maxNodes)"
        #expect(try Self.refusal(HandProto.reluChain(n, block: 1280), named: "relu.onnx") == expected)
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let input = folder.appendingPathComponent("relu.onnx").path
        try Data(HandProto.reluChain(100_000, block: 1280)).write(to: URL(fileURLWithPath: input))
        let run = try runEarshot(["import", input, "-o", folder.appendingPathComponent("out").path])
        #expect(run.status == 65 && run.err == "earshot: \(input): 100000 nodes (those of If, Loop and Scan bodies counted), more than the limit of 50000\n",
                "\(run.err)")
    }

    @Test("Importing a chain of 20,000 Relu nodes on a block of 1280 holds one block per node (the compiled step's arena), not four")
    func memoryPerNode() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let input = folder.appendingPathComponent("relu.onnx").path, n = 20_000
        try Data(HandProto.reluChain(n, block: 1280)).write(to: URL(fileURLWithPath: input))
        let (status, peakKB) = try peakMemory(["import", input, "-o", folder.appendingPathComponent("out").path])
        #expect(status == 0)
        // A block is 5 kB: the compiled step's arena takes 100 MB, and with the process and the
        // graph's text it came to 8 kB a node (debug build). When the importer, the dry step, the
        // plan's build and its check each kept every node's value on silence, it was 17-18 kB.
        let perNode = Double(peakKB) / Double(n)
        print("import of \(n) Relu nodes: peak RSS \(peakKB) kB, \(perNode) kB a node")
        #expect(perNode < 13, "peak RSS \(peakKB) kB")
    }

    /// Runs earshot with `arguments` (output to /dev/null): its exit status and its peak resident
    /// memory in kB, its VmHWM read every 5 ms until it ends. (Not wait4's ru_maxrss: a child
    /// spawned with vfork starts its count from this process's own peak.)
    private func peakMemory(_ arguments: [String]) throws -> (status: Int32, peakKB: Int) {
        let process = Process()
        process.executableURL = earshotBinary
        process.arguments = arguments
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        var peakKB = 0
        while process.isRunning {
            let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
            if let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
               let kB = line.split(separator: " ").compactMap({ Int($0) }).first {
                peakKB = max(peakKB, kB)
            }
            Thread.sleep(forTimeInterval: 0.005)
        }
        process.waitUntilExit()
        return (process.terminationStatus, peakKB)
    }

    private func run(_ words: [String]) throws -> (status: Int32, last: String) {
        let r = try runEarshot(words)
        return (r.status, r.err.split(separator: "\n").last.map(String.init) ?? "")
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

    /// ValueInfoProto: a tensor of fixed dims, float unless `type` (ONNX's number) says otherwise.
    static func valueInfo(_ name: String, _ dims: [Int64], type: Int64 = 1) -> [UInt8] {
        let shape = dims.flatMap { bytes(1, int(1, $0)) }
        return string(1, name) + bytes(2, bytes(1, int(1, type) + bytes(2, shape)))
    }
    static func node(_ op: String, _ inputs: [String], _ outputs: [String]) -> [UInt8] {
        inputs.flatMap { string(1, $0) } + outputs.flatMap { string(2, $0) } + string(3, op.lowercased()) + string(4, op)
    }
    /// `audio` [1, block] through n Relu nodes to `scores`, each node named.
    static func reluChain(_ n: Int, block: Int64) -> [UInt8] {
        let nodes = (0..<n).map { i in
            string(1, i == 0 ? "audio" : "v\(i)") + string(2, i == n - 1 ? "scores" : "v\(i + 1)") + string(3, "r\(i)") + string(4, "Relu")
        }
        return model(nodes: nodes, inputs: [valueInfo("audio", [1, block])], outputs: [valueInfo("scores", [1, block])])
    }

    static func model(nodes: [[UInt8]], inputs: [[UInt8]], outputs: [[UInt8]], opset: Int64 = 17) -> [UInt8] {
        let graph = nodes.flatMap { bytes(1, $0) } + string(2, "hand") + inputs.flatMap { bytes(11, $0) } + outputs.flatMap { bytes(12, $0) }
        return int(1, 8) + bytes(8, int(2, opset)) + bytes(7, graph)
    }
}

@Suite("ONNX import: a model of every op (tools/make_op_coverage_model.py)")
struct OpCoverageTests {
    @Test("Every step's scores equal onnxruntime's, the LSTM and GRU states carried from step to step")
    func everyOp() throws {
        let folder = Repo.path("Tests/EarshotTests/Goldens/op-coverage")
        let golden = try Reference.json(folder + "/golden.json")
        var options = ImportOptions()
        options.contextSamples = golden["contextSamples"] as? Int ?? 0
        options.metadata.labels = ["a", "b", "c"]
        let (manifest, tensors) = try OnnxImporter.importModel(path: folder + "/model.onnx", options: options)
        // The states were paired by name (lstm_state → lstm_state_next, gru_state → gru_state_next).
        #expect(manifest.graph?.states.map(\.input) == ["lstm_state", "gru_state"])
        let ops = Set(manifest.graph?.nodes.map(\.op) ?? [])
        // No-ops are not kept; global pooling is imported as the reduction over its axes.
        let globalPools = ["GlobalAveragePool": "ReduceMean", "GlobalMaxPool": "ReduceMax"]
        let goldenOps = golden["ops"] as? [String] ?? []
        #expect(globalPools.keys.allSatisfy(goldenOps.contains))
        let expectedOps = Set(goldenOps.map { globalPools[$0] ?? $0 }).subtracting(["Identity", "Cast"])
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

    @Test("--manifest FILE.json gives the package's metadata; a key it does not know, or a file that is no JSON object, is a usage error")
    func sidecar() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let sidecar = folder.appendingPathComponent("meta.json").path, output = folder.appendingPathComponent("package").path
        let words = ["import", "Models/sources/silero_vad.onnx", "--set", "sr=16000", "--state", "state=stateN", "--context", "64",
                     "--chunk", "512", "--manifest", sidecar, "--output", output]
        try #"{"name": "vad", "version": "7", "labels": ["speech"], "url": "u", "languages": ["en"], "decision": {"threshold": 0.25}}"#
            .write(toFile: sidecar, atomically: true, encoding: .utf8)
        let imported = try runEarshot(words + ["--author", "A"])
        #expect(imported.status == 0, "\(imported.err)")
        let manifest = try Model(contentsOf: URL(fileURLWithPath: output)).manifest
        #expect(manifest.name == "vad" && manifest.version == "7" && manifest.outputs.labels == ["speech"] && manifest.url == "u")
        #expect(manifest.languages == ["en"] && manifest.decision?.threshold == 0.25 && manifest.author == "A")
        try #"{"name": "vad", "labell": ["speech"]}"#.write(toFile: sidecar, atomically: true, encoding: .utf8)
        let misspelt = try runEarshot(words + ["--force"])
        #expect(misspelt.status == 64)
        #expect(misspelt.err == "earshot: --manifest \(sidecar): unknown key 'labell'\n"
                + "  hint: known keys: author, decision, description, labels, languages, license, name, phrase, source, url, version\n")
        try "[1]".write(toFile: sidecar, atomically: true, encoding: .utf8)
        let array = try runEarshot(words + ["--force"])
        #expect(array.status == 64 && array.err == "earshot: --manifest \(sidecar): not a JSON object\n", "\(array.err)")
    }
}
