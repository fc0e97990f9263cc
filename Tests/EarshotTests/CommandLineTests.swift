import EarshotModel
import EarshotTestSupport
import EarshotTraining
import Foundation
import Testing

/// The `earshot` tool built with the tests (beside the test bundle, in the same build folder:
/// with `--scratch-path` or a sanitizer, the same build), else `.build/debug/earshot`.
let earshotBinary: URL = {
    let beside = Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("earshot")
    return FileManager.default.isExecutableFile(atPath: beside.path) ? beside : Repo.root.appendingPathComponent(".build/debug/earshot")
}()

/// Runs the built `earshot` tool (swift test builds it beside the tests). `interruptAfter`
/// sends `signal` (SIGINT: Ctrl-C) after that long (counted from when stderr shows
/// `readyMarker`, when given); `stdin` is a file for standard input;
/// `stdinPipe` bytes fed through a pipe; `stdout` a file for standard output (then `out` is empty).
func runEarshot(_ arguments: [String], environment: [String: String] = [:],
                interruptAfter: Duration? = nil, signal: Int32 = SIGINT, readyMarker: String? = nil, stdin: String? = nil, stdinPipe: Data? = nil,
                stdout: String? = nil) throws -> (status: Int32, out: String, err: String) {
    let process = Process()
    if !environment.isEmpty {
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    }
    process.executableURL = earshotBinary
    process.arguments = arguments
    process.currentDirectoryURL = Repo.root
    let out = Pipe(), err = Pipe()
    if let stdout {
        guard let handle = FileHandle(forWritingAtPath: stdout) else { throw FixtureError(message: "\(stdout): cannot open") }
        process.standardOutput = handle
    } else {
        process.standardOutput = out
    }
    process.standardError = err
    if let stdin {
        guard let handle = FileHandle(forReadingAtPath: stdin) else { throw FixtureError(message: "\(stdin): cannot open") }
        process.standardInput = handle
    }
    let input = Pipe()
    if stdinPipe != nil { process.standardInput = input }
    try process.run()
    if let stdinPipe {
        // Fed from another thread through a real pipe (not a seekable file).
        Thread {
            try? input.fileHandleForWriting.write(contentsOf: stdinPipe)
            try? input.fileHandleForWriting.close()
        }.start()
    }
    if stdout != nil { try out.fileHandleForWriting.close() }
    var errData = Data()
    if let interruptAfter {
        // The signal goes once the tool says it is running (its first line on stderr: a slow
        // build, such as a sanitizer's, may take seconds to get there), then after the delay.
        if let ready = readyMarker {
            let deadline = Date().addingTimeInterval(120)
            while !String(decoding: errData, as: UTF8.self).contains(ready), Date() < deadline {
                let chunk = err.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                errData += chunk
            }
        }
        Thread.sleep(forTimeInterval: Double(interruptAfter.components.seconds) + Double(interruptAfter.components.attoseconds) * 1e-18)
        kill(process.processIdentifier, signal)
    }
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    errData += err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
}

@Suite("earshot command line")
struct CommandLineTests {
    @Test("features --json reports the file and the frames the library computes")
    func featuresJSON() throws {
        let result = try runEarshot(["features", "AudioSamples/speech-noise-16k.flac", "--json"])
        #expect(result.status == 0, "\(result.err)")
        let object = try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any]
        #expect(object?["sourceRate"] as? Int == 16000)
        #expect(object?["channels"] as? Int == 1)
        // 583984 samples, centred frames every 160: 1 + 583984 / 160 = 3650.
        #expect(object?["frames"] as? Int == 3650)
        #expect(object?["featureCount"] as? Int == 64)
    }

    @Test("Usage errors exit 64 with a hint; a missing file exits 66 naming it")
    func errors() throws {
        let unknown = try runEarshot(["features", "AudioSamples/speech-noise-16k.wav", "--bogus"])
        #expect(unknown.status == 64)
        #expect(unknown.err.contains("unknown option --bogus"))
        #expect(unknown.err.contains("hint:"))
        let badValue = try runEarshot(["features", "AudioSamples/speech-noise-16k.wav", "--mels", "0"])
        #expect(badValue.status == 64)
        #expect(badValue.err.contains("--mels 0: expected a whole number in 1...512"))
        let missing = try runEarshot(["features", "no-such.wav"])
        #expect(missing.status == 66)
        #expect(missing.err.contains("no-such.wav: no such file"))
    }
}

@Suite("earshot inspect")
struct InspectCommandTests {
    @Test("inspect --json states the model's sizes, costs and labels")
    func inspectJSON() throws {
        let result = try runEarshot(["inspect", "silero-vad", "--json"])
        #expect(result.status == 0, "\(result.err)")
        let d = try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any]
        #expect(d?["stateBytesPerStream"] as? Int == 1280)
        #expect(d?["parameterCount"] as? Int == 309_635)  // every stored tensor's values, the STFT basis included
        #expect(d?["labels"] as? [String] == ["speech"])
        #expect(d?["sampleRate"] as? Int == 16000)
        #expect(d?["chunkSamples"] as? Int == 512)
        #expect((d?["layers"] as? [[String: Any]])?.count == 39)  // the graph's nodes
    }

    @Test("inspect in text names the layers; an unknown model exits 66 naming it")
    func inspectText() throws {
        let result = try runEarshot(["inspect", "Models/silero-vad-8k"])
        #expect(result.status == 0)
        #expect(result.out.contains("\nIf_0_else_branch__Inline_0__/decoder/rnn/LSTM            LSTM       [1, 1, 128] [1, 1, 1, 128] 132096 131072     34.2% LSTM cell"))
        #expect(result.out.contains("state:     1152 bytes per stream"))  // (32 context + 2 * 128 carry) * 4
        let missing = try runEarshot(["inspect", "no-such-model"])
        #expect(missing.status == 66)
        #expect(missing.err.contains("no model 'no-such-model'") && missing.err.contains("models found: alexa, digits"))
    }
}

@Suite("earshot train and evaluate")
struct TrainCommandTests {
    @Test("train writes a package that evaluate reads; progress goes to stderr; bad options are usage errors")
    func trainAndEvaluate() throws {
        let root = try toneFolder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let output = root + "/model"
        let trained = try runEarshot(["train", "--data", root, "--group-by", "^(s[0-9]+)_", "--validation-split", "0.25",
                                      "--architecture", "conv:8x3,gru:1x8", "--features", "log-mel:16", "--epochs", "3",
                                      "--batch-size", "4", "--learning-rate", "0.01", "--augment", "gain,shift", "--output", output])
        #expect(trained.status == 0, "\(trained.err)")
        #expect(trained.err.contains("epoch   1/3  loss") && trained.err.contains("left"))
        #expect(trained.out.contains("model: validation accuracy") && trained.out.contains("written to \(output)"))
        let manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: output + "/model.json"))) as? [String: Any]
        let outputs = manifest?["outputs"] as? [String: Any]
        #expect(outputs?["labels"] as? [String] == ["high", "low", "_background_"])
        #expect((manifest?["training"] as? [String: Any])?["command"] as? String == "earshot train --data \(root) --group-by ^(s[0-9]+)_ "
                + "--validation-split 0.25 --architecture conv:8x3,gru:1x8 --features log-mel:16 --epochs 3 --batch-size 4 "
                + "--learning-rate 0.01 --augment gain,shift --output \(output)")

        // Another process, the same seed: the same model, byte for byte.
        let again = try runEarshot(["train", "--data", root, "--group-by", "^(s[0-9]+)_", "--validation-split", "0.25",
                                    "--architecture", "conv:8x3,gru:1x8", "--features", "log-mel:16", "--epochs", "3",
                                    "--batch-size", "4", "--learning-rate", "0.01", "--augment", "gain,shift", "--output", output + "2"])
        #expect(again.status == 0, "\(again.err)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: output + "/weights.safetensors"))
                == Data(contentsOf: URL(fileURLWithPath: output + "2/weights.safetensors")))

        let evaluated = try runEarshot(["evaluate", "--model", output, "--data", root, "--format", "json"])
        #expect(evaluated.status == 0, "\(evaluated.err)")
        let result = try JSONSerialization.jsonObject(with: Data(evaluated.out.utf8)) as? [String: Any]
        let confusion = result?["confusion"] as? [[Int]] ?? []
        #expect(confusion.count == 3 && confusion.flatMap { $0 }.reduce(0, +) == 16)
        #expect(confusion[2] == [0, 0, 0])  // no file is labelled background
        let accuracy = result?["accuracy"] as? Double ?? -1
        #expect(abs(accuracy - Double(confusion[0][0] + confusion[1][1]) / 16) < 1e-12)
        // The same figures as the library computes on the package, file by file.
        let library = try Evaluation.run(model: Model(contentsOf: URL(fileURLWithPath: output)), data: Dataset.load(root))
        #expect(library.confusion == confusion)
        // --plot: the confusion matrix as SVG, a cell per (true, predicted) holding its count.
        let svgPath = output + "-confusion.svg"
        defer { try? FileManager.default.removeItem(atPath: svgPath) }
        let plotted = try runEarshot(["evaluate", "--model", output, "--data", root, "--format", "json", "--plot", svgPath])
        #expect(plotted.status == 0 && plotted.out == evaluated.out)
        let matrix = SVGElements.parse(try String(contentsOfFile: svgPath, encoding: .utf8))
        let cells = matrix.withClass("cell")
        #expect(cells.count == 9)
        #expect(matrix.textsOutsideCanvas().isEmpty, "\(matrix.textsOutsideCanvas())")  // the title and the last column's label were clipped
        let labels = result?["labels"] as? [String] ?? []
        for cell in cells {
            let i = labels.firstIndex(of: cell["data-true"] ?? "") ?? -1, j = labels.firstIndex(of: cell["data-predicted"] ?? "") ?? -1
            #expect(i >= 0 && j >= 0 && Int(cell["data-count"] ?? "") == confusion[i][j])
        }
        let text = try runEarshot(["evaluate", "--model", output, "--data", root, "--group-by", "^(s[0-9]+)_"])
        #expect(text.out.contains("confusion (rows: true label, columns: predicted)") && text.out.contains("accuracy by group"))

        for (words, message) in [(["train", "--output", output], "train needs --data"),
                                 (["train", "--data", root, "--output", output, "--augment", "wobble"], "--augment wobble"),
                                 (["evaluate", "--data", root], "evaluate needs --model")] {
            let bad = try runEarshot(words)
            #expect(bad.status == 64 && bad.err.contains(message), "\(words): \(bad.err)")
        }
        let unknown = try runEarshot(["train", "--data", root, "--output", output, "--force", "--background", "hum"])
        #expect(unknown.status == 1 && unknown.err.contains("--background hum: expected one of the labels"), "\(unknown.err)")
    }
}
