import Earshot
import EarshotFetch
import Foundation

/// `earshot models fetch NAME...`: models of the catalog that Earshot does not ship, fetched,
/// imported and installed into the user's model folder.
extension ModelsCommand {
    static func fetch(_ words: [String]) throws -> Int32 {
        let args = try Arguments(words, spec: Specs.modelsFetch)
        guard !args.positionals.isEmpty else {
            throw UsageError("models fetch takes the names of models in the catalog", hint: "earshot models lists them; earshot models fetch oww-alexa --accept-license")
        }
        let locator = ModelLocator(args)
        let catalog = try catalog(args.string("catalog"), locator: locator)
        guard let destination = args.string("models").map({ URL(fileURLWithPath: $0) }) ?? locator.folders.first(where: { $0.origin == .userData }).map({ URL(fileURLWithPath: $0.path) }) else {
            throw UsageError("no folder to install into: neither $XDG_DATA_HOME nor $HOME is set", hint: "give one with --models DIR")
        }
        guard let cache = DownloadCache.standardFolder() else {
            throw UsageError("no cache folder for downloads: neither $XDG_CACHE_HOME nor $HOME is set", hint: "set XDG_CACHE_HOME=/var/cache/earshot")
        }
        let fetcher = ModelFetcher(catalog: catalog, destination: destination, cache: DownloadCache(folder: cache))
        let quiet = args.flag("quiet")
        var code: Int32 = 0
        // Each name alone: one that fails is reported and the others are still fetched.
        for name in args.positionals {
            do {
                let entry = try fetcher.entry(name, acceptLicense: args.flag("accept-license"))
                if entry.license.nonCommercial && !quiet {
                    printError("\(name): \(entry.license.name) (\(entry.license.id)), accepted with --accept-license: \(entry.license.summary) \(entry.license.url)")
                }
                let result = try fetcher.fetch(name, acceptLicense: args.flag("accept-license"), replace: args.flag("force"),
                                               note: { if !quiet { printError("\(name): \($0)") } },
                                               importer: { request in _ = try ImportCommand.importPackage(request.arguments + ["--output", request.output.path]) })
                if result.alreadyThere {
                    try out("\(name): already in \(result.folder.path) (--force fetches it again)")
                } else {
                    try out("\(name): \(result.replaced ? "fetched again" : "fetched") into \(result.folder.path) (\(describe(entry)))")
                }
            } catch {
                printError("earshot: \(error)")
                if code == 0 { code = ExitCode.of(error) }
            }
        }
        return code
    }

    /// The catalog named by `--catalog` (a path or URL), else `catalog.json` of the installed
    /// models folder (PREFIX/share/earshot/models) or of the checkout's Models/.
    static func catalog(_ given: String?, locator: ModelLocator) throws -> ModelCatalog {
        if let given { return try ModelCatalog.load(given) }
        let places = locator.folders.filter { $0.origin == .installed || $0.origin == .checkout }.map { $0.path + "/catalog.json" }
        guard let path = places.first(where: { FileManager.default.fileExists(atPath: $0) }) else { throw FetchError.noCatalog(searched: places) }
        return try ModelCatalog.read(path: path)
    }

    /// A catalog entry's kind and what it hears, and its licence.
    static func describe(_ entry: ModelCatalog.Entry) -> String {
        [entry.kind, entry.phrase.map { "\"\($0)\"" }, entry.license.id].compactMap { $0 }.joined(separator: ", ")
    }

    /// The folder where a catalog entry is found on the search path: a package of its name,
    /// or (files installed as they are) a folder of its name holding them.
    static func fetched(_ entry: ModelCatalog.Entry, in locator: ModelLocator) -> URL? {
        let needed = entry.importArguments == nil ? entry.files.map(\.name) : ["model.json"]
        for folder in locator.folders {
            let url = URL(fileURLWithPath: folder.path).appendingPathComponent(entry.name)
            if needed.allSatisfy({ FileManager.default.fileExists(atPath: url.appendingPathComponent($0).path) }) { return url }
        }
        return nil
    }

    /// The catalog's entries not found on the search path, for the listing; a catalog that
    /// cannot be read is said on stderr and leaves the listing as it is.
    static func notFetched(_ locator: ModelLocator) -> [ModelCatalog.Entry] {
        do {
            return try catalog(nil, locator: locator).models.filter { fetched($0, in: locator) == nil }
        } catch FetchError.noCatalog {
            return []
        } catch {
            printError("earshot: \(error)")
            return []
        }
    }
}
