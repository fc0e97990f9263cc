import Foundation

/// Finds a model package by name or path: a folder path as given; else NAME under
/// `$EARSHOT_MODELS`; else NAME under `Models/` in the current folder or beside the executable.
public enum ModelLocator {
    /// The model used when none is named.
    public static let defaultModel = "silero-vad"

    /// The package folder for a name or path.
    /// - Throws: `ModelError.cannotRead` when no folder of that name is in any of the places searched.
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

extension Model {
    /// The packages that come with Earshot, in its own source tree (`Models/`): found from this
    /// file's place in the checkout, so a package that depends on Earshot loads them by name
    /// without knowing where SwiftPM put the checkout.
    public static let bundledFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Models")

    /// The names of the bundled packages.
    public static var bundledNames: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: bundledFolder.path)) ?? [])
            .filter { FileManager.default.fileExists(atPath: bundledFolder.appendingPathComponent($0).appendingPathComponent("model.json").path) }
            .sorted()
    }

    /// A bundled package by name (`Model.bundled("silero-vad")`, `"okay-nabu"`, ...).
    public static func bundled(_ name: String) throws(ModelError) -> Model {
        guard !name.isEmpty, !name.contains("/"), name != "..", bundledNames.contains(name) else {
            throw .cannotRead(path: name, reason: "no bundled model of that name (bundled: \(bundledNames.joined(separator: ", ")))")
        }
        return try Model(contentsOf: bundledFolder.appendingPathComponent(name))
    }
}
