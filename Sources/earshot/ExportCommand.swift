import Earshot
import EarshotTraining
import Foundation

/// A package that has no form in the format asked for (exit 65, as damaged data).
struct ExportRefused: Error, CustomStringConvertible {
    let description: String
}

/// `earshot export MODEL --format microwakeword -o NAME.tflite`: a package as the files another
/// runtime loads (here NAME.tflite and NAME.json for ESPHome's micro_wake_word and pymicro-wakeword).
enum ExportCommand {
    static func run(_ words: [String]) throws {
        let args = try Arguments(words, spec: Specs.export)
        guard args.positionals.count == 1, let name = args.positionals.first else {
            throw UsageError("export takes one model name or folder", hint: "earshot export okay-nabu --format microwakeword -o okay_nabu.tflite")
        }
        guard let output = args.string("output"), output.hasSuffix(".tflite"), output.count > 7 else {
            throw UsageError("export needs --output NAME.tflite", hint: "earshot export --help")
        }
        let folder = try ModelLocator(args).find(name)
        let tflite = URL(fileURLWithPath: output)
        let json = tflite.deletingPathExtension().appendingPathExtension("json")
        let files: MicroWakeWordExport.Files
        do {
            files = try MicroWakeWordExport.export(package: folder, modelFile: tflite.lastPathComponent)
        } catch let error as TrainingError { throw ExportRefused(description: "\(error)") }
        // Both files written whole before either is renamed into place.
        let model = try OutputFile.open(tflite.path), manifestFile = try OutputFile.open(json.path)
        try model.write(bytes: files.tflite)
        try manifestFile.write(bytes: files.json)
        try model.commit()
        try manifestFile.commit()
        try out("wrote \(tflite.path) (\(files.tflite.count) bytes) and \(json.path) (tensor arena \(files.arenaBytes) bytes)")
    }
}
