import Earshot
import EarshotFetch
import EarshotJSON
import Foundation

extension ModelLocator {
    /// The search path of a command's `--models DIR` (first) and the environment.
    init(_ args: Arguments) {
        self.init(modelsFolder: args.string("models"))
    }
}

/// `earshot models`: every model on the search path, and the catalog's not fetched;
/// `earshot models info NAME`: one of them; `earshot models fetch NAME`: one of the catalog's.
enum ModelsCommand {
    static func run(_ words: [String]) throws -> Int32 {
        if words.first == "info" { try info(Array(words.dropFirst())); return 0 }
        if words.first == "fetch" { return try fetch(Array(words.dropFirst())) }
        let args = try Arguments(words, spec: Specs.models)
        let locator = ModelLocator(args)
        var rows: [Row] = []
        for package in locator.packages() {
            do {
                rows.append(Row(package, try package.manifest()))
            } catch {
                // A damaged package is listed as such: the others are still worth seeing.
                printError("earshot: \(error)")
            }
        }
        let missing = notFetched(locator)
        if args.flag("json") {
            try out(jsonLine([
                "searchPath": locator.folders.map { ["path": $0.path, "origin": $0.origin.rawValue, "exists": $0.exists] },
                "models": rows.map(\.json),
                "notFetched": missing.map { e in
                    ["name": e.name, "kind": e.kind, "phrase": e.phrase ?? NSNull(), "labels": e.labels ?? NSNull(), "sampleRate": e.sampleRate ?? NSNull(),
                     "license": e.license.id, "nonCommercial": e.license.nonCommercial, "description": e.description, "author": e.author,
                     "unavailable": e.unavailable ?? NSNull()] as [String: Any]
                },
            ]))
            return 0
        }
        var table = [["name", "kind", "labels", "rate", "licence", "path", "source"]]
        for row in rows {
            table.append([row.package.name + (row.package.shadowed ? " (hidden)" : ""), row.kind.rawValue, row.labelsText,
                          "\(row.manifest.audio.sampleRate)", row.manifest.license ?? "?", row.package.url.path, row.manifest.source ?? "?"])
        }
        for e in missing {
            table.append([e.name, e.kind, e.phrase.map { "\"\($0)\"" } ?? e.labels?.joined(separator: ",") ?? "", e.sampleRate.map(String.init) ?? "",
                          e.license.id, "(not fetched)",
                          e.unavailable.map { "cannot be fetched yet: \($0)" } ?? "fetch with earshot models fetch \(e.name)"
                              + (e.license.nonCommercial ? " --accept-license (non-commercial)" : "")])
        }
        let widths = table[0].indices.map { c in table.map { $0[c].count }.max() ?? 0 }
        var lines = table.map { row in
            row.enumerated().map { c, cell in c == row.count - 1 ? cell : InspectCommand.pad(cell, widths[c] + 1) }.joined()
        }
        if rows.isEmpty && missing.isEmpty { lines = ["no models found"] }
        if rows.contains(where: \.package.shadowed) {
            lines += ["", "(hidden): a package of the same name comes earlier on the search path, and a name finds that one"]
        }
        lines += ["", "searched, in order:"] + searchPath(locator.folders)
        try out(lines.joined(separator: "\n"))
        return 0
    }

    /// `earshot models info NAME`: what `inspect` says, the kind, and where it was found.
    static func info(_ words: [String]) throws {
        let args = try Arguments(words, spec: Specs.modelsInfo)
        guard args.positionals.count == 1, let name = args.positionals.first else {
            throw UsageError("models info takes one model name or folder", hint: "earshot models info okay-nabu")
        }
        let locator = ModelLocator(args)
        let url = try locator.find(name)
        let model = try Model(contentsOf: url)
        let kind = ModelKind(model.manifest)
        // The folder of the search path it came from, when it came from one.
        let parent = url.deletingLastPathComponent().standardizedFileURL.path
        let folder = locator.folders.first { URL(fileURLWithPath: $0.path).standardizedFileURL.path == parent }
        let found = folder.map { "\($0.path) (\($0.origin.rawValue))" } ?? "the path given"
        if args.flag("json") {
            guard case var .object(fields) = try InspectCommand.json(model) else { return }
            fields["path"] = .string(url.standardizedFileURL.path)
            fields["kind"] = .string(kind.rawValue)
            fields["foundIn"] = folder.map { JSONValue.object(["path": .string($0.path), "origin": .string($0.origin.rawValue)]) } ?? .null
            try out(JSONValue.object(fields).serialized)
            return
        }
        try out(InspectCommand.text(model, notes: ["kind:      \(kind.rawValue)", "path:      \(url.standardizedFileURL.path)",
                                                   "found in:  \(found)"]))
    }

    /// A model's line of the listing.
    struct Row {
        let package: ModelLocator.Package
        let manifest: ModelManifest
        let kind: ModelKind

        init(_ package: ModelLocator.Package, _ manifest: ModelManifest) {
            self.package = package
            self.manifest = manifest
            kind = ModelKind(manifest)
        }

        /// A wake word's phrase, else its labels (the first few and how many).
        var labelsText: String {
            if let phrase = manifest.phrase { return "\"\(phrase)\"" }
            let labels = manifest.outputs.labels
            return labels.count <= 4 ? labels.joined(separator: ",") : labels.prefix(3).joined(separator: ",") + ",... (\(labels.count))"
        }

        var json: [String: Any] {
            ["name": package.name, "kind": kind.rawValue, "labels": manifest.outputs.labels, "phrase": manifest.phrase ?? NSNull(),
             "sampleRate": manifest.audio.sampleRate, "license": manifest.license ?? NSNull(), "source": manifest.source ?? NSNull(),
             "path": package.url.path, "foundIn": package.folder.origin.rawValue, "hidden": package.shadowed]
        }
    }

    /// The search path, a folder a line: its path, why it is there, and whether it is there.
    static func searchPath(_ folders: [ModelLocator.Folder]) -> [String] {
        let width = folders.map(\.path.count).max() ?? 0
        return folders.map { "  " + InspectCommand.pad($0.path, width + 2) + $0.origin.rawValue + ($0.exists ? "" : " (no such folder)") }
    }

    /// A failed lookup as a person reads it: the name, every folder searched, the names found
    /// and the near ones.
    static func failure(_ error: ModelLookupError) -> String {
        guard case let .notFound(name, searched, known, near) = error else { return "earshot: \(error)" }
        var lines = ["earshot: no model '\(name)'" + (near.isEmpty ? "" : " (did you mean \(near.joined(separator: " or "))?)"),
                     "  searched, in order:"]
        lines += searchPath(searched).map { "  " + $0 }
        lines.append(known.isEmpty ? "  no models found there" : "  models found: " + known.joined(separator: ", "))
        lines.append("  hint: earshot models lists them; -m takes a package folder's path too; earshot help models tells the search path")
        return lines.joined(separator: "\n")
    }
}
