import Foundation

/// Finds a model package by name or path: a folder path as given; else NAME under
/// `$EARSHOT_MODELS`; else NAME under `Models/` in the current folder or beside the executable.
public enum ModelLocator {
    public static let defaultModel = "silero-vad"

    public static func find(_ nameOrPath: String, environment: [String: String] = ProcessInfo.processInfo.environment,
                            executable: String = CommandLine.arguments.first ?? "") throws(ModelError) -> URL {
        let fm = FileManager.default
        var isFolder: ObjCBool = false
        if fm.fileExists(atPath: nameOrPath, isDirectory: &isFolder), isFolder.boolValue {
            return URL(fileURLWithPath: nameOrPath)
        }
        var searched: [String] = []
        if let root = environment["EARSHOT_MODELS"] { searched.append(root) }
        searched.append("Models")
        var url = URL(fileURLWithPath: executable).resolvingSymlinksInPath()
        while url.path != "/" {
            url.deleteLastPathComponent()
            searched.append(url.appendingPathComponent("Models").path)
        }
        for root in searched {
            let candidate = URL(fileURLWithPath: root).appendingPathComponent(nameOrPath)
            if fm.fileExists(atPath: candidate.appendingPathComponent("model.json").path) { return candidate }
        }
        throw .cannotRead(path: nameOrPath, reason: "no model folder of that name in $EARSHOT_MODELS, ./Models or the Models folder beside earshot")
    }
}
