#if canImport(Glibc)
import Glibc
#endif
import CEarshotSystem
import Earshot
import EarshotTelemetry
import Foundation

/// A service's loop, knowing no protocol: one thread on epoll owns the listening socket and
/// every connection, reads the clients (as their data arrives, or in batches once there are
/// many), hands the bytes to each connection's `Session`, writes what sessions send, and holds
/// the limits (clients, buffered audio, unsent output, idle and event timeouts). The streams'
/// audio goes into `ServeEngine`'s shards at every tick, which steps them on worker threads
/// while this thread goes on reading; their events go back to the sessions when it ends.
final class ServeLoop<Session: ServeSession>: @unchecked Sendable {
    // @unchecked Sendable: after init, every mutable property is touched only by the thread
    // inside `run()`; `stop()`, the one method for other threads, only writes to the eventfd of
    // `wake` (a system call, safe from any thread), and `start`/`wait` hand the summary over
    // under a lock and a semaphore. A tick's workers touch only the engine's shards, which the
    // loop leaves alone until the tick has ended (`ServeEngine.settle`).
    typealias Connection = ServeConnection<Session>
    typealias Stream = ServeStream<Session.StreamState>

    /// Where it listens (with the port chosen, when 0 was asked for).
    let address: ServeURI
    let options: ServeOptions
    let engine: ServeEngine
    let service: Session.Service
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
    private static var groupCount: Int { 4 }
    private var connections: [UInt64: Connection] = [:]
    private var nextToken: UInt64 = 16
    var summary = ServeSummary()
    private var stopping = false
    private var stopDeadline: ContinuousClock.Instant?
    private var paused: [Connection] = []
    /// Connections whose stream has audio not yet stepped (each once).
    private var withAudio: [Connection] = []
    /// The stdio client when its input is a regular file (epoll cannot watch it: always ready).
    private var unpollable: Connection?
    private var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)

    private static var listenerToken: UInt64 { 1 }
    private static var wakeToken: UInt64 { 2 }
    private static var tickToken: UInt64 { 3 }
    /// The first group's token (the groups' are consecutive, below the first client's).
    private static var groupToken: UInt64 { 4 }
    /// Bytes read from one client per wake-up of the loop, so that one fast client cannot
    /// keep the loop from the others.
    private static var readBudget: Int { 64 * 1024 }

    /// Binds `uri` (for stdio://, takes standard input and output as its one client).
    /// - Throws: `ServeError.invalidOption` for options out of range, `.socket` naming the
    ///   address when it cannot be bound.
    init(uri: ServeURI, engine: ServeEngine, service: Session.Service, options: ServeOptions) throws(ServeError) {
        try options.validate()
        self.options = options
        self.engine = engine
        self.service = service
        wake = try WakeSignal()
        tickEnded = try WakeSignal()
        epoll = try Epoll()
        groups = try (0..<Self.groupCount).map { _ throws(ServeError) in try Epoll() }
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
            let c = Connection(token: nextToken, readFD: 0, writeFD: 1, peer: "stdio",
                               session: Session(service: service, options: options), now: .now)
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

    /// Asks the loop to stop (from any thread): it stops accepting, finishes every stream, sends
    /// what is queued and `run` returns.
    func stop() { wake.signal() }

    /// Starts the loop on a thread of its own and returns at once; `wait()` gives its summary
    /// once it has stopped.
    func start() {
        let thread = Thread {
            let summary = self.run()
            self.result.withLock { $0 = summary }
            self.finished.signal()
        }
        thread.name = "earshot serve"
        thread.start()
    }

    /// Blocks until a loop started with `start()` has stopped; what it did.
    func wait() -> ServeSummary {
        finished.wait()
        finished.signal()
        return result.withLock { $0 } ?? ServeSummary()
    }

    private let finished = DispatchSemaphore(value: 0)
    private let result = Locked<ServeSummary?>(nil)

    /// Runs the loop on a thread of its own until it stops.
    func serve() async -> ServeSummary {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: self.run()) }
            thread.name = "earshot serve"
            thread.start()
        }
    }

    /// Runs the loop on this thread until it stops; what it did.
    func run() -> ServeSummary {
        var lastTick = ContinuousClock.now - .seconds(1)
        var nextHousekeeping = ContinuousClock.now
        var nextSummary = ContinuousClock.now + .seconds(options.summaryInterval)
        let tick = Duration.microseconds(Int64(options.tickMs * 1000))
        log("serving \(engine.models.map(\.model.name).joined(separator: ", ")) on \(address)")
        publishMetrics()
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
                publishMetrics()
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
        publishMetrics(stopped: true)
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
                let bytes = Session.errorMessage(reason, code: "too-many-clients")
                _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(fd)
                summary.refused += 1
                summary.errors["too-many-clients", default: 0] += 1
                log("refused: \(reason)", client: peer, level: .warning)
                continue
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let c = Connection(token: nextToken, readFD: fd, writeFD: fd, peer: peer,
                               session: Session(service: service, options: options), now: .now)
            nextToken += 1
            group(c.token).add(fd, events: Epoll.readable, token: c.token)
            connections[c.token] = c
            summary.accepted += 1
            summary.peakClients = max(summary.peakClients, connections.count)
            log("connected (\(connections.count) clients)", client: peer)
        }
    }

    private func readFrom(_ c: Connection) {
        var total = 0
        while total < Self.readBudget && !c.paused && !c.closing {
            let n = readBuffer.withUnsafeMutableBytes { read(c.readFD, $0.baseAddress, $0.count) }
            if n > 0 {
                total += n
                received(n, from: c)
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

    /// The first `count` bytes of the read buffer, from `c`: its session handles the events
    /// they complete; then the event timeout and the limit on buffered audio are applied.
    private func received(_ count: Int, from c: Connection) {
        let completed = readBuffer.withUnsafeBytes { c.session.received(UnsafeRawBufferPointer(rebasing: $0[0..<count]), on: c, loop: self) }
        guard let completed else { return }
        // The event timeout runs from the first bytes of the event still incomplete: a client
        // whose reads end inside events but which completes them keeps going.
        c.clocks.received(at: .now, midEvent: c.session.isMidEvent, completed: completed > 0)
        if let s = c.stream, Double(s.inbox.count) > options.maxBufferSeconds * Double(s.rate), !c.paused, c.pollable {
            c.paused = true
            c.clocks.pause()
            group(c.token).modify(c.readFD, events: c.waitingToWrite ? Epoll.writable : 0, token: c.token)
            paused.append(c)
        }
    }

    /// The client closed its side: a stream not stopped is discarded; what is queued for it is
    /// still sent.
    private func peerClosed(_ c: Connection) {
        let midEvent = c.session.isMidEvent
        leaveStream(c)
        log("disconnected\(midEvent ? " in the middle of an event" : "")", client: c.peer)
        closeAfterFlush(c)
    }

    // MARK: streams (for sessions)

    /// A new stream for `c` at `rate`, run by the models in `wanted` (the session has left any
    /// stream it had).
    func startStream(_ c: Connection, rate: Int, wanted: [Bool], state: Session.StreamState) throws(StreamError) {
        let (shard, channels) = try engine.join(stream: c.token, rate: rate, wanted: wanted)
        c.stream = Stream(shard: shard, channels: channels, rate: rate, state: state)
        summary.streamsStarted += 1
    }

    /// Samples a session appended to `s.inbox` (it held `before` of them): counted, and the
    /// stream stepped at the next tick.
    @discardableResult
    func appended(_ c: Connection, _ s: Stream, from before: Int) -> Int {
        let added = s.inbox.count - before
        summary.audioSeconds += Double(added) / Double(s.rate)
        if before == 0 && added > 0 { withAudio.append(c) }
        return added
    }

    /// The stream's last audio is stepped, its last events delivered, then it ends.
    func stopStream(_ c: Connection) {
        guard let s = c.stream else { return }
        engine.push(s.inbox, shard: s.shard, channels: s.channels)
        c.stream?.inbox = []
        engine.finish(shard: s.shard, channels: s.channels)
        deliver(engine.takeOutput())
        if let s = c.stream {
            c.session.finished(s, on: c, loop: self)
            engine.leave(shard: s.shard, channels: s.channels)
        }
        c.stream = nil
        summary.streamsFinished += 1
    }

    /// The stream (if any) is discarded, its events with it.
    func leaveStream(_ c: Connection) {
        if let s = c.stream {
            engine.leave(shard: s.shard, channels: s.channels)
            c.stream = nil
        }
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
        let now = ContinuousClock.now
        for c in paused where connections[c.token] != nil {
            c.paused = false
            c.clocks.resume(at: now)
            group(c.token).modify(c.readFD, events: Epoll.readable | (c.waitingToWrite ? Epoll.writable : 0), token: c.token)
        }
        paused.removeAll()
    }

    /// Model events to their streams' sessions.
    private func deliver(_ events: [(stream: UInt64, model: Int, event: ClassifierEvent)]) {
        for (token, m, event) in events {
            guard let c = connections[token], let s = c.stream else { continue }
            if case .failed = event { s.failed = true }
            c.session.deliver(event, model: m, stream: s, on: c, loop: self)
        }
    }

    // MARK: output

    /// Bytes for the client (written at once when it is taking them; else when it can).
    func send(_ bytes: [UInt8], to c: Connection) {
        c.out += bytes
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

    /// A failure the client is told of; the connection goes on.
    func error(_ c: Connection, _ text: String, code: String) {
        summary.errors[code, default: 0] += 1
        send(Session.errorMessage(text, code: code), to: c)
    }

    /// An error the stream cannot recover from: the client is told, then closed.
    func fail(_ c: Connection, _ text: String, code: String) {
        log("\(text); closing", client: c.peer, level: .warning)
        error(c, text, code: code)
        summary.closedByServer += 1
        leaveStream(c)
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
        leaveStream(c)
        if byServer { summary.closedByServer += 1 }
        if c.pollable { group(c.token).remove(c.readFD) }
        if c.readFD > 2 { close(c.readFD) }
        if let reason { log("closed: \(reason)", client: c.peer) }
        if listener == nil { beginStop() }  // stdio: the one client is gone
    }

    // MARK: housekeeping and stopping

    private func housekeeping(_ now: ContinuousClock.Instant) {
        for c in Array(connections.values) {
            let expired = c.clocks.expired(at: now, eventTimeout: options.eventTimeout, idleTimeout: options.idleTimeout)
            if expired == .event {
                fail(c, "an event began \(Int(options.eventTimeout)) s ago and is still incomplete (limit --event-timeout)", code: "timeout")
            } else if expired == .idle, !c.closing {
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

    func log(_ message: String, client: String? = nil, level: LogLevel = .info) {
        options.log?(LogRecord(message, level: level, client.map { [("client", $0)] } ?? []))
    }

    // MARK: metrics

    /// What a scrape reads (`publishMetrics`).
    let metrics = Locked(ServeMetrics())

    /// Publishes the loop's figures for the metrics endpoint.
    private func publishMetrics(stopped: Bool = false) {
        var streams = [Int](repeating: 0, count: engine.models.count)
        for c in connections.values {
            guard let s = c.stream else { continue }
            for (m, channel) in s.channels.enumerated() where channel != nil { streams[m] += 1 }
        }
        var counted = summary
        counted.steps = engine.stepsCounted
        let (models, clients) = (engine.models.map(\.model.name), connections.count)
        metrics.withLock {
            $0 = ServeMetrics(models: models, clients: clients, streams: streams, summary: counted, published: .now, stopped: stopped)
        }
    }

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
}
