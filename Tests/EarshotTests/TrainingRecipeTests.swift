import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot

@Suite("earshot train's defaults on a set a new user would make")
struct TrainingRecipeTests {
    static func requireTools() throws {
        for tool in ["espeak-ng", "sox"] {
            guard ["/usr/bin/", "/usr/local/bin/"].contains(where: { FileManager.default.isExecutableFile(atPath: $0 + tool) }) else {
                throw FixtureError(message: "\(tool) is not installed: run scripts/install-packages.sh")
            }
        }
    }

    /// Runs one of the project's scripts; its exit status.
    static func runTool(_ script: String, _ arguments: [String]) throws -> Int32 {
        let make = Process()
        make.executableURL = URL(fileURLWithPath: Repo.path(script))
        make.arguments = arguments
        make.standardOutput = FileHandle.nullDevice
        try make.run()
        make.waitUntilExit()
        return make.terminationStatus
    }

    /// tools/make_yes_no.sh's set (espeak-ng "yes" and "no" in 8 voices, noise), trained with
    /// nothing but the data, the held-out voices and the background label given.
    @Test("Two words from 8 espeak-ng voices: the defaults learn them, 100% on the 2 held-out voices, and every word found in a stream of theirs")
    func yesNo() throws {
        try Self.requireTools()
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let set = folder.appendingPathComponent("yes-no").path
        #expect(try Self.runTool("tools/make_yes_no.sh", [set]) == 0)
        let model = folder.appendingPathComponent("model").path
        let train = try runEarshot(["train", "--data", "\(set)/train", "--validation", "\(set)/test", "--background", "noise", "--output", model, "-q"])
        #expect(train.status == 0, "\(train.err)")
        let clips = try runEarshot(["evaluate", "--model", model, "--data", "\(set)/test", "--format", "json"])
        let clipResult = try JSONSerialization.jsonObject(with: Data(clips.out.utf8)) as? [String: Any]
        #expect(clipResult?["accuracy"] as? Double == 1, "\(clips.out)")
        let stream = try runEarshot(["evaluate", "--model", model, "--stream", "\(set)/stream.wav", "--truth", "\(set)/stream.truth.csv", "--format", "json"])
        let streamResult = try JSONSerialization.jsonObject(with: Data(stream.out.utf8)) as? [String: Any]
        #expect(streamResult?["hits"] as? Int == 16 && streamResult?["keywords"] as? Int == 16, "\(stream.out)")
        #expect(streamResult?["falseAlarms"] as? Int == 0, "\(stream.out)")
    }

    /// tools/make_wake_phrase.sh's quick set ("hey earshot" in 8 accents x 16 voice variants,
    /// distractor words and noise), a head trained on openWakeWord's embedding with the defaults,
    /// run on voice variants it never heard, in streams as listen runs them.
    @Test("A wake phrase from espeak-ng voices alone: a head on openWakeWord's embedding finds it in held-out voices, not in their distractors")
    func wakePhrase() throws {
        try Self.requireTools()
        let models = Repo.path("Tests/.models/openwakeword")
        guard FileManager.default.fileExists(atPath: models + "/embedding_model.onnx") else {
            throw FixtureError(message: "openWakeWord's models are missing: run scripts/fetch-test-models.sh")
        }
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let set = folder.appendingPathComponent("wake").path
        #expect(try Self.runTool("tools/make_wake_phrase.sh", [set, "hey earshot", "20"]) == 0)
        let model = folder.appendingPathComponent("hey-earshot").path
        let train = try runEarshot(["train", "--data", "\(set)/train", "--validation", "\(set)/test", "--background", "other",
                                    "--embedding", "openwakeword", "--embedding-models", models, "--output", model, "-q"])
        #expect(train.status == 0, "\(train.err)")
        let inspect = try runEarshot(["inspect", model, "--json"])
        #expect(inspect.out.contains("\"labels\":[\"hey-earshot\"]"), "\(inspect.out)")
        #expect(try Reference.json(model + "/model.json")["phrase"] as? String == "hey earshot")
        func evaluate(_ stream: String, _ truth: String) throws -> [String: Any] {
            let run = try runEarshot(["evaluate", "--model", model, "--stream", "\(set)/\(stream)", "--truth", "\(set)/\(truth)", "--format", "json"])
            #expect(run.status == 0, "\(run.err)")
            return try JSONSerialization.jsonObject(with: Data(run.out.utf8)) as? [String: Any] ?? [:]
        }
        // Clip by clip, each at the end of its sequence as in training: measured 64 of 64.
        let clips = try runEarshot(["evaluate", "--model", model, "--data", "\(set)/test", "--format", "json"])
        let clipResult = try JSONSerialization.jsonObject(with: Data(clips.out.utf8)) as? [String: Any]
        #expect((clipResult?["accuracy"] as? Double ?? 0) >= 63.0 / 64, "\(clips.out)")
        // 32 held-out takes between 32 distractors; measured: all 32 found, no false alarm.
        let phrase = try evaluate("stream.wav", "stream.truth.csv")
        #expect(phrase["keywords"] as? Int == 32 && (phrase["hits"] as? Int ?? 0) >= 31, "\(phrase)")
        #expect((phrase["falseAlarms"] as? Int ?? 99) <= 1, "\(phrase)")
        let distractors = try evaluate("distractors.wav", "none.truth.csv")
        #expect(distractors["falseAlarms"] as? Int == 0, "\(distractors)")
    }
}
