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

    /// The model `name` found by `locator`, loaded with the precision --precision gives it.
    static func load(_ args: Arguments, _ locator: ModelLocator, _ name: String) throws -> Model {
        let folder = try locator.find(name)
        return try Model(contentsOf: folder, precision: try precision(args, name: name, folder: folder))
    }

    /// Chooses the bf16 path of the process from `EARSHOT_BF16_PATH` (portable, avx512 or amx),
    /// when it is set: a name not known, or a path this CPU (or kernel) does not allow, is a
    /// usage error naming the paths there are.
    static func choosePath(environment: [String: String] = ProcessInfo.processInfo.environment) throws(UsageError) {
        guard let name = environment["EARSHOT_BF16_PATH"], !name.isEmpty else { return }
        let here = Precision.paths.map(\.name).joined(separator: ", ")
        guard let path = Precision.Path(name: name) else {
            throw UsageError("EARSHOT_BF16_PATH=\(name): expected portable, avx512 or amx", hint: "this machine has \(here)")
        }
        guard Precision.paths.contains(path) else {
            throw UsageError("EARSHOT_BF16_PATH=\(name): this machine does not allow the \(name) path", hint: "it has \(here)")
        }
        Precision.use(path)
    }
}
