import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot

@Suite("Stream snapshots: a whole stream moved = the stream uninterrupted")
struct WholeStreamSnapshotTests {
    /// The events of `samples` in `sizes` chunks; at chunk `cut` the stream is snapshotted,
    /// serialized, and goes on in a new classifier restored from the bytes alone.
    static func run(_ model: Model, _ samples: [Float], rate: Int, sizes: [Int], cut: Int?, options: LabelOptions) async throws -> [ClassifierEvent] {
        var stream = try StreamClassifier(model: model, sourceSampleRate: rate, options: options)
        var events: [ClassifierEvent] = []
        var offset = 0
        for (i, size) in sizes.enumerated() {
            if i == cut {
                let bytes = await stream.snapshot().serialized()
                stream = try StreamClassifier(model: model, restoring: try StreamSnapshot(serialized: bytes))
            }
            events += try await stream.process(Array(samples[offset..<(offset + size)]))
            offset += size
        }
        return events + (try await stream.finish())
    }

    static func cases() -> [(model: Model, file: String)] {
        [(Fixtures.model, "AudioSamples/speech-noise-16k.wav"), (Fixtures.model, "AudioSamples/speech-44k.wav"),
         (Fixtures.model, "AudioSamples/speech-8k.wav"), (Fixtures.wakeModel, "Tests/EarshotTests/Goldens/microwakeword/wake-words.wav"),
         (ToneEvents.model, ToneEvents.audio), (ToneEvents.model, ToneEvents.stereo)]
    }

    @Test("Snapshot at random chunk boundaries (16 kHz, 44.1 kHz, 8 kHz; segments, detections and many-label events), restore from bytes: the same events, bit for bit",
          arguments: 0..<6)
    func restoreEqualsUninterrupted(_ index: Int) async throws {
        let (model, file) = Self.cases()[index]
        let (samples, rate) = try AudioFile.readMono(path: Repo.path(file))
        var options = LabelOptions(model: model)
        options.includeScores = true
        if index == 5 {
            // Events open across the cuts: windows joined over a gap, a minimum duration, labels' own thresholds.
            options.events?.mergeGapSeconds = 0.4
            options.events?.minDurationSeconds = 0.6
            options.events?.labelThresholds = ["Sinus 600_Tone 600 Hz": 0.8, "Sinus 200_Tone 200 Hz": 0.3]
        }
        var random = SeededRandom.fromEnvironment()
        let sizes = random.chunkSizes(total: samples.count, maxChunk: Int.random(in: 100...9000, using: &random))
        let whole = try await Self.run(model, samples, rate: rate, sizes: sizes, cut: nil, options: options)
        let decisions = whole.filter { if case .scores = $0 { return false } else { return true } }
        #expect(decisions.count >= 2, "seed \(random.seed)")
        for _ in 0..<4 {
            let cut = Int.random(in: 0..<sizes.count, using: &random)
            let moved = try await Self.run(model, samples, rate: rate, sizes: sizes, cut: cut, options: options)
            #expect(moved == whole, "\(file): cut before chunk \(cut) of \(sizes.count), seed \(random.seed)")
            let bits = { (e: [ClassifierEvent]) in scores(e).flatMap { $0.scores.map(\.bitPattern) } }
            #expect(bits(moved) == bits(whole))
        }
    }

    @Test("A snapshot of format 1 (an earshot before many-label events) is read: segments and detections go on as uninterrupted")
    func formatOne() async throws {
        var random = SeededRandom.fromEnvironment()
        for (model, file) in Self.cases().prefix(4) {
            let (samples, rate) = try AudioFile.readMono(path: Repo.path(file))
            var options = LabelOptions(model: model)
            options.includeScores = true
            let sizes = random.chunkSizes(total: samples.count, maxChunk: Int.random(in: 100...9000, using: &random))
            let whole = try await Self.run(model, samples, rate: rate, sizes: sizes, cut: nil, options: options)
            let cut = Int.random(in: 1..<sizes.count, using: &random)
            var stream = try StreamClassifier(model: model, sourceSampleRate: rate, options: options)
            var events: [ClassifierEvent] = []
            var offset = 0
            for (i, size) in sizes.enumerated() {
                if i == cut {
                    let bytes = await stream.snapshot(formatVersion: 1).serialized()
                    #expect(Array(bytes[9..<13]) == [1, 0, 0, 0])
                    let old = try StreamSnapshot(serialized: bytes)
                    #expect(old.options == options)
                    stream = try StreamClassifier(model: model, restoring: old)
                    // Written again, it keeps its format; a new snapshot of the stream is of the current one.
                    #expect(old.serialized() == bytes)
                    #expect(Array(await stream.snapshot().serialized()[9..<13]) == [UInt8(StreamSnapshot.formatVersion), 0, 0, 0])
                }
                events += try await stream.process(Array(samples[offset..<(offset + size)]))
                offset += size
            }
            events += try await stream.finish()
            #expect(events == whole, "\(file): cut before chunk \(cut) of \(sizes.count), seed \(random.seed)")
        }
    }

    @Test("A session channel's snapshot goes on in another session, beside other channels, as it would have")
    func sessionChannel() async throws {
        let (samples, rate) = try Fixtures.audio("speech-44k.wav")
        let alone = try await Fixtures.run(samples, rate: rate, options: Fixtures.withScores)
        let first = try Session(model: Fixtures.model, channelCount: 0, options: Fixtures.withScores)
        let k = try await first.addChannel(sourceSampleRate: rate)
        let half = samples.count / 2 + 777
        var events = try await first.process(Array(samples[..<half]), channel: k)
        let bytes = try await first.snapshot(channel: k).serialized()
        let second = try Session(model: Fixtures.model, channelCount: 0, options: Fixtures.withScores)
        let other = try await second.addChannel(sourceSampleRate: 16000)
        let moved = try await second.addChannel(restoring: try StreamSnapshot(serialized: bytes))
        #expect(moved == 1 && other == 0)
        var noiseRandom = SeededRandom(seed: 5)
        let noise = noiseRandom.gaussian(count: 16000 * 3, deviation: 0.1)
        let later = await second.process([noise, Array(samples[half...])]) + (await second.finish(channel: moved))
        events += later.filter { $0.channel == moved }
        let renumbered = events.map { $0.renumbered(to: 0) }
        #expect(renumbered == alone)
    }

    @Test("Bad snapshots are refused with the reason: damaged, cut short, another model, another format")
    func refused() async throws {
        let stream = try StreamClassifier(model: Fixtures.model, sourceSampleRate: 44100)
        var r = SeededRandom(seed: 1)
        _ = try await stream.process(r.gaussian(count: 30000, deviation: 0.1))
        let bytes = await stream.snapshot().serialized()
        var damaged = bytes
        damaged[damaged.count / 2] ^= 0x10
        #expect { try StreamSnapshot(serialized: damaged) } throws: { "\($0)".contains("checksum mismatch") }
        #expect { try StreamSnapshot(serialized: Array(bytes.prefix(40))) } throws: { "\($0)".contains("stream snapshot") }
        #expect { try StreamSnapshot(serialized: Array("hello".utf8)) } throws: { "\($0)".contains("not an earshot stream snapshot") }
        let snapshot = try StreamSnapshot(serialized: bytes)
        #expect(snapshot.sourceSamples == 30000 && snapshot.sourceSampleRate == 44100)
        #expect { try StreamClassifier(model: Fixtures.wakeModel, restoring: snapshot) } throws: { error in
            guard case .model(.stateModelMismatch) = error as? StreamError else { return false }
            return true
        }
        // Bytes changed at random with the checksum made right again: refused, or a stream that
        // runs; never a crash.
        var random = SeededRandom.fromEnvironment()
        var refusedCount = 0
        for _ in 0..<300 {
            var mutated = Array(bytes.dropLast(4))
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let at = Int.random(in: 9..<mutated.count, using: &random)
                mutated[at] = [0, 0xFF, 0x7F, 0x80, UInt8.random(in: 0...255, using: &random)][Int.random(in: 0..<5, using: &random)]
            }
            withUnsafeBytes(of: CRC32C.checksum(mutated).littleEndian) { mutated += $0 }
            do {
                let restored = try StreamClassifier(model: Fixtures.model, restoring: try StreamSnapshot(serialized: mutated))
                _ = try? await restored.process(r.gaussian(count: 5000, deviation: 0.1))
                _ = try? await restored.finish()
            } catch {
                refusedCount += 1
            }
        }
        #expect(refusedCount > 0, "seed \(random.seed)")
        // Every cut of the bytes is refused, none crashes; and every cut with its checksum made
        // right again (the fields end early: a count, a string, a number cut in two).
        for n in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 200)) {
            #expect(throws: StreamError.self) { try StreamSnapshot(serialized: Array(bytes.prefix(n))) }
        }
        for n in 9..<(bytes.count - 4) {
            var cut = Array(bytes.prefix(n))
            withUnsafeBytes(of: CRC32C.checksum(cut).littleEndian) { cut += $0 }
            #expect(throws: StreamError.self, "cut at \(n)") {
                _ = try StreamClassifier(model: Fixtures.model, restoring: try StreamSnapshot(serialized: cut))
            }
        }
    }

    @Test("A many-label stream's snapshot with open events, its bytes changed at random (checksum made right) or cut: refused, or a stream that runs; never a crash")
    func eventsMutated() async throws {
        let (samples, rate) = try AudioFile.readMono(path: Repo.path(ToneEvents.audio))
        let stream = try StreamClassifier(model: ToneEvents.model, sourceSampleRate: rate)
        _ = try await stream.process(Array(samples[..<(8 * rate + 4321)]))  // four tones open
        let bytes = await stream.snapshot().serialized()
        var random = SeededRandom.fromEnvironment()
        var refusedCount = 0
        for _ in 0..<300 {
            var mutated = Array(bytes.dropLast(4))
            // Mostly in the tail: the event tracker and the rule's options lie near the end.
            let at = Int.random(in: 0..<3, using: &random) == 0 ? Int.random(in: 9..<mutated.count, using: &random)
                : Int.random(in: max(9, mutated.count - 400)..<mutated.count, using: &random)
            mutated[at] = [0, 0xFF, 0x7F, 0x80, UInt8.random(in: 0...255, using: &random)][Int.random(in: 0..<5, using: &random)]
            withUnsafeBytes(of: CRC32C.checksum(mutated).littleEndian) { mutated += $0 }
            do {
                let restored = try StreamClassifier(model: ToneEvents.model, restoring: try StreamSnapshot(serialized: mutated))
                _ = try? await restored.process(Array(samples[(8 * rate + 4321)...]))
                _ = try? await restored.finish()
            } catch {
                refusedCount += 1
            }
        }
        #expect(refusedCount > 0, "seed \(random.seed)")
        for n in stride(from: 9, to: bytes.count - 4, by: 7) {
            var cut = Array(bytes.prefix(n))
            withUnsafeBytes(of: CRC32C.checksum(cut).littleEndian) { cut += $0 }
            #expect(throws: StreamError.self, "cut at \(n)") {
                _ = try StreamClassifier(model: ToneEvents.model, restoring: try StreamSnapshot(serialized: cut))
            }
        }
    }

    @Test("A snapshot whose steps hold more than 2^52 samples is refused, its state and stream agreeing")
    func tooManySteps() async throws {
        let stream = try StreamClassifier(model: Fixtures.model, sourceSampleRate: 16000)
        var r = SeededRandom(seed: 2)
        _ = try await stream.process(r.gaussian(count: 8000, deviation: 0.1))
        let snapshot = await stream.snapshot()
        let chunk = Fixtures.model.chunkSamples
        // Steps a state may hold (at most 2^48) whose samples pass 2^52 at this model's block.
        let steps = (1 << 52) / chunk + 1
        #expect(chunk > 16 && steps <= ModelState.maxSteps)
        // The body starts with the model state's bytes: its step count (after "ESTATE", the
        // version and the hash) set to the same number, and its checksum made right.
        var body = snapshot.body
        let stateCount = body.withUnsafeBytes { Int(Int64(littleEndian: $0.loadUnaligned(as: Int64.self))) }
        var state = Array(body[8..<(8 + stateCount)])
        withUnsafeBytes(of: UInt64(steps).littleEndian) { state.replaceSubrange(26..<34, with: $0) }
        withUnsafeBytes(of: CRC32C.checksum(Array(state.dropLast(4))).littleEndian) { state.replaceSubrange((state.count - 4)..., with: $0) }
        #expect(try Fixtures.model.restoreState(state).steps == steps)
        body.replaceSubrange(8..<(8 + stateCount), with: state)
        let far = StreamSnapshot(modelHash: snapshot.modelHash, sourceSampleRate: 16000, sourceSamples: snapshot.sourceSamples,
                                 steps: steps, options: snapshot.options, body: body)
        let restored = try StreamSnapshot(serialized: far.serialized())
        #expect { try StreamClassifier(model: Fixtures.model, restoring: restored) } throws: { "\($0)".contains("more than 2^52 samples") }
    }
}
