import Earshot
import EarshotCluster
import EarshotFetch
import EarshotImport
import EarshotRedis
import EarshotTraining

/// A usage error: shown with a hint, exit code 64 (EX_USAGE).
struct UsageError: Error, CustomStringConvertible {
    let message: String
    let hint: String?
    init(_ message: String, hint: String? = nil) {
        self.message = message
        self.hint = hint
    }
    var description: String { message }
}

/// `--help` or `-h` was given: the command's help is printed and the tool exits 0.
struct HelpRequested: Error {
    let spec: CommandSpec
}

/// One option of a command, declared once: its name, short form, value, range, default and
/// help drive parsing, validation, `--help`, the man page, the completions and docs/cli.md.
struct OptionSpec: Sendable {
    enum Kind: Sendable {
        case flag
        /// Free text (a path, a name, a list): checked by the command.
        case text
        case int(ClosedRange<Int>)
        case double(ClosedRange<Double>)
        case choice([String])
    }

    let name: String
    let short: Character?
    /// The value's placeholder in the synopsis (nil for a flag).
    let value: String?
    let kind: Kind
    /// The default as the help states it (nil: none, or the command decides).
    let defaultText: String?
    let help: String
    /// The command cannot run without it: the help, the synopsis, the usage error and the
    /// completions say so.
    private(set) var isRequired = false

    /// This option, required.
    var required: OptionSpec {
        var o = self
        o.isRequired = true
        return o
    }

    /// The value taken when the option is given without one (it is last, or the next word is an
    /// option): `--zeroconf` alone means `--zeroconf earshot`. Its placeholder reads `[NAME]`.
    private(set) var valueWhenAbsent: String?

    /// This option, its value optional (`value` when it has none).
    func valueOptional(_ value: String) -> OptionSpec {
        var o = self
        o.valueWhenAbsent = value
        return o
    }

    /// The help with "(required)" when it is, for the shells' completions.
    var completionHelp: String { isRequired ? help + " (required)" : help }

    static func flag(_ name: String, short: Character? = nil, _ help: String) -> OptionSpec {
        OptionSpec(name: name, short: short, value: nil, kind: .flag, defaultText: nil, help: help)
    }

    static func text(_ name: String, short: Character? = nil, _ value: String, default d: String? = nil, _ help: String) -> OptionSpec {
        OptionSpec(name: name, short: short, value: value, kind: .text, defaultText: d, help: help)
    }

    static func int(_ name: String, short: Character? = nil, _ value: String, _ range: ClosedRange<Int>, default d: Int? = nil,
                    defaultText: String? = nil, _ help: String) -> OptionSpec {
        OptionSpec(name: name, short: short, value: value, kind: .int(range), defaultText: d.map(String.init) ?? defaultText, help: help)
    }

    static func double(_ name: String, short: Character? = nil, _ value: String, _ range: ClosedRange<Double>, default d: Double? = nil,
                       defaultText: String? = nil, _ help: String) -> OptionSpec {
        OptionSpec(name: name, short: short, value: value, kind: .double(range), defaultText: d.map(Self.format) ?? defaultText, help: help)
    }

    static func choice(_ name: String, short: Character? = nil, _ values: [String], default d: String? = nil, _ help: String) -> OptionSpec {
        OptionSpec(name: name, short: short, value: values.joined(separator: "|"), kind: .choice(values), defaultText: d, help: help)
    }

    static func format(_ x: Double) -> String {
        x == x.rounded() && abs(x) < 1e15 ? String(Int64(x)) : "\(x)"
    }

    /// The range or choices, for the help.
    var rangeText: String? {
        switch kind {
        case let .int(r): return "\(r.lowerBound)...\(r.upperBound == Int.max ? "" : String(r.upperBound))"
        case let .double(r): return "\(Self.format(r.lowerBound))...\(Self.format(r.upperBound))"
        default: return nil
        }
    }
}

/// A command's declaration: what it does, its options and examples.
struct CommandSpec: Sendable {
    let name: String
    /// The synopsis after `earshot NAME [options]`: its positional arguments.
    let operands: String
    let summary: String
    let options: [OptionSpec]
    let examples: [String]

    func option(_ name: String) -> OptionSpec? { options.first { $0.name == name } }

    /// `earshot NAME --help`.
    var help: String {
        var lines = ["usage: earshot \(name)\(options.isEmpty ? "" : " [options]")\(operands.isEmpty ? "" : " " + operands)", "",
                     Self.wrap(summary, indent: 0)]
        if !options.isEmpty {
            lines += ["", "options:"]
            let heads = options.map { o -> String in
                var head = (o.short.map { "-\($0), " } ?? "    ") + "--\(o.name)"
                if let v = o.value { head += " \(v)" }
                return head
            }
            let width = min(34, (heads.map(\.count).max() ?? 0) + 2)
            for (o, head) in zip(options, heads) {
                var text = o.help
                var notes: [String] = o.isRequired ? ["required"] : []
                if let r = o.rangeText { notes.append("range \(r)") }
                if let d = o.defaultText { notes.append("default \(d)") }
                if !notes.isEmpty { text += " (" + notes.joined(separator: "; ") + ")" }
                let pad = head.count < width ? String(repeating: " ", count: width - head.count) : "\n" + String(repeating: " ", count: width + 2)
                lines.append("  " + head + pad + Self.wrap(text, indent: width + 2))
            }
            lines.append("  -h, --help" + String(repeating: " ", count: max(2, width - 10)) + "this help")
        }
        if !examples.isEmpty {
            lines += ["", "examples:"] + examples.map { "  " + $0 }
        }
        return lines.joined(separator: "\n")
    }

    /// The one-paragraph synopsis used in `earshot help` and the reference in docs/cli.md.
    var synopsis: String {
        var words = ["earshot \(name)"]
        for o in options {
            let word = (o.short.map { "-\($0)|" } ?? "") + "--\(o.name)" + (o.value.map { " " + $0 } ?? "")
            words.append(o.isRequired ? word : "[" + word + "]")
        }
        if !operands.isEmpty { words.append(operands) }
        var lines: [String] = []
        var line = ""
        for w in words {
            if !line.isEmpty && line.count + 1 + w.count > 100 {
                lines.append(line)
                line = String(repeating: " ", count: 9 + name.count) + w
            } else {
                line += (line.isEmpty ? "" : " ") + w
            }
        }
        lines.append(line)
        return lines.joined(separator: "\n")
    }

    static func wrap(_ text: String, indent: Int, width: Int = 100) -> String {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty && indent + line.count + 1 + word.count > width {
                lines.append(line)
                line = String(word)
            } else {
                line += (line.isEmpty ? "" : " ") + word
            }
        }
        lines.append(line)
        return lines.joined(separator: "\n" + String(repeating: " ", count: indent))
    }
}

/// The closest of `candidates` to `word`, if it is close enough to be a typo.
func closest(_ word: String, in candidates: [String]) -> String? {
    Spelling.closest(word, in: candidates)
}

/// Command-line words after the command, parsed by its declaration: `--name value`,
/// `--name=value`, `-x value`, flags, `--` (everything after it is an operand), `-` (standard
/// input, an operand). Values of numeric options are checked against their ranges here.
struct Arguments {
    let spec: CommandSpec
    private(set) var options: [String: String] = [:]
    private(set) var flags: Set<String> = []
    private(set) var positionals: [String] = []

    init(_ words: [String], spec: CommandSpec) throws {
        self.spec = spec
        var i = 0
        var operandsOnly = false
        func option(named name: String, as typed: String) throws(UsageError) -> OptionSpec {
            if let o = spec.option(name) { return o }
            let names = spec.options.map(\.name)
            if let guess = closest(name, in: names) {
                throw UsageError("unknown option \(typed) for '\(spec.name)'", hint: "did you mean --\(guess)? (earshot \(spec.name) --help)")
            }
            throw UsageError("unknown option \(typed) for '\(spec.name)'", hint: "earshot \(spec.name) --help")
        }
        while i < words.count {
            let word = words[i]
            i += 1
            if operandsOnly || word == "-" || !word.hasPrefix("-") || word.count < 2 {
                positionals.append(word)
                continue
            }
            if word == "--" { operandsOnly = true; continue }
            if word == "--help" || word == "-h" { throw HelpRequested(spec: spec) }
            let o: OptionSpec
            var value: String?
            if word.hasPrefix("--") {
                var name = String(word.dropFirst(2))
                if let eq = name.firstIndex(of: "=") {
                    value = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                o = try option(named: name, as: "--\(name)")
            } else {
                let letter = word[word.index(after: word.startIndex)]
                guard word.count == 2, let found = spec.options.first(where: { $0.short == letter }) else {
                    // A negative number where an operand is expected stays an operand.
                    if Double(word) != nil { positionals.append(word); continue }
                    throw UsageError("unknown option \(word) for '\(spec.name)'", hint: "earshot \(spec.name) --help")
                }
                o = found
            }
            if case .flag = o.kind {
                guard value == nil else { throw UsageError("--\(o.name) takes no value", hint: "earshot \(spec.name) --help") }
                flags.insert(o.name)
                continue
            }
            if value == nil, let absent = o.valueWhenAbsent, i >= words.count || words[i].hasPrefix("-") {
                value = absent
            }
            if value == nil {
                guard i < words.count else { throw UsageError("--\(o.name) needs a value", hint: "earshot \(spec.name) --help") }
                value = words[i]
                i += 1
            }
            let text = value ?? ""
            switch o.kind {
            case let .int(range):
                guard let n = Int(text), range.contains(n) else {
                    throw UsageError("--\(o.name) \(text): expected a whole number in \(range.lowerBound)...\(range.upperBound)",
                                     hint: "earshot \(spec.name) --help")
                }
            case let .double(range):
                guard let x = Double(text), x.isFinite, range.contains(x) else {
                    throw UsageError("--\(o.name) \(text): expected a number in \(range.lowerBound)...\(range.upperBound)",
                                     hint: "earshot \(spec.name) --help")
                }
            case let .choice(values):
                guard values.contains(text) else {
                    let guess = closest(text, in: values).map { " (did you mean \($0)?)" } ?? ""
                    throw UsageError("--\(o.name) \(text): expected one of \(values.joined(separator: ", "))\(guess)")
                }
            case .text, .flag:
                break
            }
            options[o.name] = text
        }
        // A word where the command takes none is a mistake, never ignored (`bench model PATH`
        // would otherwise bench the default model).
        if spec.operands.isEmpty, let word = positionals.first {
            let hint = spec.option("model") != nil ? "a model is chosen with --model: earshot \(spec.name) --model \(word)"
                : spec.examples.first ?? "earshot \(spec.name) --help"
            throw UsageError("\(spec.name) takes no operands: '\(word)'", hint: hint)
        }
        for o in spec.options where o.isRequired && options[o.name] == nil {
            throw UsageError("\(spec.name) needs --\(o.name)" + (o.value.map { " " + $0 } ?? ""),
                             hint: spec.examples.first { $0.contains("--\(o.name)") } ?? "earshot \(spec.name) --help")
        }
    }

    func flag(_ name: String) -> Bool { flags.contains(name) }

    /// The value given, or nil when the option was not given.
    func string(_ name: String) -> String? { options[name] }

    /// A default that later readers see as if given (a command's own default for a shared option).
    mutating func setOption(_ name: String, _ value: String) { options[name] = value }

    /// The value given (checked against the declared range when parsed), or `fallback`.
    func int(_ name: String, default fallback: Int) -> Int { options[name].flatMap { Int($0) } ?? fallback }

    func double(_ name: String, default fallback: Double) -> Double { options[name].flatMap { Double($0) } ?? fallback }

    /// The value given or the declared default.
    func int(_ name: String) -> Int {
        int(name, default: spec.option(name)?.defaultText.flatMap { Int($0) } ?? 0)
    }

    func double(_ name: String) -> Double {
        double(name, default: spec.option(name)?.defaultText.flatMap { Double($0) } ?? 0)
    }

    /// The value given, or nil.
    func optionalInt(_ name: String) -> Int? { options[name].flatMap { Int($0) } }

    func optionalDouble(_ name: String) -> Double? { options[name].flatMap { Double($0) } }

    /// The range a numeric option was declared with (for values the command checks itself).
    func range(_ name: String) -> ClosedRange<Double> {
        switch spec.option(name)?.kind {
        case let .double(r): return r
        case let .int(r): return Double(r.lowerBound)...Double(r.upperBound)
        default: return -Double.infinity...Double.infinity
        }
    }
}

/// Exit codes from sysexits(3): 64 a usage error, 65 bad input data (an audio file or model
/// that is damaged or not what it claims), 66 an input that is missing, 69 a service that is
/// unavailable (Redis not reached in time, or refusing), 73 an output that cannot be created,
/// 74 an I/O error; 1 anything else (a device, a socket).
enum ExitCode {
    static let failure: Int32 = 1
    static let usage: Int32 = 64
    static let dataError: Int32 = 65
    static let noInput: Int32 = 66
    static let unavailable: Int32 = 69
    static let cannotCreate: Int32 = 73
    static let ioError: Int32 = 74

    static func of(_ error: Error) -> Int32 {
        switch error {
        case is UsageError: return usage
        case is ModelLookupError: return noInput
        case let e as OutputError: return e.exitCode
        case let e as StreamError: return of(e)
        case let e as AudioError: return of(e)
        case let e as ModelError: return of(e)
        // A model to import: missing or unreadable 66, damaged or unsupported 65.
        case let e as ImportError: return e.isMissingInput ? noInput : dataError
        case is ExportRefused: return dataError
        case is RedisUnavailable: return unavailable
        case let e as RedisError: return of(e)
        case let e as ClusterError: return of(e)
        case let e as FetchError: return of(e)
        case let e as WakeDataError: return of(e)
        default: return failure
        }
    }

    /// A wake phrase's data set: no voice or a voice that fails 69, a phrase 64, negatives
    /// missing 66, a file not written 73.
    static func of(_ e: WakeDataError) -> Int32 {
        switch e {
        case .noVoices, .synthesis: return unavailable
        case .phrase: return usage
        case .negatives: return noInput
        case .cannotWrite: return cannotCreate
        }
    }

    static func of(_ e: RedisError) -> Int32 {
        if case .badURL = e { return usage }
        return unavailable
    }

    /// A fetch: the catalog's kind of failure; an import's, the import's code.
    static func of(_ e: FetchError) -> Int32 {
        switch e.kind {
        case .usage: return usage
        case .badData: return dataError
        case .noInput: return noInput
        case .unavailable: return unavailable
        case .cannotCreate: return cannotCreate
        case .imported:
            if case let .importFailed(_, _, inner) = e { return of(inner) }
            return failure
        }
    }

    static func of(_ e: ClusterError) -> Int32 {
        switch e {
        case let .redis(r): return of(r)
        case let .stream(s): return of(s)
        case .malformedEntry, .entryTooLarge: return dataError
        case .badSource: return failure
        }
    }

    static func of(_ e: StreamError) -> Int32 {
        switch e {
        case let .file(_, inner): return of(inner)
        case let .audio(a): return of(a)
        case let .model(m): return of(m)
        case .invalidOption, .noSuchChannel: return usage
        case .source, .snapshot, .data: return dataError
        case .finished: return failure
        }
    }

    static func of(_ e: AudioError) -> Int32 {
        switch e {
        case .fileNotFound: return noInput
        case .cannotOpen: return noInput
        case .notAudio, .malformed, .unsupportedEncoding, .empty, .truncated, .channelOutOfRange, .unsupportedSampleRate, .tooLarge: return dataError
        case .readFailed: return ioError
        default: return failure
        }
    }

    static func of(_ e: ModelError) -> Int32 {
        switch e {
        case let .cannotRead(_, reason): return reason.contains("no model folder") || reason.contains("No such file") ? noInput : ioError
        case .notFound: return noInput
        case .cannotWrite: return cannotCreate
        default: return dataError
        }
    }
}
