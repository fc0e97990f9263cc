import EarshotAudio
import EarshotTestSupport
import Foundation
import Testing
@testable import EarshotTraining

/// A wake phrase's data set made from its text (espeak-ng, which scripts/install-packages.sh installs).
@Suite("Wake phrase data from text")
struct WakeDataTests {
    static func requireEspeak() throws {
        guard Subprocess.find("espeak-ng", path: ProcessInfo.processInfo.environment["PATH"] ?? "") != nil else {
            throw FixtureError(message: "espeak-ng is missing: scripts/install-packages.sh installs it")
        }
    }

    @Test("Distractors: the phrase's words alone, its halves, near-rhymes and common phrases; never the phrase or a text holding it")
    func distractors() {
        let d = WakeDataSet.distractors(for: "Hey Earshot!")
        #expect(Array(d.prefix(2)) == ["hey", "earshot"])
        // Near-rhymes of each word (onsets replaced) and of the last word's end.
        let rhymesOfHey = d.filter { $0.hasSuffix(" earshot") && $0 != "hey earshot" }
        #expect(rhymesOfHey.count == 4, "\(d)")
        #expect(rhymesOfHey.allSatisfy { $0.hasSuffix("ey earshot") })
        let rhymesOfEarshot = d.filter { $0.hasPrefix("hey ") && $0.count > 4 && !WakeDataSet.commonDistractors.contains($0) }
        #expect(rhymesOfEarshot.count == 4 + 3, "\(d)")
        #expect(rhymesOfEarshot.filter { $0.hasPrefix("hey earsho") }.count == 3, "the last word's end replaced: \(d)")
        #expect(!d.contains { (" " + $0 + " ").contains(" hey earshot ") })
        #expect(d.contains("turn on the kitchen lights"))
        // The same for the same phrase; a one-word phrase has no words alone.
        #expect(WakeDataSet.distractors(for: "hey earshot") == d)
        let one = WakeDataSet.distractors(for: "left")
        #expect(!one.contains("left") && one.contains { $0.hasSuffix("eft") } && !one.contains("turn left at the second light"), "\(one)")
        #expect(WakeDataSet.Recipe(phrase: " Hey,  Earshot ", voices: []).label == "hey-earshot")
    }

    @Test("A clip is resampled to 16 kHz, trimmed to its sound, its peak at -3 dBFS, 0.1 s of silence each side; a WAV file gives it back")
    func preparedClip() throws {
        // 0.5 s of silence, 0.3 s of a 440 Hz tone at 0.1, 0.4 s of silence, at 22050 Hz.
        let tone = sine(frequency: 440, sampleRate: 22050, count: 6615, amplitude: 0.1)
        let clip = WakeAudio.prepared([Float](repeating: 0, count: 11025) + tone + [Float](repeating: 0, count: 8820), rate: 22050)
        // 0.3 s of tone in 10 ms frames, a frame either side at most for the resampler's ringing.
        #expect(abs(clip.count - (3200 + 4800)) <= 2 * 160, "\(clip.count)")
        #expect(clip.prefix(1600).allSatisfy { $0 == 0 } && clip.suffix(1600).allSatisfy { $0 == 0 })
        let peak = clip.map(abs).max() ?? 0
        #expect(abs(peak - pow(10, -3.0 / 20)) < 1e-4)
        #expect(WakeAudio.prepared([Float](repeating: 0, count: 1000), rate: 16000).isEmpty)

        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("clip.wav").path
        try WakeAudio.write(clip, to: path)
        let (back, rate) = try AudioFile.readMono(path: path)
        #expect(rate == 16000 && back.count == clip.count)
        #expect(maxAbsDifference(back, clip) <= 0.5 / 32768 + 1e-7, "16 bits, rounded")
        #expect(throws: WakeDataError.self) { try WakeAudio.write(clip, to: "/nonexistent-folder/clip.wav") }
    }

    @Test("Generated noise and music have the level asked for; the same seed gives the same samples")
    func noiseAndMusic() {
        func rms(_ x: [Float]) -> Float { (x.reduce(0) { $0 + $1 * $1 } / Float(x.count)).squareRoot() }
        for color in 0..<3 {
            let x = WakeAudio.noise(color, seconds: 1, level: 0.05, seed: 3)
            #expect(x.count == 16000 && abs(rms(x) - 0.05) < 1e-4)
            #expect(x == WakeAudio.noise(color, seconds: 1, level: 0.05, seed: 3) && x != WakeAudio.noise(color, seconds: 1, level: 0.05, seed: 4))
        }
        let m = WakeAudio.music(seconds: 2, level: 0.1, seed: 5)
        #expect(m.count == 32000 && abs(rms(m) - 0.1) < 1e-4)
        #expect(m == WakeAudio.music(seconds: 2, level: 0.1, seed: 5))
    }

    @Test("Voices: a program not on PATH is named missing with how to get it; the sweep gives each engine its voices and prosody")
    func voices() {
        let none = WakeVoiceInventory.find(environment: ["PATH": "/nonexistent"], piperVoice: nil)
        #expect(none.voices.isEmpty)
        #expect(none.missing[.flite] == "no flite on PATH (apt-get install flite)")
        #expect(none.missing[.festival]?.hasPrefix("no text2wave on PATH") == true)
        #expect(none.summary.count == 4 && none.summary[0].hasPrefix("espeak-ng: not found: no espeak-ng on PATH"))
        let inventory = WakeVoiceInventory(voices: [.espeak: ["en-us", "en-us+a", "en-us+b", "en-gb", "en-gb+a"], .flite: ["kal", "slt"],
                                                    .festival: ["kal_diphone"], .piper: ["/v/en_US-joe-medium.onnx"]], missing: [:])
        let sweep = inventory.sweep(espeakVariants: 1, seed: 1)
        #expect(sweep.filter { $0.engine == .espeak }.map(\.voice) == ["en-us", "en-us+a", "en-gb", "en-gb+a"])
        #expect(sweep.filter { $0.engine == .flite }.count == 2 * 9 && sweep.filter { $0.engine == .festival }.count == 5
            && sweep.filter { $0.engine == .piper }.count == 15)
        #expect(Set(sweep.map(\.name)).count == sweep.count, "every voice its own file name")
        #expect(sweep.first { $0.engine == .piper }?.name == "piper-en_US-joe-medium-s75-p0-v333")
        for v in sweep where v.engine == .espeak {
            #expect((120...200).contains(Int((v.speed * 175).rounded())) && (25...75).contains(v.pitch) && (0...3).contains(v.variation))
        }
        #expect(inventory.sweep(espeakVariants: 1, seed: 1) == sweep && inventory.sweep(espeakVariants: 1, seed: 2) != sweep)
    }

    @Test("A program is stopped at its time limit, and a missing one is an error naming it")
    func subprocess() throws {
        let started = Date()
        #expect(throws: Subprocess.Failure.self) { try Subprocess.run("/bin/sleep", ["5"], timeout: 0.3) }
        #expect(Date().timeIntervalSince(started) < 3)
        let echo = try Subprocess.run("/bin/cat", [], input: "hey", timeout: 5)
        #expect(echo.status == 0 && echo.output == "hey\n")
        let voice = WakeVoice(engine: .espeak, voice: "en-us", speed: 1)
        #expect(throws: WakeDataError.synthesis(program: "espeak-ng", text: "hey", reason: "not on PATH (apt-get install espeak-ng)")) {
            try voice.speak("hey", scratch: FileManager.default.temporaryDirectory, environment: ["PATH": "/nonexistent"])
        }
    }

    @Test("A data set from espeak-ng: every fifth voice held out, the counts of each kind, negatives without the phrase's words; the same seed, the same files")
    func dataSet() throws {
        try Self.requireEspeak()
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // Real speech: a folder of the phrase's word, a file naming it, and one other word.
        let speech = folder.appendingPathComponent("speech")
        for dir in ["left", "yes", "_unknown_"] { try FileManager.default.createDirectory(at: speech.appendingPathComponent(dir), withIntermediateDirectories: true) }
        for file in ["left/a1_nohash_0.wav", "yes/a1_nohash_0.wav", "_unknown_/left_a2_nohash_0.wav", "_unknown_/bed_a2_nohash_0.wav"] {
            try writeAudio(speech.appendingPathComponent(file).path, samples: sine(frequency: 300, sampleRate: 16000, count: 8000), channels: 1, sampleRate: 16000)
        }
        let voices = ["en-us", "en-us+f1", "en-us+m3", "en-gb", "en-gb+f2", "en-gb+m1", "en-029"].enumerated().map { k, v in
            WakeVoice(engine: .espeak, voice: v, speed: 0.8 + 0.1 * Double(k % 4), pitch: 30 + 5 * k, variation: k % 3)
        }
        var recipe = WakeDataSet.Recipe(phrase: "turn left", voices: voices)
        recipe.negatives = [speech.path]
        recipe.distractorsPerVoice = 2
        recipe.noiseClips = 3
        recipe.musicClips = 2
        let a = try WakeDataSet.make(recipe, in: folder.appendingPathComponent("a").path)
        #expect(a.failures.isEmpty, "\(a.failures)")
        // 7 voices: the 5th held out. Training: 6 takes, 6 x 2 distractors, 3 noise, 2 music, 2 real files.
        #expect(a.label == "turn-left" && a.trainingTakes == 6 && a.heldOutTakes == 1 && a.heldOutNegatives == 1)
        #expect(a.distractors == 12 && a.noise == 3 && a.music == 2 && a.speech == 2 && a.trainingNegatives == 19)
        func files(_ root: String, _ sub: String) throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: root + "/" + sub).sorted()
        }
        #expect(try files(a.folder, "test/turn-left") == [voices[4].name + ".wav"])
        #expect(try files(a.folder, "train/turn-left").count == 6)
        #expect(try files(a.folder, "train/other").filter { $0.hasPrefix("speech0-") } == ["speech0-_unknown_-bed_a2_nohash_0.wav", "speech0-yes-a1_nohash_0.wav"])
        // Every take is a 16 kHz clip with 0.1 s of silence each side and its peak at -3 dBFS.
        let (take, rate) = try AudioFile.readMono(path: a.folder + "/test/turn-left/" + voices[4].name + ".wav")
        #expect(rate == 16000 && take.count > 8000 && take.prefix(1600).allSatisfy { $0 == 0 } && abs((take.map(abs).max() ?? 0) - 0.708) < 0.001)
        // The stream: the held-out take after its distractor, its truth where the take is.
        let truth = try String(contentsOfFile: a.folder + "/stream.truth.csv", encoding: .utf8).split(separator: "\n")
        #expect(truth.count == 1 && truth[0].hasSuffix(",turn-left"))
        let (stream, _) = try AudioFile.readMono(path: a.folder + "/stream.wav")
        let span = truth[0].split(separator: ",").prefix(2).compactMap { Double($0) }
        #expect(span.count == 2 && abs((span[1] - span[0] + 0.2) * 16000 - Double(take.count)) < 20, "the truth to the ms")
        #expect(abs(Double(stream.count) / 16000 - a.streamSeconds) < 0.001)

        // The same recipe elsewhere: the same bytes; in the same folder: reused.
        let b = try WakeDataSet.make(recipe, in: folder.appendingPathComponent("b").path)
        for sub in ["train/turn-left", "train/other", "test/turn-left", "test/other"] {
            for f in try files(a.folder, sub) where !f.hasPrefix("speech") {
                #expect(FileManager.default.contents(atPath: "\(a.folder)/\(sub)/\(f)") == FileManager.default.contents(atPath: "\(b.folder)/\(sub)/\(f)"), "\(sub)/\(f)")
            }
        }
        #expect(try WakeDataSet.make(recipe, in: a.folder).reused)
        // Another seed: other distractors for the voices.
        recipe.seed = 2
        let c = try WakeDataSet.make(recipe, in: folder.appendingPathComponent("c").path)
        #expect(c.trainingNegatives == 19 && !c.reused)
        let differs = try files(a.folder, "train/other").filter { $0.hasPrefix("espeak") }.contains {
            FileManager.default.contents(atPath: "\(a.folder)/train/other/\($0)") != FileManager.default.contents(atPath: "\(c.folder)/train/other/\($0)")
        }
        #expect(differs)
        // Negatives that are not there: an error naming the folder.
        recipe.negatives = [folder.appendingPathComponent("none").path]
        #expect(throws: WakeDataError.negatives(path: folder.appendingPathComponent("none").path, reason: "not a folder that can be read")) {
            try WakeDataSet.make(recipe, in: folder.appendingPathComponent("d").path)
        }
    }
}
