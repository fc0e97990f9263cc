import EarshotModel
import EarshotCommandTestSupport
import EarshotTestSupport
import EarshotTraining
import Foundation
import Testing

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
        // A word where the command takes none is refused, not ignored (it benched the default model).
        let stray = try runEarshot(["bench", "model", "Models/okay-nabu", "--repeat", "1"])
        #expect(stray.status == 64 && stray.out.isEmpty)
        #expect(stray.err.contains("bench model takes no operands: 'Models/okay-nabu'"))
        #expect(stray.err.contains("earshot bench model --model Models/okay-nabu"))
        let strayServe = try runEarshot(["serve", "models.txt"])
        #expect(strayServe.status == 64 && strayServe.err.contains("serve takes no operands: 'models.txt'"))
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
