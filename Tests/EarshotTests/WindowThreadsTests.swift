import EarshotAudio
import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot

/// A window classifier's steps split between threads (`earshot label --threads N`): the same
/// scores, states and events, bit for bit, as one step after another.
@Suite("A window classifier's steps on several threads: the scores and events of one thread")
struct WindowThreadsTests {
    /// tones.wav's samples (96,500 at 8 kHz: 96.5 hops of the fixture's 1000-sample hop).
    static func toneSamples() throws -> [Float] {
        let file = try AudioFile(path: Repo.path(ToneEvents.audio))
        return try file.readMono(maxFrames: 1 << 20)
    }

    @Test("predictions(forWindows:) equals prediction(from:) block after block, bit for bit (every step's scores, the state after), on 2 and 3 threads, from a fresh state and from one part way, for 2 to 96 blocks; a model with a recurrent state is not split")
    func modelSteps() throws {
        let model = ToneEvents.model
        #expect(model.stepsAreWindows)
        let samples = try Self.toneSamples()
        let n = model.chunkSamples
        let blocks = (0..<(samples.count / n)).map { Array(samples[($0 * n)..<(($0 + 1) * n)]) }
        #expect(blocks.count == 96)
        // One step after another: the reference.
        var serialState = model.makeState()
        var serial: [[Float]] = []
        var states: [ModelState] = [serialState]
        for block in blocks {
            serial.append(try model.prediction(from: block, using: &serialState))
            states.append(serialState)
        }
        for threads in [2, 3] {
            for (first, count) in [(0, 96), (0, 2), (0, 7), (13, 50), (40, 3), (95, 1)] {
                var state = states[first]
                let scores = try model.predictions(forWindows: Array(blocks[first..<(first + count)]), using: &state, threads: threads)
                #expect(scores == Array(serial[first..<(first + count)]), "threads \(threads), blocks \(first)..<\(first + count)")
                #expect(state == states[first + count], "threads \(threads), blocks \(first)..<\(first + count): the state after")
            }
        }
        let recurrent = try Model(contentsOf: Repo.root.appendingPathComponent("Tests/Fixtures/silero-vad-layers"))
        #expect(!recurrent.stepsAreWindows)
    }

    @Test("FileLabeler on 1, 2 and 3 threads, read in any chunks: the same events and window scores, mixed and each channel (tones.wav: 96.5 hops, windows of two hops)")
    func fileEvents() async throws {
        var options = LabelOptions(model: ToneEvents.model)
        options.includeScores = true
        for path in [ToneEvents.audio, ToneEvents.stereo] {
            for channels in [FileLabeler.Channels.mix, .each] {
                let reference = try await FileLabeler(model: ToneEvents.model, options: options, channels: channels, threads: 1)
                    .label(path: Repo.path(path)).events
                #expect(reference.contains { if case .ended = $0 { true } else { false } })
                #expect(reference.filter { if case .scores = $0 { true } else { false } }.count == 97 * (channels == .each && path == ToneEvents.stereo ? 2 : 1))
                for threads in [2, 3] {
                    for chunk in [262_144, 1500, 777] {
                        let events = try await FileLabeler(model: ToneEvents.model, options: options, channels: channels, chunkSamples: chunk,
                                                           threads: threads).label(path: Repo.path(path)).events
                        #expect(events == reference, "\(path) \(channels) threads \(threads) chunks of \(chunk)")
                    }
                }
            }
        }
        #expect(throws: StreamError.self) { try Session(model: ToneEvents.model, channelCount: 1, threads: 0) }
    }

    @Test("earshot label --threads 1, 2, 3: the same output in every format, with --scores, mixed and each channel; --threads 0 is a usage error")
    func commandOutput() throws {
        let model = "Tests/Fixtures/tone-events"
        let runs: [[String]] = [["-f", "jsonl", "--scores"], ["-f", "csv", "--scores"], ["-f", "raven"], ["-f", "birdnet"], ["-f", "audacity"],
                                ["-f", "jsonl", "--merge-gap", "0.25"], ["-f", "raven", "--channels", "each"]]
        for run in runs {
            let file = run.contains("each") ? ToneEvents.stereo : ToneEvents.audio
            let one = try runEarshot(["label", "-m", model, "--quiet", "--threads", "1"] + run + [file])
            #expect(one.status == 0, "\(one.err)")
            #expect(one.out.split(separator: "\n").count > 5)
            for threads in ["2", "3"] {
                let r = try runEarshot(["label", "-m", model, "--quiet", "--threads", threads] + run + [file])
                #expect(r.status == 0 && r.out == one.out, "\(run) --threads \(threads)")
            }
        }
        let bad = try runEarshot(["label", "-m", model, "--threads", "0", ToneEvents.audio])
        #expect(bad.status == 64 && bad.err.contains("--threads"), "\(bad.err)")
    }

    @Test("BirdNET (birds.flac, 10.6 s: not whole windows) at overlap 0 and 1.5 s: earshot label --threads 2 and 3 write what --threads 1 writes, bit for bit, as BirdNET's CSV and as JSON lines with every window's scores")
    func birdnet() throws {
        // At overlap 1.5 s a window's context is the half before it, so a run that did not start
        // from the window before its first block would differ; at overlap 0 the windows share
        // nothing and the threads' runs of windows must only come back in order.
        let package = try BirdNETTests.package()
        let file = "\(BirdNETTests.goldens)/birds.flac"
        for overlap in ["0", "1.5"] {
            for run in [["-f", "birdnet"], ["-f", "jsonl", "--scores"]] {
                let args = ["label", "-m", package, "--quiet", "--overlap", overlap, "--min-confidence", "0.1"] + run
                let one = try runEarshot(args + ["--threads", "1", file])
                #expect(one.status == 0, "\(one.err)")
                #expect(one.out.split(separator: "\n").count > 2)
                for threads in ["2", "3"] {
                    let r = try runEarshot(args + ["--threads", threads, file])
                    #expect(r.status == 0 && r.out == one.out, "overlap \(overlap) \(run) --threads \(threads)")
                }
            }
        }
    }
}
