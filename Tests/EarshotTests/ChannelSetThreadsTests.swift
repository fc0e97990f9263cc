import EarshotCommandTestSupport
import EarshotTestSupport
import Testing

@testable import Earshot

@Suite("A channel set's batched step split between threads")
struct ChannelSetThreadsTests {
    /// Every event, and every open channel's snapshot after the last round, of 45 channels that
    /// join at different rounds at different places in the audio (some at 44.1 kHz), live and
    /// file, pushed ragged chunks; one turns NaN and fails as it is pushed, one (live, at 44.1
    /// kHz) is pushed the largest finite samples, which resample to values the model refuses in
    /// a batched step, and one leaves and its number is taken again. With the set's steps split
    /// between threads and the parts of them that refused a block.
    static func run(threads: Int) throws -> (events: [ClassifierEvent], snapshots: [StreamSnapshot], splitSteps: Int, partsRefused: Int) {
        let (speech16, _) = try Fixtures.audio("speech-noise-16k.wav")
        let (speech44, rate44) = try Fixtures.audio("speech-44k.wav")
        var set = ChannelSet(model: Fixtures.model, options: Fixtures.withScores)
        set.threads = threads
        var events: [ClassifierEvent] = []
        var position: [Int: (samples: [Float], offset: Int)] = [:]
        func join(_ c: Int) throws {
            let wide = c % 9 == 4
            let samples = wide ? speech44 : speech16
            let k = try set.add(sourceRate: wide ? rate44 : 16000, kind: c % 5 == 0 ? .file : .live)
            position[k] = (samples, (c * 7919) % (samples.count / 2))
        }
        for round in 0..<40 {
            if round < 5 { for c in stride(from: round, to: 45, by: 5) { try join(c) } }
            if round == 25 { set.remove(11); position[11] = nil }
            if round == 26 { try join(11) }
            for k in set.channels {
                guard let (samples, offset) = position[k] else { continue }
                let size = 1000 + (k * 37 + round * 101) % 3000
                var chunk = Array(samples[offset..<min(offset + size, samples.count)])
                if k == 7 && round == 20 { chunk[17] = .nan }
                if k == 22 && round == 12 { for i in 0..<200 { chunk[i] = .greatestFiniteMagnitude } }
                events += set.push(chunk, channel: k)
                position[k]?.offset = offset + chunk.count
            }
            events += set.drain()
        }
        let snapshots = try set.channels.map { try set.snapshot($0) }
        for k in set.channels { events += set.finish(channel: k) }
        return (events, snapshots, set.splitSteps, set.splitPartsRefused)
    }

    @Test("Threads 2 and 3 give the events, scores and states of one thread, bit for bit, their steps split between threads; a channel failing as it is pushed or in its part's batch stops alone")
    func threadsEqualOne() async throws {
        let one = try Self.run(threads: 1)
        let failures = one.events.compactMap { e -> (channel: Int, error: StreamError)? in if case let .failed(k, error) = e { (k, error) } else { nil } }
        #expect(failures.map(\.channel) == [22, 7])
        // 22's block is refused by the model (its audio was finite), 7's audio as it is pushed.
        #expect(failures.map { if case .model(.nonFiniteInput) = $0.error { "model" } else if case .source = $0.error { "source" } else { "\($0.error)" } }
                == ["model", "source"])
        #expect(scores(one.events).count > 45 * 150)
        #expect(one.splitSteps == 0 && one.partsRefused == 0)
        // Channel 0 (16 kHz, from the start of the file, there from round 0) equals its run alone.
        let alone = try await Fixtures.run(Array(Fixtures.audio("speech-noise-16k.wav").samples[0..<(40 * 1000 + (0..<40).reduce(0) { $0 + ($1 * 101) % 3000 })]),
                                           rate: 16000, options: Fixtures.withScores)
        #expect(one.events.filter { $0.channel == 0 } == alone)
        for threads in [2, 3] {
            let split = try Self.run(threads: threads)
            // The split path ran (over twice a round), and 22's block was refused inside one part of a split step.
            #expect(split.splitSteps > 80, "threads \(threads)")
            #expect(split.partsRefused == 1, "threads \(threads)")
            #expect(split.events == one.events, "threads \(threads)")
            #expect(split.snapshots == one.snapshots, "threads \(threads)")
        }
    }
}
