import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

/// `earshot label` against committed expected output (Tests/EarshotTests/Expected/, made by
/// this command and checked against AudioSamples' ground truth when it was committed).
@Suite("earshot label")
struct LabelCommandTests {
    static let runs: [(arguments: [String], expected: String)] = [
        (["AudioSamples/speech-noise-16k.wav", "--format", "text"], "speech-noise-16k.text"),
        (["AudioSamples/speech-noise-16k.wav", "--format", "jsonl"], "speech-noise-16k.jsonl"),
        (["AudioSamples/speech-noise-16k.wav", "--format", "csv"], "speech-noise-16k.csv"),
        (["AudioSamples/speech-noise-16k.wav", "--format", "audacity"], "speech-noise-16k.audacity"),
        (["AudioSamples/speech-noise-16k.wav", "--format", "rttm"], "speech-noise-16k.rttm"),
        (["AudioSamples/stereo-16k.wav", "--channels", "each", "--format", "text"], "stereo-16k-each.text"),
        (["AudioSamples/stereo-16k.wav", "--channels", "each", "--format", "jsonl"], "stereo-16k-each.jsonl"),
        (["AudioSamples/speech-noise-16k.flac", "AudioSamples/speech-noise-16k.ogg", "AudioSamples/speech-44k.wav",
          "AudioSamples/speech-8k.wav", "--format", "csv"], "formats.csv"),
        (["AudioSamples/speech-noise-16k.wav", "--threshold", "0.7", "--min-speech", "500", "--min-silence", "300",
          "--pad", "100", "--max-speech", "3", "--format", "jsonl"], "speech-noise-16k-options.jsonl"),
    ]

    @Test("Every format on the samples gives the expected output", arguments: 0..<runs.count)
    func expectedOutput(_ index: Int) throws {
        let run = Self.runs[index]
        let result = try runEarshot(["label"] + run.arguments)
        #expect(result.status == 0, "\(result.err)")
        let expected = try String(contentsOfFile: Repo.path("Tests/EarshotTests/Expected/\(run.expected)"), encoding: .utf8)
        #expect(result.out == expected, "earshot label \(run.arguments.joined(separator: " "))")
    }

    @Test("The speech found lies on the samples' ground truth")
    func groundTruth() throws {
        // AudioSamples/speech-noise-16k.truth.csv: speech at 1.000-4.691, 8.391-12.395, 14.995-18.877,
        // 22.477-25.168, 26.768-31.086 (over noise), 32.486-35.499; no segment on the noise or tone.
        let truth: [(Double, Double)] = [(1.0, 4.691), (8.391, 12.395), (14.995, 18.877), (22.477, 25.168), (26.768, 31.086), (32.486, 35.499)]
        let result = try runEarshot(["label", "AudioSamples/speech-noise-16k.wav", "--format", "csv"])
        let rows = result.out.split(separator: "\n").dropFirst().map { $0.split(separator: ",") }
        #expect(rows.count == truth.count)
        for (row, (start, end)) in zip(rows, truth) {
            #expect(abs((Double(row[3]) ?? 0) - start) < 0.15 && abs((Double(row[4]) ?? 0) - end) < 0.4, "\(row) vs \(start)-\(end)")
        }
    }

    @Test("A folder with one broken file: the others are labelled, the broken one reported, exit 65 (bad data)")
    func brokenFileInFolder() throws {
        let folder = try Repo.temporaryFolder()
        for name in ["speech-8k.wav", "speech-44k.wav"] {
            try FileManager.default.copyItem(atPath: Repo.path("AudioSamples/\(name)"), toPath: folder.appendingPathComponent(name).path)
        }
        let broken = folder.appendingPathComponent("broken.wav").path
        try Data("not sound".utf8).write(to: URL(fileURLWithPath: broken))
        try Data("notes".utf8).write(to: folder.appendingPathComponent("notes.txt"))  // not audio by name: skipped
        let result = try runEarshot(["label", folder.path, "--format", "csv"])
        #expect(result.status == 65)
        #expect(result.err.contains("\(broken): not an audio file libsndfile can read"))
        let expected = try String(contentsOfFile: Repo.path("Tests/EarshotTests/Expected/formats.csv"), encoding: .utf8)
        let expectedRows = expected.split(separator: "\n").filter { $0.contains("speech-44k.wav") || $0.contains("speech-8k.wav") }
            .map { $0.replacingOccurrences(of: "AudioSamples/", with: folder.path + "/") }
        let rows = result.out.split(separator: "\n").dropFirst().map(String.init)
        #expect(rows.sorted() == expectedRows.sorted())
    }

    @Test("Missing files, unknown models and bad flags are reported with the right exit code")
    func errors() throws {
        let missing = try runEarshot(["label", "no-such.wav"])
        #expect(missing.status == 66)
        #expect(missing.err.contains("no-such.wav: no such file"))
        let model = try runEarshot(["label", "--model", "no-such-model", "AudioSamples/speech-8k.wav"])
        #expect(model.status == 66)
        #expect(model.err.contains("no model 'no-such-model'") && model.err.contains("searched, in order:"))
        for (flags, message) in [(["--format", "xml"], "--format xml: expected one of text, jsonl, csv, audacity, rttm"),
                                 (["--threshold", "2"], "--threshold 2: expected a number in 0.0...1.0"),
                                 (["--channels", "both"], "--channels both: expected one of mix, each"),
                                 (["--min-speech"], "--min-speech needs a value")] {
            let r = try runEarshot(["label", "AudioSamples/speech-8k.wav"] + flags)
            #expect(r.status == 64, "\(flags)")
            #expect(r.err.contains(message), "\(r.err)")
        }
        let none = try runEarshot(["label"])
        #expect(none.status == 64)
        #expect(none.err.contains("hint: earshot label AudioSamples/speech-noise-16k.wav"))
    }
}

@Suite("earshot label: folders through links, per-model options naming models")
struct LabelInputsTests {
    @Test("A folder named by a symbolic link is walked, and linked folders inside it; a link back to a parent is walked once")
    func symlinkedFolders() throws {
        let root = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: root) }
        let fm = FileManager.default
        let real = root.appendingPathComponent("real"), other = root.appendingPathComponent("other")
        try fm.createDirectory(at: real, withIntermediateDirectories: true)
        try fm.createDirectory(at: other, withIntermediateDirectories: true)
        try fm.copyItem(atPath: Repo.path("AudioSamples/speech-8k.wav"), toPath: real.appendingPathComponent("a.wav").path)
        try fm.copyItem(atPath: Repo.path("AudioSamples/speech-44k.wav"), toPath: other.appendingPathComponent("b.wav").path)
        try fm.createSymbolicLink(atPath: root.appendingPathComponent("link").path, withDestinationPath: real.path)
        try fm.createSymbolicLink(atPath: real.appendingPathComponent("sub").path, withDestinationPath: other.path)
        try fm.createSymbolicLink(atPath: other.appendingPathComponent("loop").path, withDestinationPath: real.path)
        let link = root.appendingPathComponent("link").path
        let result = try runEarshot(["label", "-f", "csv", link])
        #expect(result.status == 0, "\(result.err)")
        let files = result.out.split(separator: "\n").dropFirst().map { String($0.split(separator: ",")[0]) }
        #expect(Set(files) == [link + "/a.wav", link + "/sub/b.wav"], "\(result.out)")
        // The same events as the files themselves.
        let direct = try runEarshot(["label", "-f", "csv", "AudioSamples/speech-8k.wav", "AudioSamples/speech-44k.wav"])
        #expect(result.out.replacingOccurrences(of: link + "/sub/b.wav", with: "AudioSamples/speech-44k.wav")
            .replacingOccurrences(of: link + "/a.wav", with: "AudioSamples/speech-8k.wav") == direct.out)
    }

    @Test("--threshold, --window and --refractory MODEL=X name a model given: another is a usage error naming it and them",
          arguments: ["label", "serve"])
    func unknownModelInPerModelOption(_ command: String) throws {
        let operands = command == "label" ? ["AudioSamples/speech-8k.wav"] : ["--uri", "stdio://"]
        let nope = try runEarshot([command, "--threshold", "nope=0.5", "-m", "silero-vad"] + operands, stdinPipe: Data())
        #expect(nope.status == 64, "\(nope.err)")
        #expect(nope.err.contains("--threshold nope=0.5: 'nope' is none of the models given (silero-vad)"), "\(nope.err)")
        let typo = try runEarshot([command, "-m", "okay-nabu,silero-vad", "--window", "okay-nabu=3", "--refractory", "okay-nabo=100"] + operands,
                                  stdinPipe: Data())
        #expect(typo.status == 64)
        #expect(typo.err.contains("--refractory okay-nabo=100: 'okay-nabo' is none of the models given (okay-nabu, silero-vad)"), "\(typo.err)")
        #expect(typo.err.contains("hint: did you mean okay-nabu?"), "\(typo.err)")
    }
}
