import Earshot
import Foundation

enum LabelCommand {
    static let audioExtensions: Set<String> = ["wav", "flac", "ogg", "oga", "opus", "aif", "aiff", "aifc", "au", "snd", "caf", "w64", "rf64", "mp3", "voc"]

    /// The label options of `earshot label` and `earshot listen`: the model's defaults, overridden.
    static func options(_ args: Arguments, model: Model) throws(UsageError) -> LabelOptions {
        var options = LabelOptions(model: model)
        if args.string("threshold") != nil { options.threshold = try args.double("threshold", default: 0.5, range: 0...1) }
        if args.string("min-speech") != nil { options.minSegmentMs = try args.double("min-speech", default: 250, range: 0...3_600_000) }
        if args.string("min-silence") != nil { options.minSilenceMs = try args.double("min-silence", default: 100, range: 0...3_600_000) }
        if args.string("pad") != nil { options.padMs = try args.double("pad", default: 30, range: 0...60000) }
        if args.string("max-speech") != nil { options.maxSegmentSeconds = try args.double("max-speech", default: 0, range: 0.1...86400) }
        options.includeScores = args.flag("scores")
        do { try options.validate() } catch { throw UsageError("\(error)") }
        return options
    }

    static let labelOptionNames: Set<String> = ["model", "threshold", "min-speech", "min-silence", "pad", "max-speech"]

    /// Files named, and audio files found in folders named (sorted), in order.
    static func inputs(_ paths: [String]) -> [String] {
        let fm = FileManager.default
        return paths.flatMap { path -> [String] in
            var isFolder: ObjCBool = false
            guard fm.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue else { return [path] }
            let found = (fm.enumerator(atPath: path)?.allObjects as? [String] ?? [])
                .filter { audioExtensions.contains(URL(fileURLWithPath: $0).pathExtension.lowercased()) }
                .sorted()
            return found.map { URL(fileURLWithPath: path).appendingPathComponent($0).path }
        }
    }

    static func run(_ words: [String]) async throws -> Int32 {
        let args = try Arguments(words, valued: labelOptionNames.union(["format", "channels", "output"]),
                                 switches: ["scores"], command: "label")
        guard !args.positionals.isEmpty else {
            throw UsageError("label needs audio files or folders", hint: "earshot label AudioSamples/speech-noise-16k.wav")
        }
        let interactive = isatty(STDOUT_FILENO) != 0 && args.string("output") == nil
        let formatName = args.string("format") ?? (interactive ? "text" : "jsonl")
        guard let format = SegmentFormat(rawValue: formatName) else {
            throw UsageError("--format \(formatName): expected one of \(SegmentFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let channelsName = args.string("channels") ?? "mix"
        guard let channels = FileLabeler.Channels(rawValue: channelsName) else {
            throw UsageError("--channels \(channelsName): expected mix or each")
        }
        let model = try Model(contentsOf: try ModelLocator.find(args.string("model") ?? ModelLocator.defaultModel))
        let labeler = FileLabeler(model: model, options: try options(args, model: model), channels: channels)
        let output = try OutputFile(path: args.string("output"))
        if let header = format.header { output.write(header) }
        let files = inputs(args.positionals)
        var failures = 0
        let showProgress = isatty(STDERR_FILENO) != 0
        // Files are labelled in parallel, as many at once as there are cores, and printed in
        // the order given.
        let width = max(1, ProcessInfo.processInfo.activeProcessorCount)
        typealias Outcome = (index: Int, result: Result<FileLabeler.Result, Error>)
        var pending: [Int: Result<FileLabeler.Result, Error>] = [:]
        var nextToPrint = 0
        func printReady() {
            while let outcome = pending.removeValue(forKey: nextToPrint) {
                let file = files[nextToPrint]
                nextToPrint += 1
                switch outcome {
                case let .success(result):
                    if format == .text && files.count > 1 { output.write("== \(file)") }
                    failures += write(result, file: file, format: format, model: model, channels: channels, to: output)
                case let .failure(error):
                    printError("earshot: \(error)")
                    failures += 1
                }
            }
        }
        await withTaskGroup(of: Outcome.self) { group in
            var started = 0
            func startNext() {
                guard started < files.count else { return }
                let position = started
                let file = files[position]
                started += 1
                group.addTask {
                    do {
                        let progress: @Sendable (Double) -> Void = { fraction in
                            if showProgress && files.count == 1 { ProgressBar.draw(fraction, label: file) }
                        }
                        let result = try await labeler.label(path: file, progress: progress)
                        return (position, .success(result))
                    } catch {
                        return (position, .failure(error))
                    }
                }
            }
            for _ in 0..<width { startNext() }
            for await outcome in group {
                pending[outcome.index] = outcome.result
                if showProgress {
                    ProgressBar.clear()
                    if files.count > 1 { ProgressBar.draw(Double(outcome.index + 1) / Double(files.count), label: "\(files.count) files") }
                }
                startNext()
                printReady()
            }
        }
        if showProgress { ProgressBar.clear() }
        if files.isEmpty { printError("earshot: no audio files in \(args.positionals.joined(separator: " "))") }
        return failures > 0 || files.isEmpty ? 1 : 0
    }
}

extension LabelCommand {
    /// Writes one file's events; returns how many of its channels failed.
    static func write(_ result: FileLabeler.Result, file: String, format: SegmentFormat, model: Model,
                      channels: FileLabeler.Channels, to output: OutputFile) -> Int {
        var failures = 0
        for event in result.events {
            switch event {
            case let .ended(segment):
                output.write(format.line(segment, file: file, multiChannel: channels == .each && result.channelCount > 1))
            case let .scores(step) where format == .jsonl || format == .text:
                output.write(format == .jsonl ? SegmentFormat.scoresLine(step, labels: model.labels, file: file)
                             : "\(SegmentFormat.clock(Double(step.start) / Double(step.sampleRate)))  "
                               + zip(model.labels, step.scores).map { "\($0) \(String(format: "%.3f", $1))" }.joined(separator: "  "))
            case let .failed(channel, error):
                printError("earshot: \(file): channel \(channel): \(error)")
                failures += 1
            default:
                break
            }
        }
        return failures
    }
}

/// Standard output or a file, line by line.
final class OutputFile {
    private let handle: FileHandle

    init(path: String?) throws {
        guard let path else {
            handle = FileHandle.standardOutput
            return
        }
        guard FileManager.default.createFile(atPath: path, contents: nil) else {
            throw UsageError("--output \(path): cannot create the file")
        }
        handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
    }

    func write(_ line: String) {
        handle.write(Data((line + "\n").utf8))
    }
}

/// A one-line progress bar on stderr (only when stderr is a terminal).
enum ProgressBar {
    static func draw(_ fraction: Double, label: String) {
        let width = 30, filled = Int((fraction * Double(width)).rounded(.down))
        let bar = String(repeating: "#", count: min(filled, width)) + String(repeating: ".", count: max(0, width - filled))
        FileHandle.standardError.write(Data("\r[\(bar)] \(Int(fraction * 100))% \(label.suffix(40))".utf8))
    }

    static func clear() {
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}
