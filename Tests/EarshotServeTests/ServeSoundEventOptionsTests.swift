import EarshotCommandTestSupport
import EarshotTestSupport
import EarshotWyoming
import Foundation
import Testing

@testable import Earshot

/// `earshot serve` with a sound-events model's run options, as `earshot label` takes them: the
/// label choice (the place and week its label filter model reads, or a species list) and the
/// overlap of its windows.
@Suite("serve: a sound-events model's --lat/--lon/--week, --species-list and --overlap")
struct ServeSoundEventOptionsTests {
    /// A stdio:// conversation: the audio at its rate in 20 ms chunks of 16-bit PCM.
    static func conversation(_ samples: [Float], rate: Int) -> [UInt8] {
        let format: [String: JSONValue] = ["rate": .number(Double(rate)), "width": 2, "channels": 1]
        var bytes = WyomingEvent(type: "audio-start", data: format).encoded
        let pcm = pcm16(samples), step = rate / 50 * 2
        for at in stride(from: 0, to: pcm.count, by: step) {
            bytes += WyomingEvent(type: "audio-chunk", data: format, payload: Array(pcm[at..<min(at + step, pcm.count)])).encoded
        }
        return bytes + WyomingEvent(type: "audio-stop").encoded
    }

    /// The sound-event answers in a file of a stdio:// conversation's answers.
    static func soundEvents(_ path: String) throws -> [WyomingEvent] {
        var reader = WyomingReader()
        reader.append([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
        var events: [WyomingEvent] = []
        while let e = try reader.next() {
            if e.type == "sound-event" { events.append(e) }
        }
        return events
    }

    @Test("serve --overlap S: a window stream's windows every window - S seconds, the events earshot label --overlap S finds (tone-events' 0.25 s windows every 0.1 s instead of its 0.125 s)")
    func overlap() throws {
        let package = "Tests/Fixtures/tone-events", wav = Repo.path("Tests/EarshotTests/Goldens/sound-events/tones.wav")
        let (samples, rate) = try AudioFile.readMono(path: wav)
        // From a file: a server that refuses its options reads none of it.
        let input = try Repo.temporaryFolder().appendingPathComponent("conversation").path
        try Data(Self.conversation(samples, rate: rate)).write(to: URL(fileURLWithPath: input))
        var windows: [String: Int] = [:]
        for options in [["--overlap", "0.15"], []] {
            let label = try runEarshot(["label", "-m", package, "--format", "jsonl"] + options + [wav])
            #expect(label.status == 0, "\(label.err)")
            let expected = try label.out.split(separator: "\n").map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            }
            let out = try Repo.temporaryFolder().appendingPathComponent("answers").path
            _ = FileManager.default.createFile(atPath: out, contents: nil)
            let run = try runEarshot(["serve", "--uri", "stdio://", "-m", package] + options, stdin: input, stdout: out)
            #expect(run.status == 0, "\(options): \(run.err)")
            let events = try Self.soundEvents(out)
            #expect(events.count == expected.count && !expected.isEmpty, "\(options): \(events.map(\.data))\n\(label.out)")
            for (e, x) in zip(events, expected) {
                // label writes seconds to 3 decimals (12.0625 as 12.062), serve whole ms (12063).
                let near = { (key: String) in abs(Double(e.data[key]?.integer ?? -9) - ((x[key] as? Double) ?? 9) * 1000) <= 1 }
                #expect(e.data["label"]?.string == x["label"] as? String && e.data["windows"]?.integer == x["windows"] as? Int
                        && near("start") && near("end"), "\(options): \(e.data) \(x)")
            }
            windows[options.joined()] = expected.compactMap { $0["windows"] as? Int }.reduce(0, +)
        }
        // A window every 0.1 s: more windows than every 0.125 s, over the same events.
        #expect((windows["--overlap0.15"] ?? 0) > (windows[""] ?? 0), "\(windows)")
    }

    @Test("serve answers only the events of the labels kept: --lat 45 --lon 0 --week 10 (the filter model's five), --lat -45 --lon 0 (the whole year: the other six), --species-list (two): each as a stream of those labels alone gives them")
    func filtered() async throws {
        let package = try LocatedToneEvents.package()
        let model = try Model(contentsOf: URL(fileURLWithPath: package))
        let labels = model.labels
        let (samples, rate) = try AudioFile.readMono(path: Repo.path("Tests/EarshotTests/Goldens/sound-events/tones.wav"))
        let list = try Repo.temporaryFolder().appendingPathComponent("tones.txt")
        try "\(labels[2])\n# a comment\n\(labels[7])\n".write(to: list, atomically: true, encoding: .utf8)
        func ended(_ kept: Set<String>?) async throws -> [Segment] {
            var options = LabelOptions(model: model)
            options.events?.onlyLabels = kept
            let stream = try StreamClassifier(model: model, sourceSampleRate: rate, options: options)
            return (try await stream.process(samples) + (try await stream.finish())).compactMap { e -> Segment? in
                if case let .ended(s) = e { return s } else { return nil }
            }
        }
        let all = try await ended(nil)
        let north = LocatedToneEvents.kept(labels: labels, lat: 45, lon: 0, week: 10)
        let south = LocatedToneEvents.kept(labels: labels, lat: -45, lon: 0, week: -1)
        #expect(north == Set(labels[1...5]) && south == Set(labels[6...11]))
        let cases: [([String], Set<String>)] = [
            (["--lat", "45", "--lon", "0", "--week", "10"], north),
            (["--lat", "-45", "--lon", "0"], south),
            (["--species-list", list.path], [labels[2], labels[7]]),
        ]
        let input = try Repo.temporaryFolder().appendingPathComponent("conversation").path
        try Data(Self.conversation(samples, rate: rate)).write(to: URL(fileURLWithPath: input))
        for (options, kept) in cases {
            let expected = try await ended(kept)
            #expect(!expected.isEmpty && expected.count < all.count && Set(expected.map(\.label)).isSubset(of: kept), "\(options): \(expected)")
            // Every event of a kept label is still there (the labels left out no longer take a window's top 3).
            #expect(Set(all.filter { kept.contains($0.label) }.map(\.label)).isSubset(of: Set(expected.map(\.label))), "\(options)")
            let out = try Repo.temporaryFolder().appendingPathComponent("answers").path
            _ = FileManager.default.createFile(atPath: out, contents: nil)
            let run = try runEarshot(["serve", "--uri", "stdio://", "-m", package] + options, stdin: input, stdout: out)
            #expect(run.status == 0, "\(options): \(run.err)")
            let events = try Self.soundEvents(out)
            #expect(events.count == expected.count, "\(options): \(events.map(\.data))")
            for (e, s) in zip(events, expected) {
                #expect(e.data["label"]?.string == s.label && e.data["windows"]?.integer == s.windows
                        && e.data["start"]?.integer == Int((s.startSeconds * 1000).rounded()) && e.data["end"]?.integer == Int((s.endSeconds * 1000).rounded())
                        && e.data["score"]?.number == Double(s.confidence), "\(options): \(e.data) \(s)")
            }
        }
    }
}
