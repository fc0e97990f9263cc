import EarshotTestSupport
import Foundation
import Testing

/// Runs the built `earshot` tool (swift test builds it beside the tests). `interruptAfter`
/// sends SIGINT (Ctrl-C) after that long.
func runEarshot(_ arguments: [String], environment: [String: String] = [:],
                interruptAfter: Duration? = nil) throws -> (status: Int32, out: String, err: String) {
    let binary = Repo.root.appendingPathComponent(".build/debug/earshot")
    let process = Process()
    if !environment.isEmpty {
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    }
    process.executableURL = FileManager.default.fileExists(atPath: binary.path)
        ? binary : Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("earshot")
    process.arguments = arguments
    process.currentDirectoryURL = Repo.root
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    if let interruptAfter {
        Thread.sleep(forTimeInterval: Double(interruptAfter.components.seconds) + Double(interruptAfter.components.attoseconds) * 1e-18)
        process.interrupt()
    }
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    let errData = err.fileHandleForReading.readDataToEndOfFile()
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

    @Test("Usage errors exit 64 with a hint; a missing file exits 1 naming it")
    func errors() throws {
        let unknown = try runEarshot(["features", "AudioSamples/speech-noise-16k.wav", "--bogus"])
        #expect(unknown.status == 64)
        #expect(unknown.err.contains("unknown option --bogus"))
        #expect(unknown.err.contains("hint:"))
        let badValue = try runEarshot(["features", "AudioSamples/speech-noise-16k.wav", "--mels", "0"])
        #expect(badValue.status == 64)
        #expect(badValue.err.contains("--mels 0: expected a whole number in 1...512"))
        let missing = try runEarshot(["features", "no-such.wav"])
        #expect(missing.status == 1)
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
        #expect(d?["parameterCount"] as? Int == 243_585)
        #expect(d?["labels"] as? [String] == ["speech"])
        #expect(d?["sampleRate"] as? Int == 16000)
        #expect(d?["chunkSamples"] as? Int == 512)
        #expect((d?["layers"] as? [[String: Any]])?.count == 11)
    }

    @Test("inspect in text names the layers; an unknown model exits 1 naming it")
    func inspectText() throws {
        let result = try runEarshot(["inspect", "Models/silero-vad-8k"])
        #expect(result.status == 0)
        #expect(result.out.contains("decoder.rnn     lstm"))
        #expect(result.out.contains("state:     1152 bytes per stream"))  // (32 context + 2 * 128 carry) * 4
        let missing = try runEarshot(["inspect", "no-such-model"])
        #expect(missing.status == 1)
        #expect(missing.err.contains("no-such-model: cannot read: no model folder of that name"))
    }
}
