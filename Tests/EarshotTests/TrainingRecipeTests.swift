import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot

@Suite("earshot train's defaults on a set a new user would make")
struct TrainingRecipeTests {
    /// tools/make_yes_no.sh's set (espeak-ng "yes" and "no" in 8 voices, noise), trained with
    /// nothing but the data, the held-out voices and the background label given.
    @Test("Two words from 8 espeak-ng voices: the defaults learn them, 100% on the 2 held-out voices, and every word found in a stream of theirs")
    func yesNo() throws {
        for tool in ["espeak-ng", "sox"] {
            guard ["/usr/bin/", "/usr/local/bin/"].contains(where: { FileManager.default.isExecutableFile(atPath: $0 + tool) }) else {
                throw FixtureError(message: "\(tool) is not installed: run scripts/install-packages.sh")
            }
        }
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let set = folder.appendingPathComponent("yes-no").path
        let make = Process()
        make.executableURL = URL(fileURLWithPath: Repo.path("tools/make_yes_no.sh"))
        make.arguments = [set]
        make.standardOutput = FileHandle.nullDevice
        try make.run()
        make.waitUntilExit()
        #expect(make.terminationStatus == 0)
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
}
