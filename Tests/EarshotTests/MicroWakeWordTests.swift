import Earshot
import EarshotCommandTestSupport
import EarshotGraph
import EarshotImport
import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotModel

/// microWakeWord's int8 TFLite models (Models/sources/microwakeword, from pymicro-wakeword,
/// Apache-2.0), imported by `TFLiteImporter` and run over the features of a recording of the
/// wake phrases and other words, against TFLite's reference kernels on the same features
/// (tools/microwakeword_reference.py): every step's output equal, bit for bit.
@Suite("TFLite import: microWakeWord's models against TFLite's reference kernels")
struct MicroWakeWordTests {
    static let models = ["okay_nabu", "hey_jarvis", "alexa", "hey_mycroft"]
    static let goldens = "Tests/EarshotTests/Goldens/microwakeword"

    static func importModel(_ name: String, frontEnd: String = "features") throws -> Model {
        var options = ImportOptions()
        options.metadata.name = name
        options.frontEnd = frontEnd
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
        // A compiled plan that differs from the reference kernels at build falls back to them:
        // the kernels under test are the compiled plan's only while this holds.
        #expect(model.description.execution == "compiled", "\(model.description.execution ?? "")")
        #expect(outputs.max() ?? 0 > 200 || name == "hey_jarvis", "the recording holds the phrase")
    }

    @Test("Each int8 path the CPU has (plain C, AVX-512, AVX-512 VNNI) gives TFLite's reference outputs, batched and alone")
    func everyPath() throws {
        let model = try Self.importModel("okay_nabu")
        #expect(model.description.execution == "compiled", "\(model.description.execution ?? "")")
        let (frames, reference, _, stride) = try Self.reference("okay_nabu")
        let blocks = Self.blocks(frames, stride: stride)
        defer { Quantized.use(nil) }
        #expect(Quantized.paths.first == .baseline)
        for path in Quantized.paths {
            #expect(Quantized.use(path) == path)
            // Three streams batched, each from its own offset, and the first again alone.
            let offsets = [0, 7, 19], steps = blocks.count - 19
            var states = offsets.map { _ in model.makeState() }
            var batched: [[Int]] = offsets.map { _ in [] }
            for s in 0..<steps {
                let scores = try model.predictions(from: offsets.map { blocks[$0 + s] }, using: &states)
                for (i, score) in scores.enumerated() { batched[i].append(Int((score[0] * 256).rounded())) }
            }
            var alone = model.makeState()
            let outputs = try blocks.map { Int((try model.prediction(from: $0, using: &alone)[0] * 256).rounded()) }
            #expect(outputs == reference, "path \(path): every step as TFLite's reference kernels")
            #expect(batched[0] == Array(reference.prefix(steps)), "path \(path): batched")
            // The other two streams: each as it is alone.
            for (i, offset) in offsets.enumerated().dropFirst() {
                var own = model.makeState()
                let single = try (0..<steps).map { Int((try model.prediction(from: blocks[offset + $0], using: &own)[0] * 256).rounded()) }
                #expect(batched[i] == single, "path \(path): stream from block \(offset), batched = alone")
            }
        }
    }

    @Test("Batched = alone, bit for bit, on each int8 path, for batches of 1 to 9 streams (blocks of four streams and their ragged ends), each stream at its own place in the recording")
    func raggedBatches() throws {
        let model = try Self.importModel("okay_nabu")
        let (frames, _, _, stride) = try Self.reference("okay_nabu")
        let blocks = Self.blocks(frames, stride: stride)
        let steps = 40
        defer { Quantized.use(nil) }
        for path in Quantized.paths {
            #expect(Quantized.use(path) == path)
            for count in 1...9 {
                // Stream i starts at block 23 i + count: every stream of a batch holds other frames, and so other states.
                let offsets = (0..<count).map { 23 * $0 + count }
                var states = offsets.map { _ in model.makeState() }
                var batched: [[Float]] = offsets.map { _ in [] }
                for t in 0..<steps {
                    let scores = try model.predictions(from: offsets.map { blocks[$0 + t] }, using: &states)
                    for i in offsets.indices { batched[i].append(scores[i][0]) }
                }
                for (i, offset) in offsets.enumerated() {
                    var own = model.makeState()
                    let alone = try (0..<steps).map { try model.prediction(from: blocks[offset + $0], using: &own)[0] }
                    #expect(batched[i] == alone, "path \(path): stream \(i) of \(count) (from block \(offset)), batched = alone")
                    #expect(states[i] == own, "path \(path): stream \(i) of \(count): the same state after the steps")
                }
                #expect(count == 1 || states[0] != states[1], "the streams of a batch hold states of their own")
            }
        }
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

    /// The recording as 16 kHz samples.
    static func recording() throws -> [Float] {
        let (audio, rate) = try AudioFile.readMono(path: Repo.path("\(goldens)/wake-words.wav"))
        #expect(rate == 16000)
        return audio
    }

    static func blocks(of audio: [Float], _ model: Model) -> [[Float]] {
        let n = model.chunkSamples
        return (0..<(audio.count / n)).map { Array(audio[($0 * n)..<(($0 + 1) * n)]) }
    }

    @Test("From audio, with TFLite Micro's front end in the package: step s gives the reference's output of step s - 1",
          arguments: models)
    func fromAudio(_ name: String) throws {
        let model = try Self.importModel(name, frontEnd: "microfrontend")
        #expect(model.chunkSamples == 480 && model.sampleRate == 16000)
        let (_, reference, _, _) = try Self.reference(name)
        var state = model.makeState()
        var outputs: [Int] = []
        for block in Self.blocks(of: try Self.recording(), model) {
            outputs.append(Int((try model.prediction(from: block, using: &state)[0] * 256).rounded()))
        }
        #expect(outputs.first == 0)
        let differing = zip(outputs.dropFirst(), reference).filter { $0 != $1 }.count
        print("microWakeWord \(name) from audio: \(outputs.count) steps, \(differing) differ from the reference; \(model.description.execution ?? "")")
        #expect(differing == 0 && outputs.count - 1 >= reference.count - 1, "every group the audio holds")
    }

    @Test("Batched = alone, and a state restored mid-stream = the uninterrupted stream, bit for bit")
    func batchedAndRestored() throws {
        let model = try Self.importModel("okay_nabu", frontEnd: "microfrontend")
        let audio = try Self.recording()
        // Three streams: the recording from 0, from 1.3 s and from 7.1 s.
        let streams = [0, 20_800, 113_600].map { Self.blocks(of: Array(audio[$0...]), model) }
        let steps = streams.map(\.count).min() ?? 0
        var alone: [[Float]] = []
        for s in streams {
            var state = model.makeState()
            alone.append(try (0..<steps).map { try model.prediction(from: s[$0], using: &state)[0] })
        }
        var states = streams.map { _ in model.makeState() }
        var batched: [[Float]] = streams.map { _ in [] }
        for t in 0..<steps {
            let scores = try model.predictions(from: streams.map { $0[t] }, using: &states)
            for k in streams.indices { batched[k].append(scores[k][0]) }
        }
        #expect(batched == alone)
        // More streams than one batched pass takes (the model steps them a few dozen at a time).
        // Each from its own offset (of a recording long enough for 60 steps from each).
        let span = audio.count - 61 * model.chunkSamples
        let many = (0..<(2 * model.streamsPerPass + 3)).map { Self.blocks(of: Array(audio[(($0 * 4_480) % span)...]), model) }
        var manyStates = many.map { _ in model.makeState() }
        var manyBatched: [[Float]] = many.map { _ in [] }
        for t in 0..<60 {
            let scores = try model.predictions(from: many.map { $0[t] }, using: &manyStates)
            for k in many.indices { manyBatched[k].append(scores[k][0]) }
        }
        // Every stream: each lane of the front end's blocks of 16, and the ragged ends of the passes.
        for k in many.indices {
            var state = model.makeState()
            #expect(try (0..<60).map { try model.prediction(from: many[k][$0], using: &state)[0] } == manyBatched[k], "stream \(k)")
            #expect(state == manyStates[k], "stream \(k): the same state after the steps")
        }
        // Serialized after step 150 and restored: the rest as if never stopped.
        var state = model.makeState()
        for t in 0..<150 { _ = try model.prediction(from: streams[0][t], using: &state) }
        var restored = try model.restoreState(state.serialized())
        let rest = try (150..<steps).map { try model.prediction(from: streams[0][$0], using: &restored)[0] }
        #expect(rest == Array(alone[0][150...]))
        // Reset is fresh.
        var fresh = model.makeState()
        #expect(try model.prediction(from: streams[0][0], using: &fresh)[0] == alone[0][0])
    }

    @Test("The int8 state tensors are kept a byte a value; a state saved as version 2 (every tensor as floats) restores to the same stream")
    func int8States() throws {
        let model = try Self.importModel("okay_nabu", frontEnd: "microfrontend")
        let graph = try #require(model.graph)
        // The model's six streaming windows hold int8 values; the front end's noise estimates,
        // pending frame and start flag do not.
        #expect(graph.spec.states.map(\.input) == ["front end noise", "front end pending", "front end started", "state stream_10/states",
                                                  "state stream_11/states", "state stream_6/states", "state stream_7/states", "state stream_8/states",
                                                  "state stream_9/states"])
        #expect(graph.stateCoded == [false, false, false, true, true, true, true, true, true])
        #expect(model.makeState().byteCount == (320 + 80 + 40 + 1) * 4 + 896 + 1024 + 80 + 128 + 512 + 768)
        let blocks = Self.blocks(of: try Self.recording(), model)
        var state = model.makeState()
        for t in 0..<150 { _ = try model.prediction(from: blocks[t], using: &state) }
        #expect(state.codes.contains { $0 != 0 })
        // Version 2's bytes: the counts, the context and every state tensor as floats.
        func version2(_ floats: [Float]) -> [UInt8] {
            var bytes = Array("ESTATE".utf8)
            func append<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
            append(UInt32(2))
            bytes += Array(model.contentHash.utf8)
            append(UInt64(state.steps))
            append(UInt32(state.context.count))
            append(UInt32(floats.count))
            for v in state.context + floats { append(v.bitPattern) }
            append(CRC32C.checksum(bytes))
            return bytes
        }
        let unpacked = model.unpacked(state)
        #expect(unpacked.count == model.stateCount)
        var restored = try model.restoreState(version2(unpacked))
        #expect(restored == state)
        var uninterrupted = state
        for t in 150..<200 {
            #expect(try model.prediction(from: blocks[t], using: &restored) == model.prediction(from: blocks[t], using: &uninterrupted))
        }
        // An int8 tensor holding something else is refused.
        let window = try #require(graph.spec.states.firstIndex { $0.input == "state stream_9/states" })
        for bad: Float in [0.5, 128, -129] {
            var floats = unpacked
            floats[graph.stateOffsets[window] + 3] = bad
            #expect(throws: ModelError.stateFormat(reason: "an int8 state tensor holds a value that is not a whole number in -128...127")) {
                try model.restoreState(version2(floats))
            }
        }
    }

    @Test("Any chunking of the audio gives the detections of the whole")
    func chunking() async throws {
        let model = try Self.importModel("okay_nabu", frontEnd: "microfrontend")
        var options = LabelOptions(model: model)
        options.threshold = 0.85
        options.detectionWindow = 5
        let audio = try Self.recording()
        func detections(_ chunks: [[Float]]) async throws -> [Detection] {
            let stream = try StreamClassifier(model: model, sourceSampleRate: 16000, options: options)
            var found: [Detection] = []
            for try await event in stream.events(for: chunks.async) { if case let .detected(d) = event { found.append(d) } }
            return found
        }
        let whole = try await detections([audio])
        var random = SeededRandom.fromEnvironment()
        var chunks: [[Float]] = []
        var at = 0
        for size in random.chunkSizes(total: audio.count, maxChunk: 3000) {
            chunks.append(Array(audio[at..<(at + size)]))
            at += size
        }
        #expect(whole.map(\.sample) == [51 * 480, 537 * 480], "seed \(random.seed)")
        #expect(try await detections(chunks) == whole, "seed \(random.seed)")
    }

    @Test("The shipped wake-word packages are what earshot import makes of Models/sources/microwakeword (scripts/import-models.sh)",
          arguments: models)
    func shipped(_ name: String) throws {
        let folder = name.replacingOccurrences(of: "_", with: "-")
        let shipped = try Model(contentsOf: Repo.root.appendingPathComponent("Models/\(folder)"))
        let imported = try Self.importModel(name, frontEnd: "microfrontend")
        #expect(shipped.contentHash == imported.contentHash)
        #expect(shipped.manifest.graph == imported.manifest.graph)
        #expect(shipped.manifest.audio == imported.manifest.audio)
        let config = try #require(TFLiteImporter.MicroWakeWordConfig(beside: Repo.path("Models/sources/microwakeword/\(name).tflite")))
        #expect(shipped.labels == [config.wakeWord])
        #expect(shipped.manifest.decision?.threshold == config.probabilityCutoff)
        #expect(shipped.manifest.decision?.detectionWindow == config.slidingWindowSize)
        #expect(shipped.manifest.license == "Apache-2.0")
    }

    @Test("Several models on one file: events merged in time order; a VAD gate keeps the detections speech overlaps")
    func severalModels() async throws {
        let path = Repo.path("\(Self.goldens)/wake-words.wav")
        let wake = try Model(contentsOf: Repo.root.appendingPathComponent("Models/okay-nabu"))
        let vad = try Model(contentsOf: Repo.root.appendingPathComponent("Models/silero-vad"))
        let labelers = [FileLabeler(model: wake), FileLabeler(model: vad)]
        let merged = try await MultiLabeler(labelers: labelers).label(path: path).events
        let alone = try await labelers[0].label(path: path).events
        let detections = merged.compactMap { if case let .detected(d) = $0 { return d } else { return nil } }
        #expect(detections.map(\.sample) == alone.compactMap { if case let .detected(d) = $0 { return d.sample } else { return nil } })
        #expect(detections.count == 2)
        let segments = merged.compactMap { if case let .ended(s) = $0 { return s } else { return nil } }
        #expect(segments.count >= 7)
        let times = merged.compactMap { e -> Double? in
            switch e {
            case let .ended(s): return s.startSeconds
            case let .detected(d): return d.seconds
            default: return nil
            }
        }
        #expect(times == times.sorted())
        // Gated by the VAD (not shown): each "okay nabu" ends within a second after speech.
        let gated = try await MultiLabeler(labelers: labelers, gate: 1, showGate: false).label(path: path).events
        #expect(gated.allSatisfy { if case .detected = $0 { return true } else { return false } })
        #expect(gated.count == 2)
        // With no time before the detection allowed, speech has ended by then: nothing counts.
        let strict = try await MultiLabeler(labelers: labelers, gate: 1, showGate: false, gateSeconds: 0).label(path: path).events
        #expect(strict.isEmpty)
    }

    @Test("label's per-model threshold, window and refractory time")
    func perModelOptions() throws {
        let wav = Repo.path("\(Self.goldens)/wake-words.wav")
        func times(_ words: [String]) throws -> [String] {
            let r = try runEarshot(["label", "--format", "csv"] + words + [wav])
            #expect(r.status == 0, "\(r.err)")
            return r.out.split(separator: "\n").dropFirst().map { line in
                let f = line.split(separator: ","); return "\(f[2])@\(f[3])"
            }
        }
        #expect(try times(["--model", "okay-nabu,alexa"]) == ["Okay Nabu@1.530", "Alexa@8.730", "Okay Nabu@16.110"])
        // A longer window for one model only: its detections come later; the other's stay.
        #expect(try times(["--model", "okay-nabu,alexa", "--window", "okay-nabu=10"]) == ["Okay Nabu@1.650", "Alexa@8.730", "Okay Nabu@16.230"])
        #expect(try times(["--model", "okay-nabu,alexa", "--threshold", "alexa=0.999"]) == ["Okay Nabu@1.530", "Okay Nabu@16.110"])
        #expect(try times(["--model", "okay-nabu", "--refractory", "100000"]) == ["Okay Nabu@1.530"])
        let bad = try runEarshot(["label", "--model", "okay-nabu", "--window", "0", wav])
        #expect(bad.status == 64 && bad.err.contains("--window"))
    }

    @Test("EARSHOT_INT8_PATH runs label on each int8 path the machine has, with the same detections; a path not known is a usage error")
    func forcedPath() throws {
        let wav = Repo.path("\(Self.goldens)/wake-words.wav")
        for path in Quantized.paths {
            let r = try runEarshot(["label", "--format", "csv", "--model", "okay-nabu", wav], environment: ["EARSHOT_INT8_PATH": path.name])
            #expect(r.status == 0, "\(path.name): \(r.err)")
            let times = r.out.split(separator: "\n").dropFirst().map { line in
                let f = line.split(separator: ","); return "\(f[2])@\(f[3])"
            }
            #expect(times == ["Okay Nabu@1.530", "Okay Nabu@16.110"], "\(path.name)")
        }
        let bad = try runEarshot(["inspect", "okay-nabu"], environment: ["EARSHOT_INT8_PATH": "tiles"])
        #expect(bad.status == 64 && bad.err.contains("EARSHOT_INT8_PATH=tiles: expected portable, avx512, vnni or amx"), "\(bad.err)")
    }

    @Test("bench streams runs a wake word and a VAD together: a tick holds whole blocks of both")
    func benchTogether() throws {
        let r = try runEarshot(["bench", "streams", "--model", "okay-nabu,silero-vad", "--counts", "4", "--ticks", "10", "--json"])
        #expect(r.status == 0, "\(r.err)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any])
        #expect(json["model"] as? String == "okay-nabu,silero-vad")
        #expect((json["results"] as? [[String: Any]])?.first?["streams"] as? Int == 4)
        let mixed = try runEarshot(["bench", "streams", "--model", "okay-nabu,silero-vad-8k", "--counts", "4", "--ticks", "10"])
        #expect(mixed.status == 64 && mixed.err.contains("different rates"))
    }
}
