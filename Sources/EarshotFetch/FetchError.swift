/// Why a model from the catalog could not be fetched. Each case names the catalog, the URL or
/// the file, and the reason; `earshot models fetch` maps them to exit codes (`kind`).
public enum FetchError: Error, CustomStringConvertible {
    /// The catalog could not be read, or says something it may not (a missing field, a bad hash).
    case catalog(source: String, reason: String)
    /// No catalog was found: the places looked in.
    case noCatalog(searched: [String])
    /// The catalog has no model of this name; `near` are names close to it.
    case unknownModel(name: String, catalog: String, known: [String], near: [String])
    /// The catalog lists the model but it cannot be fetched yet: why.
    case notAvailable(name: String, reason: String)
    /// A non-commercial licence not accepted with `--accept-license`.
    case licenseNotAccepted(name: String, license: ModelCatalog.License)
    /// The download failed: the network, the server's answer, or no `curl` to fetch with.
    case download(url: String, reason: String)
    /// The download was larger than the catalog says it is: stopped there.
    case tooLarge(url: String, limit: Int)
    /// The bytes downloaded are not the ones the catalog names.
    case hashMismatch(url: String, expected: String, found: String, bytes: Int)
    /// The archive is damaged, or lacks a file the catalog names.
    case archive(url: String, reason: String)
    case missingFile(url: String, path: String)
    /// A file or folder could not be written (the cache, the model folder).
    case cannotWrite(path: String, reason: String)
    /// The import of the extracted files failed: the model's name, the files' source, and the
    /// importer's own error.
    case importFailed(name: String, url: String, error: any Error)

    /// What kind of failure it is, for an exit code.
    public enum Kind: Sendable {
        /// The catalog or the name given (usage), the data (damaged, not what was published),
        /// a missing input, the network or the server, a place that cannot be written.
        case usage, badData, noInput, unavailable, cannotCreate, imported
    }

    public var kind: Kind {
        switch self {
        case .catalog: return .badData
        case .noCatalog, .unknownModel: return .noInput
        case .notAvailable, .download: return .unavailable
        case .licenseNotAccepted: return .usage
        case .tooLarge, .hashMismatch, .archive, .missingFile: return .badData
        case .cannotWrite: return .cannotCreate
        case .importFailed: return .imported
        }
    }

    public var description: String {
        switch self {
        case let .catalog(source, reason): return "\(source): \(reason)"
        case let .noCatalog(searched):
            return "no model catalog (catalog.json) in " + searched.joined(separator: ", ") + "; name one with --catalog FILE|URL"
        case let .unknownModel(name, catalog, known, near):
            return "no model '\(name)' in the catalog \(catalog)" + (near.isEmpty ? "" : " (did you mean \(near.joined(separator: " or "))?)")
                + (known.isEmpty ? "" : "; it lists " + known.joined(separator: ", "))
        case let .notAvailable(name, reason): return "\(name) cannot be fetched yet: \(reason)"
        case let .licenseNotAccepted(name, license):
            return "\(name) is licensed \(license.name) (\(license.id)), which does not allow commercial use: \(license.summary) "
                + "Its terms: \(license.url). Fetch it with --accept-license to accept them."
        case let .download(url, reason): return "\(url): download failed: \(reason)"
        case let .tooLarge(url, limit): return "\(url): more than the \(limit) bytes the catalog says it has; stopped there, nothing kept"
        case let .hashMismatch(url, expected, found, bytes):
            return "\(url): the \(bytes) bytes downloaded have SHA-256 \(found), not the catalog's \(expected); nothing kept"
        case let .archive(url, reason): return "\(url): \(reason)"
        case let .missingFile(url, path): return "\(url): no \(path) in it (the catalog names it)"
        case let .cannotWrite(path, reason): return "\(path): cannot write: \(reason)"
        case let .importFailed(name, url, error): return "\(name): the import of the files from \(url) failed: \(error)"
        }
    }
}
