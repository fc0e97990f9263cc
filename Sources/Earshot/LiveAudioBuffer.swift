import EarshotFeatures

/// A bounded buffer between a live source (a capture thread) and the stream that consumes it.
/// When the source outruns the consumer, the oldest audio is dropped and every dropped sample
/// is counted, so that the consumer can report it: nothing is lost silently.
public final class LiveAudioBuffer: Sendable {
    /// Samples held at most.
    public let capacity: Int

    private struct Storage {
        var samples: [Float] = []
        var droppedSinceRead = 0
        var droppedTotal = 0
        var closed = false
        var failure: StreamError?
        var wakeUp: AsyncStream<Void>.Continuation?
    }

    private let storage = Locked(Storage())

    /// `capacity`: samples held at most (e.g. 2 s of audio).
    public init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Adds captured samples; drops the oldest beyond the capacity.
    public func write(_ samples: [Float]) {
        let wake = storage.withLock { s -> AsyncStream<Void>.Continuation? in
            guard !s.closed else { return nil }
            s.samples += samples
            let excess = s.samples.count - capacity
            if excess > 0 {
                s.samples.removeFirst(excess)
                s.droppedSinceRead += excess
                s.droppedTotal += excess
            }
            return s.wakeUp
        }
        wake?.yield()
    }

    /// The source has ended (with an error if it failed).
    public func close(failure: StreamError? = nil) {
        let wake = storage.withLock { s -> AsyncStream<Void>.Continuation? in
            s.closed = true
            s.failure = failure
            return s.wakeUp
        }
        wake?.yield()
    }

    /// Samples dropped since the buffer was made.
    public var droppedTotal: Int { storage.withLock { $0.droppedTotal } }

    struct Read {
        var samples: [Float]
        var dropped: Int
        var closed: Bool
        var failure: StreamError?
    }

    /// Takes everything buffered, without waiting.
    func take() -> Read {
        storage.withLock { s in
            let r = Read(samples: s.samples, dropped: s.droppedSinceRead, closed: s.closed, failure: s.failure)
            s.samples.removeAll(keepingCapacity: true)
            s.droppedSinceRead = 0
            return r
        }
    }

    /// Where `write` and `close` signal that there is something to take.
    func setWakeUp(_ continuation: AsyncStream<Void>.Continuation) {
        storage.withLock { $0.wakeUp = continuation }
    }
}

/// Where a session channel's audio comes from.
public enum AudioSource: Sendable {
    /// A file or other pulled source: the next chunk is asked for only when the session has
    /// processed the last (back-pressure; nothing is dropped). nil ends the channel.
    case pulled(@Sendable () async throws -> [Float]?)
    /// A live source pushing into a bounded buffer; its drops are reported as events.
    case live(LiveAudioBuffer)
}

extension Session {
    /// Runs every channel from its source until all have ended; events as they happen.
    /// Live channels are served first; a pulled channel is read a chunk at a time. Source k
    /// feeds channel k: the session's channels must be 0..<sources.count.
    public nonisolated func events(from sources: [AudioSource]) -> AsyncThrowingStream<ClassifierEvent, Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                let channels = await self.channels
                guard channels == Array(sources.indices) else {
                    continuation.finish(throwing: StreamError.invalidOption(
                        name: "sources", value: "\(sources.count)", expected: "\(channels.count) (one per channel of the session, 0...\(channels.count - 1))"))
                    return
                }
                let (signal, wake) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
                var wakeIterator = signal.makeAsyncIterator()
                for case let .live(buffer) in sources { buffer.setWakeUp(wake) }
                var open = Set(sources.indices)
                func emit(_ events: [ClassifierEvent]) { for e in events { continuation.yield(e) } }
                do {
                while !open.isEmpty && !Task.isCancelled {
                    var progressed = false
                    for k in open.sorted() {
                        guard case let .live(buffer) = sources[k] else { continue }
                        let read = buffer.take()
                        if read.dropped > 0 { emit([try await self.reportDropped(read.dropped, channel: k)]) }
                        if !read.samples.isEmpty {
                            emit(await self.process(Array(repeating: [], count: k) + [read.samples]))
                            progressed = true
                        }
                        if read.closed {
                            if let failure = read.failure { emit([try await self.fail(channel: k, error: failure)]) }
                            emit(await self.finish(channel: k))
                            open.remove(k)
                            progressed = true
                        }
                    }
                    for k in open.sorted() {
                        guard case let .pulled(next) = sources[k] else { continue }
                        do {
                            if let chunk = try await next() {
                                emit(await self.process(Array(repeating: [], count: k) + [chunk]))
                            } else {
                                emit(await self.finish(channel: k))
                                open.remove(k)
                            }
                        } catch {
                            emit([try await self.fail(channel: k, error: .source(channel: k, reason: "\(error)"))])
                            open.remove(k)
                        }
                        progressed = true
                    }
                    if !progressed && !open.isEmpty {
                        _ = await wakeIterator.next()  // only live channels are open: wait for their audio
                    }
                }
                } catch {
                    wake.finish()
                    continuation.finish(throwing: error)
                    return
                }
                wake.finish()
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
