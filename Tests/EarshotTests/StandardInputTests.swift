import Earshot
import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

/// What `earshot label` leaves in its temporary folder of a stream it held.
private func heldCopies(_ folder: URL) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.hasPrefix("earshot-stdin") }
}

@Suite("earshot label - (standard input)")
struct StandardInputTests {
    static let sample = "AudioSamples/speech-noise-16k"

    @Test("From a pipe, WAV, FLAC and raw PCM (--rate) give the file's events, and no copy is left in the temporary folder",
          arguments: ["wav", "flac", "raw"])
    func sameEventsAsTheFile(_ kind: String) throws {
        // An earshot that stops reading early (a usage error) must fail this test, not end the test process.
        signal(SIGPIPE, SIG_IGN)
        let temporary = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: temporary) }
        let file = try runEarshot(["label", "-f", "csv", "\(Self.sample).wav"])
        #expect(file.status == 0, "\(file.err)")
        let bytes: Data
        var flags: [String] = []
        if kind == "raw" {
            // The WAV's samples as 16-bit little-endian PCM, without a header.
            let samples = try AudioFile.readMono(path: Repo.path("\(Self.sample).wav")).samples
            bytes = Data(littleEndianBytes(samples.map { Int16(($0 * 32768).rounded()) }))
            flags = ["--rate", "16000"]
        } else {
            bytes = try Data(contentsOf: Repo.root.appendingPathComponent("\(Self.sample).\(kind)"))
        }
        let piped = try runEarshot(["label", "-f", "csv"] + flags + ["-"], environment: ["TMPDIR": temporary.path], stdinPipe: bytes)
        #expect(piped.status == 0, "\(piped.err)")
        // The same samples (FLAC is lossless, the raw PCM is the WAV's), the same events, named '-'.
        #expect(piped.out == file.out.replacingOccurrences(of: "\(Self.sample).wav,", with: "-,"))
        #expect(piped.out.split(separator: "\n").count == 7)
        #expect(heldCopies(temporary).isEmpty)
    }

    @Test("A FLAC stream held for reading leaves no file behind, while it is read and after SIGKILL")
    func nothingLeftAfterSIGKILL() throws {
        let temporary = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: temporary) }
        let process = Process()
        process.executableURL = earshotBinary
        process.arguments = ["label", "-f", "csv", "-"]
        process.currentDirectoryURL = Repo.root
        process.environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": temporary.path]) { $1 }
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Half the FLAC file, and the pipe kept open: earshot is holding the stream, waiting for more.
        let flac = try Data(contentsOf: Repo.root.appendingPathComponent("\(Self.sample).flac"))
        try input.fileHandleForWriting.write(contentsOf: flac.prefix(flac.count / 2))
        Thread.sleep(forTimeInterval: 1)
        #expect(process.isRunning)
        let during = (try FileManager.default.contentsOfDirectory(atPath: temporary.path))
        #expect(heldCopies(temporary).isEmpty, "while running: \(during)")
        // What the process holds open: its held copy, deleted (an unnamed file), not a name in the folder.
        let open = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process.processIdentifier)/fd")) ?? [])
            .compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(process.processIdentifier)/fd/\($0)") }
        #expect(open.contains { $0.hasPrefix(temporary.path) && $0.hasSuffix("(deleted)") }, "\(open)")
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? input.fileHandleForWriting.close()
        #expect(process.terminationReason == .uncaughtSignal)
        #expect(heldCopies(temporary).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary.path).isEmpty)
    }

    @Test("Raw PCM options need --rate and '-'; --help states how much of a stream is held at most")
    func rawOptions() throws {
        let noRate = try runEarshot(["label", "--raw-channels", "2", "-"], stdinPipe: Data([0, 0]))
        #expect(noRate.status == 64 && noRate.err.contains("--raw-channels describes raw PCM on standard input: it needs --rate HZ"))
        let noDash = try runEarshot(["label", "--rate", "16000", "\(Self.sample).wav"])
        #expect(noDash.status == 64 && noDash.err.contains("--rate reads standard input as raw PCM: name it as '-'"))
        let help = try runEarshot(["label", "--help"])
        #expect(help.out.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            .contains("first held in an unnamed temporary file (nothing is left behind), of at most 1024 MiB"))
    }
}
