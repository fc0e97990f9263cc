import Earshot
import EarshotCommandTestSupport
import EarshotImport
import EarshotTestSupport
import Foundation
import Testing

/// Fixed-window classifiers (models that take one window of samples and say nothing of time)
/// imported as streams by `earshot import --window N --hop H`, against onnxruntime on the same
/// windows from step 0 (tools/conformance_window.py wrote the model and the goldens), and the
/// stream invariants: any chunking = whole, batched = alone, restore = uninterrupted.
@Suite("Conformance: fixed-window classifiers as streams")
struct ConformanceWindowTests {
    static let folder = "Tests/EarshotTests/Goldens/conformance/window-classifier"

    /// The model imported by one `earshot import` command with `arguments`, loaded.
    static func imported(_ arguments: [String]) throws -> Model {
        let out = try Repo.temporaryFolder().appendingPathComponent("window-classifier")
        let r = try runEarshot(["import", Repo.path(folder + "/model.onnx")] + arguments + ["-o", out.path])
        guard r.status == 0 else { throw FixtureError(message: "earshot import failed (\(r.status)): \(r.err)") }
        return try Model(contentsOf: out)
    }

    static func golden(hop: Int) throws -> (audio: [Float], window: Int, scores: [[Float]]) {
        let g = try Reference.json(Repo.path(folder + "/hop-\(hop).json"))
        let audio = try AudioFile.readMono(path: Repo.path(g["audio"] as? String ?? "")).samples
        let scores = (g["scores"] as? [[Double]] ?? []).map { $0.map(Float.init) }
        return (audio, g["window"] as? Int ?? 0, scores)
    }

    /// The audio in hops, the last padded with zeros.
    static func blocks(_ audio: [Float], hop: Int) -> [[Float]] {
        stride(from: 0, to: audio.count, by: hop).map { start in
            Array(audio[start..<min(start + hop, audio.count)]) + [Float](repeating: 0, count: max(0, start + hop - audio.count))
        }
    }

    @Test("Each step's scores equal onnxruntime's on the same window from step 0 (hop = window: chunks; hop = window / 2: overlap)",
          arguments: [15600, 7800])
    func stepsEqualOnnxruntime(hop: Int) throws {
        let (audio, window, expected) = try Self.golden(hop: hop)
        // The window is the model's input length when not given; the hop the window when not given.
        let model = try Self.imported(hop == window ? [] : ["--hop", "\(hop)"])
        #expect(model.chunkSamples == hop && model.manifest.audio.contextSamples == window - hop)
        // The window is the stream's state: its bytes are the window's samples before the hop, no more.
        #expect(model.makeState().byteCount == (window - hop) * 4)
        var state = model.makeState()
        var worst: Float = 0
        let blocks = Self.blocks(audio, hop: hop)
        #expect(blocks.count == expected.count)
        for (k, block) in blocks.enumerated() {
            let scores = try model.prediction(from: block, using: &state)
            worst = max(worst, maxAbsDifference(scores, expected[k]))
            if k == 0 { #expect(maxAbsDifference(scores, expected[0]) <= 1e-4, "step 0: \(scores) vs \(expected[0])") }
        }
        print("window classifier, window \(window), hop \(hop): max |diff| \(worst) against onnxruntime over \(blocks.count) steps")
        #expect(worst <= 1e-4, "max |diff| \(worst) against onnxruntime")
        // The scores move (the test would not see a window that never changes).
        #expect(Set(expected.map { $0[0] }).count > expected.count / 2)
    }

    @Test("BirdNET V2.4 FP32 as a window stream (3 s windows at 48 kHz, overlap 0 and 1.5 s) equals TFLite on every window from step 0, its 6,522 labels from its labels file",
          arguments: [144_000, 72_000])
    func birdnet(hop: Int) throws {
        let model = try ConformanceTFLiteTests.model("birdnet", "BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite")
        let labels = try ConformanceTFLiteTests.model("birdnet", "BirdNET_GLOBAL_6K_V2.4_Labels.txt")
        // Without overlap, the catalog's package (its import: --rate 48000 --hop 144000 --labels-file), fetched once for the tests.
        let stream = hop == 144_000 ? try Model(contentsOf: URL(fileURLWithPath: try BirdNETTests.package()))
            : try ConformanceTFLiteTests.imported([model, "--rate", "48000", "--hop", "\(hop)", "--labels-file", labels], "birdnet")
        let dir = "Tests/EarshotTests/Goldens/conformance/birdnet-window"
        let meta = try Reference.json(Repo.path(dir + "/meta.json"))
        let expected = try ConformanceTFLiteTests.floats(dir + "/hop-\(hop).f32")
        // The goldens' audio: speech-44k.wav's samples taken as 48 kHz, as tools/conformance_window.py reads them.
        let audio = try AudioFile.readMono(path: Repo.path(meta["audio"] as? String ?? "")).samples
        #expect(stream.chunkSamples == hop && stream.manifest.audio.contextSamples == 144_000 - hop && stream.manifest.audio.sampleRate == 48000)
        #expect(stream.labels.count == 6522 && stream.labels.first == "Abroscopus albogularis_Rufous-faced Warbler")
        let blocks = Self.blocks(audio, hop: hop)
        #expect(blocks.count * 6522 == expected.count, "\(blocks.count) steps, goldens of \(expected.count / 6522)")
        var state = stream.makeState()
        var worst: Float = 0, worstRelative: Float = 0
        for (k, block) in blocks.enumerated() where (k + 1) * 6522 <= expected.count {
            let scores = try stream.prediction(from: block, using: &state)
            let want = Array(expected[(k * 6522)..<((k + 1) * 6522)])
            for (a, b) in zip(scores, want) {
                worst = max(worst, abs(a - b))
                worstRelative = max(worstRelative, abs(a - b) / max(1, abs(b)))
            }
            if k == 0 { #expect(maxAbsDifference(scores, want) <= 1e-4, "step 0") }
        }
        print("BirdNET window stream, hop \(hop): max |diff| \(worst), relative \(worstRelative) against TFLite over \(blocks.count) steps")
        #expect(worst <= 1e-4 && worstRelative <= 1e-5, "max |diff| \(worst), relative \(worstRelative)")
        // The scores move from window to window.
        #expect(Set(stride(from: 0, to: expected.count, by: 6522).map { expected[$0] }).count == blocks.count)
    }

    @Test("A window stream fed in random chunks gives the scores of the whole file; batched streams give each its own; a state restored mid-stream goes on as if uninterrupted")
    func invariants() async throws {
        let (audio, window, expected) = try Self.golden(hop: 7800)
        let model = try Self.imported(["--window", "\(window)", "--hop", "7800"])
        var options = LabelOptions(model: model)
        options.includeScores = true
        func run(_ sizes: [Int]) async throws -> [[Float]] {
            let stream = try StreamClassifier(model: model, sourceSampleRate: 16000, options: options)
            var events: [ClassifierEvent] = []
            var offset = 0
            for size in sizes {
                events += try await stream.process(Array(audio[offset..<(offset + size)]))
                offset += size
            }
            return scores(events + (try await stream.finish())).map(\.scores)
        }
        var random = SeededRandom.fromEnvironment()
        let whole = try await run([audio.count])
        let chunked = try await run(random.chunkSizes(total: audio.count, maxChunk: 20_000))
        #expect(whole.count == expected.count && chunked == whole, "seed \(random.seed)")
        #expect(zip(whole, expected).map { maxAbsDifference($0, $1) }.max() ?? 1 <= 1e-4)

        // Three streams of one model in one batched step each: each is what it is alone.
        let blocks = Self.blocks(audio, hop: 7800)
        let offsets = [0, 3, 11]
        var states = offsets.map { _ in model.makeState() }
        var batched: [[[Float]]] = offsets.map { _ in [] }
        for k in 0..<(blocks.count - 11) {
            let out = try model.predictions(from: offsets.map { blocks[$0 + k] }, using: &states)
            for s in offsets.indices { batched[s].append(out[s]) }
        }
        for (s, offset) in offsets.enumerated() {
            var alone = model.makeState()
            let single = try blocks[offset..<(offset + batched[s].count)].map { try model.prediction(from: $0, using: &alone) }
            #expect(single == batched[s], "stream \(s) batched differs from alone")
        }

        // Restore = uninterrupted: serialized after 9 steps, restored, the same scores after.
        var state = model.makeState()
        var uninterrupted: [[Float]] = []
        var restored: [[Float]] = []
        var copy = model.makeState()
        for (k, block) in blocks.enumerated() {
            if k == 9 { copy = try model.restoreState(state.serialized()) }
            uninterrupted.append(try model.prediction(from: block, using: &state))
            if k >= 9 { restored.append(try model.prediction(from: block, using: &copy)) }
        }
        #expect(restored == Array(uninterrupted[9...]))
        #expect(uninterrupted == whole)
    }

    @Test("--window/--hop refuse what cannot be a window stream, naming the flag and why")
    func refusals() throws {
        let out = try Repo.temporaryFolder().appendingPathComponent("refused").path
        let model = Repo.path(Self.folder + "/model.onnx")
        func refusal(_ arguments: [String]) throws -> (status: Int32, err: String) {
            let r = try runEarshot(["import", model] + arguments + ["-o", out])
            return (r.status, r.err)
        }
        let wrongWindow = try refusal(["--window", "16000"])
        #expect(wrongWindow.status == 65 && wrongWindow.err.contains("--window 16000: the model's audio input takes 15600 samples"), "\(wrongWindow.err)")
        let longHop = try refusal(["--hop", "20000"])
        #expect(longHop.status == 65 && longHop.err.contains("--hop 20000 with --window 15600; the hop is 1 to 15600 samples"), "\(longHop.err)")
        let both = try refusal(["--hop", "7800", "--chunk", "7800"])
        #expect(both.status == 64 && both.err.contains("--window/--hop and --chunk/--context both say how the model streams"), "\(both.err)")
        let features = try refusal(["--hop", "7800", "--front-end", "features"])
        #expect(features.status == 65 && features.err.contains("--window/--hop with --front-end features; --window takes a model whose input is one window of samples"),
                "\(features.err)")
        #expect(!FileManager.default.fileExists(atPath: out))
    }
}

/// `earshot import --labels-file`: a model of thousands of labels (BirdNET has 6,522) names them
/// from a file, and its package loads fast, `inspect` stays a screen, `label --scores` as text a
/// line a step.
@Suite("Conformance: thousands of labels from a file")
struct ManyLabelsTests {
    static let count = 6522

    /// BirdNET-style lines ("Scientific name_Common name"), kept whole, a comma and quotes among them.
    static let labels = (0..<count).map { i in
        i == 7 ? "Aix sponsa_Wood Duck, drake \"quoted\"" : "Genus species\(i)_Common bird \(i)"
    }

    /// A window classifier of `count` scores (the window through a Relu), imported with the
    /// labels from a file by one `earshot import` command, in a temporary folder.
    static func imported() throws -> (folder: URL, package: String) {
        let folder = try Repo.temporaryFolder()
        let onnx = folder.appendingPathComponent("many.onnx").path
        try Data(HandProto.reluChain(1, block: Int64(count))).write(to: URL(fileURLWithPath: onnx))
        let labelsFile = folder.appendingPathComponent("labels.txt").path
        try (labels.joined(separator: "\n") + "\n").write(toFile: labelsFile, atomically: true, encoding: .utf8)
        let package = folder.appendingPathComponent("many").path
        let r = try runEarshot(["import", onnx, "--window", "\(count)", "--labels-file", labelsFile, "-o", package])
        guard r.status == 0 else { throw FixtureError(message: "earshot import failed (\(r.status)): \(r.err)") }
        return (folder, package)
    }

    @Test("6,522 labels from a file of lines: the package has them whole and in order, loads in milliseconds, inspect is a screen, text scores show the 5 highest, jsonl every one")
    func thousands() throws {
        let (folder, package) = try Self.imported()
        defer { try? FileManager.default.removeItem(at: folder) }
        let model = try Model(contentsOf: URL(fileURLWithPath: package))
        #expect(model.labels == Self.labels)
        // Load time: the median of 9 loads.
        var times: [Double] = []
        for _ in 0..<9 {
            let start = ContinuousClock.now
            _ = try Model(contentsOf: URL(fileURLWithPath: package))
            let d = ContinuousClock.now - start
            times.append(Double(d.components.seconds) + Double(d.components.attoseconds) * 1e-18)
        }
        let median = times.sorted()[4]
        print("a package of \(Self.count) labels loads in \(String(format: "%.1f", median * 1000)) ms (median of 9)")
        #expect(median < 0.5, "load took \(median) s")

        let inspect = try runEarshot(["inspect", package])
        #expect(inspect.status == 0)
        #expect(inspect.out.split(separator: "\n").count < 30, "\(inspect.out.split(separator: "\n").count) lines")
        #expect(inspect.out.contains("over Genus species0_Common bird 0, Genus species1_Common bird 1, ") && inspect.out.contains(", ... (6522 labels)"))

        // Two windows: a rising ramp (the last labels highest), then a falling one (the first).
        let ramp = (0..<Self.count).map { Float($0) / Float(Self.count) * 0.9 }
        let audio = folder.appendingPathComponent("ramps.wav").path
        try writeAudio(audio, samples: ramp + ramp.reversed(), channels: 1, sampleRate: 16000)
        let text = try runEarshot(["label", audio, "-m", package, "--scores", "-f", "text", "-q"])
        let lines = text.out.split(separator: "\n").filter { $0.contains("top 5 of 6522") }
        #expect(text.status == 0 && lines.count == 2, "\(text.err)")
        func expected(_ indices: [Int]) -> String {
            indices.map { "\(Self.labels[$0]) \(String(format: "%.3f", ramp[$0]))" }.joined(separator: "  ")
        }
        #expect(lines.first?.hasSuffix("top 5 of 6522: " + expected([6521, 6520, 6519, 6518, 6517])) == true, "\(lines.first ?? "")")
        let falling = (0..<5).map { "\(Self.labels[$0]) \(String(format: "%.3f", ramp[Self.count - 1 - $0]))" }.joined(separator: "  ")
        #expect(lines.last?.hasSuffix("top 5 of 6522: " + falling) == true, "\(lines.last ?? "")")
        let jsonl = try runEarshot(["label", audio, "-m", package, "--scores", "-f", "jsonl", "-q"])
        let first = try #require(jsonl.out.split(separator: "\n").first { $0.contains("\"scores\"") })
        let object = try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any]
        let scores = object?["scores"] as? [String: Double] ?? [:]
        #expect(scores.count == Self.count && scores["Aix sponsa_Wood Duck, drake \"quoted\""] == Double(String(format: "%.4f", ramp[7])))
    }

    @Test("A CSV of labels gives its name column (quoted commas kept); a file of the wrong count, without a name column, or missing is refused naming it")
    func files() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        func file(_ name: String, _ text: String) throws -> String {
            let path = folder.appendingPathComponent(name).path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        // YAMNet's class map: index,mid,display_name, names with commas quoted; CRLF line ends.
        let yamnet = try file("classes.csv", "index,mid,display_name\r\n0,/m/09x0r,Speech\r\n1,/m/0ytgt,\"Child speech, kid speaking\"\r\n"
                              + "2,/m/01h8n0,\"Say \"\"hi\"\"\"\r\n")
        #expect(try LabelsFile.read(path: yamnet) == ["Speech", "Child speech, kid speaking", "Say \"hi\""])
        let named = try file("birds.txt", "\u{FEFF}scientific,name\nAix sponsa,Wood Duck\nAnas crecca,Teal\n")
        #expect(try LabelsFile.read(path: named) == ["Wood Duck", "Teal"])
        let lines = try file("lines.txt", "a_b, c\nd\n\n")
        #expect(try LabelsFile.read(path: lines) == ["a_b, c", "d"])
        func refusal(_ path: String) -> String {
            do { _ = try LabelsFile.read(path: path); return "" } catch { return error.description }
        }
        let noColumn = try file("bad.csv", "index,mid\n0,x\n")
        #expect(refusal(noColumn) == "--labels-file \(noColumn): the CSV's first line (index, mid) has no name column; "
                + "name the labels' column one of: name, display_name, label, labels, class, class_name")
        let gap = try file("gap.txt", "a\n\nb\n")
        #expect(refusal(gap) == "--labels-file \(gap): label 2 (line 2) is empty; give every score a name")

        // Through the command: a missing file exits 66, the wrong count 65 naming both counts.
        let onnx = folder.appendingPathComponent("six.onnx").path
        try Data(HandProto.reluChain(1, block: 6)).write(to: URL(fileURLWithPath: onnx))
        let out = folder.appendingPathComponent("out").path
        let missing = try runEarshot(["import", onnx, "--labels-file", folder.appendingPathComponent("none.txt").path, "-o", out])
        #expect(missing.status == 66 && missing.err.contains("none.txt: no such file"), "\(missing.err)")
        let wrong = try runEarshot(["import", onnx, "--labels-file", lines, "-o", out])
        #expect(wrong.status == 65 && wrong.err.contains("--labels-file \(lines): 2 labels, but six.onnx gives 6 scores; give the labels file of this model"),
                "\(wrong.err)")
        let both = try runEarshot(["import", onnx, "--labels-file", lines, "--labels", "a,b", "-o", out])
        #expect(both.status == 64, "\(both.err)")
        #expect(!FileManager.default.fileExists(atPath: out))
    }
}
