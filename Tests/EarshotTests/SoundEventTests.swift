import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot

/// The sound-events fixture: tools/make_sound_events_fixture.py's model of 12 tones (a 0.25 s
/// window every 0.125 s at 8 kHz) and its audio.
enum ToneEvents {
    static let model: Model = {
        (try? Model(contentsOf: Repo.root.appendingPathComponent("Tests/Fixtures/tone-events")))!
    }()
    static let audio = "Tests/EarshotTests/Goldens/sound-events/tones.wav"
    static let stereo = "Tests/EarshotTests/Goldens/sound-events/tones-stereo.wav"
    static let goldens = "Tests/EarshotTests/Goldens/sound-events"
    static let hop = 1000, window = 2000

    /// An event as the documented rule gives it, computed here from a run's window scores.
    struct Event: Equatable, CustomStringConvertible {
        var label: String
        var start: Int, end: Int
        var best: Float, mean: Float
        var windows: Int
        var description: String { "\(label) \(start)...\(end) best \(best) mean \(mean) \(windows)w" }
    }

    /// The rule, written plainly for a whole stream (not as Earshot runs it, step by step): window
    /// k is [max(0, (k+1)·hop − window), its step's end); a label is on in it when among the k best
    /// (scores descending, then label order) and at least its threshold; a label's on-windows,
    /// in order, join while each starts at most the gap after the group's end; groups shorter
    /// than the minimum are dropped.
    static func reference(_ steps: [StepScores], labels: [String], threshold: Double, rule: LabelOptions.Events, rate: Int) -> [Event] {
        var on: [Int: [(start: Int, end: Int, score: Float)]] = [:]
        for (k, s) in steps.enumerated() {
            let order = s.scores.indices.sorted { (s.scores[$0], -$0) > (s.scores[$1], -$1) }
            let ranked = rule.topK.map { Array(order.prefix($0)) } ?? order
            for i in ranked where Double(s.scores[i]) >= (rule.labelThresholds[labels[i]] ?? threshold) {
                on[i, default: []].append((max(0, (k + 1) * hop - window), s.end, s.scores[i]))
            }
        }
        var events: [Event] = []
        for (i, windows) in on {
            var groups: [[(start: Int, end: Int, score: Float)]] = []
            for w in windows {
                if let gap = rule.mergeGapSeconds, let last = groups.last, Double(w.start - last.map(\.end).max()!) <= gap * Double(rate) {
                    groups[groups.count - 1].append(w)
                } else {
                    groups.append([w])
                }
            }
            for g in groups {
                let start = g[0].start, end = g.map(\.end).max()!
                guard Double(end - start) >= rule.minDurationSeconds * Double(rate) else { continue }
                let sum = g.reduce(0.0) { $0 + Double($1.score) }
                events.append(Event(label: labels[i], start: start, end: end, best: g.map(\.score).max()!, mean: Float(sum / Double(g.count)),
                                    windows: g.count))
            }
        }
        return events.sorted { ($0.label, $0.start) < ($1.label, $1.start) }
    }

    static func events(_ events: [ClassifierEvent]) -> [Event] {
        segments(events).compactMap { s in
            s.windows.map { Event(label: s.label, start: s.start, end: s.end, best: s.best ?? .nan, mean: s.confidence, windows: $0) }
        }.sorted { ($0.label, $0.start) < ($1.label, $1.start) }
    }

    static func options(_ change: (inout LabelOptions.Events) -> Void = { _ in }, threshold: Double? = nil) -> LabelOptions {
        var o = LabelOptions(model: model)
        o.includeScores = true
        if let threshold { o.threshold = threshold }
        change(&o.events!)
        return o
    }

    /// A random rule: top k, thresholds (some of single labels), gap or none, minimum duration.
    static func randomRule(_ r: inout SeededRandom) -> LabelOptions {
        options({ e in
            e.topK = [nil, 1, 2, 3, 4][Int.random(in: 0..<5, using: &r)]
            e.mergeGapSeconds = [nil, 0, 0.1, 0.3, 1.0][Int.random(in: 0..<5, using: &r)]
            e.minDurationSeconds = [0, 0.2, 0.5, 1][Int.random(in: 0..<4, using: &r)]
            for label in model.labels where Int.random(in: 0..<4, using: &r) == 0 { e.labelThresholds[label] = Double.random(in: 0.2...0.95, using: &r) }
        }, threshold: Double.random(in: 0.3...0.9, using: &r))
    }
}

@Suite("Sound events: a many-label window classifier's events, by its rule")
struct SoundEventTests {
    @Test("The events equal the rule recomputed here from the same run's window scores: the manifest's rule, overrides, and random rules",
          arguments: 0..<6)
    func ruleFromScores(_ index: Int) async throws {
        var random = SeededRandom(seed: SeededRandom.fromEnvironment().seed &+ UInt64(index))
        let options: LabelOptions
        switch index {
        case 0: options = ToneEvents.options()
        case 1: options = ToneEvents.options({ e in
            e.topK = 2; e.mergeGapSeconds = 0.25; e.minDurationSeconds = 0.5; e.labelThresholds = ["Sinus 400_Tone 400 Hz": 0.3]
        }, threshold: 0.6)
        case 2: options = ToneEvents.options({ e in e.topK = 1; e.mergeGapSeconds = nil })
        default: options = ToneEvents.randomRule(&random)
        }
        let (samples, rate) = try AudioFile.readMono(path: Repo.path(ToneEvents.audio))
        let run = try StreamClassifier(model: ToneEvents.model, sourceSampleRate: rate, options: options)
        let events = try await run.process(samples) + (try await run.finish())
        let steps = scores(events)
        #expect(steps.count == (samples.count + ToneEvents.hop - 1) / ToneEvents.hop)
        let expected = ToneEvents.reference(steps, labels: ToneEvents.model.labels, threshold: options.threshold, rule: options.events!, rate: rate)
        let found = ToneEvents.events(events)
        #expect(found == expected, "rule \(options.events!), threshold \(options.threshold), seed \(random.seed)")
        if index < 3 { #expect(found.count == [10, 8, 62][index]) }
        // Every event kept was announced once, before its end, with its start.
        let started = events.compactMap { if case let .started(s) = $0 { return s } else { return nil } }
        #expect(started.count == found.count)
        #expect(Set(started.map { "\($0.label)@\($0.start)" }) == Set(found.map { "\($0.label)@\($0.start)" }))
    }

    @Test("label --scores and label agree by the rule: events recomputed from the printed window scores (times and windows exact, confidences to the printed digits)")
    func ruleFromPrintedScores() throws {
        let args = ["label", "-m", "Tests/Fixtures/tone-events", "-f", "jsonl", "--top-k", "12", "--merge-gap", "0.125", "--min-duration", "0.3", ToneEvents.audio]
        let printed = try runEarshot(args + ["--scores"])
        let labelled = try runEarshot(args)
        #expect(printed.status == 0 && labelled.status == 0, "\(printed.err)\(labelled.err)")
        // --scores of a many-label model prints each window's 12 best: every label here.
        let labels = ToneEvents.model.labels
        var steps: [StepScores] = []
        for line in printed.out.split(separator: "\n") {
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            guard let top = o["top"] as? [[String: Any]] else {
                #expect(labelled.out.contains(line), "an event --scores printed that label did not: \(line)")
                continue
            }
            #expect(top.count == 12)
            var values = [Float](repeating: -1, count: labels.count)
            for entry in top { values[try #require(labels.firstIndex(of: entry["label"] as? String ?? ""))] = Float(entry["score"] as? Double ?? -1) }
            let end = Int(((o["end"] as? Double ?? 0) * 8000).rounded())
            steps.append(StepScores(channel: 0, start: end - ToneEvents.hop, end: end, sampleRate: 8000, scores: values))
        }
        var rule = LabelOptions.Events()
        rule.topK = 12; rule.mergeGapSeconds = 0.125; rule.minDurationSeconds = 0.3
        let expected = ToneEvents.reference(steps, labels: labels, threshold: 0.5, rule: rule, rate: 8000)
        let found = try labelled.out.split(separator: "\n").map { line -> ToneEvents.Event in
            let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return ToneEvents.Event(label: o["label"] as? String ?? "", start: Int(((o["start"] as? Double ?? -1) * 8000).rounded()),
                                    end: Int(((o["end"] as? Double ?? -1) * 8000).rounded()), best: Float(o["best"] as? Double ?? -1),
                                    mean: Float(o["score"] as? Double ?? -1), windows: o["windows"] as? Int ?? -1)
        }.sorted { ($0.label, $0.start) < ($1.label, $1.start) }
        #expect(found.count == expected.count && found.count >= 8)
        for (f, e) in zip(found, expected) {
            #expect(f.label == e.label && f.start == e.start && f.end == e.end && f.windows == e.windows, "\(f) vs \(e)")
            // The best is one printed score; the mean of printed (rounded) scores is within their rounding.
            #expect(f.best == e.best, "\(f) vs \(e)")
            #expect(abs(f.mean - e.mean) <= 1.0001e-4, "\(f) vs \(e)")
        }
    }

    @Test("Any chunking gives the events of the whole; a channel in a batch gives what it gives alone; a channel's rule is its own")
    func streamingAndBatches() async throws {
        var random = SeededRandom.fromEnvironment()
        let (samples, rate) = try AudioFile.readMono(path: Repo.path(ToneEvents.audio))
        let file = try AudioFile(path: Repo.path(ToneEvents.stereo))
        let stereo = try file.readChannels(maxFrames: file.frameCount ?? 0)
        for round in 0..<3 {
            // The manifest's rule first (its 10 events), then random ones (which may keep no event:
            // their window scores are compared all the same).
            let options = round == 0 ? ToneEvents.options() : ToneEvents.randomRule(&random)
            let whole = try await run(samples, rate: rate, sizes: [samples.count], options: options)
            #expect(round > 0 || ToneEvents.events(whole).count == 10, "seed \(random.seed)")
            let sizes = random.chunkSizes(total: samples.count, maxChunk: Int.random(in: 1...4000, using: &random))
            #expect(try await run(samples, rate: rate, sizes: sizes, options: options) == whole, "seed \(random.seed)")
            // Three channels stepped together (the second with a rule of its own), each as alone.
            let other = ToneEvents.randomRule(&random)
            let session = try Session(model: ToneEvents.model, channelCount: 0, options: options)
            let a = try await session.addChannel(sourceSampleRate: rate, kind: .file)
            let b = try await session.addChannel(sourceSampleRate: rate, options: other, kind: .file)
            let c = try await session.addChannel(sourceSampleRate: rate, kind: .file)
            var events: [ClassifierEvent] = []
            var offset = 0
            while offset < samples.count {
                let n = min(Int.random(in: 1...6000, using: &random), samples.count - offset)
                events += await session.process([Array(samples[offset..<(offset + n)]), Array(stereo[1][offset..<(offset + n)]), Array(samples[offset..<(offset + n)])])
                offset += n
            }
            events += await session.finish()
            #expect(events.filter { $0.channel == a } == whole, "seed \(random.seed)")
            #expect(events.filter { $0.channel == c }.map { $0.renumbered(to: 0) } == whole, "seed \(random.seed)")
            let alone = try await run(stereo[1], rate: rate, sizes: [stereo[1].count], options: other)
            #expect(events.filter { $0.channel == b }.map { $0.renumbered(to: 0) } == alone, "seed \(random.seed)")
        }
    }

    @Test("BirdNET's options (sigmoid of logits with a sensitivity, windows aligned to the start, the least audio of the last windows, labels kept) give the same events in any chunking and across a snapshot taken mid-stream (format 3)")
    func birdnetOptionsStream() async throws {
        var random = SeededRandom.fromEnvironment()
        let (samples, rate) = try AudioFile.readMono(path: Repo.path(ToneEvents.audio))
        let kept = Set(ToneEvents.model.labels.prefix(6))
        let options = ToneEvents.options({ e in
            e.sensitivity = 1.25
            e.alignedWindows = true
            e.minWindowAudioSeconds = 0.2
            e.onlyLabels = kept
            e.mergeGapSeconds = nil
        }, threshold: 0.62)  // sigmoid(0.75 x) of scores in 0...1: 0.5 to 0.68
        let whole = try await run(samples, rate: rate, sizes: [samples.count], options: options)
        let found = ToneEvents.events(whole)
        #expect(!found.isEmpty && found.allSatisfy { kept.contains($0.label) }, "\(found)")
        // Aligned: whole windows (0.25 s) from the start, none reaching before it.
        let m = ToneEvents.model
        let window = (m.manifest.audio.contextSamples + m.chunkSamples) * rate / m.sampleRate
        #expect(window == rate / 4 && found.allSatisfy { $0.windows == 1 && $0.end - $0.start == window && $0.start >= 0 }, "\(found)")
        for _ in 0..<3 {
            let sizes = random.chunkSizes(total: samples.count, maxChunk: Int.random(in: 1...4000, using: &random))
            #expect(try await run(samples, rate: rate, sizes: sizes, options: options) == whole, "seed \(random.seed)")
            // Stopped at a random point, moved as bytes, resumed: the events of the whole.
            let cut = Int.random(in: 1..<samples.count, using: &random)
            let first = try StreamClassifier(model: ToneEvents.model, sourceSampleRate: rate, options: options)
            var events = try await first.process(Array(samples[..<cut]))
            let bytes = await first.snapshot().serialized()
            #expect(Array(bytes[9..<13]) == [3, 0, 0, 0])
            let resumed = try StreamClassifier(model: ToneEvents.model, restoring: try StreamSnapshot(serialized: bytes))
            events += try await resumed.process(Array(samples[cut...]))
            events += try await resumed.finish()
            #expect(events == whole, "seed \(random.seed), cut at \(cut)")
        }
    }

    @Test("LabelOptions.Events.labels(kept:by:) composes the run's choice: every label; a species list's; or those the package's label filter model keeps for a place and week; out-of-range places, a model without a filter and an unknown listed label are typed errors naming the value or the line")
    func labelChoice() throws {
        let model = try Model(contentsOf: URL(fileURLWithPath: try LocatedToneEvents.package()))
        let labels = model.labels
        #expect(try LabelOptions.Events.labels(kept: .all, by: model) == nil)
        #expect(try LabelOptions.Events.labels(kept: .place(latitude: 45, longitude: 0, week: 10), by: model) == Set(labels[1...5]))
        #expect(try LabelOptions.Events.labels(kept: .place(latitude: 45, longitude: 0, week: -1), by: model) == Set(labels[0...5]))
        #expect(try LabelOptions.Events.labels(kept: .place(latitude: -45, longitude: 180, week: 48), by: model) == Set(labels[6...11]))
        let list = try Repo.temporaryFolder().appendingPathComponent("list.txt")
        try "\(labels[3])\n\n\(labels[9])\n".write(to: list, atomically: true, encoding: .utf8)
        #expect(try LabelOptions.Events.labels(kept: .list(path: list.path), by: model) == [labels[3], labels[9]])
        try "\(labels[3])\nSinus 250_Tone 250 Hz\n".write(to: list, atomically: true, encoding: .utf8)
        #expect(throws: StreamError.data(path: list.path, reason: "line 2: 'Sinus 250_Tone 250 Hz' is not a label of the model (did you mean 'Sinus 200_Tone 200 Hz'?)")) {
            try LabelOptions.Events.labels(kept: .list(path: list.path), by: model)
        }
        let bad: [(LabelOptions.Events.LabelChoice, String, String)] = [
            (.place(latitude: 90.5, longitude: 0, week: 1), "lat", "90.5"),
            (.place(latitude: .nan, longitude: 0, week: 1), "lat", "nan"),
            (.place(latitude: 0, longitude: -180.5, week: 1), "lon", "-180.5"),
            (.place(latitude: 0, longitude: 0, week: 0), "week", "0"),
            (.place(latitude: 0, longitude: 0, week: 49), "week", "49"),
        ]
        for (choice, name, value) in bad {
            let error = #expect(throws: StreamError.self) { try LabelOptions.Events.labels(kept: choice, by: model) }
            guard case let .invalidOption(n, v, _) = error else { Issue.record("\(choice): \(String(describing: error))"); continue }
            #expect(n == name && v == value, "\(choice): \(n) = \(v)")
        }
        let none = #expect(throws: StreamError.self) { try LabelOptions.Events.labels(kept: .place(latitude: 0, longitude: 0, week: 1), by: ToneEvents.model) }
        guard case let .invalidOption(n, v, _) = none else { Issue.record("\(String(describing: none))"); return }
        #expect(n == "labelFilter" && v == "none in tone-events")
    }

    func run(_ samples: [Float], rate: Int, sizes: [Int], options: LabelOptions) async throws -> [ClassifierEvent] {
        let stream = try StreamClassifier(model: ToneEvents.model, sourceSampleRate: rate, options: options)
        var events: [ClassifierEvent] = []
        var offset = 0
        for size in sizes {
            events += try await stream.process(Array(samples[offset..<(offset + size)]))
            offset += size
        }
        return events + (try await stream.finish())
    }

    @Test("Audio at another rate is resampled: the events keep to its clock and match the model's rate within a window's rounding")
    func resampled() async throws {
        let (samples, rate) = try AudioFile.readMono(path: Repo.path(ToneEvents.audio))
        let up = try Resampler(inputRate: Double(rate), outputRate: 48000)
        let high = try up.process(samples) + (try up.finish())
        let options = ToneEvents.options()
        let at8k = ToneEvents.events(try await run(samples, rate: rate, sizes: [samples.count], options: options))
        let at48k = ToneEvents.events(try await run(high, rate: 48000, sizes: [high.count], options: options))
        #expect(at48k.map(\.label) == at8k.map(\.label))
        #expect(zip(at48k, at8k).allSatisfy { $0.start == $1.start * 6 && abs($0.end - $1.end * 6) <= 6 && $0.windows == $1.windows })
        #expect(zip(at48k, at8k).allSatisfy { abs($0.best - $1.best) < 0.02 })
    }
}

@Suite("Sound events: the formats people read, against files written with BirdNET-Analyzer's writer logic")
struct SoundEventFormatTests {
    /// Lines of `found` against `expected`: the same count, the same fields, confidence fields
    /// (`numeric`; a JSON field's value after its key) within 1e-4 (Earshot computes in float32,
    /// the script in float64: one in the fourth decimal at most), every other field exactly.
    static func compare(_ found: String, _ expected: String, separator: Character, numeric: Set<Int>, _ what: String) {
        let a = found.split(separator: "\n", omittingEmptySubsequences: false), b = expected.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(a.count == b.count, "\(what): \(a.count) lines, expected \(b.count)")
        func number(_ field: Substring) -> (key: Substring, value: Double)? {
            let cut = field.lastIndex(of: ":").map { field.index(after: $0) } ?? field.startIndex
            return Double(field[cut...]).map { (field[..<cut], $0) }
        }
        for (n, (x, y)) in zip(a, b).enumerated() {
            let f = x.split(separator: separator, omittingEmptySubsequences: false), g = y.split(separator: separator, omittingEmptySubsequences: false)
            #expect(f.count == g.count, "\(what) line \(n + 1): \(x)")
            for (c, (u, v)) in zip(f, g).enumerated() {
                if numeric.contains(c), let p = number(u), let q = number(v) {
                    #expect(p.key == q.key && abs(p.value - q.value) <= 1.0001e-4, "\(what) line \(n + 1) field \(c + 1): \(u), expected \(v)")
                } else {
                    #expect(u == v, "\(what) line \(n + 1) field \(c + 1): \(u), expected \(v)")
                }
            }
        }
    }

    static let configs: [(name: String, args: [String])] = [
        ("defaults", []),
        ("overrides", ["--threshold", "tone-events=0.6,Sinus 400_Tone 400 Hz=0.3", "--top-k", "2", "--merge-gap", "0.25", "--min-duration", "0.5"]),
        ("windows", ["--merge-gap", "none", "--top-k", "1"]),
    ]

    @Test("Raven selection table, BirdNET-Analyzer's CSV, Audacity labels and JSON lines with both names: the manifest's rule, overrides, every window its own",
          arguments: 0..<3)
    func formats(_ index: Int) throws {
        let (name, args) = Self.configs[index]
        for (format, file, separator, numeric) in [("raven", "raven.txt", Character("\t"), Set([9])), ("birdnet", "birdnet.csv", ",", [4]),
                                                   ("audacity", "audacity.txt", "\t", [3])] {
            let run = try runEarshot(["label", "-m", "Tests/Fixtures/tone-events", "-f", format] + args + [ToneEvents.audio])
            #expect(run.status == 0, "\(run.err)")
            let expected = try String(contentsOfFile: Repo.path("\(ToneEvents.goldens)/\(name)/\(file)"), encoding: .utf8)
            Self.compare(run.out, expected, separator: separator, numeric: numeric, "\(name) \(format)")
        }
        // JSON lines: the same keys in the same order, the values equal (confidences within 1e-4).
        let run = try runEarshot(["label", "-m", "Tests/Fixtures/tone-events", "-f", "jsonl"] + args + [ToneEvents.audio])
        let expected = try String(contentsOfFile: Repo.path("\(ToneEvents.goldens)/\(name)/events.jsonl"), encoding: .utf8)
        Self.compare(run.out, expected, separator: ",", numeric: [7, 8], "\(name) jsonl")
        let first = try #require(try JSONSerialization.jsonObject(with: Data((run.out.split(separator: "\n").first ?? "").utf8)) as? [String: Any])
        #expect(first["scientific"] as? String == "Sinus 1000" && first["common"] as? String == "Tone 1000 Hz" && first["label"] as? String == "Sinus 1000_Tone 1000 Hz")
    }

    @Test("--channels each: each microphone its own state and events, in one Raven table with its Channel column")
    func channelsEach() throws {
        let run = try runEarshot(["label", "-m", "Tests/Fixtures/tone-events", "-f", "raven", "--channels", "each", ToneEvents.stereo])
        #expect(run.status == 0, "\(run.err)")
        let expected = try String(contentsOfFile: Repo.path("\(ToneEvents.goldens)/stereo/raven.txt"), encoding: .utf8)
        Self.compare(run.out, expected, separator: "\t", numeric: [9], "stereo raven")
        #expect(Set(run.out.split(separator: "\n").dropFirst().map { $0.split(separator: "\t")[2] }) == ["1", "2"])
        // BirdNET's CSV has no channel: with --channels each a Channel column follows its own.
        let csv = try runEarshot(["label", "-m", "Tests/Fixtures/tone-events", "-f", "birdnet", "--channels", "each", ToneEvents.stereo])
        let rows = csv.out.split(separator: "\n")
        #expect(rows.first == "Start (s),End (s),Scientific name,Common name,Confidence,File,Channel")
        let csvChannels: [String] = rows.dropFirst().map { row in row.split(separator: ",").last.map(String.init) ?? "" }
        let ravenChannels: [String] = run.out.split(separator: "\n").dropFirst().map { row in String(row.split(separator: "\t")[2]) }
        #expect(csvChannels == ravenChannels)
    }

    @Test("Several files in one Raven table: selections numbered through, each file's times after the files before it (its File Offset its own)")
    func ravenAcrossFiles() throws {
        let run = try runEarshot(["label", "-m", "Tests/Fixtures/tone-events", "-f", "raven", ToneEvents.audio, ToneEvents.audio])
        let rows = run.out.split(separator: "\n").dropFirst().map { $0.split(separator: "\t").map(String.init) }
        #expect(rows.count == 20 && rows.map { $0[0] } == (1...20).map(String.init))
        let length = 96500.0 / 8000
        for (a, b) in zip(rows[..<10], rows[10...]) {
            let begin = try #require(Double(b[3])), first = try #require(Double(a[3]))
            #expect(abs(begin - (first + length)) <= 0.0005 + 1e-9 && b[11] == a[11] && b[7] == a[7], "\(a) \(b)")
        }
    }

    @Test("--scores of a many-label model: each window's k best labels (the rule's k, or --top-k), best first, not a column per label")
    func scoresTable() async throws {
        let csv = try runEarshot(["label", "-m", "Tests/Fixtures/tone-events", "--scores", "-f", "csv", ToneEvents.audio])
        let rows = csv.out.split(separator: "\n").map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
        #expect(rows.first == ["file", "channel", "start", "end", "label1", "score1", "label2", "score2", "label3", "score3"])
        // Against every label's scores from the library: the 3 best, in order.
        let (samples, rate) = try AudioFile.readMono(path: Repo.path(ToneEvents.audio))
        let stream = try StreamClassifier(model: ToneEvents.model, sourceSampleRate: rate, options: ToneEvents.options())
        let steps = scores(try await stream.process(samples) + (try await stream.finish()))
        #expect(rows.count == steps.count + 1)
        let labels = ToneEvents.model.labels
        for (row, step) in zip(rows.dropFirst(), steps) {
            let best = step.scores.indices.sorted { (step.scores[$0], -$0) > (step.scores[$1], -$1) }.prefix(3)
            #expect([row[4], row[6], row[8]] == best.map { labels[$0] }, "\(row)")
            #expect(zip([row[5], row[7], row[9]], best).allSatisfy { $0 == String(format: "%.4f", step.scores[$1]) }, "\(row)")
        }
        let text = try runEarshot(["label", "-m", "Tests/Fixtures/tone-events", "--scores", "-f", "text", "--top-k", "5", ToneEvents.audio])
        let first = steps[0].scores
        #expect(text.out.split(separator: "\n").first.map(String.init) == "00:00:00.000  " + first.indices.sorted { (first[$0], -$0) > (first[$1], -$1) }
            .prefix(5).map { "\(labels[$0]) \(String(format: "%.3f", first[$0]))" }.joined(separator: "  "))
        #expect(text.out.hasPrefix("00:00:00.000  Sinus 1000_Tone 1000 Hz 0.835  "))
        for format in ["raven", "birdnet"] {
            let refused = try runEarshot(["label", "-m", "Tests/Fixtures/tone-events", "--scores", "-f", format, ToneEvents.audio])
            #expect(refused.status == 64 && refused.err.contains("cannot carry scores"), "\(format)")
        }
    }

    @Test("Per-label thresholds from a file equal them given one by one; a bad file is refused naming its line")
    func thresholdsFile() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("thresholds.csv")
        try "label,threshold\n# the quiet tone\nSinus 400_Tone 400 Hz,0.3\n\nSinus 1500_Tone 1500 Hz\t0.8\r\n".write(to: file, atomically: true, encoding: .utf8)
        let base = ["label", "-m", "Tests/Fixtures/tone-events", "-f", "jsonl", ToneEvents.audio]
        let fromFile = try runEarshot(base + ["--thresholds", file.path])
        let given = try runEarshot(base + ["--threshold", "Sinus 400_Tone 400 Hz=0.3,Sinus 1500_Tone 1500 Hz=0.8"])
        #expect(fromFile.status == 0 && fromFile.out == given.out && !given.out.isEmpty)
        #expect(given.out.contains("\"common\":\"Tone 400 Hz\"") && !given.out.contains("\"common\":\"Tone 1500 Hz\""))
        for (text, reason) in [("Sinus 400_Tone 400 Hz,0.3\nSinus 40_Tone 400 Hz,0.2\n", "line 2: 'Sinus 40_Tone 400 Hz' is not a label of the model (did you mean 'Sinus 400_Tone 400 Hz'?)"),
                               ("Sinus 400_Tone 400 Hz,1.5\n", "line 1: threshold 1.5 of 'Sinus 400_Tone 400 Hz': expected 0...1"),
                               ("Sinus 400_Tone 400 Hz,0.3\nSinus 500_Tone 500 Hz,high\n", "line 2: 'high' is not a number"),
                               ("Sinus 400_Tone 400 Hz 0.3\n", "line 1: expected LABEL,THRESHOLD")] {
            try text.write(to: file, atomically: true, encoding: .utf8)
            let bad = try runEarshot(base + ["--thresholds", file.path])
            #expect(bad.status == 65 && bad.err.contains("\(file.path): \(reason)") && bad.out.isEmpty, "\(bad.err)")
        }
        let missing = try runEarshot(base + ["--thresholds", folder.appendingPathComponent("none.csv").path])
        #expect(missing.status == 65 && missing.err.contains("none.csv: cannot read the file"), "\(missing.err)")
        // The options of a sound-events rule need a model that has one.
        let vad = try runEarshot(["label", "-m", "silero-vad-8k", "--top-k", "2", "AudioSamples/speech-8k.wav"])
        #expect(vad.status == 64 && vad.err.contains("--top-k: silero-vad-8k has no sound-events rule"), "\(vad.err)")
        let typo = try runEarshot(base + ["--threshold", "Sinus 40_Tone 400 Hz=0.3"])
        #expect(typo.status == 64 && typo.err.contains("did you mean Sinus 400_Tone 400 Hz?"), "\(typo.err)")
        let gap = try runEarshot(base + ["--merge-gap", "soon"])
        #expect(gap.status == 64 && gap.err.contains("--merge-gap soon: expected seconds in 0...86400, or none"), "\(gap.err)")
    }
}

@Suite("Sound events: a package's rule refused at load when it cannot hold")
struct SoundEventManifestTests {
    /// The fixture package with its manifest's decision changed.
    static func load(_ change: (inout [String: Any]) -> Void) throws -> Result<Model, Error> {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = Repo.root.appendingPathComponent("Tests/Fixtures/tone-events")
        try FileManager.default.copyItem(at: source.appendingPathComponent("weights.safetensors"), to: folder.appendingPathComponent("weights.safetensors"))
        var manifest = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: source.appendingPathComponent("model.json"))) as? [String: Any])
        var decision = manifest["decision"] as? [String: Any] ?? [:]
        change(&decision)
        manifest["decision"] = decision
        try JSONSerialization.data(withJSONObject: manifest).write(to: folder.appendingPathComponent("model.json"))
        return Result { try Model(contentsOf: folder) }
    }

    @Test("topK 0, a threshold of a label the model lacks, a negative gap, events and a detection window at once: each named")
    func refused() throws {
        let cases: [(String, ([String: Any]) -> [String: Any])] = [
            ("decision.events.topK 0 in the model's manifest: expected 1...100000", { d in var d = d; d["events"] = ["topK": 0]; return d }),
            ("decision.events.labelThresholds: 'Sinus 100_Tone 100 Hz' is not one of the model's labels",
             { d in var d = d; d["events"] = ["labelThresholds": ["Sinus 100_Tone 100 Hz": 0.5]]; return d }),
            ("decision.events.labelThresholds[Sinus 200_Tone 200 Hz] 1.5 in the model's manifest: expected 0...1",
             { d in var d = d; d["events"] = ["labelThresholds": ["Sinus 200_Tone 200 Hz": 1.5]]; return d }),
            ("decision.events.mergeGapSeconds -1.0 in the model's manifest: expected 0...86400 s", { d in var d = d; d["events"] = ["mergeGapSeconds": -1]; return d }),
            ("decision: a model gives events or detections, not both", { d in var d = d; d["detectionWindow"] = 3; return d }),
        ]
        for (message, change) in cases {
            let result = try Self.load { $0 = change($0) }
            guard case let .failure(error) = result else { Issue.record("loaded: \(message)"); continue }
            #expect("\(error)".contains(message), "\(error)")
        }
        // The rule read back: merge false is every window its own event.
        let windows = try Self.load { $0["events"] = ["merge": false, "topK": 1] }.get()
        #expect(LabelOptions(model: windows).events?.mergeGapSeconds == nil && LabelOptions(model: windows).events?.topK == 1)
        #expect(ModelKind(windows.manifest) == .soundEvents)
    }
}

@Suite("Sound events: bench streams runs a window classifier at its hop, --overlap its own")
struct SoundEventBenchTests {
    static let fixture = "Tests/Fixtures/tone-events"

    /// The JSON line of a run that succeeded.
    func bench(_ arguments: [String]) throws -> [String: Any] {
        let r = try runEarshot(["bench", "streams", "-m", Self.fixture, "--audio", ToneEvents.audio] + arguments + ["--json"])
        #expect(r.status == 0, "\(r.err)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any], "\(r.out)")
    }

    @Test("a tick is the hop (the window less --overlap); per count the CPU time of a stream's tick, the streams it allows and the resident memory; the state is the window")
    func overlapTicks() throws {
        // The fixture's window is 0.25 s at 8 kHz (2000 samples): --overlap 0.1875 leaves a hop of
        // 500 samples (0.0625 s); --overlap 0, one of 2000; without it the package's hop, 1000.
        for (overlap, hop) in [("0.1875", 500), ("0", 2000), (nil, 1000)] as [(String?, Int)] {
            let json = try bench(["--counts", "3,5", "--ticks", "10"] + (overlap.map { ["--overlap", $0] } ?? []))
            #expect(json["tickSeconds"] as? Double == Double(hop) / 8000, "--overlap \(overlap ?? "none")")
            #expect(json["warmUpTicks"] as? Int == 1)
            // A stream's state holds the window's samples before the hop: the whole window less the hop.
            #expect(json["stateBytesPerStream"] as? Int == (2000 - hop) * 4, "--overlap \(overlap ?? "none"): \(json)")
            let results = try #require(json["results"] as? [[String: Any]])
            #expect(results.map { $0["streams"] as? Int } == [3, 5])
            let cores = try #require(json["cores"] as? Int)
            for row in results {
                let cpuMs = try #require(row["cpuMsPerStreamTick"] as? Double)
                #expect(cpuMs > 0 && cpuMs < 50, "\(row)")  // a 12-label network on 0.25 s
                #expect(row["cpuMsPerBlock"] as? Double == cpuMs)  // one block a tick
                // cores x the tick over the CPU time of a stream's tick (within one: the JSON's milliseconds are rounded back).
                let byCpu = Int(Double(cores) * Double(hop) / 8000 / (cpuMs / 1000))
                #expect(abs((row["streamsByCpu"] as? Int ?? -9) - byCpu) <= 1, "\(row)")
                let resident = try #require(row["residentMb"] as? Double)
                #expect(resident > 1 && resident < 4096, "\(row)")
            }
        }
        let text = try runEarshot(["bench", "streams", "-m", Self.fixture, "--audio", ToneEvents.audio, "--overlap", "0.1875", "--counts", "2", "--ticks", "20"])
        #expect(text.status == 0, "\(text.err)")
        #expect(text.out.hasPrefix("tone-events on "), "\(text.out)")
        #expect(text.out.contains("of every stream's audio (500 samples at 8000 Hz), 20 ticks a count, 2 of them warm-up"), "\(text.out)")
        #expect(text.out.contains("     2 streams: tick p50"), "\(text.out)")
    }

    @Test("--overlap is refused when it leaves no hop, or for a model without a sound-events rule")
    func overlapRefused() throws {
        let whole = try runEarshot(["bench", "streams", "-m", Self.fixture, "--overlap", "0.25", "--counts", "2", "--ticks", "10"])
        #expect(whole.status == 64 && whole.err.contains("--overlap 0.25: tone-events's windows are 0.25 s"), "\(whole.err)")
        let vad = try runEarshot(["bench", "streams", "-m", "silero-vad", "--overlap", "1", "--counts", "2", "--ticks", "10"])
        #expect(vad.status == 64 && vad.err.contains("--overlap: silero-vad has no sound-events rule"), "\(vad.err)")
        let bad = try runEarshot(["bench", "streams", "-m", Self.fixture, "--overlap", "x"])
        #expect(bad.status == 64 && bad.err.contains("--overlap"), "\(bad.err)")
    }
}
