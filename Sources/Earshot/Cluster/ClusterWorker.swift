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
    /// The most bytes of audio in one entry. A larger entry fails its source
    /// (`ClusterError.entryTooLarge`); its bytes are dropped as they are read, never held, so a
    /// read holds at most `readCount` entries of this size per source.
    public var maxEntryBytes = ClusterLimits.maxEntryBytes
    /// A source that sends nothing for this long (seconds) is set aside: checkpointed and let go,
    /// its id kept in `P:idle`. At a heartbeat of any worker after its audio stream has a new
    /// entry, it goes back on the registry and is taken up from its checkpoint. 0: never.
    public var idleAfter: Double = 60
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
    /// Sources set aside for sending nothing for `idleAfter`, and sources put back on the
    /// registry when their audio came again.
    public var sourcesIdled = 0
    public var sourcesWoken = 0
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
/// One thread runs it (`run`); Redis errors are retried with backoff, never thrown. A source
/// whose own keys Redis refuses (a key of another type, a group deleted) fails alone.
/// The source-by-source work is in `ClusterWorker+Sources.swift`; idle sources in
/// `ClusterWorker+Idle.swift`.
public final class ClusterWorker {
    public let model: Model
    public let options: LabelOptions
    public let settings: WorkerOptions
    var channels: ChannelSet
    private var connection: RedisConnection?
    var owned: [String: Owned] = [:]
    var byChannel: [Int: String] = [:]
    var summary = WorkerSummary()
    private var target = 1
    private var nextHeartbeat = 0
    /// From the publishing of each entry processed since the last heartbeat to its processing.
    var latencies = LatencyHistogram()
    var entriesSinceStats = 0
    /// Per source, the last seq after which a gap made it be taken up again.
    var gapRetried: [String: Int] = [:]
    /// Where the next look at `P:idle` starts (HSCAN's cursor).
    var idleCursor = "0"

    /// One source this worker owns.
    struct Owned {
        let id: String
        /// Its registry entry, pending with this worker while it owns the source.
        var registryEntry: String
        var channel: Int?
        var lastSeq = 0
        var lastEntry = "0-0"
        /// The last audio entry read from its stream (processed, skipped or refused).
        var lastRead = "0-0"
        /// When an entry last came, or when it was taken (ms on the monotonic clock).
        var lastHeard: Int
        /// Audio entries processed since the last checkpoint.
        var unacked: [String] = []
        var done = false
        var failed = false
    }

    /// The largest checkpoint snapshot read (a stream's snapshot is kilobytes; a larger one is
    /// refused as damaged, not held).
    static let maxSnapshotBytes = 64 << 20

    public init(model: Model, options: LabelOptions? = nil, settings: WorkerOptions) throws(StreamError) {
        self.model = model
        self.options = options ?? LabelOptions(model: model)
        try self.options.validate()
        self.settings = settings
        channels = ChannelSet(model: model, options: self.options)
    }

    var keys: ClusterKeys { settings.keys }
    var group: RedisArgument { RedisArgument(settings.group) }
    var me: RedisArgument { RedisArgument(settings.name) }

    /// Sources owned now.
    public var ownedSources: [String] { owned.keys.sorted() }

    /// Runs until `shouldStop` says so, then checkpoints and hands back every source it owns.
    /// The wait between attempts doubles up to 5 s until an iteration succeeds again.
    public func run(shouldStop: () -> Bool) -> WorkerSummary {
        var backoff = 0.1
        var failing = false
        while !shouldStop() {
            do {
                if connection == nil {
                    let c = try RedisConnection(settings.endpoint, timeout: max(5, settings.claimAfter))
                    connection = c
                    try setUp(c)
                    if failing { settings.log("connected to \(settings.endpoint) again") }
                    try recoverOwn(c)
                }
                if let c = connection { try iteration(c) }
                backoff = 0.1
                failing = false
            } catch {
                settings.log("\(error); retrying in \(Self.format(backoff)) s (sources resume from their checkpoints)")
                failing = true
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
    static func format(_ s: Double) -> String {
        let ms = Int((s * 1000).rounded())
        return ms % 1000 == 0 ? String(ms / 1000) : String(Double(ms) / 1000)
    }

    private func setUp(_ c: RedisConnection) throws(RedisError) {
        try createGroup(keys.sources, c)
        try heartbeat(c)
    }

    func createGroup(_ key: String, _ c: RedisConnection) throws(RedisError) {
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
            try setIdleAside(c)
            try wakeIdle(c)
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
        let reply = try c.command(args, maxStringBytes: settings.maxEntryBytes)
        var batch: [String: [(id: String, fields: [RedisReply]?)]] = [:]
        if let message = reply.errorMessage {
            // One source's stream replaced by another type, or deleted: each is read alone,
            // and the ones Redis refuses fail.
            let refusal = RedisError.refused(command: "XREADGROUP", message: message)
            guard refusal.isKeyFault else { throw refusal }
            batch = try readEach(reading, c)
        } else {
            let prefix = keys.audio("")
            for s in StreamReplies.streams(reply) where s.key.hasPrefix(prefix) {
                batch[String(s.key.dropFirst(prefix.count))] = s.entries
            }
        }
        if !batch.isEmpty { try process(batch, c) }
    }

    /// Each source's audio read by a command of its own (not waiting); a source whose stream
    /// Redis refuses fails with the refusal.
    private func readEach(_ ids: [String], _ c: RedisConnection) throws(RedisError) -> [String: [(id: String, fields: [RedisReply]?)]] {
        let commands: [[RedisArgument]] = ids.map {
            ["XREADGROUP", "GROUP", group, me, "COUNT", RedisArgument(settings.readCount), "STREAMS", RedisArgument(keys.audio($0)), ">"]
        }
        let replies = try c.pipeline(commands, maxStringBytes: settings.maxEntryBytes)
        var batch: [String: [(id: String, fields: [RedisReply]?)]] = [:]
        for (id, reply) in zip(ids, replies) {
            if let message = reply.errorMessage {
                let refusal = RedisError.refused(command: "XREADGROUP \(keys.audio(id))", message: message)
                guard refusal.isKeyFault else { throw refusal }
                try fail(id, reason: refusal.description, c)
                continue
            }
            if let entries = StreamReplies.streams(reply).first?.entries, !entries.isEmpty { batch[id] = entries }
        }
        return batch
    }

    /// Heartbeat: this worker is alive; the registry entries of its sources are touched so
    /// that no one claims them (a source another worker took meanwhile is let go); the fair
    /// share is counted again: every source held (pending on the registry, with any worker,
    /// whether it sends audio or not) and every source waiting there, over the live workers.
    private func heartbeat(_ c: RedisConnection) throws(RedisError) {
        let now = WallClock.millis()
        let ids = owned.values.map(\.registryEntry)
        var commands: [[RedisArgument]] = [
            ["ZADD", RedisArgument(keys.workers), RedisArgument(now), me],
            ["ZREMRANGEBYSCORE", RedisArgument(keys.workers), "-inf", RedisArgument(now - Int(settings.claimAfter * 10_000))],
            ["XINFO", "GROUPS", RedisArgument(keys.sources)],
            ["ZCOUNT", RedisArgument(keys.workers), RedisArgument(now - Int(settings.claimAfter * 1000)), "+inf"],
            ["SCARD", RedisArgument(keys.active)],
            ["HLEN", RedisArgument(keys.idle)],
        ]
        if !ids.isEmpty {
            commands.append(["EVAL", RedisArgument(Self.touchScript), "1", RedisArgument(keys.sources), group, me] + ids.map { RedisArgument($0) })
        }
        let replies = try c.pipeline(commands)
        for (r, cmd) in zip(replies, commands) where r.errorMessage != nil {
            throw .refused(command: RedisConnection.name(cmd), message: r.errorMessage ?? "")
        }
        let alive = max(1, replies[3].integer ?? 1)
        target = max(1, (Self.sourcesToRun(groups: replies[2], group: settings.group, active: replies[4].integer ?? 0,
                                           idle: replies[5].integer ?? 0) + alive - 1) / alive)
        if !ids.isEmpty {
            let kept = Set((replies[6].elements ?? []).compactMap(\.text))
            for (id, o) in owned where !kept.contains(o.registryEntry) {
                settings.log("source \(id) was claimed by another worker; letting it go")
                drop(id)
            }
        }
        if latencies.count > 0 || entriesSinceStats > 0 {
            // Microseconds, as the entries' times are.
            func us(_ d: Duration?) -> Int { d.map { Int(($0 / .microseconds(1)).rounded()) } ?? 0 }
            _ = try c.command(["XADD", RedisArgument(keys.stats), "MAXLEN", "~", "100000", "*", "worker", me,
                               "entries", RedisArgument(entriesSinceStats), "sources", RedisArgument(owned.count),
                               "p50", RedisArgument(us(latencies.percentile(0.5))), "p99", RedisArgument(us(latencies.percentile(0.99))),
                               "max", RedisArgument(us(latencies.maximum))])
            latencies.removeAll()
            entriesSinceStats = 0
        }
    }

    /// The sources the workers share: the registry's entries pending in the group (sources held,
    /// by live workers or by dead ones not yet claimed) and those not yet read (its lag). When
    /// Redis cannot tell the lag (entries deleted from the registry), the active sources that
    /// are neither held nor set aside stand for it.
    static func sourcesToRun(groups: RedisReply, group: String, active: Int, idle: Int) -> Int {
        for g in groups.elements ?? [] {
            let fields = StreamReplies.fields(g.elements ?? [])
            guard fields["name"]?.text == group else { continue }
            let pending = max(0, fields["pending"]?.integer ?? 0)
            let lag = fields["lag"]?.integer ?? max(0, active - idle - pending)
            return pending + max(0, lag)
        }
        return active
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
}
