import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot
@testable import earshot

/// Live classification through ALSA's file PCM (no hardware): the real capture API, fed from an
/// AudioSamples file.
enum LiveFixture {
    static func capture(name: String, channels: [[Float]], queuedFrames: Int? = nil) throws -> ALSACapture {
        let frames = channels[0].count
        let interleaved = (0..<frames).flatMap { f in channels.map { $0[f] } }
        var s = ALSACapture.Settings()
        s.device = name
        s.channels = channels.count
        s.sampleRate = 16000
        s.configuration = try FilePCM.configuration(name: name, samples: interleaved)
        s.maxFrames = frames  // the file PCM never ends by itself
        s.queuedFrames = queuedFrames ?? frames + 16000  // faster than real time: hold it all
        return try ALSACapture(s)
    }

    static func listen(_ capture: ALSACapture, slow: Bool = false, options: LabelOptions? = nil) async throws -> ([ClassifierEvent], LiveLabeler.Summary) {
        var events: [ClassifierEvent] = []
        let summary = try await LiveLabeler(model: Fixtures.model, options: options).run(capture) { delivery in
            events += delivery.events
            if slow { usleep(3000) }  // a consumer slower than the file PCM delivers
        }
        return (events, summary)
    }
}

@Suite("Listening (ALSA file PCM)")
struct ListenTests {
    @Test("Listening to a PCM fed with a sample gives the segments labelling the file gives")
    func listenEqualsLabel() async throws {
        let channels = try Fixtures.channels("speech-noise-16k.wav")
        let (events, summary) = try await LiveFixture.listen(try LiveFixture.capture(name: "earshot_listen", channels: channels))
        let labelled = try await FileLabeler(model: Fixtures.model).label(path: Repo.path("AudioSamples/speech-noise-16k.wav"))
        #expect(segments(events) == labelled.segments)
        #expect(labelled.segments.count == 6)
        #expect(summary.frames == channels[0].count && summary.droppedFrames == 0)
        // Every segment was announced while it ran, before its end.
        let started = events.compactMap { if case let .started(s) = $0 { return s.start } else { return nil } }
        #expect(started.count == 6)
    }

    @Test("A stereo capture gives each channel the timeline it gets when labelled alone")
    func stereo() async throws {
        let channels = try Fixtures.channels("stereo-16k.wav")
        let (events, _) = try await LiveFixture.listen(try LiveFixture.capture(name: "earshot_stereo_listen", channels: channels))
        for k in 0..<2 {
            let alone = segments(try await Fixtures.run(channels[k], rate: 16000)).map { s -> Segment in
                var s = s
                s.channel = k
                return s
            }
            #expect(segments(events).filter { $0.channel == k } == alone, "channel \(k)")
            #expect(!alone.isEmpty)
        }
    }

    @Test("A consumer slower than the device: the oldest audio is dropped and every dropped sample is reported")
    func slowConsumer() async throws {
        let channels = try Fixtures.channels("speech-noise-16k.wav")
        let capture = try LiveFixture.capture(name: "earshot_slow_listen", channels: [Array(channels[0][0..<160_000])], queuedFrames: 1600)
        let (events, summary) = try await LiveFixture.listen(capture, slow: true, options: Fixtures.withScores)
        let reported = events.reduce(0) { total, e in
            if case let .dropped(_, samples, _) = e { return total + samples } else { return total }
        }
        #expect(summary.droppedFrames > 0)
        #expect(reported == summary.droppedFrames)
        #expect(summary.frames + summary.droppedFrames == 160_000)
        // The lost audio stands as silence: the steps still cover the capture's whole clock.
        #expect(scores(events).count == (160_000 + 511) / 512)
        #expect(scores(events).last?.end == 160_000)
        if case let .dropped(_, _, total) = events.last(where: { if case .dropped = $0 { return true } else { return false } }) {
            #expect(total == summary.droppedFrames)
        }
    }
}

@Suite("listen's live view")
struct LiveViewTests {
    static func scores(_ channel: Int, _ values: [Float], end: Int) -> ClassifierEvent {
        .scores(StepScores(channel: channel, start: end - 512, end: end, sampleRate: 16000, scores: values))
    }

    @Test("Two models on two channels: a line per channel and model, each its model's name, label and own score; the level on a channel's first line")
    func linePerModel() throws {
        let nabu = try Model(contentsOf: Repo.root.appendingPathComponent("Models/okay-nabu"))
        let models = [nabu, Fixtures.model].map { ($0, LabelOptions(model: $0)) }
        let view = LiveView(models: models, channels: 2, interactive: false, json: false, printScores: false)
        let segment = Segment(channel: 1, label: "speech", start: 1000, end: 1000, sampleRate: 16000, confidence: 0.9)
        let printed = view.record(LiveLabeler.Delivery(
            events: [Self.scores(0, [0.91], end: 16000), Self.scores(0, [0.12], end: 16000), Self.scores(1, [0.05], end: 16000),
                     .started(segment), Self.scores(1, [0.77], end: 16000),
                     .detected(Detection(channel: 0, label: "Okay Nabu", sample: 15000, sampleRate: 16000, score: 0.91))],
            models: [0, 1, 0, 1, 1, 0], latency: .milliseconds(3), levels: [-20, -35.5]))
        #expect(printed == ["ch1  \(SegmentFormat.clock(1000.0 / 16000))  ...           speech",
                            "ch0  \(SegmentFormat.clock(15000.0 / 16000))  detected  Okay Nabu  0.91"], "\(printed)")
        let lines = view.statusLines()
        #expect(lines == [
            "ch0  okay-nabu   Okay Nabu  [##################..] 0.91  detected  in  -20.0 dB  dropped 0",
            "ch0  silero-vad  speech     [##..................] 0.12",
            "ch1  okay-nabu   Okay Nabu  [#...................] 0.05            in  -35.5 dB  dropped 0",
            "ch1  silero-vad  speech     [###############.....] 0.77  on",
        ], "\(lines.joined(separator: "\n"))")
        // Later steps: okay-nabu falls, the VAD's segment ends; each line keeps to its own model.
        _ = view.record(LiveLabeler.Delivery(
            events: [Self.scores(0, [0.02], end: 48000), .ended(segment), Self.scores(1, [0.3], end: 48000)],
            models: [0, 1, 1], latency: nil, levels: [-.infinity, -.infinity]))
        #expect(view.statusLines()[0] == "ch0  okay-nabu   Okay Nabu  [....................] 0.02            in  -20.0 dB  dropped 0")
        #expect(view.statusLines()[3] == "ch1  silero-vad  speech     [######..............] 0.30")
        // A gate asked for only as a gate (--gate without -m) has no line; asked for with -m, it has one.
        let gated = try LiveLabeler(models: models, gate: 1, showGate: false)
        #expect(gated.shownModels == [0])
        #expect(try LiveLabeler(models: models, gate: 1, showGate: true).shownModels == [0, 1])
        let oneLine = LiveView(models: models, shown: gated.shownModels, channels: 1, interactive: false, json: false, printScores: false)
        #expect(oneLine.statusLines() == ["ch0  okay-nabu  Okay Nabu  [....................] 0.00            in   -inf dB  dropped 0"])
    }

    @Test("Listening with okay-nabu and silero-vad (ALSA file PCM): each delivered event names its model, and each live line shows its own model's last score")
    func twoModelsLive() async throws {
        let (audio, _) = try AudioFile.readMono(path: Repo.path("Tests/EarshotTests/Goldens/microwakeword/wake-words.wav"))
        let nabu = try Model(contentsOf: Repo.root.appendingPathComponent("Models/okay-nabu"))
        let models = [nabu, Fixtures.model].map { m -> (model: Model, options: LabelOptions) in
            var o = LabelOptions(model: m)
            o.includeScores = true
            return (m, o)
        }
        let view = LiveView(models: models, channels: 1, interactive: false, json: false, printScores: false)
        var last: [Float?] = [nil, nil]
        var checked = 0, apart = 0
        _ = try await LiveLabeler(models: models).run(try LiveFixture.capture(name: "earshot_two_models", channels: [audio])) { delivery in
            #expect(delivery.models.count == delivery.events.count)
            for (event, m) in zip(delivery.events, delivery.models) {
                if case let .scores(s) = event {
                    #expect(s.scores.count == models[m].model.labels.count)
                    last[m] = s.scores[0]
                }
            }
            _ = view.record(delivery)
            guard let a = last[0], let b = last[1] else { return }
            let lines = view.statusLines()
            #expect(lines.count == 2 && lines[0].hasPrefix("ch0  okay-nabu   Okay Nabu  [") && lines[1].hasPrefix("ch0  silero-vad  speech     ["))
            #expect(lines[0].contains("] " + String(format: "%.2f", a)) && lines[1].contains("] " + String(format: "%.2f", b)), "\(lines)")
            checked += 1
            if abs(a - b) > 0.5 { apart += 1 }
        }
        #expect(checked > 50)
        #expect(apart > 5)  // one bar for both would jump between these
    }
}

@Suite("Listening to a sound-events model (ALSA file PCM)")
struct ListenSoundEventTests {
    /// The tones at 16 kHz on two channels (the mono sequence and the stereo file's second), as
    /// 16-bit values: what the capture reads back.
    static func tones16k() throws -> [[Float]] {
        let file = try AudioFile(path: Repo.path(ToneEvents.stereo))
        return try file.readChannels(maxFrames: file.frameCount ?? 0).map { channel in
            let up = try Resampler(inputRate: 8000, outputRate: 16000)
            return (try up.process(channel) + (try up.finish())).map { Float(Int16(clamping: Int(($0 * 32768).rounded()))) / 32768 }
        }
    }

    @Test("Two microphones, each its own state: the events each channel gives when labelled alone, and the live lines show each one's best labels and what it heard")
    func twoChannels() async throws {
        let channels = try Self.tones16k()
        var options = LabelOptions(model: ToneEvents.model)
        options.includeScores = true
        let view = LiveView(models: [(ToneEvents.model, options)], channels: 2, interactive: false, json: true, printScores: false)
        var events: [ClassifierEvent] = []
        var printed: [String] = []
        _ = try await LiveLabeler(model: ToneEvents.model, options: options).run(try LiveFixture.capture(name: "earshot_tones", channels: channels)) { d in
            events += d.events
            printed += view.record(d)
        }
        for k in 0..<2 {
            let alone = try StreamClassifier(model: ToneEvents.model, sourceSampleRate: 16000, options: options)
            let expected = try await alone.process(channels[k]) + (try await alone.finish())
            #expect(events.filter { $0.channel == k }.map { $0.renumbered(to: 0) }.filter { if case .ended = $0 { true } else { false } }
                    == expected.filter { if case .ended = $0 { true } else { false } }, "channel \(k)")
            #expect(segments(expected).count == [10, 5][k])
        }
        // In a pipe: a JSON line per event, with its best window and window count.
        let ended = printed.filter { $0.hasPrefix("{\"event\":\"ended\"") }
        #expect(ended.count == 15 && ended.allSatisfy { $0.contains("\"best\":") && $0.contains("\"windows\":") })
        // The live lines: each channel's last window's best labels; under them what it heard lately.
        let lines = view.statusLines()
        #expect(lines.count == 4, "\(lines)")
        #expect(lines[0].hasPrefix("ch0  tone-events  Tone 1800 Hz ") && lines[2].hasPrefix("ch1  tone-events  "), "\(lines)")
        // The latest first (of events ended together, the later in the file's order); a label's
        // events once, with their count, best score and the latest one's start.
        #expect(lines[1] == "                  heard (5 min): 00:00:11 Tone 1800 Hz 0.96 · 00:00:08 Tone 1200 Hz 0.87 · 00:00:07 Tone 600 Hz 0.95 · 00:00:07 Tone 300 Hz 0.99 (+5 more)", "\(lines[1])")
        #expect(lines[3] == "                  heard (5 min): 00:00:09 Tone 2600 Hz 0.97 · 00:00:06 Tone 600 Hz 0.99 · 00:00:04 Tone 1800 Hz 0.99 ×2 · 00:00:00 Tone 200 Hz 0.98", "\(lines[3])")
    }

    @Test("The live lines of a sound-events model: the best labels with their scores, open events marked, the last minutes' events by label; older ones leave")
    func liveLines() throws {
        var options = LabelOptions(model: ToneEvents.model)
        options.includeScores = true
        let view = LiveView(models: [(ToneEvents.model, options)], channels: 1, interactive: false, json: false, printScores: false)
        let labels = ToneEvents.model.labels
        func scores(_ values: [Int: Float], at seconds: Double) -> ClassifierEvent {
            var all = [Float](repeating: 0.01, count: labels.count)
            for (i, v) in values { all[i] = v }
            let end = Int(seconds * 8000)
            return .scores(StepScores(channel: 0, start: end - 1000, end: end, sampleRate: 8000, scores: all))
        }
        func event(_ i: Int, _ start: Double, _ end: Double, best: Float) -> Segment {
            Segment(channel: 0, label: labels[i], start: Int(start * 8000), end: Int(end * 8000), sampleRate: 8000, confidence: best - 0.1, best: best, windows: 3)
        }
        let printed = view.record(LiveLabeler.Delivery(events: [scores([6: 0.9, 2: 0.4, 9: 0.7], at: 10), .ended(event(2, 3, 4, best: 0.8)),
                                                                .ended(event(6, 5, 6, best: 0.95)), .started(event(6, 9.5, 10, best: 0.9))],
                                                       models: [0, 0, 0, 0], latency: .milliseconds(2), levels: [-30]))
        #expect(printed == ["00:00:03.000  00:00:04.000  Tone 400 Hz  0.70  best 0.80, 3 windows",
                            "00:00:05.000  00:00:06.000  Tone 1000 Hz  0.85  best 0.95, 3 windows", "00:00:09.500  ...           Tone 1000 Hz"], "\(printed)")
        #expect(view.statusLines() == [
            "ch0  tone-events  *Tone 1000 Hz          0.90  Tone 1800 Hz           0.70  Tone 400 Hz            0.40  in  -30.0 dB  dropped 0",
            "                  heard (5 min): 00:00:05 Tone 1000 Hz 0.95 · 00:00:03 Tone 400 Hz 0.80",
        ], "\(view.statusLines().joined(separator: "\n"))")
        // Six minutes on, the event ends; those of more than five minutes ago have left the list.
        _ = view.record(LiveLabeler.Delivery(events: [scores([:], at: 370), .ended(event(6, 9.5, 369, best: 0.99))], models: [0, 0], latency: nil, levels: [-40]))
        #expect(view.statusLines()[1] == "                  heard (5 min): 00:00:09 Tone 1000 Hz 0.99")
        #expect(view.statusLines()[0].hasPrefix("ch0  tone-events  Tone 200 Hz            0.01  Tone 300 Hz            0.01"))
    }
}

@Suite("earshot listen and devices")
struct ListenCommandTests {
    @Test("listen prints the same segments as label, one JSON line per event, with latency")
    func listenJSON() throws {
        let config = try Fixtures.captureConfigFile(name: "earshot_cli")
        let result = try runEarshot(["listen", "--device", "earshot_cli", "--duration", "36.499", "--buffer-seconds", "60",
                                     "--format", "jsonl", "--verbose"], environment: ["ALSA_CONFIG_PATH": config])
        #expect(result.status == 0, "\(result.err)")
        let objects = result.out.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let endedObjects = objects.filter { $0["event"] as? String == "ended" }
        let ended = endedObjects.map {
            (String(format: "%.3f", $0["start"] as? Double ?? -1), String(format: "%.3f", $0["end"] as? Double ?? -1))
        }
        // Segments that end while capture runs carry their delivery latency (the last may end with the capture).
        #expect(endedObjects.filter { ($0["latencyMs"] as? Double).map { $0 >= 0 } ?? false }.count >= 5)
        #expect(objects.filter { $0["event"] as? String == "started" }.count == 6)
        let expected = try String(contentsOfFile: Repo.path("Tests/EarshotTests/Expected/speech-noise-16k.csv"), encoding: .utf8)
            .split(separator: "\n").dropFirst().map { $0.split(separator: ",") }.map { (String($0[3]), String($0[4])) }
        #expect(ended.map(\.0) == expected.map(\.0))
        #expect(ended.map(\.1) == expected.map(\.1))
        #expect(result.err.contains("delivery latency p50"))
        #expect(result.err.contains("583984 frames captured, 0 dropped"))
    }

    @Test("listen --model okay-nabu detects the wake phrase live as label finds it in the file")
    func listenWakeWord() throws {
        let wav = Repo.path("Tests/EarshotTests/Goldens/microwakeword/wake-words.wav")
        let (audio, _) = try AudioFile.readMono(path: wav)
        let config = try Repo.temporaryFolder().appendingPathComponent("alsa.conf").path
        try FilePCM.configuration(name: "earshot_wake", samples: audio).write(toFile: config, atomically: true, encoding: .utf8)
        let seconds = String(format: "%.3f", Double(audio.count) / 16000 - 0.001)
        let live = try runEarshot(["listen", "--device", "earshot_wake", "--model", "okay-nabu", "--duration", seconds,
                                   "--buffer-seconds", "60", "--format", "jsonl"], environment: ["ALSA_CONFIG_PATH": config])
        #expect(live.status == 0, "\(live.err)")
        let detected = live.out.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .filter { $0["event"] as? String == "detected" }
        let file = try runEarshot(["label", "--model", "okay-nabu", "--format", "jsonl", wav])
        let labelled = file.out.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(detected.map { $0["time"] as? Double ?? -1 } == labelled.map { $0["time"] as? Double ?? -2 })
        #expect(detected.map { $0["label"] as? String } == ["Okay Nabu", "Okay Nabu"])
        // Two wake words and a VAD gate on one capture: the detections speech overlaps, no segments.
        let gated = try runEarshot(["listen", "--device", "earshot_wake", "--model", "okay-nabu,alexa", "--gate", "silero-vad",
                                    "--duration", seconds, "--buffer-seconds", "60", "--format", "jsonl"],
                                   environment: ["ALSA_CONFIG_PATH": config])
        #expect(gated.status == 0, "\(gated.err)")
        let events = gated.out.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(events.compactMap { $0["label"] as? String } == ["Okay Nabu", "Alexa", "Okay Nabu"])
        #expect(events.allSatisfy { $0["event"] as? String == "detected" })
    }

    @Test("Ctrl-C stops listening cleanly: open segments are closed, exit code 0")
    func interrupt() throws {
        let config = try Fixtures.captureConfigFile(name: "earshot_sigint")
        // No duration: the file PCM would run for ever (it repeats its last read).
        let result = try runEarshot(["listen", "--device", "earshot_sigint", "--format", "jsonl", "--buffer-seconds", "600", "--verbose"],
                                    environment: ["ALSA_CONFIG_PATH": config], interruptAfter: .milliseconds(1500), readyMarker: "capturing")
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out.contains("\"event\":\"ended\""))
    }

    @Test("A device that does not exist: exit 1 with ALSA's reason and what to try")
    func missingDevice() throws {
        let result = try runEarshot(["listen", "--device", "earshot_nothing", "--duration", "1"])
        #expect(result.status == 1)
        #expect(result.err.contains("capture device 'earshot_nothing': No such file or directory; run `earshot devices`"))
        #expect(!result.err.contains("ALSA lib"))  // ALSA's own printing is silenced
    }

    @Test("devices lists the capture PCMs ALSA knows, and says when there is no card")
    func devices() throws {
        let config = try Fixtures.captureConfigFile(name: "earshot_listed")
        let result = try runEarshot(["devices"], environment: ["ALSA_CONFIG_PATH": config])
        #expect(result.status == 0)
        #expect(result.out.contains("sound cards:\n  (none found: no sound card on this machine)"))
        #expect(result.out.contains("  earshot_listed  Earshot test capture"))
    }
}
