import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot

@Suite("Streams and sessions: the invariants")
struct StreamTests {
    @Test("Any chunking of a stream equals feeding it whole", arguments: ["speech-noise-16k.wav", "speech-44k.wav"])
    func chunking(_ name: String) async throws {
        let (samples, rate) = try Fixtures.audio(name)
        let whole = try await Fixtures.run(samples, rate: rate, options: Fixtures.withScores)
        #expect(segments(whole).count >= 4)
        var random = SeededRandom.fromEnvironment()
        for _ in 0..<3 {
            let sizes = random.chunkSizes(total: samples.count, maxChunk: Int.random(in: 1...20000, using: &random))
            let chunked = try await Fixtures.run(samples, rate: rate, sizes: sizes, options: Fixtures.withScores)
            if rate == Fixtures.model.sampleRate {
                #expect(chunked == whole, "seed \(random.seed)")
            } else {
                // Resampling in chunks equals resampling whole to float rounding (1e-6, see the
                // resampler tests): scores within 1e-4, segments the same.
                #expect(segments(chunked) == segments(whole), "seed \(random.seed)")
                let a = scores(chunked).flatMap(\.scores), b = scores(whole).flatMap(\.scores)
                #expect(maxAbsDifference(a, b) <= 1e-4, "seed \(random.seed)")
            }
        }
    }

    @Test("Segments carry times in the source's clock")
    func sourceClock() async throws {
        let (samples, rate) = try Fixtures.audio("speech-44k.wav")
        let events = try await Fixtures.run(samples, rate: rate)
        let segs = segments(events)
        #expect(segs.allSatisfy { $0.sampleRate == 44100 && $0.end <= samples.count && $0.start < $0.end })
        // The first speech of this sample starts at 0.600 s (AudioSamples/speech-44k.truth.csv).
        #expect(abs((segs.first?.startSeconds ?? 0) - 0.6) < 0.1)
    }

    @Test("After reset a stream gives exactly what a fresh stream gives")
    func reset() async throws {
        let (samples, rate) = try Fixtures.audio("speech-noise-16k.wav")
        let part = Array(samples[0..<(16000 * 13)])  // two speech segments (truth: 1.0-4.7 s, 8.4-12.4 s)
        let fresh = try await Fixtures.run(part, rate: rate, options: Fixtures.withScores)
        let stream = try StreamClassifier(model: Fixtures.model, sourceSampleRate: rate, options: Fixtures.withScores)
        _ = try await stream.process(Array(samples[200_000..<300_000]))
        try await stream.reset()
        let again = try await stream.process(part) + stream.finish()
        #expect(again == fresh)
        #expect(segments(fresh).count >= 2)
    }

    @Test("Channel k of a session equals that channel run alone")
    func sessionEqualsAlone() async throws {
        let channels = try Fixtures.channels("stereo-16k.wav")
        let session = try Session(model: Fixtures.model, channelCount: 2, sourceSampleRate: 16000, options: Fixtures.withScores)
        var random = SeededRandom.fromEnvironment()
        var events: [ClassifierEvent] = []
        var offset = 0
        for size in random.chunkSizes(total: channels[0].count, maxChunk: 7000) {
            events += await session.process(channels.map { Array($0[offset..<(offset + size)]) })
            offset += size
        }
        events += await session.finish()
        for k in 0..<2 {
            var alone = try await Fixtures.run(channels[k], rate: 16000, options: Fixtures.withScores)
            for i in alone.indices { alone[i] = alone[i].renumbered(to: k) }
            #expect(events.filter { $0.channel == k } == alone, "channel \(k), seed \(random.seed)")
        }
        #expect(Set(segments(events).map(\.channel)) == [0, 1])
    }

    @Test("Channels that join and leave a session: each equals its run alone, whoever else is in the batch")
    func channelsComeAndGo() async throws {
        let (speech, _) = try Fixtures.audio("speech-noise-16k.wav")
        let (fast, fastRate) = try Fixtures.audio("speech-44k.wav")
        // Four streams: (audio, rate, tick it joins at, tick it leaves at without finishing, if it does).
        let streams: [(samples: [Float], rate: Int, joins: Int, abandons: Int?)] = [
            (Array(speech[0..<200_000]), 16000, 0, nil),
            (Array(speech[100_000..<260_000]), 16000, 3, 20),
            (fast, fastRate, 5, nil),
            (Array(speech[300_000..<420_000]), 16000, 21, nil),
        ]
        let session = try Session(model: Fixtures.model, channelCount: 0, options: Fixtures.withScores)
        var random = SeededRandom.fromEnvironment()
        var channel: [Int?] = Array(repeating: nil, count: streams.count)
        var offset = Array(repeating: 0, count: streams.count)
        var events: [[ClassifierEvent]] = Array(repeating: [], count: streams.count)
        var numbers: [[Int]] = []
        func record(_ batch: [ClassifierEvent]) {
            for e in batch { if let s = channel.firstIndex(of: e.channel) { events[s].append(e) } }
        }
        var tick = 0
        while channel.contains(where: { $0 != nil }) || tick <= streams.map(\.joins).max()! {
            for (s, stream) in streams.enumerated() where stream.joins == tick {
                channel[s] = try await session.addChannel(sourceSampleRate: stream.rate)
            }
            for (s, stream) in streams.enumerated() where stream.abandons == tick {
                try await session.removeChannel(channel[s]!)
                channel[s] = nil
            }
            numbers.append(await session.channels)
            for (s, stream) in streams.enumerated() {
                guard let k = channel[s] else { continue }
                let n = min(Int.random(in: 1...12_000, using: &random), stream.samples.count - offset[s])
                if n > 0 {
                    record(try await session.process(Array(stream.samples[offset[s]..<(offset[s] + n)]), channel: k))
                    offset[s] += n
                }
                if offset[s] == stream.samples.count {
                    record(await session.finish(channel: k))
                    try await session.removeChannel(k)
                    channel[s] = nil
                }
            }
            tick += 1
        }
        // Stream 3 joined after stream 1 left and took its number.
        #expect(numbers[21].count == 3 && numbers[21].contains(1))
        #expect(await session.channelCount == 0)
        for (s, stream) in streams.enumerated() where stream.abandons == nil {
            let alone = try await Fixtures.run(stream.samples, rate: stream.rate, options: Fixtures.withScores)
            #expect(events[s].map { $0.renumbered(to: 0) } == alone, "stream \(s), seed \(random.seed)")
            #expect(!segments(alone).isEmpty)
        }
        // The abandoned stream's events up to its leaving are a prefix of its run alone.
        let alone1 = try await Fixtures.run(streams[1].samples, rate: 16000, options: Fixtures.withScores)
        #expect(!events[1].isEmpty && Array(alone1.prefix(events[1].count)) == events[1].map { $0.renumbered(to: 0) })
    }

    @Test("A channel whose audio turns NaN fails alone; the others equal their runs alone")
    func failingChannel() async throws {
        let (samples, _) = try Fixtures.audio("speech-noise-16k.wav")
        let inputs = [Array(samples[0..<160_000]), Array(samples[160_000..<320_000]), Array(samples[320_000..<480_000])]
        let session = try Session(model: Fixtures.model, channelCount: 3, sourceSampleRate: 16000)
        var events: [ClassifierEvent] = []
        for start in stride(from: 0, to: 160_000, by: 4000) {
            var chunks = inputs.map { Array($0[start..<(start + 4000)]) }
            if start == 80_000 { chunks[1][17] = .nan }
            events += await session.process(chunks)
        }
        events += await session.finish()
        let failures = events.filter { if case .failed = $0 { return true } else { return false } }
        #expect(failures == [.failed(channel: 1, error: .source(channel: 1, reason: "audio sample 80017 is NaN or infinite"))])
        for k in [0, 2] {
            let alone = try await Fixtures.run(inputs[k], rate: 16000).map { $0.renumbered(to: k) }
            #expect(events.filter { $0.channel == k } == alone)
        }
    }
}


@Suite("Stream state snapshots")
struct StreamSnapshotTests {
    @Test("A stream restored from a serialized state scores exactly as the uninterrupted one")
    func restored() async throws {
        let (samples, _) = try Fixtures.audio("speech-noise-16k.wav")
        let cut = 512 * 300  // a block boundary, mid-speech
        let whole = try await Fixtures.run(Array(samples[0..<(cut + 512 * 200)]), rate: 16000, options: Fixtures.withScores)
        let first = try StreamClassifier(model: Fixtures.model, options: Fixtures.withScores)
        _ = try await first.process(Array(samples[0..<cut]))
        let bytes = await first.state.serialized()
        let second = try StreamClassifier(model: Fixtures.model, options: Fixtures.withScores)
        try await second.restoreState(bytes)
        let rest = try await second.process(Array(samples[cut..<(cut + 512 * 200)]))
        #expect(scores(rest).map(\.scores) == Array(scores(whole).map(\.scores)[300..<500]))
    }
}
