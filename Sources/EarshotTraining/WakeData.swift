import EarshotAudio
import EarshotModel
import Foundation

/// A wake phrase's data set made from its text on this machine: the phrase said by every voice
/// found (`WakeVoiceInventory.sweep`), negatives (distractors said by the same voices, real
/// speech without the phrase's words, generated noise and music), and two streams of the
/// held-out voices for false accepts. Every fifth voice of each engine is held out: never in
/// training.
///
/// Written as a folder `earshot train` reads:
///
///     train/<label>/<voice>.wav      the phrase (16 kHz mono), train/other/... the negatives
///     test/<label>/..., test/other/   the held-out voices
///     stream.wav, stream.truth.csv   each held-out take after a distractor, 1-2 s apart, over quiet noise
///     distractors.wav, none.truth.csv the held-out distractors alone
///     recipe.txt                     what made it (a folder with the same recipe is reused)
public struct WakeDataSet: Sendable {
    /// What to make.
    public struct Recipe: Sendable, Equatable {
        public var phrase: String
        public var voices: [WakeVoice]
        /// Folders of real speech used as negatives (files naming a word of the phrase left out).
        public var negatives: [String] = []
        /// Distractors each training voice says (a held-out voice says one).
        public var distractorsPerVoice = 3
        /// Generated noise clips and music clips among the negatives.
        public var noiseClips = 40, musicClips = 20
        public var seed: UInt64 = 1

        public init(phrase: String, voices: [WakeVoice]) {
            self.phrase = phrase
            self.voices = voices
        }

        /// The phrase's label: its words in lower case joined by dashes ("hey-earshot").
        public var label: String { WakeDataSet.words(of: phrase).joined(separator: "-") }

        /// A text that changes when anything that makes the set changes.
        public var key: String {
            (["phrase \(phrase)", "seed \(seed)", "distractors \(distractorsPerVoice)", "noise \(noiseClips)", "music \(musicClips)"]
                + negatives.map { "negatives \($0)" } + voices.map { "voice \($0.name) \($0.voice)" }).joined(separator: "\n") + "\n"
        }
    }

    /// What was made.
    public var folder: String
    public var label: String
    /// Takes of the phrase and negatives, in training and held out.
    public var trainingTakes = 0, heldOutTakes = 0, trainingNegatives = 0, heldOutNegatives = 0
    /// Negatives of each kind in training: distractors, real speech, noise, music.
    public var distractors = 0, speech = 0, noise = 0, music = 0
    /// Seconds of the two streams.
    public var streamSeconds = 0.0, distractorSeconds = 0.0
    /// Takes a voice could not say, with the reason (the others go on).
    public var failures: [String] = []
    /// Whether an existing folder with the same recipe was used as it was.
    public var reused = false

    /// The phrase's words: lower case, letters, digits and apostrophes.
    public static func words(of phrase: String) -> [String] {
        phrase.lowercased().split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "'") }).map(String.init)
    }

    /// Other wake phrases and everyday sentences every phrase is trained against.
    public static let commonDistractors = [
        "hey siri", "okay nabu", "hey jarvis", "alexa", "hey mycroft", "okay google", "hey there", "hey you", "hello",
        "the meeting moved to thursday afternoon", "please pass the salt and pepper", "turn left at the second light",
        "my brother bought a new bicycle", "it might rain later this evening", "can you hear me", "what time is it",
        "set a timer for ten minutes", "turn on the kitchen lights", "good morning everyone", "let me think about it",
    ]

    /// Distractors for `phrase`: its words alone and its partial phrases, near-rhymes (a word's
    /// first consonants or, for the last word, its last ones replaced), and `commonDistractors`;
    /// none is the phrase or holds it.
    public static func distractors(for phrase: String) -> [String] {
        let w = words(of: phrase)
        guard !w.isEmpty else { return commonDistractors }
        var out: [String] = []
        if w.count > 1 {
            out += w
            out.append(w.dropLast().joined(separator: " "))
            out.append(w.dropFirst().joined(separator: " "))
        }
        let vowels = Set("aeiouy")
        let onsets = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "w", "h", "sh", "ch", "st", "br", ""]
        let codas = ["t", "d", "k", "p", "n", "s", "m", "ng", "st"]
        for (i, word) in w.enumerated() {
            let onset = String(word.prefix { !vowels.contains($0) })
            let rest = String(word.dropFirst(onset.count))
            guard !rest.isEmpty else { continue }
            var random = SplitMix64(seed: WakeVoiceInventory.hash(word))
            for o in onsets.filter({ $0 != onset }).shuffled(using: &random).prefix(4) {
                var v = w
                v[i] = o + rest
                out.append(v.joined(separator: " "))
            }
            if i == w.count - 1 {
                let coda = String(word.reversed().prefix { !vowels.contains($0) }.reversed())
                let stem = String(word.dropLast(coda.count))
                guard !stem.isEmpty else { continue }
                for c in codas.filter({ $0 != coda }).shuffled(using: &random).prefix(3) {
                    var v = w
                    v[i] = stem + c
                    out.append(v.joined(separator: " "))
                }
            }
        }
        let phraseText = " " + w.joined(separator: " ") + " "
        var seen = Set<String>()
        return (out + commonDistractors).filter { d in
            let text = " " + words(of: d).joined(separator: " ") + " "
            return !text.contains(phraseText) && seen.insert(d).inserted && !d.trimmingCharacters(in: .whitespaces).isEmpty
        }
    }

    /// Whether `path` (below a negatives folder) names a word of the phrase in a folder or
    /// file name: such a file may say the phrase and is left out.
    static func names(_ path: String, anyOf phraseWords: Set<String>) -> Bool {
        let tokens = path.lowercased().split(whereSeparator: { !$0.isLetter })
        return tokens.contains { $0.count >= 2 && phraseWords.contains(String($0)) }
    }

    /// Makes the set in `folder` (replacing it unless it holds the same recipe, which is kept).
    /// `progress` is told what is being done. A take a voice cannot say is skipped and counted
    /// in `failures`; no take of the phrase at all is an error.
    public static func make(_ recipe: Recipe, in folder: String, progress: (String) -> Void = { _ in }) throws(WakeDataError) -> WakeDataSet {
        let label = recipe.label
        guard !label.isEmpty else { throw .phrase(recipe.phrase, reason: "no letters or digits") }
        let root = URL(fileURLWithPath: folder)
        let recipeFile = root.appendingPathComponent("recipe.txt").path
        if let old = try? String(contentsOfFile: recipeFile, encoding: .utf8), old == recipe.key,
           let summary = try? String(contentsOfFile: root.appendingPathComponent("summary.txt").path, encoding: .utf8),
           var made = WakeDataSet(summary: summary, folder: folder) {
            made.reused = true
            return made
        }
        let manager = FileManager.default
        do {
            if manager.fileExists(atPath: folder) { try manager.removeItem(atPath: folder) }
            for set in ["train", "test"] {
                for l in [label, "other"] { try manager.createDirectory(at: root.appendingPathComponent("\(set)/\(l)"), withIntermediateDirectories: true) }
            }
        } catch { throw .cannotWrite(path: folder, reason: error.localizedDescription) }
        let scratch = root.appendingPathComponent(".scratch")
        do { try manager.createDirectory(at: scratch, withIntermediateDirectories: true) } catch {
            throw .cannotWrite(path: scratch.path, reason: error.localizedDescription)
        }
        defer { try? manager.removeItem(at: scratch) }
        var made = WakeDataSet(folder: folder, label: label)

        // Every fifth voice of each engine (in sweep order) is held out.
        var count: [WakeEngine: Int] = [:]
        let heldOut: [Bool] = recipe.voices.map { v in
            defer { count[v.engine, default: 0] += 1 }
            return count[v.engine, default: 0] % 5 == 4
        }
        let distractors = Self.distractors(for: recipe.phrase)
        struct Job: Sendable { var voice: Int; var text: String; var file: String; var phrase: Bool }
        var jobs: [Job] = []
        for (k, v) in recipe.voices.enumerated() {
            let set = heldOut[k] ? "test" : "train"
            jobs.append(Job(voice: k, text: recipe.phrase, file: "\(set)/\(label)/\(v.name).wav", phrase: true))
            for n in 0..<(heldOut[k] ? 1 : recipe.distractorsPerVoice) {
                var random = SplitMix64(seed: recipe.seed ^ WakeVoiceInventory.hash("\(v.name)#\(n)"))
                let d = distractors[Int.random(in: 0..<distractors.count, using: &random)]
                jobs.append(Job(voice: k, text: d, file: "\(set)/other/\(v.name)-\(n).wav", phrase: false))
            }
        }
        progress("speaking \(jobs.count) takes in \(recipe.voices.count) voices (\(Set(recipe.voices.map(\.engine)).sorted().map(\.rawValue).joined(separator: ", ")))")
        let results = Results(count: jobs.count), work = jobs, held = heldOut
        DispatchQueue.concurrentPerform(iterations: work.count) { j in
            let job = work[j]
            do {
                let audio = try recipe.voices[job.voice].speak(job.text, scratch: scratch)
                try WakeAudio.write(audio, to: root.appendingPathComponent(job.file).path)
                results.set(j, .success(held[job.voice] ? audio : []))  // only the held-out takes are kept
            } catch { results.set(j, .failure(error)) }
        }
        var takes: [Int: [Float]] = [:]  // the held-out voices' takes, for the streams
        for (j, job) in jobs.enumerated() {
            switch results.get(j) {
            case let .success(audio)?:
                let held = heldOut[job.voice]
                if job.phrase { if held { made.heldOutTakes += 1 } else { made.trainingTakes += 1 } } else {
                    if held { made.heldOutNegatives += 1 } else { made.trainingNegatives += 1; made.distractors += 1 }
                }
                if held { takes[j] = audio }
            case let .failure(error)?: made.failures.append("\(error)")
            case nil: made.failures.append("\(job.file): not made")
            }
        }
        guard made.trainingTakes > 0 else {
            throw .synthesis(program: recipe.voices.first?.engine.program ?? "text-to-speech", text: recipe.phrase,
                             reason: "no voice said it: " + (made.failures.first ?? "no voices"))
        }

        // Generated noise and music (no recordings of either are at hand).
        progress("generating \(recipe.noiseClips) noise and \(recipe.musicClips) music clips")
        for k in 0..<recipe.noiseClips {
            let x = WakeAudio.noise(k, seconds: 1.5, level: 0.01 * Float(k % 9 + 1), seed: recipe.seed &+ UInt64(k))
            try WakeAudio.write(x, to: root.appendingPathComponent("train/other/noise-\(k).wav").path)
        }
        for k in 0..<recipe.musicClips {
            let x = WakeAudio.music(seconds: 2, level: 0.02 * Float(k % 5 + 1), seed: recipe.seed &+ 1000 &+ UInt64(k))
            try WakeAudio.write(x, to: root.appendingPathComponent("train/other/music-\(k).wav").path)
        }
        made.trainingNegatives += recipe.noiseClips + recipe.musicClips
        made.noise = recipe.noiseClips
        made.music = recipe.musicClips

        // Real speech without the phrase's words, linked where it is.
        let phraseWords = Set(words(of: recipe.phrase))
        for (n, negatives) in recipe.negatives.enumerated() {
            let base = URL(fileURLWithPath: negatives).standardizedFileURL.path
            var isFolder: ObjCBool = false
            guard manager.fileExists(atPath: base, isDirectory: &isFolder), isFolder.boolValue, let walker = manager.enumerator(atPath: base) else { throw .negatives(path: negatives, reason: "not a folder that can be read") }
            var files: [String] = []
            while let relative = walker.nextObject() as? String {
                let ext = (relative as NSString).pathExtension.lowercased()
                if Dataset.audioExtensions.contains(ext) && !names(relative, anyOf: phraseWords) { files.append(relative) }
            }
            guard !files.isEmpty else { throw .negatives(path: negatives, reason: "no audio files (\(Dataset.audioExtensions.sorted().joined(separator: ", ")))") }
            for relative in files.sorted() {
                let link = root.appendingPathComponent("train/other/speech\(n)-" + relative.replacingOccurrences(of: "/", with: "-")).path
                do { try manager.createSymbolicLink(atPath: link, withDestinationPath: base + "/" + relative) } catch {
                    throw .cannotWrite(path: link, reason: error.localizedDescription)
                }
            }
            made.speech += files.count
            made.trainingNegatives += files.count
        }

        // The held-out voices' streams: each take after its distractor, and the distractors alone.
        progress("writing the held-out voices' streams")
        var stream: [Float] = [], alone: [Float] = [], truth = ""
        var gapIndex = 0
        func gap() -> [Float] {
            gapIndex += 1
            return [Float](repeating: 0, count: Int((1 + Double(gapIndex * 37 % 10) / 10) * Double(WakeAudio.rate)))
        }
        stream += [Float](repeating: 0, count: WakeAudio.rate / 2)
        alone += [Float](repeating: 0, count: WakeAudio.rate / 2)
        for (j, job) in jobs.enumerated() where heldOut[job.voice] && !job.phrase {
            guard let d = takes[j] else { continue }
            stream += d + gap()
            alone += d + gap()
            if let p = jobs.indices.first(where: { jobs[$0].voice == job.voice && jobs[$0].phrase }), let take = takes[p] {
                let start = Double(stream.count) / Double(WakeAudio.rate)
                truth += String(format: "%.3f,%.3f,%@\n", start + 0.1, start + Double(take.count) / Double(WakeAudio.rate) - 0.1, label)
                stream += take + gap()
            }
        }
        for (name, var x) in [("stream", stream), ("distractors", alone)] {
            let bed = WakeAudio.noise(1, seconds: Double(x.count) / Double(WakeAudio.rate), level: 0.003, seed: recipe.seed &+ 7)
            for i in x.indices where i < bed.count { x[i] += bed[i] }
            try WakeAudio.write(x, to: root.appendingPathComponent("\(name).wav").path)
        }
        made.streamSeconds = Double(stream.count) / Double(WakeAudio.rate)
        made.distractorSeconds = Double(alone.count) / Double(WakeAudio.rate)
        try writeText(truth, to: root.appendingPathComponent("stream.truth.csv").path)
        try writeText("", to: root.appendingPathComponent("none.truth.csv").path)
        try writeText(made.summary, to: root.appendingPathComponent("summary.txt").path)
        try writeText(recipe.key, to: recipeFile)
        return made
    }

    init(folder: String, label: String) {
        self.folder = folder
        self.label = label
    }

    /// One line of counts, as `summary.txt` keeps them.
    public var summary: String {
        "label=\(label) training=\(trainingTakes) heldOut=\(heldOutTakes) trainingNegatives=\(trainingNegatives) heldOutNegatives=\(heldOutNegatives) "
            + "distractors=\(distractors) speech=\(speech) noise=\(noise) music=\(music) "
            + String(format: "stream=%.1f distractorStream=%.1f failures=%d\n", streamSeconds, distractorSeconds, failures.count)
    }

    init?(summary: String, folder: String) {
        var fields: [String: String] = [:]
        for part in summary.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            let kv = part.split(separator: "=", maxSplits: 1)
            if kv.count == 2 { fields[String(kv[0])] = String(kv[1]) }
        }
        guard let label = fields["label"] else { return nil }
        self.init(folder: folder, label: label)
        func int(_ k: String) -> Int { fields[k].flatMap { Int($0) } ?? 0 }
        trainingTakes = int("training"); heldOutTakes = int("heldOut")
        trainingNegatives = int("trainingNegatives"); heldOutNegatives = int("heldOutNegatives")
        distractors = int("distractors"); speech = int("speech"); noise = int("noise"); music = int("music")
        streamSeconds = fields["stream"].flatMap { Double($0) } ?? 0
        distractorSeconds = fields["distractorStream"].flatMap { Double($0) } ?? 0
    }

    static func writeText(_ text: String, to path: String) throws(WakeDataError) {
        do { try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
            throw .cannotWrite(path: path, reason: error.localizedDescription)
        }
    }

    /// Each job's outcome, set from the worker threads. `@unchecked Sendable`: every access
    /// holds the lock, and each slot is set by one job.
    final class Results: @unchecked Sendable {
        private let lock = NSLock()
        private var slots: [Result<[Float], any Error>?]
        init(count: Int) { slots = Array(repeating: nil, count: count) }
        func set(_ k: Int, _ r: Result<[Float], any Error>) { lock.lock(); slots[k] = r; lock.unlock() }
        func get(_ k: Int) -> Result<[Float], any Error>? { lock.lock(); defer { lock.unlock() }; return slots[k] }
    }
}
