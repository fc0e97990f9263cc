import Earshot
import Foundation

/// Fetches a model of the catalog into a model folder: checks that it can be fetched and that
/// its licence is accepted, takes its downloads from the cache (or the network, each checked
/// against its SHA-256), extracts the files it names, has them imported (the caller's
/// importer: what `earshot import` makes of the catalog's arguments) or keeps them as they
/// are, and installs the result whole: everything is made in a temporary folder beside the
/// destination and renamed into place, so a failure at any point leaves the folder as it was.
public struct ModelFetcher: Sendable {
    /// What the importer is asked: `earshot import` arguments whose file names are the
    /// extracted files' paths, and the package folder to write (it does not exist yet).
    public struct ImportRequest: Sendable, Equatable {
        public var arguments: [String]
        public var output: URL
    }

    public struct Result: Sendable, Equatable {
        public var entry: ModelCatalog.Entry
        /// The installed folder.
        public var folder: URL
        /// It was there already and was left alone (no `replace`).
        public var alreadyThere: Bool
        /// An earlier copy was replaced.
        public var replaced: Bool
    }

    public var catalog: ModelCatalog
    /// The model folder installed into.
    public var destination: URL
    public var cache: DownloadCache
    public var downloader: Downloader

    public init(catalog: ModelCatalog, destination: URL, cache: DownloadCache, downloader: Downloader = Downloader()) {
        self.catalog = catalog
        self.destination = destination
        self.cache = cache
        self.downloader = downloader
    }

    /// The catalog's entry `name`, or why it cannot be fetched (unknown, not available yet, a
    /// non-commercial licence not accepted).
    public func entry(_ name: String, acceptLicense: Bool) throws(FetchError) -> ModelCatalog.Entry {
        guard let entry = catalog.entry(named: name) else {
            let known = catalog.models.map(\.name)
            throw .unknownModel(name: name, catalog: catalog.source, known: known, near: Spelling.near(name, in: known))
        }
        if let reason = entry.unavailable { throw .notAvailable(name: name, reason: reason) }
        if entry.license.nonCommercial && !acceptLicense { throw .licenseNotAccepted(name: name, license: entry.license) }
        return entry
    }

    /// Fetches `name` into `destination/name`. An existing folder of that name is left alone
    /// (`alreadyThere`) unless `replace`. `note` hears each step.
    public func fetch(_ name: String, acceptLicense: Bool, replace: Bool = false, note: (String) -> Void = { _ in },
                      importer: (ImportRequest) throws -> Void) throws(FetchError) -> Result {
        let entry = try entry(name, acceptLicense: acceptLicense)
        let fm = FileManager.default
        let target = destination.appendingPathComponent(entry.name)
        let exists = fm.fileExists(atPath: target.path)
        if exists && !replace { return Result(entry: entry, folder: target, alreadyThere: true, replaced: false) }
        do { try fm.createDirectory(at: destination, withIntermediateDirectories: true) } catch {
            throw .cannotWrite(path: destination.path, reason: error.localizedDescription)
        }
        let prefix = ".\(entry.name).fetch-"
        removeStale(in: destination, prefix: prefix)
        let work = try makeTemporary(in: destination, prefix: prefix, folder: true)
        defer { try? fm.removeItem(at: work) }

        // Each download once, from the cache or the network.
        var archives: [String: ZipArchive] = [:]
        for id in Set(entry.files.map(\.download)).sorted() {
            guard let download = catalog.downloads[id] else { throw .catalog(source: catalog.source, reason: "no download '\(id)'") }
            let file = try cache.file(for: download, using: downloader, note: note)
            do { archives[id] = try ZipArchive(contentsOf: file, name: download.url) } catch {
                throw .archive(url: download.url, reason: error.reason)
            }
        }
        let files = work.appendingPathComponent("files")
        let package = work.appendingPathComponent(entry.name)
        // Installed as they are: extracted straight into the package.
        let extractTo = entry.importArguments == nil ? package : files
        do { try fm.createDirectory(at: extractTo, withIntermediateDirectories: true) } catch {
            throw .cannotWrite(path: extractTo.path, reason: error.localizedDescription)
        }
        var paths: [String: String] = [:]
        for file in entry.files {
            guard let archive = archives[file.download], let download = catalog.downloads[file.download] else { continue }
            guard let member = archive.entry(named: file.path) else { throw .missingFile(url: download.url, path: file.path) }
            let bytes: Data
            do { bytes = try archive.contents(of: member) } catch { throw .archive(url: download.url, reason: error.reason) }
            let path = extractTo.appendingPathComponent(file.name)
            do { try bytes.write(to: path) } catch { throw .cannotWrite(path: path.path, reason: error.localizedDescription) }
            paths[file.name] = path.path
        }
        let source = entry.files.first.flatMap { catalog.downloads[$0.download] }?.url ?? catalog.source
        if let arguments = entry.importArguments {
            note("importing \(entry.files.map(\.name).joined(separator: ", "))")
            let request = ImportRequest(arguments: arguments.map { paths[$0] ?? $0 }, output: package)
            do { try importer(request) } catch { throw .importFailed(name: entry.name, url: source, error: error) }
        }
        let notice = package.appendingPathComponent("LICENSE")
        if !fm.fileExists(atPath: notice.path) {
            do { try Data(licenseNotice(entry).utf8).write(to: notice) } catch {
                throw .cannotWrite(path: notice.path, reason: error.localizedDescription)
            }
        }
        // Into place: the old copy (when replacing) moved aside into the work folder, removed with it.
        if exists {
            guard rename(target.path, work.appendingPathComponent("replaced").path) == 0 else {
                throw .cannotWrite(path: target.path, reason: String(cString: strerror(errno)))
            }
        }
        guard rename(package.path, target.path) == 0 else {
            let reason = String(cString: strerror(errno))
            if exists { _ = rename(work.appendingPathComponent("replaced").path, target.path) }
            throw .cannotWrite(path: target.path, reason: reason)
        }
        return Result(entry: entry, folder: target, alreadyThere: false, replaced: exists)
    }

    /// The LICENSE file of a fetched package: the model, its licence and where it came from.
    func licenseNotice(_ entry: ModelCatalog.Entry) -> String {
        var lines = ["\(entry.name): \(entry.description)", "Author: \(entry.author)",
                     "Licence: \(entry.license.name) (\(entry.license.id)), \(entry.license.url)", entry.license.summary, "",
                     "Fetched by earshot models fetch from:"]
        for file in entry.files {
            guard let d = catalog.downloads[file.download] else { continue }
            lines.append("  \(file.path) in \(d.url) (version \(d.version), SHA-256 \(d.sha256))")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
