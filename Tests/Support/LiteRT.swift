import Foundation

/// TFLite's reference kernels through ai-edge-litert, for interop tests: the Python of
/// tools/.venv (or $EARSHOT_PYTHON) when it has the package. Tests that need it are enabled only
/// where it is, and say so when skipped.
public enum LiteRT {
    /// tools/.venv/bin/python or $EARSHOT_PYTHON, when it imports ai_edge_litert.
    public static let python: String? = {
        let candidates = [ProcessInfo.processInfo.environment["EARSHOT_PYTHON"], Repo.path("tools/.venv/bin/python")].compactMap { $0 }
        return candidates.first { path in
            guard FileManager.default.isExecutableFile(atPath: path) else { return false }
            let p = Process()
            p.executableURL = URL(fileURLWithPath: path)
            p.arguments = ["-c", "import ai_edge_litert.interpreter"]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            guard (try? p.run()) != nil else { return false }
            p.waitUntilExit()
            return p.terminationStatus == 0
        }
    }()

    /// Why a test that needs it is skipped.
    public static let missing = "no Python with ai-edge-litert (tools/.venv/bin/python or $EARSHOT_PYTHON)"

    /// The output codes of a microWakeWord .tflite under TFLite's reference kernels, step after
    /// step from a fresh interpreter, given each step's int8 input codes one after another
    /// (tools/microwakeword_tflite_outputs.py).
    public static func microWakeWordOutputs(model: String, inputs: [Int8]) throws -> [Int] {
        guard let python else { throw FixtureError(message: missing) }
        let features = try Repo.temporaryFolder().appendingPathComponent("features.int8")
        defer { try? FileManager.default.removeItem(at: features.deletingLastPathComponent()) }
        try Data(inputs.map { UInt8(bitPattern: $0) }).write(to: features)
        let p = Process(), out = Pipe()
        p.executableURL = URL(fileURLWithPath: python)
        p.arguments = [Repo.path("tools/microwakeword_tflite_outputs.py"), model, features.path]
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0, let result = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              let outputs = result["outputs"] as? [Int] else {
            throw FixtureError(message: "tools/microwakeword_tflite_outputs.py on \(model) failed (status \(p.terminationStatus))")
        }
        return outputs
    }
}
