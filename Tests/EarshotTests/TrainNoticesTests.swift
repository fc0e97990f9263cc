import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

@Suite("earshot train and evaluate say what they do")
struct TrainNoticesTests {
    @Test("train says it adds a '_background_' label, and warns that 4 validation files make an unreliable accuracy")
    func backgroundAndTinyValidation() throws {
        // 16 clips, a quarter held out: 4 validation files, as the 17 that gave "100%".
        let root = try toneFolder()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let output = root + "/model"
        let trained = try runEarshot(["train", "--data", root, "--validation-split", "0.25", "--architecture", "conv:8x3",
                                      "--features", "log-mel:16", "--epochs", "2", "--batch-size", "4", "--output", output])
        #expect(trained.status == 0, "\(trained.err)")
        #expect(trained.err.contains("earshot train: no --background: a label '_background_' of generated noise and near-silence is added"),
                "\(trained.err)")
        #expect(trained.err.contains("earshot train: warning: only 4 validation files: the validation accuracy is unreliable below 50 "
                                     + "(one file moves it by 25%)"), "\(trained.err)")
        #expect(trained.out.contains("(only 4 validation files: the validation accuracy is unreliable below 50 (one file moves it by 25%))"))
        let help = try runEarshot(["train", "--help"]).out.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(help.contains("without it a label '_background_' of generated noise and near-silence is added (said on stderr)"))
        // With a background label of the data's own, and 50 validation files, neither note.
        let many = try toneFolder(files: 50)
        defer { try? FileManager.default.removeItem(atPath: many) }
        let quiet = try runEarshot(["train", "--data", many, "--validation-split", "0.5", "--background", "low", "--architecture", "conv:8x3",
                                    "--features", "log-mel:16", "--epochs", "1", "--batch-size", "4", "--output", many + "/model"])
        #expect(quiet.status == 0, "\(quiet.err)")
        #expect(!quiet.err.contains("--background") && !quiet.err.contains("warning") && !quiet.out.contains("unreliable"), "\(quiet.err)")
    }

    @Test("evaluate without --model says it needs one, and its help says so (no default that cannot be evaluated)")
    func evaluateNeedsAModel() throws {
        let root = try toneFolder(files: 2)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let bare = try runEarshot(["evaluate", "--data", root])
        #expect(bare.status == 64 && bare.err.contains("evaluate needs --model NAME|PATH"), "\(bare.err)")
        let help = try runEarshot(["evaluate", "--help"])
        let model = help.out.split(separator: "\n").first { $0.contains("--model") } ?? ""
        #expect(model.contains("(required)") && !help.out.contains("default silero-vad"), "\(help.out)")
        // The one model the help names as the default of the labelling commands cannot be evaluated on clips.
        let vad = try runEarshot(["evaluate", "-m", "silero-vad", "--data", root])
        #expect(vad.status != 0 && vad.err.contains("a clip classifier needs a softmax model"), "\(vad.err)")
    }
}
