import EarshotCommandTestSupport
import EarshotTestSupport
import Testing

@testable import Earshot

@Suite("A channel set's batched step split between threads")
struct ChannelSetThreadsTests {
    /// Every event, and every open channel's snapshot after the last round, of 45 channels that
    /// join at different rounds at different places in the audio (some at 44.1 kHz), live and
    /// file, pushed ragged chunks; one turns NaN and fails, one leaves and its number is taken again.
    static func run(threads: Int) throws -> (events: [ClassifierEvent], snapshots: [StreamSnapshot]) {
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
                events += set.push(chunk, channel: k)
                position[k]?.offset = offset + chunk.count
            }
            events += set.drain()
        }
        let snapshots = try set.channels.map { try set.snapshot($0) }
        for k in set.channels { events += set.finish(channel: k) }
        return (events, snapshots)
    }

    @Test("Threads 2 and 3 give the events, scores and states of one thread, bit for bit; a failing channel stops alone")
    func threadsEqualOne() async throws {
        let one = try Self.run(threads: 1)
        let failures = one.events.filter { if case .failed = $0 { return true } else { return false } }
        #expect(failures.map(\.channel) == [7])
        #expect(scores(one.events).count > 45 * 150)
        // Channel 0 (16 kHz, from the start of the file, there from round 0) equals its run alone.
        let alone = try await Fixtures.run(Array(Fixtures.audio("speech-noise-16k.wav").samples[0..<(40 * 1000 + (0..<40).reduce(0) { $0 + ($1 * 101) % 3000 })]),
                                           rate: 16000, options: Fixtures.withScores)
        #expect(one.events.filter { $0.channel == 0 } == alone)
        for threads in [2, 3] {
            let split = try Self.run(threads: threads)
            #expect(split.events == one.events, "threads \(threads)")
            #expect(split.snapshots == one.snapshots, "threads \(threads)")
        }
    }
}
