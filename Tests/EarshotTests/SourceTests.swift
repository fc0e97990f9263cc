import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Synchronization
import Testing

@testable import Earshot

/// Chunks of an array handed out one call at a time (a pulled source).
final class ChunkFeeder: Sendable {
    private let state: Mutex<(samples: [Float], offset: Int, failAt: Int?)>
    let size: Int
    struct Broken: Error, CustomStringConvertible { var description: String { "the source broke" } }

    init(_ samples: [Float], size: Int, failAt: Int? = nil) {
        state = Mutex((samples, 0, failAt))
        self.size = size
    }

    func next() throws -> [Float]? {
        try state.withLock { s in
            if let f = s.failAt, s.offset >= f { throw Broken() }
            guard s.offset < s.samples.count else { return nil }
            let chunk = Array(s.samples[s.offset..<min(s.offset + size, s.samples.count)])
            s.offset += size
            return chunk
        }
    }
}

func collect(_ stream: AsyncThrowingStream<ClassifierEvent, Error>) async throws -> [ClassifierEvent] {
    var out: [ClassifierEvent] = []
    for try await e in stream { out.append(e) }
    return out
}

@Suite("Sources, buffers and scheduling")
struct SourceTests {
    @Test("A live source that outruns the session drops its oldest audio and every sample is reported")
    func liveDrops() async throws {
        let (samples, _) = try Fixtures.audio("speech-noise-16k.wav")
        let buffer = LiveAudioBuffer(capacity: 3200)
        buffer.write(Array(samples[0..<16000]))  // 1 s arrives before the session reads: 0.8 s cannot be held
        buffer.write(Array(samples[16000..<17000]))
        buffer.close()
        let session = try Session(model: Fixtures.model, channelCount: 1, options: Fixtures.withScores, kinds: [.live])
        let events = try await collect(session.events(from: [.live(buffer)]))
        #expect(events.first == .dropped(channel: 0, samples: 13800, total: 13800))
        #expect(buffer.droppedTotal == 13800)
        // What was kept (the newest 3200 samples) was all processed: 3200 / 512 -> 7 steps with the padded tail.
        #expect(scores(events).count == 7)
    }

    @Test("Live channels step before file channels in the same round")
    func liveFirst() async throws {
        let (samples, _) = try Fixtures.audio("speech-noise-16k.wav")
        let session = try Session(model: Fixtures.model, channelCount: 2, options: Fixtures.withScores, kinds: [.file, .live])
        let events = await session.process([Array(samples[0..<2048]), Array(samples[2048..<4096])])
        #expect(events.map(\.channel) == [1, 1, 1, 1, 0, 0, 0, 0])
    }

    @Test("Pulled sources are read a chunk at a time and equal a stream fed directly; a source that throws fails alone")
    func pulledSources() async throws {
        let (samples, _) = try Fixtures.audio("speech-noise-16k.wav")
        let a = Array(samples[0..<200_000]), b = Array(samples[200_000..<400_000])
        let feeders = [ChunkFeeder(a, size: 3000), ChunkFeeder(b, size: 5000, failAt: 100_000), ChunkFeeder(b, size: 4096)]
        let session = try Session(model: Fixtures.model, channelCount: 3)
        let events = try await collect(session.events(from: feeders.map { f in .pulled { try f.next() } }))
        #expect(events.filter { $0.channel == 0 } == (try await Fixtures.run(a, rate: 16000)))
        #expect(events.filter { $0.channel == 2 } == (try await Fixtures.run(b, rate: 16000)).map { $0.renumbered(to: 2) })
        #expect(events.filter { $0.channel == 1 }.last == .failed(channel: 1, error: .source(channel: 1, reason: "the source broke")))
    }

    @Test("A stream's events as an AsyncSequence equal its direct calls")
    func asyncSequence() async throws {
        let (samples, _) = try Fixtures.audio("speech-noise-16k.wav")
        let chunks = stride(from: 0, to: samples.count, by: 10_000).map { Array(samples[$0..<min($0 + 10_000, samples.count)]) }
        let stream = try StreamClassifier(model: Fixtures.model)
        let viaSequence = try await collect(stream.events(for: chunks.async))
        #expect(viaSequence == (try await Fixtures.run(samples, rate: 16000)))
    }
}

extension Array where Element: Sendable {
    /// The elements as an AsyncSequence.
    var async: AsyncStream<Element> {
        AsyncStream { c in
            for e in self { c.yield(e) }
            c.finish()
        }
    }
}

@Suite("Session channel checks")
struct SessionChannelTests {
    @Test("Reports for a channel the session does not have are refused; so is a wrong count of sources")
    func channelRange() async throws {
        let session = try Session(model: Fixtures.model, channelCount: 1)
        await #expect(throws: StreamError.noSuchChannel(channel: 5, open: [0])) { try await session.reportDropped(10, channel: 5) }
        await #expect(throws: StreamError.noSuchChannel(channel: 2, open: [0])) {
            try await session.fail(channel: 2, error: .finished)
        }
        await #expect(throws: StreamError.invalidOption(name: "sources", value: "2", expected: "1 (one per channel of the session, 0...0)")) {
            _ = try await collect(session.events(from: [.pulled { nil }, .pulled { nil }]))
        }
    }
}
