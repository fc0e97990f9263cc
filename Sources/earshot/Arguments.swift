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

/// Command-line words after the command: `--name value`, `--name=value`, `--flag`, positionals.
struct Arguments {
    private(set) var options: [String: String] = [:]
    private(set) var flags: Set<String> = []
    private(set) var positionals: [String] = []

    /// `valued` names take a value; `switches` take none. Anything else is a usage error.
    init(_ words: [String], valued: Set<String>, switches: Set<String>, command: String) throws(UsageError) {
        var i = 0
        while i < words.count {
            let word = words[i]
            i += 1
            guard word.hasPrefix("--"), word.count > 2 else {
                positionals.append(word)
                continue
            }
            var name = String(word.dropFirst(2))
            var value: String?
            if let eq = name.firstIndex(of: "=") {
                value = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if switches.contains(name) {
                guard value == nil else { throw UsageError("--\(name) takes no value", hint: "earshot \(command) --help") }
                flags.insert(name)
            } else if valued.contains(name) {
                if value == nil {
                    guard i < words.count else {
                        throw UsageError("--\(name) needs a value", hint: "earshot \(command) --help")
                    }
                    value = words[i]
                    i += 1
                }
                options[name] = value
            } else {
                let known = (valued.union(switches)).sorted().map { "--\($0)" }.joined(separator: " ")
                throw UsageError("unknown option --\(name) for '\(command)'", hint: "options: \(known)")
            }
        }
    }

    func flag(_ name: String) -> Bool { flags.contains(name) }

    /// A default that later readers see as if given (a command's own default for a shared option).
    mutating func setOption(_ name: String, _ value: String) { options[name] = value }

    func string(_ name: String) -> String? { options[name] }

    func int(_ name: String, default value: Int, range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let text = options[name] else { return value }
        guard let n = Int(text), range.contains(n) else {
            throw UsageError("--\(name) \(text): expected a whole number in \(range.lowerBound)...\(range.upperBound)")
        }
        return n
    }

    func double(_ name: String, default value: Double, range: ClosedRange<Double>) throws(UsageError) -> Double {
        guard let text = options[name] else { return value }
        guard let x = Double(text), range.contains(x) else {
            throw UsageError("--\(name) \(text): expected a number in \(range.lowerBound)...\(range.upperBound)")
        }
        return x
    }
}
