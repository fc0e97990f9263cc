import Earshot
import Foundation

/// `--precision` and `EARSHOT_BF16_PATH`: the arithmetic of the models' products.
enum PrecisionOption {
    static let spec = OptionSpec.text("precision", "fp32|bf16|NAME=P,...", default: "the model's (fp32)",
                                      "the arithmetic of a graph's products: bf16 stores the weights as bf16 and multiplies in bf16 with "
                                      + "fp32 sums (AMX tiles, AVX-512 BF16 or a portable path, by CPUID; EARSHOT_BF16_PATH=portable|avx512|amx "
                                      + "chooses one), everything else stays fp32; NAME=P for one model")

    /// The precision --precision gives the model asked for as `name` (found at `folder`): nil
    /// when none is given for it (the model's own).
    static func precision(_ args: Arguments, name: String, folder: URL) throws(UsageError) -> Precision? {
        guard let text = args.string("precision") else { return nil }
        func parse(_ value: String) throws(UsageError) -> Precision {
            guard let p = Precision(rawValue: value) else {
                throw UsageError("--precision \(text): '\(value)' is not fp32 or bf16", hint: "--precision bf16, or --precision silero-vad=bf16")
            }
            return p
        }
        guard text.contains("=") else { return try parse(text) }
        var found: Precision?
        for pair in text.split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw UsageError("--precision \(text): expected P or NAME=P,... with P fp32 or bf16") }
            let p = try parse(parts[1])
            if parts[0] == name || parts[0] == folder.lastPathComponent { found = p }
        }
        return found
    }

    /// The model `name` found by `locator`, loaded with the precision --precision gives it (and
    /// `stepSamples`, a window stream's hop for this run, when given).
    static func load(_ args: Arguments, _ locator: ModelLocator, _ name: String, stepSamples: Int? = nil) throws -> Model {
        let folder = try locator.find(name)
        return try Model(contentsOf: folder, precision: try precision(args, name: name, folder: folder), stepSamples: stepSamples)
    }

    /// Chooses the bf16 path of the process from `EARSHOT_BF16_PATH` (portable, avx512 or amx)
    /// and the int8 path from `EARSHOT_INT8_PATH` (portable, avx512, vnni or amx), when they are
    /// set: a name not known, or a path this CPU (or kernel) does not allow, is a usage error
    /// naming the paths there are.
    static func choosePath(environment: [String: String] = ProcessInfo.processInfo.environment) throws(UsageError) {
        if let path = try chosen("EARSHOT_BF16_PATH", environment, all: Precision.Path.allCases, here: Precision.paths, name: \.name) {
            Precision.use(path)
        }
        if let path = try chosen("EARSHOT_INT8_PATH", environment, all: Quantized.Path.allCases, here: Quantized.paths, name: \.name) {
            Quantized.use(path)
        }
    }

    /// The path `variable` names among `all`, nil when it is not set.
    private static func chosen<P: Equatable>(_ variable: String, _ environment: [String: String], all: [P], here: [P],
                                             name: (P) -> String) throws(UsageError) -> P? {
        guard let given = environment[variable], !given.isEmpty else { return nil }
        let names = here.map(name).joined(separator: ", ")
        guard let path = all.first(where: { name($0) == given }) else {
            let known = all.map(name)
            throw UsageError("\(variable)=\(given): expected \(known.dropLast().joined(separator: ", ")) or \(known.last ?? "")",
                             hint: "this machine has \(names)")
        }
        guard here.contains(path) else {
            throw UsageError("\(variable)=\(given): this machine does not allow the \(given) path", hint: "it has \(names)")
        }
        return path
    }
}
