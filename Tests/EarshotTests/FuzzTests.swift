import CSndFile
import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot
@testable import EarshotAudio
@testable import EarshotModel
@testable import earshot

/// Seeded mutation fuzzing of everything that reads outside input: audio files, model packages
/// (model.json and safetensors), serialized states and the command line's words. Each target
/// runs `Fuzz.iterations` mutations of valid seeds (EARSHOT_FUZZ_ITERATIONS sets it; CI runs
/// the default) and must give a typed error or a correct result, never a crash or a hang. The
/// committed corpus (Tests/Fuzz/<target>/) holds the inputs that found defects; each is replayed.
enum Fuzz {
    /// The budget unit; each target runs a multiple of it that takes a few seconds in a debug
    /// build (a package load is slow, a parse of words fast).
    static let iterations = ProcessInfo.processInfo.environment["EARSHOT_FUZZ_ITERATIONS"].flatMap(Int.init) ?? 300
    static let corpus = Repo.root.appendingPathComponent("Tests/Fuzz")

    static func corpusFiles(_ target: String) throws -> [URL] {
        let folder = corpus.appendingPathComponent(target)
        return try FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)
            .filter { $0.lastPathComponent != "README.md" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }
}

/// Byte-level mutations as coverage-blind fuzzers make them: flips, interesting values, cuts,
/// repeats and splices, several at a time.
struct Mutator {
    var random: SeededRandom

    static let interesting: [UInt8] = [0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE, 0x10, 0x20]

    mutating func mutate(_ input: [UInt8]) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            guard !bytes.isEmpty else { return [UInt8.random(in: 0...255, using: &random)] }
            let at = Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<8, using: &random) {
            case 0: bytes[at] ^= 1 << UInt8.random(in: 0..<8, using: &random)
            case 1: bytes[at] = Self.interesting.randomElement(using: &random)!
            case 2:  // a 32-bit field set to an extreme (sizes and counts in headers)
                let value: UInt32 = [0, 1, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 0x0010_0000].randomElement(using: &random)!
                for i in 0..<4 where at + i < bytes.count { bytes[at + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(i))) }
            case 3: bytes.removeSubrange(at..<min(bytes.count, at + Int.random(in: 1...64, using: &random)))
            case 4: bytes = Array(bytes[0..<at])  // truncated
            case 5:  // a run repeated
                let run = Array(bytes[at..<min(bytes.count, at + Int.random(in: 1...32, using: &random))])
                bytes.insert(contentsOf: run, at: Int.random(in: 0...bytes.count, using: &random))
            case 6: bytes[at] = UInt8.random(in: 0...255, using: &random)
            default:  // random bytes inserted
                bytes.insert(contentsOf: (0..<Int.random(in: 1...16, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }, at: at)
            }
        }
        return bytes
    }
}

@Suite("Fuzzing (seeded mutations)", .serialized)
struct FuzzTests {
    /// Small valid files of every container the reader takes.
    static func audioSeeds(in folder: URL) throws -> [[UInt8]] {
        let tone = sine(frequency: 440, sampleRate: 8000, count: 800, amplitude: 0.4)
        let stereo = (0..<800).flatMap { [tone[$0], -tone[$0]] }
        var seeds: [[UInt8]] = []
        for (name, format, channels) in [("a.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1), ("b.wav", SF_FORMAT_WAV | SF_FORMAT_FLOAT, 2),
                                         ("c.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 1), ("d.ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS, 1),
                                         ("e.aiff", SF_FORMAT_AIFF | SF_FORMAT_PCM_24, 2), ("f.au", SF_FORMAT_AU | SF_FORMAT_ULAW, 1)] {
            let path = folder.appendingPathComponent(name).path
            try writeAudio(path, samples: channels == 1 ? tone : stereo, channels: channels, sampleRate: 8000, format: Int32(format))
            seeds.append(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
        }
        return seeds
    }

    /// Reads a whole file in random chunk sizes; every failure must be an AudioError.
    static func readAll(_ path: String, random: inout SeededRandom) -> Result<Int, AudioError> {
        do {
            let file = try AudioFile(path: path)
            var frames = 0
            while frames < 10_000_000 {
                let n = Int.random(in: 1...5000, using: &random)
                let chunk = Bool.random(using: &random) ? try file.readMono(maxFrames: n) : try file.readChannels(maxFrames: n)[0]
                if chunk.isEmpty { break }
                frames += chunk.count
            }
            return .success(frames)
        } catch {
            return .failure(error)
        }
    }

    @Test("The audio reader: mutated WAV, FLAC, Ogg, AIFF and AU files are read or refused with an AudioError")
    func audioReader() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let seeds = try Self.audioSeeds(in: folder)
        var mutator = Mutator(random: SeededRandom.fromEnvironment())
        let seed = mutator.random.seed
        var refused = 0
        let path = folder.appendingPathComponent("fuzz.bin").path
        let count = Fuzz.iterations * 5
        for i in 0..<count {
            let input = mutator.mutate(seeds[i % seeds.count])
            try Data(input).write(to: URL(fileURLWithPath: path))
            if case .failure = Self.readAll(path, random: &mutator.random) { refused += 1 }
        }
        for url in try Fuzz.corpusFiles("audio") {
            _ = Self.readAll(url.path, random: &mutator.random)
        }
        // Both paths were taken: the mutations reach past the first check.
        #expect(refused > 0 && refused < count, "seed \(seed): \(refused) of \(count) refused")
    }

    /// Loads a package folder and, when it loads, steps it on a little audio and restores a
    /// state. nil when all went through; else the loader's error (a ModelError: typed throws).
    static func loadAndRun(_ folder: URL) -> ModelError? {
        do {
            let model = try Model(contentsOf: folder)
            var state = model.makeState()
            var block = [Float](repeating: 0, count: model.chunkSamples)
            for i in block.indices { block[i] = Float(i % 50) / 100 - 0.25 }
            _ = try model.prediction(from: block, using: &state)
            _ = try model.restoreState(state.serialized())
            return nil
        } catch {
            return error
        }
    }

    /// Mutations that keep model.json JSON but change its values: numbers to extremes, fields
    /// removed, strings swapped.
    static func mutateManifest(_ object: Any, random: inout SeededRandom) -> Any {
        switch object {
        case var dict as [String: Any]:
            guard let key = dict.keys.sorted().randomElement(using: &random) else { return dict }
            if Int.random(in: 0..<6, using: &random) == 0 {
                dict.removeValue(forKey: key)
            } else {
                dict[key] = mutateManifest(dict[key]!, random: &random)
            }
            return dict
        case var array as [Any]:
            guard !array.isEmpty else { return array }
            let i = Int.random(in: 0..<array.count, using: &random)
            array[i] = mutateManifest(array[i], random: &random)
            if Int.random(in: 0..<8, using: &random) == 0 { array.remove(at: Int.random(in: 0..<array.count, using: &random)) }
            return array
        case is NSNumber:
            let extremes: [Any] = [0, -1, 1, 2, 3, 65537, 1 << 24, 1 << 31, Int.max, 1e18, -1e18, 1e-300, 0.5, "7", NSNull()]
            return extremes.randomElement(using: &random)!
        case is String:
            return ["", "conv1d", "lstm", "gru", "linear", "softmax", "sigmoid", "mean", "stft", "x", "hann", "reflect"]
                .randomElement(using: &random)!
        default:
            return object
        }
    }

    @Test("The package loader: mutated model.json and safetensors load and run, or are refused with a ModelError")
    func packageLoader() throws {
        let silero = Repo.root.appendingPathComponent("Tests/Fixtures/silero-vad-layers")
        let manifestData = try Data(contentsOf: silero.appendingPathComponent("model.json"))
        let manifest = try JSONSerialization.jsonObject(with: manifestData)
        let weights = Array(try Data(contentsOf: silero.appendingPathComponent("weights.safetensors")))
        let headerEnd = 8 + Int(weights.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) })
        var mutator = Mutator(random: SeededRandom.fromEnvironment())
        let seed = mutator.random.seed
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var loaded = 0
        let count = max(3, Fuzz.iterations / 3)
        for i in 0..<count {
            var manifestBytes = Array(manifestData), weightBytes = weights
            switch i % 3 {
            case 0: manifestBytes = Array(try JSONSerialization.data(withJSONObject: Self.mutateManifest(manifest, random: &mutator.random)))
            case 1: manifestBytes = mutator.mutate(manifestBytes)
            default:  // the safetensors header (where offsets, shapes and dtypes live), or anywhere
                let header = mutator.mutate(Array(weights[0..<headerEnd]))
                weightBytes = Bool.random(using: &mutator.random) ? header + weights[headerEnd...] : mutator.mutate(weights)
            }
            try Data(manifestBytes).write(to: folder.appendingPathComponent("model.json"))
            try Data(weightBytes).write(to: folder.appendingPathComponent("weights.safetensors"))
            if Self.loadAndRun(folder) == nil { loaded += 1 }
        }
        for package in try Fuzz.corpusFiles("package") {
            let reason = try String(contentsOf: package.appendingPathComponent("refused-because.txt"), encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let error = Self.loadAndRun(package)
            if reason.isEmpty {
                #expect(error == nil, "\(package.lastPathComponent): \(String(describing: error))")
            } else {
                #expect(error.map { "\($0)".contains(reason) } == true, "\(package.lastPathComponent): \(String(describing: error))")
            }
        }
        #expect(loaded < count, "seed \(seed)")
    }

    @Test("State restore: mutated and forged state bytes are refused, or restore a state that steps")
    func stateRestore() throws {
        let model = Fixtures.model
        var state = model.makeState()
        var mutator = Mutator(random: SeededRandom.fromEnvironment())
        let seed = mutator.random.seed
        for _ in 0..<10 { _ = try model.prediction(from: mutator.random.gaussian(count: 512, deviation: 0.1), using: &state) }
        let valid = state.serialized()
        var accepted = 0
        for i in 0..<(Fuzz.iterations * 10) {
            var bytes = mutator.mutate(valid)
            if i % 2 == 1, bytes.count >= 4 {
                // Forged: a correct checksum over the mutated bytes, to reach the checks after it.
                let crc = CRC32C.checksum(Array(bytes[0..<(bytes.count - 4)]))
                withUnsafeBytes(of: crc.littleEndian) { for (k, b) in $0.enumerated() { bytes[bytes.count - 4 + k] = b } }
            }
            do {
                var restored = try model.restoreState(bytes)
                _ = try model.prediction(from: [Float](repeating: 0.1, count: 512), using: &restored)
                accepted += 1
            } catch {
                // A ModelError (typed throws): refused with a reason.
            }
        }
        for url in try Fuzz.corpusFiles("state") {
            #expect(throws: ModelError.self, "\(url.lastPathComponent)") { try model.restoreState(Array(try Data(contentsOf: url))) }
        }
        // Only forged bytes that changed nothing but floats (finite) can be accepted.
        #expect(accepted < Fuzz.iterations * 5, "seed \(seed)")
    }

    @Test("The command line's parser: random words give parsed options or a usage error")
    func argumentParser() throws {
        var random = SeededRandom.fromEnvironment()
        let seed = random.seed
        let vocabulary = ["--model", "--threshold", "--pad", "--min-speech", "--max-speech", "--format", "--output", "--scores",
                          "--channels", "--", "-", "--=", "--threshold=", "--pad=1e18", "nan", "inf", "-inf", "1e309", "-5", "0",
                          "abc", "", "=", "--x", "\u{0}", "0.5", "999999999999999999999", "--scores=1", "silero-vad", "a.wav"]
        let model = Fixtures.model
        for _ in 0..<(Fuzz.iterations * 20) {
            let words = (0..<Int.random(in: 0...8, using: &random)).map { _ in vocabulary.randomElement(using: &random)! }
            do {
                let args = try Arguments(words, spec: Specs.label)
                let options = try LabelCommand.options(args, model: model)
                try options.validate()
                _ = try StreamClassifier(model: model, options: options)
            } catch is UsageError {
            } catch {
                Issue.record("seed \(seed), \(words): \(error)")
            }
        }
        // The corpus: argument lists that once crashed or were taken silently.
        for url in try Fuzz.corpusFiles("args") {
            let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let command = lines.first ?? ""
            let words = Array(lines.dropFirst()).filter { !$0.isEmpty }
            let result = try runEarshot([command] + words)
            #expect(result.status == 64, "\(url.lastPathComponent): \(result.status) \(result.err)")
        }
    }
}
