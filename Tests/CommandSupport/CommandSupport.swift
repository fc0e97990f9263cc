import Earshot
import EarshotTestSupport
import Foundation

// What the tests of the library's products and of the command-line tool share: the built
// `earshot` tool and the library's own fixtures (the bundled model, the samples, a stream's events).

/// The `earshot` tool built with the tests (beside the test bundle, in the same build folder:
/// with `--scratch-path` or a sanitizer, the same build), else `.build/debug/earshot`.
public let earshotBinary: URL = {
    let beside = Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("earshot")
    return FileManager.default.isExecutableFile(atPath: beside.path) ? beside : Repo.root.appendingPathComponent(".build/debug/earshot")
}()

/// Runs the built `earshot` tool (swift test builds it beside the tests). `interruptAfter`
/// sends `signal` (SIGINT: Ctrl-C) after that long (counted from when stderr shows
/// `readyMarker`, when given); `stdin` is a file for standard input;
/// `stdinPipe` bytes fed through a pipe; `stdout` a file for standard output (then `out` is empty).
public func runEarshot(_ arguments: [String], environment: [String: String] = [:],
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

public enum Fixtures {
    public static let model: Model = {
        // The bundled model; a load failure shows up as a failed expectation in the tests that use it.
        (try? Model(contentsOf: Repo.root.appendingPathComponent("Models/silero-vad")))!
    }()

    /// The bundled okay-nabu: a wake word.
    public static let wakeModel: Model = {
        (try? Model(contentsOf: Repo.root.appendingPathComponent("Models/okay-nabu")))!
    }()

    /// An ALSA configuration file defining the capture `name`: the first channel of
    /// speech-noise-16k.wav through ALSA's file plugin (`FilePCM`), for `ALSA_CONFIG_PATH`.
    public static func captureConfigFile(name: String) throws -> String {
        let channels = try Fixtures.channels("speech-noise-16k.wav")
        let path = try Repo.temporaryFolder().appendingPathComponent("alsa.conf").path
        try FilePCM.configuration(name: name, samples: channels[0]).write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    public static func audio(_ name: String) throws -> (samples: [Float], sampleRate: Int) {
        try AudioFile.readMono(path: Repo.path("AudioSamples/\(name)"))
    }

    public static func channels(_ name: String) throws -> [[Float]] {
        let file = try AudioFile(path: Repo.path("AudioSamples/\(name)"))
        return try file.readChannels(maxFrames: file.frameCount ?? 0)
    }

    /// All events of a stream fed `samples` in chunks of the given sizes (whole when nil).
    public static func run(_ samples: [Float], rate: Int, sizes: [Int]? = nil, options: LabelOptions? = nil) async throws -> [ClassifierEvent] {
        let stream = try StreamClassifier(model: model, sourceSampleRate: rate, options: options)
        var events: [ClassifierEvent] = []
        var offset = 0
        for size in sizes ?? [samples.count] {
            events += try await stream.process(Array(samples[offset..<(offset + size)]))
            offset += size
        }
        return events + (try await stream.finish())
    }

    public static var withScores: LabelOptions {
        var o = LabelOptions(model: model)
        o.includeScores = true
        return o
    }
}

public func segments(_ events: [ClassifierEvent]) -> [Segment] {
    events.compactMap { if case let .ended(s) = $0 { return s } else { return nil } }
}

public func scores(_ events: [ClassifierEvent]) -> [StepScores] {
    events.compactMap { if case let .scores(s) = $0 { return s } else { return nil } }
}
