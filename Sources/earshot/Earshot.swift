import CEarshotKernels
import Earshot
import EarshotJSON
import Foundation

@main
enum EarshotCommand {
    static let version = "0.2.0"

    /// `earshot help`: every command with the first sentence of what it does.
    static var usage: String {
        var lines = ["earshot \(version): stateful audio models on Linux", "", "usage: earshot COMMAND [options] [operands]", "", "commands:"]
        let width = (Specs.all.map(\.name.count).max() ?? 10) + 2
        lines += listing(Specs.all, width: width)
        lines += ["  help [COMMAND]" + String(repeating: " ", count: max(2, width - 14)) + "this list, or a command's options",
                  "", "'earshot COMMAND --help' (or 'earshot help COMMAND') shows a command's options, defaults and examples;",
                  "'earshot --version' the version.", "",
                  "exit codes (sysexits): 0 done; 64 a usage error; 65 bad data (an audio file or model damaged or not what it claims);",
                 "66 a missing input (file, folder or model); 69 a service unavailable (Redis not reached within --retry-for, or",
                 "refusing; a download that failed); 73 an output that cannot be created; 74 an I/O error (a read or write",
                 "failed); 1 anything else (a device, a socket). With several files, the code of the first that failed.", "",
                 "models by name (-m NAME) are looked for, in order, in: --models DIR; $EARSHOT_MODELS (colon-separated);",
                 "$XDG_DATA_HOME/earshot/models (~/.local/share/earshot/models); PREFIX/share/earshot/models beside the binary",
                 "(/usr/bin/earshot: /usr/share/earshot/models); the Models/ of an Earshot checkout it runs from. 'earshot models'",
                 "lists what they hold, and the catalog's models that 'earshot models fetch NAME' installs."]
        return lines.joined(separator: "\n")
    }

    /// One line per command: its name, then the first sentence of its summary, wrapped.
    static func listing(_ specs: [CommandSpec], width: Int) -> [String] {
        specs.map { spec in
            let first = spec.summary.split(separator: ".", maxSplits: 1).first.map(String.init) ?? spec.summary
            return "  " + spec.name + String(repeating: " ", count: max(2, width - spec.name.count)) + CommandSpec.wrap(first + ".", indent: width + 2)
        }
    }

    /// `earshot help bench` and `earshot bench --help`: the benchmarks, one line each.
    static var benchUsage: String {
        let specs = Specs.all.filter { $0.name.hasPrefix("bench ") }
        let width = (specs.map(\.name.count).max() ?? 10) + 2
        return (["usage: earshot bench SUBJECT [options]", "", "subjects:"] + listing(specs, width: width)
                + ["", "'earshot bench SUBJECT --help' shows a benchmark's options, defaults and examples."]).joined(separator: "\n")
    }

    /// The command named by the first words (`bench serve` takes two).
    static func spec(for words: [String]) -> CommandSpec? {
        if words.count >= 2, let two = Specs.find(words[0] + " " + words[1]) { return two }
        return words.first.flatMap(Specs.find)
    }

    static func main() async {
        // Model steps on batches allocate large buffers again and again; keep freed memory in
        // the heap (no mmap/munmap and fresh zeroed pages on every step).
        earshot_keep_freed_memory()
        var words = Array(CommandLine.arguments.dropFirst())
        guard let command = words.first else {
            printError(usage)
            exit(64)
        }
        words.removeFirst()
        var code: Int32 = 0
        do {
            try PrecisionOption.choosePath()
            if command == "--version" || command == "-V" || command == "version" {
                try out("earshot \(version)")
                try OutputFile.standardOutput.flush()
                exit(0)
            }
            switch command {
            case "features": try FeaturesCommand.run(words)
            case "bench": try await BenchCommand.run(words)
            case "inspect": try InspectCommand.run(words)
            case "models": code = try ModelsCommand.run(words)
            case "label": code = try await LabelCommand.run(words)
            case "listen": code = try await ListenCommand.run(words)
            case "devices": try DevicesCommand.run(words)
            case "train": try TrainCommand.run(words)
            case "train-wake": try await TrainWakeCommand.run(words)
            case "evaluate": code = try await EvaluateCommand.run(words)
            case "import": try ImportCommand.run(words)
            case "export": try ExportCommand.run(words)
            case "serve": try await ServeCommand.run(words)
            case "worker": try ClusterCommands.worker(words)
            case "publish": try await ClusterCommands.publish(words)
            case "events": code = try ClusterCommands.events(words)
            case "plot": code = try await PlotCommand.run(words)
            case "completions": try Completions.run(words)
            case "man":
                _ = try Arguments(words, spec: Specs.manPage)
                try out(Completions.manPage())
            case "help", "--help", "-h":
                if words == ["--reference"] {
                    // The command reference of docs/cli.md: every command's synopsis.
                    try out(Specs.all.map(\.synopsis).joined(separator: "\n"))
                } else if words.isEmpty {
                    try out(usage)
                } else if words == ["bench"] {
                    try out(benchUsage)
                } else if let spec = spec(for: words) {
                    try out(spec.help)
                } else {
                    throw UsageError("no command '\(words.joined(separator: " "))'", hint: closest(words[0], in: Specs.commands).map { "did you mean '\($0)'?" } ?? "earshot help")
                }
            default:
                let guess = closest(command, in: Specs.commands).map { "did you mean 'earshot \($0)'? (earshot help)" } ?? "earshot help"
                throw UsageError("unknown command '\(command)'", hint: guess)
            }
            // Results written to standard output reach it, or the failure is an error.
            try OutputFile.standardOutput.flush()
        } catch let help as HelpRequested {
            do {
                try out(help.spec.help)
                try OutputFile.standardOutput.flush()
            } catch {
                printError("earshot: \(error)")
                exit(74)
            }
            exit(0)
        } catch let error as UsageError {
            printError("earshot: \(error.message)")
            if let hint = error.hint { printError("  hint: \(hint)") }
            exit(64)
        } catch let error as OutputError {
            printError("earshot: \(error)")
            exit(error.exitCode)
        } catch let error as ModelLookupError {
            printError(ModelsCommand.failure(error))
            exit(ExitCode.noInput)
        } catch {
            printError("earshot: \(error)")
            exit(ExitCode.of(error))
        }
        exit(code)
    }
}

func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// JSON text of a dictionary with sorted keys, on one line, by the package's one JSON writer.
func jsonLine(_ object: [String: Any]) -> String {
    JSONValue(any: object).serialized
}

extension JSONValue {
    /// A value built from what a command gathers (numbers, strings, flags, arrays, dictionaries).
    init(any value: Any) {
        switch value {
        case let v as JSONValue: self = v
        case is NSNull: self = .null
        case let v as Bool: self = .bool(v)
        case let v as Int: self = .number(Double(v))
        case let v as Int32: self = .number(Double(v))
        case let v as UInt64: self = .number(Double(v))
        case let v as Double: self = .number(v)
        case let v as Float: self = .number(Double(v))
        case let v as String: self = .string(v)
        case let v as [Any]: self = .array(v.map(JSONValue.init(any:)))
        case let v as [String: Any]: self = .object(v.mapValues(JSONValue.init(any:)))
        case Optional<Any>.none: self = .null
        default: self = .string("\(value)")
        }
    }
}

/// The folder that holds the package's bundled files (AudioSamples/, Models/): the current
/// folder if it has them, else the nearest parent of the executable that does.
func bundledPath(_ relative: String) -> String {
    let fm = FileManager.default
    if fm.fileExists(atPath: relative) { return relative }
    var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    while url.path != "/" {
        url.deleteLastPathComponent()
        let candidate = url.appendingPathComponent(relative).path
        if fm.fileExists(atPath: candidate) { return candidate }
    }
    return relative
}
