import EarshotModel
import Foundation

/// Finds model packages by name on a search path, or by path.
///
/// A name is looked for in these folders, in order (the first that holds `NAME/model.json`
/// wins):
/// 1. `--models DIR` (`modelsFolder`), when given;
/// 2. each folder of `$EARSHOT_MODELS` (colon-separated);
/// 3. `$XDG_DATA_HOME/earshot/models` (`~/.local/share/earshot/models` when it is not set);
/// 4. `PREFIX/share/earshot/models`, where PREFIX is the parent of the folder holding the
///    executable (`/usr/bin/earshot` looks in `/usr/share/earshot/models`);
/// 5. `Models/` of the Earshot checkout the executable was built in, or the current folder's
///    when it is one (a folder with `Package.swift` and `Models/`).
///
/// A word with a slash, or a folder that holds `model.json`, is taken as a path.
public struct ModelLocator: Sendable {
    /// The model used when none is named.
    public static let defaultModel = "silero-vad"

    /// A folder of the search path and why it is on it.
    public struct Folder: Sendable, Equatable {
        /// What put a folder on the search path.
        public enum Origin: String, Sendable, CaseIterable {
            case option = "--models"
            case environment = "$EARSHOT_MODELS"
            case userData = "$XDG_DATA_HOME/earshot/models"
            case installed = "PREFIX/share/earshot/models"
            case checkout = "the checkout's Models/"
        }

        public var path: String
        public var origin: Origin

        public init(path: String, origin: Origin) {
            self.path = path
            self.origin = origin
        }

        /// Whether the folder is there.
        public var exists: Bool { isFolder(path) }
    }

    /// The folders searched, in order.
    public var folders: [Folder]

    /// A search path of these folders.
    public init(folders: [Folder]) {
        self.folders = folders
    }

    /// The search path Earshot documents (see the type's description), from the environment
    /// and the executable's place. Repeated folders are searched once, at their first place.
    public init(modelsFolder: String? = nil, environment: [String: String] = ProcessInfo.processInfo.environment,
                executable: String = ModelLocator.currentExecutable,
                currentFolder: String = FileManager.default.currentDirectoryPath) {
        var folders: [Folder] = []
        func add(_ path: String, _ origin: Folder.Origin) {
            let path = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
            if !path.isEmpty && !folders.contains(where: { $0.path == path }) { folders.append(Folder(path: path, origin: origin)) }
        }
        if let modelsFolder { add(modelsFolder, .option) }
        for path in (environment["EARSHOT_MODELS"] ?? "").split(separator: ":") { add(String(path), .environment) }
        // XDG Base Directory: a relative or empty $XDG_DATA_HOME is ignored.
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            add(data + "/earshot/models", .userData)
        } else if let home = environment["HOME"].flatMap({ $0.isEmpty ? nil : $0 }) ?? Self.homeFolder {
            add(home + "/.local/share/earshot/models", .userData)
        }
        let binary = URL(fileURLWithPath: executable).resolvingSymlinksInPath().deletingLastPathComponent()
        if binary.path != "/" {
            add(binary.deletingLastPathComponent().appendingPathComponent("share/earshot/models").path, .installed)
        }
        var url = binary
        while url.path != "/" {
            if Self.isCheckout(url.path) {
                add(url.appendingPathComponent("Models").path, .checkout)
                break
            }
            url.deleteLastPathComponent()
        }
        if Self.isCheckout(currentFolder) {
            add(URL(fileURLWithPath: currentFolder).appendingPathComponent("Models").standardizedFileURL.path, .checkout)
        }
        self.folders = folders
    }

    /// The running executable, symbolic links resolved (Linux: /proc/self/exe), else the
    /// command's first word.
    public static var currentExecutable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments.first ?? ""
    }

    static var homeFolder: String? {
        guard let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir else { return nil }
        return String(cString: dir)
    }

    /// An Earshot checkout: a folder holding `Package.swift` and `Models/`.
    static func isCheckout(_ folder: String) -> Bool {
        FileManager.default.fileExists(atPath: folder + "/Package.swift") && isFolder(folder + "/Models")
    }

    /// A package found on the search path.
    public struct Package: Sendable, Equatable {
        /// Its folder's name: what `--model NAME` finds it by.
        public var name: String
        /// Its folder.
        public var url: URL
        /// The search path's folder that holds it.
        public var folder: Folder
        /// Another package of this name comes earlier on the search path, so a name finds that one.
        public var shadowed: Bool
    }

    /// Every package on the search path, folder by folder in order, each folder's sorted by name.
    public func packages() -> [Package] {
        var found: [Package] = []
        var names: Set<String> = []
        for folder in folders {
            let entries = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).sorted()
            for name in entries where !name.hasPrefix(".") && FileManager.default.fileExists(atPath: folder.path + "/" + name + "/model.json") {
                let url = URL(fileURLWithPath: folder.path).appendingPathComponent(name)
                found.append(Package(name: name, url: url, folder: folder, shadowed: !names.insert(name).inserted))
            }
        }
        return found
    }

    /// The package folder for a name or path.
    /// - Throws: `ModelLookupError.notFound` with every folder searched, the names found and the
    ///   near ones; `.noSuchFolder` or `.notAPackage` for a path.
    public func find(_ nameOrPath: String) throws(ModelLookupError) -> URL {
        let asFolder = isFolder(nameOrPath)
        if asFolder && FileManager.default.fileExists(atPath: nameOrPath + "/model.json") {
            return URL(fileURLWithPath: nameOrPath)
        }
        if nameOrPath.contains("/") {
            throw asFolder ? .notAPackage(path: nameOrPath) : .noSuchFolder(path: nameOrPath)
        }
        if !nameOrPath.isEmpty && nameOrPath != "." && nameOrPath != ".." {
            for folder in folders {
                let candidate = URL(fileURLWithPath: folder.path).appendingPathComponent(nameOrPath)
                if FileManager.default.fileExists(atPath: candidate.appendingPathComponent("model.json").path) { return candidate }
            }
        }
        // A folder here of that name, but no package: say so rather than that the name is unknown.
        if asFolder { throw .notAPackage(path: nameOrPath) }
        var known: [String] = []
        for package in packages() where !known.contains(package.name) { known.append(package.name) }
        throw .notFound(name: nameOrPath, searched: folders, known: known.sorted(), near: Spelling.near(nameOrPath, in: known))
    }

    /// The package folder for a name or path, on the standard search path.
    public static func find(_ nameOrPath: String, environment: [String: String] = ProcessInfo.processInfo.environment,
                            executable: String = ModelLocator.currentExecutable) throws(ModelLookupError) -> URL {
        try ModelLocator(environment: environment, executable: executable).find(nameOrPath)
    }
}

/// A model name or path that leads to no package.
public enum ModelLookupError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No folder of the search path holds a package of this name; `known` are the names found,
    /// `near` those close enough to be what was meant.
    case notFound(name: String, searched: [ModelLocator.Folder], known: [String], near: [String])
    /// A path to nothing.
    case noSuchFolder(path: String)
    /// A folder without `model.json`.
    case notAPackage(path: String)

    public var description: String {
        switch self {
        case let .notFound(name, searched, _, near):
            return "no model '\(name)'" + (near.isEmpty ? "" : " (did you mean \(near.joined(separator: " or "))?)")
                + " in " + searched.map(\.path).joined(separator: ", ")
        // The same words as loading the folder gives, so each message has one form.
        case let .noSuchFolder(path): return ModelError.notFound(folder: path, file: nil).description
        case let .notAPackage(path): return ModelError.notFound(folder: path, file: "model.json").description
        }
    }
}

/// The kind of a model, from its manifest's decision and labels.
public enum ModelKind: String, Sendable, CaseIterable {
    case voiceActivity = "voice activity"
    case wakeWord = "wake word"
    case classifier
    case soundEvents = "sound events"

    /// An events rule (many labels at once): sound events; detections (a window of scores
    /// decides) or a phrase: a wake word; one of the labels (softmax): a classifier; one label of
    /// speech or voice: voice activity; else labels of their own each (sound events).
    public init(_ manifest: ModelManifest) {
        let labels = manifest.outputs.labels
        if manifest.decision?.events != nil {
            self = .soundEvents
        } else if manifest.decision?.detectionWindow != nil || manifest.phrase != nil {
            self = .wakeWord
        } else if manifest.outputs.activation == .softmax {
            self = .classifier
        } else if labels.count == 1, ["speech", "voice", "vad"].contains(labels[0].lowercased()) {
            self = .voiceActivity
        } else {
            self = .soundEvents
        }
    }
}

extension ModelLocator.Package {
    /// The package's manifest (model.json alone: the weights are not read).
    public func manifest() throws(ModelError) -> ModelManifest {
        let path = url.appendingPathComponent("model.json").path
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw .cannotRead(path: path, reason: error.localizedDescription)
        }
        do { return try JSONDecoder().decode(ModelManifest.self, from: data) } catch {
            throw .manifest(path: path, reason: "\(error)")
        }
    }
}

private func isFolder(_ path: String) -> Bool {
    var folder: ObjCBool = false
    return FileManager.default.fileExists(atPath: path, isDirectory: &folder) && folder.boolValue
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
