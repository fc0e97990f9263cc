#if canImport(Glibc)
import Glibc
#endif
import CEarshotSystem
import EarshotFeatures
import EarshotWyoming
import Foundation

/// A Wyoming wake-word and voice-activity service: every connection is one stream with its own
/// explicit state, and every stream of a model steps in one batch per tick, spread over the
/// cores. `describe` → `info`; `detect` names the wake words to listen for; `audio-start`,
/// `audio-chunk` (1000-768000 Hz, 1-4 bytes a sample, 1-64 channels: `WyomingAudioFormat`; mixed
/// and resampled) and `audio-stop` stream the audio; answers are `detection`, `not-detected`
/// (after `audio-stop` when nothing was detected), `voice-started` / `voice-stopped` (voice
/// activity models) and `error`.
///
/// One thread (the caller of `run`) owns the sockets and every connection; a tick steps the
/// shards on worker threads, one core each, while that thread goes on reading, and its answers
/// are sent when it ends.
public final class WyomingServer: @unchecked Sendable {
    // @unchecked Sendable: after init, every mutable property is touched only by the thread
    // inside `run()`; `stop()`, the one method for other threads, only writes to the eventfd of
    // `wake` (a system call, safe from any thread). A tick's workers touch only the engine's
    // shards, which the loop leaves alone until the tick has ended (`ServeEngine.settle`).
    /// Where it listens (with the port chosen, when 0 was asked for).
    public let address: ServeURI
    /// The models every stream runs.
    public let models: [ServedModel]
    /// Its limits and pace.
    public let options: ServeOptions
    private let listener: Int32?
    private let wake: WakeSignal
    /// Signalled by a tick when it has ended.
    private let tickEnded: WakeSignal
    /// A tick was started and its end is not handled yet.
    private var tickStarted = false
    /// The loop's own descriptors (listener, wake-ups, the end of a tick) and `clients`.
    private let epoll: Epoll
    /// The clients' sockets, in groups: reported to `epoll` as they become ready, or, while reads
    /// are batched (`readBatchClients`), each group read every `readBatchMs`, the groups in turn
    /// (so that the reads, and the steps they feed, are spread over that time).
    private let groups: [Epoll]
    /// Whether the groups wake the loop (not while reads are batched).
    private var groupsArmed = true
    private static let groupCount = 4
    private let engine: ServeEngine
    private let info: WyomingEvent
    private var connections: [UInt64: Connection] = [:]
    private var nextToken: UInt64 = 16
    private var summary = ServeSummary()
    private var stopping = false
    private var stopDeadline: ContinuousClock.Instant?
    private var paused: [Connection] = []
    /// Connections whose stream has audio not yet stepped (each once).
    private var withAudio: [Connection] = []
    /// The stdio client when its input is a regular file (epoll cannot watch it: always ready).
    private var unpollable: Connection?
    private var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)

    private static let listenerToken: UInt64 = 1
    private static let wakeToken: UInt64 = 2
    private static let tickToken: UInt64 = 3
    /// The first group's token (the groups' are consecutive, below the first client's).
    private static let groupToken: UInt64 = 4
    /// Bytes read from one client per wake-up of the loop, so that one fast client cannot
    /// keep the loop from the others.
    private static let readBudget = 64 * 1024

    /// Binds `uri` (for stdio://, takes standard input and output as its one client).
    ///
    ///     let server = try WyomingServer(uri: try ServeURI("tcp://0.0.0.0:10400"),
    ///                                    models: [ServedModel(model: try Model.bundled("okay-nabu"))])
    ///     let summary = await server.serve()   // until server.stop() (from any thread)
    ///
    /// - Parameters:
    ///   - uri: `.tcp(host:port:)` (port 0: any free one; `address` tells which), `.unix(path:)`
    ///     or `.stdio`.
    ///   - models: the models every stream runs (wake words answer `detection`, voice activity
    ///     models `voice-started` / `voice-stopped`).
    ///   - options: limits and pace.
    /// - Throws: `ServeError.invalidOption` for options out of range, `.socket` naming the
    ///   address when it cannot be bound, `.noModels`.
    public init(uri: ServeURI, models: [ServedModel], options: ServeOptions = ServeOptions()) throws(ServeError) {
        guard !models.isEmpty else { throw .noModels }
        try options.validate()
        for m in models {
            do { try m.options.validate() } catch { throw .invalidOption(name: "options of \(m.model.name)", value: "\(error)", expected: "valid label options") }
        }
        self.models = models
        self.options = options
        wake = try WakeSignal()
        tickEnded = try WakeSignal()
        epoll = try Epoll()
        groups = try (0..<Self.groupCount).map { _ throws(ServeError) in try Epoll() }
        engine = ServeEngine(models: models, shards: options.shards)
        info = Self.makeInfo(models: models, version: options.version)
        if case .stdio = uri {
            listener = nil
            address = uri
        } else {
            let (fd, bound) = try Sockets.listen(uri)
            listener = fd
            address = bound
        }
        if let listener { epoll.add(listener, events: Epoll.input, token: Self.listenerToken) }
        epoll.add(wake.fd, events: Epoll.input, token: Self.wakeToken)
        epoll.add(tickEnded.fd, events: Epoll.input, token: Self.tickToken)
        for (g, group) in groups.enumerated() { epoll.add(group.fd, events: Epoll.input, token: Self.groupToken + UInt64(g)) }
        if case .stdio = uri {
            Sockets.setNonBlocking(0)
            // Answers to the one client are written whole (a slow reader slows only it).
            Sockets.setBlocking(1)
            let c = Connection(token: nextToken, readFD: 0, writeFD: 1, peer: "stdio", limits: options.limits, now: .now)
            nextToken += 1
            c.pollable = group(c.token).add(0, events: Epoll.readable, token: c.token)
            if !c.pollable { unpollable = c }
            connections[c.token] = c
            summary.accepted = 1
            summary.peakClients = 1
        }
    }

    deinit {
        if let listener { close(listener) }
    }

    /// Asks the server to stop (from any thread, e.g. on SIGTERM): it stops accepting, finishes
    /// every stream (their last events, `not-detected`), sends what is queued and `run` returns.
    public func stop() { wake.signal() }

    /// Runs the loop on a thread of its own until the server stops.
    public func serve() async -> ServeSummary {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: self.run()) }
            thread.name = "earshot serve"
            thread.start()
        }
    }

    /// Starts the loop on a thread of its own and returns at once (no task needs to be
    /// scheduled for it to start); `wait()` gives its summary once it has stopped.
    public func start() {
        let thread = Thread {
            let summary = self.run()
            self.result.withLock { $0 = summary }
            self.finished.signal()
        }
        thread.name = "earshot serve"
        thread.start()
    }

    /// Blocks until a loop started with `start()` has stopped; what it did.
    public func wait() -> ServeSummary {
        finished.wait()
        finished.signal()
        return result.withLock { $0 } ?? ServeSummary()
    }

    private let finished = DispatchSemaphore(value: 0)
    private let result = Locked<ServeSummary?>(nil)

    /// Runs the loop on this thread until the server stops; what it did.
    public func run() -> ServeSummary {
        var lastTick = ContinuousClock.now - .seconds(1)
        var nextHousekeeping = ContinuousClock.now
        var nextSummary = ContinuousClock.now + .seconds(options.summaryInterval)
        let tick = Duration.microseconds(Int64(options.tickMs * 1000))
        log("serving \(models.map(\.model.name).joined(separator: ", ")) on \(address)")
        var nextGroupRead = ContinuousClock.now
        /// A group was read since the last tick started.
        var groupRead = false
        var nextGroup = 0
        let groupInterval = Duration.microseconds(Int64(options.readBatchMs * 1000 / Double(Self.groupCount)))
        while true {
            let batched = options.readBatchMs > 0 && connections.count >= options.readBatchClients
            if batched == groupsArmed {
                groupsArmed = !batched
                for (g, group) in groups.enumerated() {
                    epoll.modify(group.fd, events: batched ? 0 : Epoll.input, token: Self.groupToken + UInt64(g))
                }
            }
            let now = ContinuousClock.now
            var wait = nextHousekeeping - now
            if !withAudio.isEmpty && !tickStarted { wait = min(wait, lastTick + tick - now) }
            if batched { wait = min(wait, nextGroupRead - now) }
            if let c = unpollable, connections[c.token] != nil, !c.closing { wait = .zero }
            let ms = Int32(max(0, min(1000, ceil(Double(wait.components.attoseconds) / 1e15 + Double(wait.components.seconds) * 1000))))
            for i in 0..<epoll.wait(timeoutMs: ms) {
                let token = epoll.ready(i).token
                switch token {
                case Self.listenerToken: acceptAll()
                case Self.wakeToken:
                    wake.clear()
                    beginStop()
                case Self.tickToken:
                    tickEnded.clear()
                    if tickStarted { endTick() }
                default:
                    let g = Int(truncatingIfNeeded: token &- Self.groupToken)
                    if groups.indices.contains(g) { serve(groups[g]) }
                }
            }
            if batched && ContinuousClock.now >= nextGroupRead {
                serve(groups[nextGroup])
                summary.batchedReads += 1
                nextGroup = (nextGroup + 1) % groups.count
                nextGroupRead = max(nextGroupRead + groupInterval, ContinuousClock.now)
                groupRead = true  // steps at once (not at the next tick's time)
            }
            if let c = unpollable, connections[c.token] != nil, !c.closing { readFrom(c) }
            let after = ContinuousClock.now
            if !withAudio.isEmpty && !tickStarted && (groupRead || after >= lastTick + tick) {
                startTick()
                lastTick = after
                groupRead = false
            }
            if after >= nextHousekeeping {
                housekeeping(after)
                nextHousekeeping = after + .milliseconds(250)
            }
            if after >= nextSummary {
                logSummary()
                nextSummary = after + .seconds(options.summaryInterval)
            }
            if stopping && (connections.isEmpty || (stopDeadline.map { after >= $0 } ?? true)) { break }
        }
        for c in Array(connections.values) { closeConnection(c, reason: "the server stopped") }
        if case let .unix(path) = address { unlink(path) }
        summary.steps = engine.steps
        log("stopped: \(summaryLine(steps: summary.steps))")
        return summary
    }

    // MARK: connections

    /// The group of the client with this token.
    private func group(_ token: UInt64) -> Epoll { groups[Int(token % UInt64(groups.count))] }

    /// Reads and writes every client of `group` that is ready (a bounded number of times: one
    /// that keeps sending waits for the next round).
    private func serve(_ group: Epoll) {
        var rounds = connections.count / Epoll.capacity + 1
        while rounds > 0 {
            rounds -= 1
            let ready = group.wait(timeoutMs: 0)
            for i in 0..<ready {
                let (token, events) = group.ready(i)
                guard let c = connections[token] else { continue }
                if events & (Epoll.input | Epoll.hangUp) != 0 { readFrom(c) }
                if events & Epoll.writable != 0, connections[token] != nil { flush(c) }
            }
            if ready < Epoll.capacity { break }
        }
    }

    private final class Connection {
        let token: UInt64
        let readFD: Int32
        let writeFD: Int32
        let peer: String
        var reader: WyomingReader
        var out: [UInt8] = []
        var outOffset = 0
        var waitingToWrite = false
        var paused = false
        var closing = false
        /// Whether epoll can watch it (not for a regular file on standard input).
        var pollable = true
        var lastReceived: ContinuousClock.Instant
        var eventStarted: ContinuousClock.Instant?
        /// Wake words asked for by `detect` (nil: all).
        var names: [String]?
        var stream: Stream?
        var warnedChunkBeforeStart = false
        /// When a closing connection is closed even if its last events are not all taken.
        var closingDeadline: ContinuousClock.Instant?

        init(token: UInt64, readFD: Int32, writeFD: Int32, peer: String, limits: WyomingReader.Limits, now: ContinuousClock.Instant) {
            self.token = token
            self.readFD = readFD
            self.writeFD = writeFD
            self.peer = peer
            reader = WyomingReader(limits: limits)
            lastReceived = now
        }
    }

    /// One stream: from audio-start to audio-stop. A class, so that a chunk extends its buffers
    /// in place (a struct held by the connection would be copied out and back per chunk).
    private final class Stream {
        var format: WyomingAudioFormat
        var shard: Int
        var channels: [Int?]
        var inbox: [Float] = []
        var carry: [UInt8] = []
        var carryFormat: WyomingAudioFormat
        var startTimestamp: Int?
        /// Source samples received.
        var received = 0
        /// Recent chunks: the sample after each one's last, and the client's timestamp.
        var chunks: [(end: Int, timestamp: Int?)] = []
        var lastChunkTimestamp: Int?
        var detected = false
        var failed = false
        var wakeModels: Bool

        init(format: WyomingAudioFormat, shard: Int, channels: [Int?], startTimestamp: Int?, wakeModels: Bool) {
            self.format = format
            self.shard = shard
            self.channels = channels
            carryFormat = format
            self.startTimestamp = startTimestamp
            self.wakeModels = wakeModels
        }

        /// Milliseconds of the stream's clock at a source sample.
        func ms(_ sample: Int) -> Int { (startTimestamp ?? 0) + Int((Double(sample) * 1000 / Double(format.rate)).rounded()) }

        /// The client's timestamp of the chunk that held `sample` (the stream's clock if none).
        func chunkTimestamp(_ sample: Int) -> Int {
            let hit = chunks.first { $0.end >= sample } ?? chunks.last
            return hit?.timestamp ?? ms(sample)
        }
    }

    private func acceptAll() {
        guard let listener else { return }
        while true {
            let fd = earshot_accept(listener)
            if fd < 0 {
                if errno == EINTR { continue }
                return  // EAGAIN: no more; other errors (EMFILE...) are retried on the next wake-up
            }
            let peer = Sockets.peerName(fd)
            if connections.count >= options.maxClients || stopping {
                let reason = stopping ? "the server is stopping" : "the server has \(connections.count) clients, its limit (--max-clients)"
                let bytes = WyomingEvent(type: "error", data: ["text": .string(reason), "code": "too-many-clients"]).encoded
                _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(fd)
                summary.refused += 1
                log("\(peer): refused: \(reason)")
                continue
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let c = Connection(token: nextToken, readFD: fd, writeFD: fd, peer: peer, limits: options.limits, now: .now)
            nextToken += 1
            group(c.token).add(fd, events: Epoll.readable, token: c.token)
            connections[c.token] = c
            summary.accepted += 1
            summary.peakClients = max(summary.peakClients, connections.count)
            log("\(peer): connected (\(connections.count) clients)")
        }
    }

    private func readFrom(_ c: Connection) {
        var total = 0
        while total < Self.readBudget && !c.paused && !c.closing {
            let n = readBuffer.withUnsafeMutableBytes { read(c.readFD, $0.baseAddress, $0.count) }
            if n > 0 {
                total += n
                c.lastReceived = .now
                readBuffer.withUnsafeBytes { c.reader.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                handleEvents(c)
                guard connections[c.token] != nil else { return }
                // A short read took all there was: epoll (level-triggered) reports the socket
                // again when more comes, so no read is spent on finding it empty.
                if !c.pollable || n < readBuffer.count { break }
            } else if n == 0 {
                peerClosed(c)
                return
            } else {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { break }
                closeConnection(c, reason: "read failed: \(systemError())")
                return
            }
        }
    }

    /// The client closed its side: a stream without audio-stop is discarded; what is queued
    /// for it is still sent.
    private func peerClosed(_ c: Connection) {
        let midEvent = c.reader.isMidEvent
        if let s = c.stream {
            engine.leave(shard: s.shard, channels: s.channels)
            c.stream = nil
        }
        log("\(c.peer): disconnected\(midEvent ? " in the middle of an event" : "")")
        closeAfterFlush(c)
    }

    private func handleEvents(_ c: Connection) {
        var completed = 0
        while !c.closing {
            // Audio chunks in the form clients send them are read in place (no JSON built, the
            // payload decoded from the read buffer); every other event, the general way.
            if let head = c.reader.peekAudioChunk(),
               let format = try? WyomingAudioFormat(validating: head.rate, width: head.width, channels: head.channels) {
                completed += 1
                chunk(c, format: format, timestamp: head.timestamp, payloadBytes: head.payloadCount) { format, carry, inbox in
                    c.reader.payload(of: head) { format.decode($0, carry: &carry, appendingTo: &inbox) }
                }
                c.reader.consume(head)
                continue
            }
            let event: WyomingMessage?
            do { event = try c.reader.nextMessage() } catch {
                fail(c, Self.protocolError(error), code: "protocol")
                return
            }
            guard let event else { break }
            completed += 1
            handle(event, from: c)
        }
        // The event timeout runs from the first bytes of the event still incomplete: a client
        // whose reads end inside events but which completes them keeps going.
        if !c.reader.isMidEvent {
            c.eventStarted = nil
        } else if completed > 0 || c.eventStarted == nil {
            c.eventStarted = .now
        }
        if let s = c.stream, Double(s.inbox.count) > options.maxBufferSeconds * Double(s.format.rate), !c.paused, c.pollable {
            c.paused = true
            group(c.token).modify(c.readFD, events: c.waitingToWrite ? Epoll.writable : 0, token: c.token)
            paused.append(c)
        }
    }

    private func handle(_ event: WyomingMessage, from c: Connection) {
        switch event.type {
        case "describe":
            send(info, to: c)
        case "ping":
            send(WyomingEvent(type: "pong", data: ["text": event["text"] ?? .null]), to: c)
        case "detect":
            // As wyoming-openwakeword does: no names or an empty list ask for every wake word;
            // names this service lacks are left out (and the client told), and when none is
            // left, every wake word listens. The stream that follows always ends with an answer.
            guard let list = event["names"]?.array, !list.isEmpty else {
                c.names = nil
                return
            }
            let strings = list.compactMap(\.string)
            guard strings.count == list.count else { return error(c, "detect: names must be strings", code: "detect") }
            let known = wakeNames
            let isKnown = { (n: String) in known.contains { $0.caseInsensitiveCompare(n) == .orderedSame } }
            let found = strings.filter(isKnown)
            c.names = found.isEmpty ? nil : found
            let unknown = strings.filter { !isKnown($0) }
            if !unknown.isEmpty {
                let has = known.isEmpty ? "this service has no wake words"
                    : "this service has \(known.joined(separator: ", ")); listening for \(found.isEmpty ? "all of them" : found.joined(separator: ", "))"
                error(c, "detect: no wake word \(unknown.joined(separator: ", ")) here; \(has)", code: "detect")
            }
        case "audio-start":
            startStream(c, event)
        case "audio-chunk":
            chunk(c, event)
        case "audio-stop":
            stopStream(c)
        default:
            break  // unknown events are ignored, as Wyoming services do
        }
    }

    private var wakeNames: [String] {
        models.filter(\.isWakeWord).flatMap { m in m.eventLabels.map { m.wakeName(label: $0) } }
    }

    private func wanted(_ c: Connection) -> [Bool] {
        models.map { m in
            guard m.isWakeWord, let names = c.names else { return true }
            return m.eventLabels.contains { label in names.contains { $0.caseInsensitiveCompare(m.wakeName(label: label)) == .orderedSame } }
        }
    }

    private func startStream(_ c: Connection, _ event: WyomingMessage) {
        if let s = c.stream {  // a new start resets the stream
            engine.leave(shard: s.shard, channels: s.channels)
            c.stream = nil
        }
        let format: WyomingAudioFormat
        do { format = try WyomingAudioFormat(event) } catch {
            return self.error(c, "audio-start: \(error.reason)", code: "audio-format")
        }
        let wanted = wanted(c)
        do {
            let (shard, channels) = try engine.join(stream: c.token, rate: format.rate, wanted: wanted)
            c.stream = Stream(format: format, shard: shard, channels: channels,
                              startTimestamp: event["timestamp"]?.integer,
                              wakeModels: zip(models, wanted).contains { $0.isWakeWord && $1 })
            c.warnedChunkBeforeStart = false
            summary.streamsStarted += 1
        } catch {
            self.error(c, "audio-start: \(error)", code: "audio-format")
        }
    }

    private func chunk(_ c: Connection, _ event: WyomingMessage) {
        guard c.stream != nil else { return chunkBeforeStart(c) }
        let format: WyomingAudioFormat
        do { format = try WyomingAudioFormat(event) } catch {
            summary.droppedChunks += 1
            return self.error(c, "audio-chunk: \(error.reason); the chunk was ignored", code: "audio-format")
        }
        chunk(c, format: format, timestamp: event["timestamp"]?.integer, payloadBytes: event.payload.count) { format, carry, inbox in
            format.decode(event.payload, carry: &carry, appendingTo: &inbox)
        }
    }

    /// A chunk with no stream to go to: dropped, counted, and the client told once.
    private func chunkBeforeStart(_ c: Connection) {
        summary.droppedChunks += 1
        if !c.warnedChunkBeforeStart {
            c.warnedChunkBeforeStart = true
            error(c, "audio-chunk before audio-start: send audio-start (rate, width, channels) first; chunks before it are ignored", code: "no-audio-start")
        }
    }

    /// An audio chunk of `format`, its payload decoded by `decode` (mono samples appended to the
    /// stream's inbox, a partial frame left in its carry).
    private func chunk(_ c: Connection, format: WyomingAudioFormat, timestamp: Int?, payloadBytes: Int,
                       decode: (WyomingAudioFormat, inout [UInt8], inout [Float]) -> Void) {
        guard let s = c.stream else { return chunkBeforeStart(c) }
        guard format.rate == s.format.rate else {
            summary.droppedChunks += 1
            summary.droppedSamples += payloadBytes / max(1, format.frameBytes)
            return error(c, "audio-chunk at \(format.rate) Hz in a stream started at \(s.format.rate) Hz: the chunk was ignored "
                         + "(send audio-start to change the rate)", code: "audio-format")
        }
        guard !s.failed else { return }
        if format != s.carryFormat { s.carry = []; s.carryFormat = format }
        let before = s.inbox.count
        decode(format, &s.carry, &s.inbox)
        let added = s.inbox.count - before
        s.received += added
        summary.audioSeconds += Double(added) / Double(format.rate)
        if before == 0 && added > 0 { withAudio.append(c) }
        s.lastChunkTimestamp = timestamp
        s.chunks.append((s.received, timestamp))
        if s.chunks.count > 512 { s.chunks.removeFirst(256) }
    }

    private func stopStream(_ c: Connection) {
        guard let s = c.stream else { return }
        engine.push(s.inbox, shard: s.shard, channels: s.channels)
        c.stream?.inbox = []
        engine.finish(shard: s.shard, channels: s.channels)
        deliver(engine.takeOutput())
        if let s = c.stream {
            if s.wakeModels && !s.detected { send(WyomingEvent(type: "not-detected"), to: c) }
            engine.leave(shard: s.shard, channels: s.channels)
        }
        c.stream = nil
        summary.streamsFinished += 1
    }

    // MARK: ticks

    /// Pushes every stream's new audio into its channels and starts a tick on the workers; the
    /// loop goes on reading, and `endTick` sends the answers.
    private func startTick() {
        // Each stream's audio goes into its channels; its buffer keeps its capacity for the next
        // chunks (no allocation from chunk to chunk).
        for c in withAudio where connections[c.token] != nil {
            // (The copy `s` ends with the `if`, so that the inbox is emptied in place.)
            if let s = c.stream, !s.failed, !s.inbox.isEmpty { engine.push(s.inbox, shard: s.shard, channels: s.channels) }
            c.stream?.inbox.removeAll(keepingCapacity: true)
        }
        withAudio.removeAll(keepingCapacity: true)
        if engine.startTick(done: tickEnded) {
            tickStarted = true
        } else {
            endTick()
        }
    }

    /// The tick has ended: its answers go out, and paused clients are read again.
    private func endTick() {
        tickStarted = false
        deliver(engine.takeOutput())
        if let time = engine.takeTickTime() {
            summary.ticks += 1
            summary.tickTimes.add(time)
        }
        for c in paused where connections[c.token] != nil {
            c.paused = false
            group(c.token).modify(c.readFD, events: Epoll.readable | (c.waitingToWrite ? Epoll.writable : 0), token: c.token)
        }
        paused.removeAll()
    }

    /// Model events to Wyoming answers for their streams.
    private func deliver(_ events: [(stream: UInt64, model: Int, event: ClassifierEvent)]) {
        for (token, m, event) in events {
            guard let c = connections[token], let s = c.stream else { continue }
            let model = models[m]
            var data: [String: JSONValue] = [:]
            if let t = s.lastChunkTimestamp { data["chunk_timestamp"] = .number(Double(t)) }
            let answer: WyomingEvent
            switch event {
            case let .detected(d) where model.isWakeWord:
                let name = model.wakeName(label: d.label)
                if let names = c.names, !names.contains(where: { $0.caseInsensitiveCompare(name) == .orderedSame }) { continue }
                s.detected = true
                data["name"] = .string(name)
                data["timestamp"] = .number(Double(s.chunkTimestamp(d.sample)))
                answer = WyomingEvent(type: "detection", data: data)
            case let .started(seg) where !model.isWakeWord:
                data["timestamp"] = .number(Double(s.ms(seg.start)))
                answer = WyomingEvent(type: "voice-started", data: data)
            case let .ended(seg) where !model.isWakeWord:
                data["timestamp"] = .number(Double(s.ms(seg.end)))
                answer = WyomingEvent(type: "voice-stopped", data: data)
            case let .failed(_, e):
                s.failed = true
                answer = WyomingEvent(type: "error", data: ["text": .string("\(model.model.name): \(e); send audio-start to begin a new stream"),
                                                            "code": "stream-failed"])
            default:
                continue
            }
            send(answer, to: c)
        }
    }

    // MARK: output

    private func send(_ event: WyomingEvent, to c: Connection) {
        c.out += event.encoded
        if c.out.count - c.outOffset > options.maxOutputBytes {
            closeConnection(c, reason: "it is not reading its events (\(c.out.count - c.outOffset) bytes waiting)", byServer: true)
            return
        }
        if !c.waitingToWrite { flush(c) }
    }

    private func flush(_ c: Connection) {
        while c.outOffset < c.out.count {
            let n = c.out.withUnsafeBytes { raw -> Int in
                let p = raw.baseAddress! + c.outOffset
                let count = raw.count - c.outOffset
                return c.pollable && c.writeFD == c.readFD ? Glibc.send(c.writeFD, p, count, Int32(MSG_NOSIGNAL)) : Glibc.write(c.writeFD, p, count)
            }
            if n > 0 {
                c.outOffset += n
            } else if n < 0 && errno == EINTR {
                continue
            } else if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                if !c.waitingToWrite {
                    c.waitingToWrite = true
                    group(c.token).modify(c.readFD, events: (c.paused || c.closing ? 0 : Epoll.readable) | Epoll.writable, token: c.token)
                }
                return
            } else {
                closeConnection(c, reason: "write failed: \(systemError())")
                return
            }
        }
        c.out.removeAll(keepingCapacity: c.out.capacity <= 64 * 1024)
        c.outOffset = 0
        if c.waitingToWrite {
            c.waitingToWrite = false
            group(c.token).modify(c.readFD, events: c.paused || c.closing ? 0 : Epoll.readable, token: c.token)
        }
        if c.closing { closeConnection(c, reason: nil) }
    }

    private func error(_ c: Connection, _ text: String, code: String) {
        send(WyomingEvent(type: "error", data: ["text": .string(text), "code": .string(code)]), to: c)
    }

    /// A framing error as the client is told it: a length over the limit names the option that sets it.
    static func protocolError(_ error: WyomingError) -> String {
        guard case let .tooLarge(field, length, limit) = error else { return error.description }
        return "an event's \(field) is \(length) bytes: it exceeds --max-payload \(limit)"
    }

    /// An error the stream cannot recover from: the client is told, then closed.
    private func fail(_ c: Connection, _ text: String, code: String) {
        log("\(c.peer): \(text); closing")
        error(c, text, code: code)
        summary.closedByServer += 1
        if let s = c.stream {
            engine.leave(shard: s.shard, channels: s.channels)
            c.stream = nil
        }
        closeAfterFlush(c)
    }

    private func closeAfterFlush(_ c: Connection) {
        guard connections[c.token] != nil else { return }
        c.closing = true
        c.closingDeadline = .now + .seconds(max(options.drainSeconds, 0.5))
        if c.outOffset >= c.out.count {
            closeConnection(c, reason: nil)
        } else if c.pollable {
            group(c.token).modify(c.readFD, events: Epoll.writable, token: c.token)
            c.waitingToWrite = true
        }
    }

    private func closeConnection(_ c: Connection, reason: String?, byServer: Bool = false) {
        guard connections.removeValue(forKey: c.token) != nil else { return }
        c.closing = true
        if let s = c.stream {
            engine.leave(shard: s.shard, channels: s.channels)
            c.stream = nil
        }
        if byServer { summary.closedByServer += 1 }
        if c.pollable { group(c.token).remove(c.readFD) }
        if c.readFD > 2 { close(c.readFD) }
        if let reason { log("\(c.peer): closed: \(reason)") }
        if listener == nil { beginStop() }  // stdio: the one client is gone
    }

    // MARK: housekeeping and stopping

    private func housekeeping(_ now: ContinuousClock.Instant) {
        for c in Array(connections.values) {
            if let started = c.eventStarted, now - started > .seconds(options.eventTimeout) {
                fail(c, "an event began \(Int(options.eventTimeout)) s ago and is still incomplete (limit --event-timeout)", code: "timeout")
            } else if now - c.lastReceived > .seconds(options.idleTimeout), !c.closing {
                fail(c, "nothing received for \(Int(options.idleTimeout)) s (limit --idle-timeout)", code: "timeout")
            } else if c.closing, let deadline = c.closingDeadline, now >= deadline {
                closeConnection(c, reason: "its last events were not taken in time")
            }
        }
    }

    private func beginStop() {
        guard !stopping else { return }
        stopping = true
        stopDeadline = .now + .seconds(options.drainSeconds)
        if let listener { epoll.remove(listener) }
        log("stopping: finishing \(connections.values.filter { $0.stream != nil }.count) streams")
        for c in Array(connections.values) {
            if c.stream != nil { stopStream(c) }
            closeAfterFlush(c)
        }
    }

    private func log(_ line: String) { options.log?(line) }

    private func summaryLine(steps: Int) -> String {
        let p99 = summary.tickTimes.milliseconds(0.99).map { String(format: "%.2f ms", $0) } ?? "-"
        return "\(connections.count) clients (peak \(summary.peakClients)), \(summary.accepted) accepted, \(summary.refused) refused, "
            + "\(summary.closedByServer) closed by the server, \(steps) steps, tick p99 \(p99), "
            + "dropped \(summary.droppedChunks) chunks"
    }

    private var lastSummarySteps = 0
    private var lastSummaryAt = ContinuousClock.now

    private func logSummary() {
        let now = ContinuousClock.now
        let steps = engine.stepsCounted
        let elapsed = now - lastSummaryAt
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        log(String(format: "%.0f steps/s; ", Double(steps - lastSummarySteps) / max(seconds, 1e-9)) + summaryLine(steps: steps))
        lastSummarySteps = steps
        lastSummaryAt = now
    }

    // MARK: info

    static func makeInfo(models: [ServedModel], version: String) -> WyomingEvent {
        let earshot: JSONValue = ["name": "Earshot", "url": "https://github.com/earshot"]
        func attribution(_ m: ServedModel) -> JSONValue {
            ["name": .string(m.model.manifest.author ?? "unknown"), "url": .string(m.model.manifest.url ?? m.model.manifest.source ?? "")]
        }
        var wakeModels: [JSONValue] = []
        var vadModels: [JSONValue] = []
        for m in models {
            let manifest = m.model.manifest
            // Home Assistant shows a wake word by its description: the phrase, as the Wyoming
            // wake-word services give it.
            func entry(name: String, phrase: String?) -> JSONValue {
                .object(["name": .string(name), "attribution": attribution(m), "installed": true,
                         "description": .string(phrase ?? manifest.description ?? m.model.name),
                         "version": manifest.version.map(JSONValue.string) ?? .null,
                         "languages": .array((manifest.languages ?? []).map(JSONValue.string)),
                         "phrase": phrase.map(JSONValue.string) ?? .null])
            }
            if m.isWakeWord {
                let labels = m.eventLabels
                for label in labels {
                    wakeModels.append(entry(name: m.wakeName(label: label), phrase: labels.count == 1 ? (manifest.phrase ?? label) : label))
                }
            } else {
                vadModels.append(entry(name: m.model.name, phrase: nil))
            }
        }
        func program(_ description: String, _ list: [JSONValue]) -> JSONValue {
            ["name": "earshot", "attribution": earshot, "installed": true, "description": .string(description),
             "version": .string(version), "models": .array(list)]
        }
        var data: [String: JSONValue] = ["asr": [], "tts": [], "handle": [], "intent": [], "mic": [], "snd": [],
                                         "wake": wakeModels.isEmpty ? [] : [program("Earshot wake-word detection", wakeModels)]]
        // Wyoming's info has no place for voice activity; clients ignore keys they do not know.
        if !vadModels.isEmpty { data["vad"] = [program("Earshot voice activity detection", vadModels)] }
        return WyomingEvent(type: "info", data: data)
    }
}
