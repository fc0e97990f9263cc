import EarshotModel
import EarshotRedis
import Glibc

/// How a worker joins a cluster.
public struct WorkerOptions: Sendable {
    /// The Redis server.
    public var endpoint: RedisEndpoint
    /// The consumer group, on the registry and on every audio stream.
    public var group = "earshot"
    /// This worker's consumer name: a worker started again under its name takes its own
    /// sources back first.
    public var name: String
    public var keys = ClusterKeys()
    /// A source's snapshot is written (and its audio acknowledged) every this many entries,
    /// and when it ends or moves.
    public var checkpointEvery = 20
    /// A source whose owner has not been heard from for this long (seconds) is claimed.
    public var claimAfter: Double = 5
    /// Seconds between heartbeats (and rebalancing).
    public var heartbeat: Double = 1
    /// Audio entries read per source at a time.
    public var readCount = 10
    /// How long a read waits for audio (ms).
    public var blockMs = 100
    /// Messages for the operator (connection lost and regained, sources taken and given up).
    public var log: @Sendable (String) -> Void = { _ in }

    public init(endpoint: RedisEndpoint, name: String) {
        self.endpoint = endpoint
        self.name = name
    }
}

/// What a worker did, when it stops.
public struct WorkerSummary: Sendable, Equatable {
    public var sourcesTaken = 0
    public var sourcesEnded = 0
    public var sourcesFailed = 0
    public var sourcesReleased = 0
    public var entries = 0
    public var events = 0
    /// Events a replay wrote again, which Redis refused as already there.
    public var duplicateEvents = 0
    public var checkpoints = 0
    public var reconnects = 0
}

/// A worker of a cluster on Redis Streams: it owns sources (one stream of audio each), runs
/// all of them in one batched channel set of one model, appends their events, and checkpoints
/// each source's whole-stream snapshot atomically with the acknowledgement of its audio. A
/// worker that dies loses nothing: another claims its sources, restores their last snapshots
/// and replays the audio after them; the events it writes again carry the same ids and are
/// refused. Workers share the sources evenly, by a heartbeat count of the live ones.
///
/// One thread runs it (`run`); Redis errors are retried with backoff, never thrown.
public final class ClusterWorker {
    public let model: Model
    public let options: LabelOptions
    public let settings: WorkerOptions
    private var channels: ChannelSet
    private var connection: RedisConnection?
    private var owned: [String: Owned] = [:]
    private var byChannel: [Int: String] = [:]
    private var summary = WorkerSummary()
    private var target = 1
    private var nextHeartbeat = 0
    private var latencies: [Int] = []
    private var entriesSinceStats = 0
    /// Per source, the last seq after which a gap made it be taken up again.
    private var gapRetried: [String: Int] = [:]

    /// One source this worker owns.
    private struct Owned {
        let id: String
        /// Its registry entry, pending with this worker while it owns the source.
        var registryEntry: String
        var channel: Int?
        var lastSeq = 0
        var lastEntry = "0-0"
        /// Audio entries processed since the last checkpoint.
        var unacked: [String] = []
        var done = false
        var failed = false
    }

    public init(model: Model, options: LabelOptions? = nil, settings: WorkerOptions) throws(StreamError) {
        self.model = model
        self.options = options ?? LabelOptions(model: model)
        try self.options.validate()
        self.settings = settings
        channels = ChannelSet(model: model, options: self.options)
    }

    private var keys: ClusterKeys { settings.keys }
    private var group: RedisArgument { RedisArgument(settings.group) }
    private var me: RedisArgument { RedisArgument(settings.name) }

    /// Sources owned now.
    public var ownedSources: [String] { owned.keys.sorted() }

    /// Runs until `shouldStop` says so, then checkpoints and hands back every source it owns.
    public func run(shouldStop: () -> Bool) -> WorkerSummary {
        var backoff = 0.1
        while !shouldStop() {
            do {
                if connection == nil {
                    let c = try RedisConnection(settings.endpoint, timeout: max(5, settings.claimAfter))
                    connection = c
                    try setUp(c)
                    if summary.reconnects > 0 || backoff > 0.1 { settings.log("connected to \(settings.endpoint) again") }
                    backoff = 0.1
                    try recoverOwn(c)
                }
                if let c = connection { try iteration(c) }
            } catch {
                settings.log("\(error); retrying in \(Self.format(backoff)) s (sources resume from their checkpoints)")
                dropAll()
                connection?.close()
                connection = nil
                summary.reconnects += 1
                var slept = 0.0
                while slept < backoff && !shouldStop() { usleep(50_000); slept += 0.05 }
                backoff = min(backoff * 2, 5)
            }
        }
        if let c = connection {
            do {
                for id in owned.keys.sorted() { try release(id, c) }
                try c.expect(["ZREM", RedisArgument(keys.workers), me])
            } catch {
                settings.log("stopping: \(error); the sources' pending audio will be claimed after \(Self.format(settings.claimAfter)) s")
            }
        }
        return summary
    }

    /// Seconds as people read them in a log: whole seconds bare, else to the millisecond (0.1, 1.6).
    private static func format(_ s: Double) -> String {
        let ms = Int((s * 1000).rounded())
        return ms % 1000 == 0 ? String(ms / 1000) : String(Double(ms) / 1000)
    }

    private func setUp(_ c: RedisConnection) throws(RedisError) {
        try createGroup(keys.sources, c)
        try heartbeat(c)
    }

    private func createGroup(_ key: String, _ c: RedisConnection) throws(RedisError) {
        let r = try c.command(["XGROUP", "CREATE", RedisArgument(key), group, "0", "MKSTREAM"])
        if let e = r.errorMessage, !e.hasPrefix("BUSYGROUP") { throw .refused(command: "XGROUP CREATE \(key)", message: e) }
    }

    /// After a restart or a lost connection: the registry entries still pending with this name
    /// are this worker's sources; it takes them up from their checkpoints.
    private func recoverOwn(_ c: RedisConnection) throws(RedisError) {
        var after = "0"
        while true {
            let reply = try c.expect(["XREADGROUP", "GROUP", group, me, "COUNT", "100", "STREAMS", RedisArgument(keys.sources), RedisArgument(after)])
            let entries = StreamReplies.streams(reply).first?.entries ?? []
            if entries.isEmpty { return }
            for e in entries { try take(registryEntry: e.id, fields: e.fields, c) }
            after = entries[entries.count - 1].id
        }
    }

    // MARK: The loop

    private func iteration(_ c: RedisConnection) throws(RedisError) {
        let now = WallClock.millis()
        if now >= nextHeartbeat {
            try heartbeat(c)
            try rebalance(c)
            nextHeartbeat = now + Int(settings.heartbeat * 1000)
        }
        if owned.count < target { try acquire(c) }
        let reading = owned.values.filter { !$0.done }.map(\.id).sorted()
        if reading.isEmpty {
            // Nothing to run: wait for a source on the registry.
            let reply = try c.expect(["XREADGROUP", "GROUP", group, me, "COUNT", "1", "BLOCK", RedisArgument(settings.blockMs),
                                      "STREAMS", RedisArgument(keys.sources), ">"])
            for e in StreamReplies.streams(reply).first?.entries ?? [] { try take(registryEntry: e.id, fields: e.fields, c) }
            return
        }
        var args: [RedisArgument] = ["XREADGROUP", "GROUP", group, me, "COUNT", RedisArgument(settings.readCount),
                                     "BLOCK", RedisArgument(settings.blockMs), "STREAMS"]
        args += reading.map { RedisArgument(keys.audio($0)) }
        args += reading.map { _ in ">" }
        let reply = try c.expect(args)
        var batch: [String: [(id: String, fields: [RedisReply]?)]] = [:]
        let prefix = keys.audio("")
        for s in StreamReplies.streams(reply) where s.key.hasPrefix(prefix) {
            batch[String(s.key.dropFirst(prefix.count))] = s.entries
        }
        if !batch.isEmpty { try process(batch, c) }
    }

    /// Heartbeat: this worker is alive; the registry entries of its sources are touched so
    /// that no one claims them (a source another worker took meanwhile is let go); the fair
    /// share is counted again.
    private func heartbeat(_ c: RedisConnection) throws(RedisError) {
        let now = WallClock.millis()
        let ids = owned.values.map(\.registryEntry)
        var commands: [[RedisArgument]] = [
            ["ZADD", RedisArgument(keys.workers), RedisArgument(now), me],
            ["ZREMRANGEBYSCORE", RedisArgument(keys.workers), "-inf", RedisArgument(now - Int(settings.claimAfter * 10_000))],
            ["SCARD", RedisArgument(keys.active)],
            ["ZCOUNT", RedisArgument(keys.workers), RedisArgument(now - Int(settings.claimAfter * 1000)), "+inf"],
        ]
        if !ids.isEmpty {
            commands.append(["EVAL", RedisArgument(Self.touchScript), "1", RedisArgument(keys.sources), group, me] + ids.map { RedisArgument($0) })
        }
        let replies = try c.pipeline(commands)
        for (r, cmd) in zip(replies, commands) where r.errorMessage != nil {
            throw .refused(command: RedisConnection.name(cmd), message: r.errorMessage ?? "")
        }
        let active = replies[2].integer ?? 0, alive = max(1, replies[3].integer ?? 1)
        target = max(1, (active + alive - 1) / alive)
        if !ids.isEmpty {
            let kept = Set((replies[4].elements ?? []).compactMap(\.text))
            for (id, o) in owned where !kept.contains(o.registryEntry) {
                settings.log("source \(id) was claimed by another worker; letting it go")
                drop(id)
            }
        }
        if !latencies.isEmpty || entriesSinceStats > 0 {
            latencies.sort()
            func pct(_ p: Double) -> Int { latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
            _ = try c.command(["XADD", RedisArgument(keys.stats), "MAXLEN", "~", "100000", "*", "worker", me,
                               "entries", RedisArgument(entriesSinceStats), "sources", RedisArgument(owned.count),
                               "p50", RedisArgument(pct(0.5)), "p99", RedisArgument(pct(0.99)), "max", RedisArgument(latencies.last ?? 0)])
            latencies.removeAll(keepingCapacity: true)
            entriesSinceStats = 0
        }
    }

    /// For each registry id: touched (idle time reset) if still pending with this consumer.
    /// Returns the ids kept.
    static let touchScript = """
        local kept = {}
        for i = 3, #ARGV do
          local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
          if p[1] and p[1][2] == ARGV[2] then
            redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
            kept[#kept + 1] = ARGV[i]
          end
        end
        return kept
        """

    /// More sources, up to the fair share: a dead worker's first (claimed), then new ones.
    private func acquire(_ c: RedisConnection) throws(RedisError) {
        var want = target - owned.count
        var cursor = "0-0"
        repeat {
            let reply = try c.expect(["XAUTOCLAIM", RedisArgument(keys.sources), group, me, RedisArgument(Int(settings.claimAfter * 1000)),
                                      RedisArgument(cursor), "COUNT", RedisArgument(want)])
            guard let parts = reply.elements, parts.count >= 2, let next = parts[0].text else { break }
            let claimed = StreamReplies.entries(parts[1])
            for e in claimed {
                settings.log("claimed source entry \(e.id) from a worker not heard from in \(Self.format(settings.claimAfter)) s")
                try take(registryEntry: e.id, fields: e.fields, c)
            }
            want = target - owned.count
            cursor = next
        } while cursor != "0-0" && want > 0
        guard want > 0 else { return }
        let reply = try c.expect(["XREADGROUP", "GROUP", group, me, "COUNT", RedisArgument(want), "STREAMS", RedisArgument(keys.sources), ">"])
        for e in StreamReplies.streams(reply).first?.entries ?? [] { try take(registryEntry: e.id, fields: e.fields, c) }
    }

    /// More than the fair share (a worker joined): the extra sources are checkpointed and put
    /// back on the registry for the others.
    private func rebalance(_ c: RedisConnection) throws(RedisError) {
        let extra = owned.count - target
        guard extra > 0 else { return }
        for id in owned.keys.sorted().suffix(extra) {
            try release(id, c)
            settings.log("gave up source \(id): \(owned.count) left, the fair share is \(target)")
        }
    }

    // MARK: Taking a source

    /// Takes the source of a registry entry: its checkpoint restored, its audio after it replayed.
    private func take(registryEntry: String, fields: [RedisReply]?, _ c: RedisConnection) throws(RedisError) {
        let source = StreamReplies.pairs(fields ?? [])["source"].map { String(decoding: $0, as: UTF8.self) }
        guard let id = source, (try? ClusterKeys.validate(source: id)) != nil else {
            // A registry entry that names no source (or one deleted): nothing to run.
            try c.expect(["XACK", RedisArgument(keys.sources), group, RedisArgument(registryEntry)])
            return
        }
        if var o = owned[id] {
            // Already ours (read twice after a lost connection): the newer entry is the one kept.
            if o.registryEntry != registryEntry {
                try c.expect(["XACK", RedisArgument(keys.sources), group, RedisArgument(o.registryEntry)])
                o.registryEntry = registryEntry
                owned[id] = o
            }
            return
        }
        summary.sourcesTaken += 1
        var o = Owned(id: id, registryEntry: registryEntry)
        try createGroup(keys.audio(id), c)
        let checkpoint = StreamReplies.hash(try c.expect(["HGETALL", RedisArgument(keys.checkpoint(id))]))
        func text(_ k: String) -> String? { checkpoint[k].map { String(decoding: $0, as: UTF8.self) } }
        if text("done") == "1" {
            try finishRegistry(o, c)
            return
        }
        var replayFromStart = false
        if let bytes = checkpoint["snapshot"], let seqText = text("seq"), let entry = text("entry") {
            // A number out of range stands as 0 in what the failure says; the checkpoint is refused.
            let seq = Int(seqText).flatMap { (0...AudioEntry.maxSeq).contains($0) ? $0 : nil }
            do {
                guard let seq else { throw StreamError.snapshot(reason: "the checkpoint's seq '\(seqText)' is not an entry number (0...2^53)") }
                let snapshot = try StreamSnapshot(serialized: bytes)
                o.channel = try channels.add(restoring: snapshot, kind: .live)
                o.lastSeq = seq
                o.lastEntry = entry
            } catch {
                // Another model's snapshot, or a damaged one: start the source again from its
                // first entry, if its audio is all still there.
                let first = StreamReplies.entries(try c.expect(["XRANGE", RedisArgument(keys.audio(id)), "-", "+", "COUNT", "1"])).first
                let firstSeq = first.flatMap { e in e.fields.flatMap { try? AudioEntry(id: e.id, fields: $0, source: id).seq } }
                if firstSeq == 1 {
                    settings.log("source \(id): checkpoint refused (\(error)); starting it again from its first entry")
                    replayFromStart = true
                } else {
                    owned[id] = o
                    try fail(id, reason: "its checkpoint was refused (\(error)) and its audio from the start is no longer there", seq: (seq ?? 0) + 1, c)
                    return
                }
            }
        }
        owned[id] = o
        if let k = o.channel { byChannel[k] = id }
        settings.log("took source \(id)" + (o.lastSeq > 0 ? " from its checkpoint at entry \(o.lastSeq)" : ""))
        // Its audio delivered to a dead owner and never acknowledged becomes ours.
        var cursor = "0-0"
        repeat {
            let reply = try c.expect(["XAUTOCLAIM", RedisArgument(keys.audio(id)), group, me, "0", RedisArgument(cursor), "COUNT", "1000", "JUSTID"])
            guard let parts = reply.elements, let next = parts.first?.text else { break }
            cursor = next
        } while cursor != "0-0"
        // The replay: acknowledged audio first when starting again, then everything pending.
        if replayFromStart, let until = text("entry") {
            var from = "-"
            while true {
                let page = StreamReplies.entries(try c.expect(["XRANGE", RedisArgument(keys.audio(id)), RedisArgument(from), RedisArgument(until), "COUNT", "500"]))
                if page.isEmpty { break }
                try replay(id, page, c)
                guard owned[id]?.done == false, let last = page.last?.id else { return }
                from = "(" + last
            }
        }
        var after = "0"
        while owned[id]?.done == false {
            let reply = try c.expect(["XREADGROUP", "GROUP", group, me, "COUNT", "500", "STREAMS", RedisArgument(keys.audio(id)), RedisArgument(after)])
            let page = StreamReplies.streams(reply).first?.entries ?? []
            if page.isEmpty { break }
            try replay(id, page, c)
            after = page[page.count - 1].id
        }
    }

    /// Entries of one source, in order, one at a time.
    private func replay(_ id: String, _ entries: [(id: String, fields: [RedisReply]?)], _ c: RedisConnection) throws(RedisError) {
        for e in entries {
            guard owned[id]?.done == false else { return }
            try process([id: [e]], c)
        }
    }

    // MARK: Running audio

    /// A read's entries: in rounds of at most one entry per source, so that each step's events
    /// belong to one entry; every source of a round steps in one batch.
    private func process(_ batch: [String: [(id: String, fields: [RedisReply]?)]], _ c: RedisConnection) throws(RedisError) {
        var commands: [[RedisArgument]] = []
        var retake: Set<String> = []
        let rounds = batch.values.map(\.count).max() ?? 0
        let now = WallClock.micros()
        for r in 0..<rounds {
            var pushed: [String: Int] = [:]  // source → seq pushed this round
            var events: [String: [ClusterEvent]] = [:]
            var ending: [(id: String, seq: Int)] = []
            for (id, entries) in batch where r < entries.count && !retake.contains(id) {
                guard var o = owned[id], !o.done else { continue }
                let raw = entries[r]
                do {
                    guard let fields = raw.fields else { throw ClusterError.malformedEntry(source: id, entry: raw.id, reason: "the entry was deleted") }
                    let entry = try AudioEntry(id: raw.id, fields: fields, source: id)
                    if entry.seq <= o.lastSeq {
                        // Already in the snapshot: acknowledged with the next checkpoint.
                        o.unacked.append(raw.id)
                        owned[id] = o
                        continue
                    }
                    guard entry.seq == o.lastSeq + 1 else {
                        // The entries between may have gone to the source's previous owner just
                        // as this worker took it: take the source up again from its checkpoint,
                        // claiming everything pending, once. Still missing then: they are lost.
                        if gapRetried[id] != o.lastSeq {
                            gapRetried[id] = o.lastSeq
                            retake.insert(id)
                            continue
                        }
                        throw ClusterError.malformedEntry(source: id, entry: raw.id, reason: "seq \(entry.seq) after \(o.lastSeq): entries are missing")
                    }
                    summary.entries += 1
                    entriesSinceStats += 1
                    if let t = entry.publishedMicros { latencies.append(max(0, now - t)) }
                    o.lastSeq = entry.seq
                    o.lastEntry = raw.id
                    o.unacked.append(raw.id)
                    if entry.end {
                        o.done = true
                        owned[id] = o
                        ending.append((id, entry.seq))
                        continue
                    }
                    if o.channel == nil {
                        do { o.channel = try channels.add(sourceRate: entry.rate, kind: .live) } catch {
                            throw ClusterError.malformedEntry(source: id, entry: raw.id, reason: "\(error)")
                        }
                        byChannel[o.channel ?? -1] = id
                    }
                    guard let k = o.channel else { continue }
                    let rate = channels.sourceRate(k)
                    guard entry.rate == rate else {
                        throw ClusterError.malformedEntry(source: id, entry: raw.id, reason: "rate \(entry.rate) Hz; the source's audio is at \(rate ?? 0) Hz")
                    }
                    owned[id] = o
                    events[id, default: []] += record(channels.push(entry.samples, channel: k), source: id, seq: entry.seq, from: 0)
                    pushed[id] = entry.seq
                } catch {
                    // The entry's place: the one after the last good one.
                    settings.log("source \(id) failed: \(error)")
                    o.unacked.append(raw.id)
                    owned[id] = o
                    events[id, default: []].append(ClusterEvent(source: id, seq: o.lastSeq + 1, index: 0, kind: .error("\(error)")))
                    markFailed(id)
                }
            }
            // One batched step of every source pushed this round.
            for event in channels.drain() {
                guard let id = byChannel[event.channel], let seq = pushed[id] else { continue }
                events[id, default: []] += record([event], source: id, seq: seq, from: events[id]?.count ?? 0)
            }
            // Sources that ended: their tails step (nothing else has a block now), their open
            // segments close, and an end event says that all is out.
            for (id, seq) in ending {
                if let k = owned[id]?.channel {
                    let tail = channels.finish(channel: k).filter { $0.channel == k }
                    events[id, default: []] += record(tail, source: id, seq: seq, from: events[id]?.count ?? 0)
                }
                events[id, default: []].append(ClusterEvent(source: id, seq: seq, index: events[id]?.count ?? 0, kind: .end))
            }
            for (id, list) in events {
                // Renumber: the k-th event of the entry.
                for (k, var e) in list.enumerated() {
                    e.index = k
                    commands.append(["XADD", RedisArgument(keys.events(id)), RedisArgument(e.entryID)] + e.fields)
                    if case .error = e.kind { markFailed(id) }
                }
            }
        }
        // The events go before the checkpoints that cover their audio.
        if !commands.isEmpty {
            let replies = try c.pipeline(commands)
            for (r, cmd) in zip(replies, commands) {
                if let e = r.errorMessage {
                    if e.contains("equal or smaller") { summary.duplicateEvents += 1; continue }
                    throw .refused(command: RedisConnection.name(cmd), message: e)
                }
                summary.events += 1
            }
        }
        for id in batch.keys.sorted() where !retake.contains(id) {
            guard let o = owned[id] else { continue }
            if o.done || o.unacked.count >= settings.checkpointEvery { try checkpoint(id, c) }
        }
        for id in retake.sorted() {
            guard let o = owned[id] else { continue }
            settings.log("source \(id): entries after \(o.lastSeq) are missing here; taking it up again from its checkpoint")
            drop(id)
            try take(registryEntry: o.registryEntry, fields: [.string(Array("source".utf8)), .string(Array(id.utf8))], c)
        }
    }

    /// A stream's events as cluster events (failures become the source's error).
    private func record(_ events: [ClassifierEvent], source: String, seq: Int, from: Int) -> [ClusterEvent] {
        var out: [ClusterEvent] = []
        for e in events {
            let kind: ClusterEvent.Kind
            switch e {
            case var .ended(s): s.channel = 0; kind = .segment(s)
            case let .detected(d): var d = d; d.channel = 0; kind = .detection(d)
            case let .failed(_, error): kind = .error("\(error)")
            case .started, .scores, .dropped: continue
            }
            out.append(ClusterEvent(source: source, seq: seq, index: from + out.count, kind: kind))
        }
        return out
    }

    private func markFailed(_ id: String) {
        guard var o = owned[id], !o.done else { return }
        o.done = true
        o.failed = true
        owned[id] = o
    }

    private func fail(_ id: String, reason: String, seq: Int, _ c: RedisConnection) throws(RedisError) {
        settings.log("source \(id) failed: \(reason)")
        let e = ClusterEvent(source: id, seq: seq, index: 0, kind: .error(reason))
        let r = try c.command(["XADD", RedisArgument(keys.events(id)), RedisArgument(e.entryID)] + e.fields)
        if let m = r.errorMessage, !m.contains("equal or smaller") { throw .refused(command: "XADD \(keys.events(id))", message: m) }
        markFailed(id)
        let last = owned[id]?.lastSeq ?? 0
        owned[id]?.lastSeq = max(last, seq)
        try checkpoint(id, c)
    }

    // MARK: Checkpoints

    /// The source's snapshot and last seq, with the acknowledgement of its audio, in one script
    /// (refused if a newer checkpoint is there: a worker that lost the source meanwhile).
    /// An ended source also leaves the registry.
    private func checkpoint(_ id: String, _ c: RedisConnection) throws(RedisError) {
        guard var o = owned[id] else { return }
        var snapshot: [UInt8] = []
        if let k = o.channel, !o.failed, let s = try? channels.snapshot(k) { snapshot = s.serialized() }
        let args: [RedisArgument] = ["EVAL", RedisArgument(Self.checkpointScript), "2", RedisArgument(keys.checkpoint(id)), RedisArgument(keys.audio(id)),
                                     group, RedisArgument(o.lastSeq), RedisArgument(o.lastEntry), RedisArgument(model.contentHash),
                                     RedisArgument(bytes: snapshot), o.done ? "1" : "0"] + o.unacked.map { RedisArgument($0) }
        try c.expect(args)
        summary.checkpoints += 1
        o.unacked.removeAll()
        owned[id] = o
        if o.done {
            if o.failed { summary.sourcesFailed += 1 } else { summary.sourcesEnded += 1 }
            try finishRegistry(o, c)
        }
    }

    static let checkpointScript = """
        local current = tonumber(redis.call('HGET', KEYS[1], 'seq') or '-1')
        if current > tonumber(ARGV[2]) then return 0 end
        redis.call('HSET', KEYS[1], 'seq', ARGV[2], 'entry', ARGV[3], 'model', ARGV[4], 'snapshot', ARGV[5], 'done', ARGV[6])
        if #ARGV > 6 then redis.call('XACK', KEYS[2], ARGV[1], unpack(ARGV, 7)) end
        return 1
        """

    /// An ended source leaves the registry and the active set.
    private func finishRegistry(_ o: Owned, _ c: RedisConnection) throws(RedisError) {
        let replies = try c.pipeline([["XACK", RedisArgument(keys.sources), group, RedisArgument(o.registryEntry)],
                                      ["SREM", RedisArgument(keys.active), RedisArgument(o.id)]])
        if let e = replies.compactMap(\.errorMessage).first { throw .refused(command: "XACK \(keys.sources)", message: e) }
        drop(o.id)
    }

    /// Checkpoints a source and puts it back on the registry for another worker.
    private func release(_ id: String, _ c: RedisConnection) throws(RedisError) {
        guard let o = owned[id] else { return }
        if o.done { drop(id); return }
        if o.lastSeq > 0 { try checkpoint(id, c) }
        let replies = try c.pipeline([["MULTI"], ["XACK", RedisArgument(keys.sources), group, RedisArgument(o.registryEntry)],
                                      ["XADD", RedisArgument(keys.sources), "*", "source", RedisArgument(id)], ["EXEC"]])
        if let e = replies.compactMap(\.errorMessage).first { throw .refused(command: "XADD \(keys.sources)", message: e) }
        summary.sourcesReleased += 1
        drop(id)
    }

    /// Forgets a source here (its channel leaves the set).
    private func drop(_ id: String) {
        guard let o = owned.removeValue(forKey: id) else { return }
        if let k = o.channel {
            channels.remove(k)
            byChannel[k] = nil
        }
    }

    /// After a lost connection: everything here is forgotten; the sources are taken up again
    /// from their checkpoints (their registry entries are still pending with this worker).
    private func dropAll() {
        for id in Array(owned.keys) { drop(id) }
    }
}
