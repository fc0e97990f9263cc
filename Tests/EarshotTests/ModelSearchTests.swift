import Earshot
import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

/// A package `name` in `folder`: a copy of a bundled one (`from`).
private func installPackage(_ from: String, as name: String, in folder: URL) throws {
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    try FileManager.default.copyItem(atPath: Repo.path("Models/\(from)"), toPath: folder.appendingPathComponent(name).path)
}

/// Runs `binary` in `folder` with exactly `environment` (PATH added), as a shell a user opens would.
private func run(_ binary: URL, _ arguments: [String], in folder: URL, environment: [String: String]) throws -> (status: Int32, out: String, err: String) {
    let process = Process()
    process.executableURL = binary
    process.arguments = arguments
    process.currentDirectoryURL = folder
    process.environment = environment.merging(["PATH": "/usr/bin:/bin"]) { a, _ in a }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    let errData = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
}

@Suite("Models by name, wherever earshot is installed")
struct ModelSearchTests {
    /// A fake install tree: PREFIX/bin/earshot (the built tool, copied), a home folder, and
    /// folders for each place a model can be.
    struct Install {
        let root: URL
        var prefix: URL { root.appendingPathComponent("prefix") }
        var binary: URL { prefix.appendingPathComponent("bin/earshot") }
        var home: URL { root.appendingPathComponent("home") }
        var installed: URL { prefix.appendingPathComponent("share/earshot/models") }
        var xdg: URL { root.appendingPathComponent("xdg") }
        var xdgModels: URL { xdg.appendingPathComponent("earshot/models") }
        var homeModels: URL { home.appendingPathComponent(".local/share/earshot/models") }
        var env1: URL { root.appendingPathComponent("env1") }
        var env2: URL { root.appendingPathComponent("env2") }
        var option: URL { root.appendingPathComponent("option") }
        var work: URL { root.appendingPathComponent("work") }

        init() throws {
            root = try Repo.temporaryFolder()
            for folder in [prefix.appendingPathComponent("bin"), home, work] {
                try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            }
            try FileManager.default.copyItem(at: earshotBinary, to: binary)
        }

        func run(_ arguments: [String], _ environment: [String: String] = [:]) throws -> (status: Int32, out: String, err: String) {
            try ModelSearchTests.runIn(self, arguments, environment)
        }
    }

    static func runIn(_ install: Install, _ arguments: [String], _ environment: [String: String]) throws -> (status: Int32, out: String, err: String) {
        try run(install.binary, arguments, in: install.work, environment: ["HOME": install.home.path].merging(environment) { $1 })
    }

    @Test("A copied binary finds the default model in PREFIX/share/earshot/models: the README's first command works outside the checkout")
    func copiedBinaryFindsItsDefault() throws {
        let install = try Install()
        defer { try? FileManager.default.removeItem(at: install.root) }
        let sample = Repo.path("AudioSamples/speech-noise-16k.wav")
        let before = try install.run(["label", "-f", "csv", sample])
        #expect(before.status == 66 && before.err.contains("no model 'silero-vad'"), "\(before.err)")
        try installPackage(ModelLocator.defaultModel, as: ModelLocator.defaultModel, in: install.installed)
        let after = try install.run(["label", "-f", "csv", sample])
        let inCheckout = try runEarshot(["label", "-f", "csv", "AudioSamples/speech-noise-16k.wav"])
        #expect(after.status == 0, "\(after.err)")
        #expect(after.out == inCheckout.out.replacingOccurrences(of: "AudioSamples/speech-noise-16k.wav", with: sample))
    }

    @Test("$EARSHOT_MODELS (each of its folders), $XDG_DATA_HOME, ~/.local/share and PREFIX/share each find a model; in that order")
    func eachPlaceAndTheirOrder() throws {
        let install = try Install()
        defer { try? FileManager.default.removeItem(at: install.root) }
        try installPackage("okay-nabu", as: "in-env2", in: install.env2)
        try installPackage("okay-nabu", as: "in-xdg", in: install.xdgModels)
        try installPackage("okay-nabu", as: "in-home", in: install.homeModels)
        try installPackage("okay-nabu", as: "in-prefix", in: install.installed)
        let environment = ["EARSHOT_MODELS": install.env1.path + ":" + install.env2.path, "XDG_DATA_HOME": install.xdg.path]
        func info(_ name: String, _ environment: [String: String], _ extra: [String] = []) throws -> [String: Any] {
            let r = try install.run(["models", "info", name, "--json"] + extra, environment)
            #expect(r.status == 0, "\(name): \(r.err)")
            return try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any] ?? [:]
        }
        func origin(_ json: [String: Any]) -> String? { (json["foundIn"] as? [String: Any])?["origin"] as? String }
        #expect(try info("in-env2", environment)["path"] as? String == install.env2.appendingPathComponent("in-env2").path)
        #expect(origin(try info("in-env2", environment)) == "$EARSHOT_MODELS")
        #expect(try info("in-xdg", environment)["path"] as? String == install.xdgModels.appendingPathComponent("in-xdg").path)
        // Without $XDG_DATA_HOME: ~/.local/share/earshot/models.
        #expect(try info("in-home", [:])["path"] as? String == install.homeModels.appendingPathComponent("in-home").path)
        #expect(try info("in-prefix", environment)["path"] as? String == install.installed.appendingPathComponent("in-prefix").path)
        #expect(origin(try info("in-prefix", environment)) == "PREFIX/share/earshot/models")
        let labelled = try install.run(["label", "-f", "csv", "-m", "in-xdg", Repo.path("Tests/EarshotTests/Goldens/microwakeword/wake-words.wav")], environment)
        #expect(labelled.status == 0 && labelled.out.contains(",Okay Nabu,1.530,"), "\(labelled.err)")

        // One name in every place: --models, then $EARSHOT_MODELS in its order, then $XDG_DATA_HOME, then PREFIX.
        for folder in [install.option, install.env1, install.env2, install.xdgModels, install.installed] {
            try installPackage("silero-vad", as: "same", in: folder)
        }
        var expected = [install.option, install.env1, install.env2, install.xdgModels, install.installed]
        var env = environment
        while let first = expected.first {
            let extra = first == install.option ? ["--models", install.option.path] : []
            #expect(try info("same", env, extra)["path"] as? String == first.appendingPathComponent("same").path, "\(first.path)")
            expected.removeFirst()
            if first == install.option { continue }
            try FileManager.default.removeItem(at: first.appendingPathComponent("same"))
            if first == install.xdgModels { env["XDG_DATA_HOME"] = nil }
        }
        // The listing: every package found, the later of one name marked hidden.
        try installPackage("silero-vad", as: "same", in: install.xdgModels)
        try installPackage("silero-vad", as: "same", in: install.installed)
        env["XDG_DATA_HOME"] = install.xdg.path
        let listed = try install.run(["models", "--json"], env)
        let json = try JSONSerialization.jsonObject(with: Data(listed.out.utf8)) as? [String: Any]
        let models = json?["models"] as? [[String: Any]] ?? []
        let same = models.filter { $0["name"] as? String == "same" }
        #expect(same.map { $0["path"] as? String } == [install.xdgModels.appendingPathComponent("same").path, install.installed.appendingPathComponent("same").path])
        #expect(same.map { $0["hidden"] as? Bool } == [false, true])
        let nabu = models.first { $0["name"] as? String == "in-prefix" }
        #expect(nabu?["kind"] as? String == "wake word" && nabu?["phrase"] as? String == "Okay Nabu" && nabu?["sampleRate"] as? Int == 16000
                && nabu?["license"] as? String == "Apache-2.0" && (nabu?["source"] as? String)?.contains("okay_nabu.tflite") == true)
        #expect(same.first?["kind"] as? String == "voice activity")
        let searched = (json?["searchPath"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
        #expect(searched == [install.env1.path, install.env2.path, install.xdgModels.path, install.installed.path])
    }

    @Test("A name found nowhere: exit 66, every folder searched, the models found and the near name (okay-nabo: okay-nabu)")
    func failureListsPathsAndNearNames() throws {
        let install = try Install()
        defer { try? FileManager.default.removeItem(at: install.root) }
        try installPackage("okay-nabu", as: "okay-nabu", in: install.installed)
        try installPackage("alexa", as: "alexa", in: install.xdgModels)
        let environment = ["EARSHOT_MODELS": install.env1.path, "XDG_DATA_HOME": install.xdg.path]
        let r = try install.run(["label", "-m", "okay-nabo", "--models", install.option.path, Repo.path("AudioSamples/speech-8k.wav")], environment)
        #expect(r.status == 66)
        #expect(r.err.contains("no model 'okay-nabo' (did you mean okay-nabu?)"), "\(r.err)")
        for (folder, origin) in [(install.option, "--models"), (install.env1, "$EARSHOT_MODELS"), (install.xdgModels, "$XDG_DATA_HOME/earshot/models"),
                                 (install.installed, "PREFIX/share/earshot/models")] {
            #expect(r.err.contains(folder.path) && r.err.contains(origin), "\(folder.path) \(origin)")
        }
        #expect(r.err.contains("models found: alexa, okay-nabu"))
        // A path is a path: no search, and what is wrong with it.
        let missing = try install.run(["inspect", "./no-such"], environment)
        #expect(missing.status == 66 && missing.err.contains("./no-such: no such model folder"), "\(missing.err)")
        let notPackage = try install.run(["inspect", install.env2.deletingLastPathComponent().path], environment)
        #expect(notPackage.status == 66 && notPackage.err.contains("no model.json in ") && notPackage.err.contains(": not a model package (a package holds model.json"), "\(notPackage.err)")
    }

    @Test("The search path as the library builds it: each place in order, repeated folders once, the checkout's Models/ last")
    func searchPathInOrder() throws {
        let locator = ModelLocator(modelsFolder: "/opt/m", environment: ["EARSHOT_MODELS": "/a:/b/::/a", "XDG_DATA_HOME": "/x", "HOME": "/h"],
                                   executable: "/usr/bin/earshot", currentFolder: Repo.root.path)
        #expect(locator.folders == [.init(path: "/opt/m", origin: .option), .init(path: "/a", origin: .environment), .init(path: "/b", origin: .environment),
                                    .init(path: "/x/earshot/models", origin: .userData), .init(path: "/usr/share/earshot/models", origin: .installed),
                                    .init(path: Repo.path("Models"), origin: .checkout)])
        // A relative $XDG_DATA_HOME is ignored (the XDG rule): the home folder's.
        let relative = ModelLocator(environment: ["XDG_DATA_HOME": "rel", "HOME": "/h"], executable: "/usr/local/bin/earshot", currentFolder: "/")
        #expect(relative.folders.map(\.path) == ["/h/.local/share/earshot/models", "/usr/local/share/earshot/models"])
        // Built in a checkout: its Models/, wherever the current folder is.
        let built = ModelLocator(environment: ["HOME": "/h"], executable: Repo.path(".build/debug/earshot"), currentFolder: "/")
        #expect(built.folders.last == .init(path: Repo.path("Models"), origin: .checkout))
        #expect(Spelling.near("okay-nabo", in: ["alexa", "okay-nabu", "hey-jarvis"]) == ["okay-nabu"])
    }
}
