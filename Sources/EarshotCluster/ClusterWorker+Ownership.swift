import Earshot
import EarshotRedis

/// Which sources a worker holds: the heartbeat that keeps them (and counts the fair share),
/// taking sources up to it (a dead worker's first), giving back what is over it, letting go.
extension ClusterWorker {
    /// Heartbeat: this worker is alive; the registry entries of its sources are touched so
    /// that no one claims them (a source another worker took meanwhile is let go); the fair
    /// share is counted again: every source held (pending on the registry, with any worker,
    /// whether it sends audio or not) and every source waiting there, over the live workers.
    func heartbeat(_ c: RedisConnection) throws(RedisError) {
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
                log("source \(id) was claimed by another worker; letting it go", source: id)
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
    func acquire(_ c: RedisConnection) throws(RedisError) {
        var want = target - owned.count
        var cursor = "0-0"
        repeat {
            let reply = try c.expect(["XAUTOCLAIM", RedisArgument(keys.sources), group, me, RedisArgument(Int(settings.claimAfter * 1000)),
                                      RedisArgument(cursor), "COUNT", RedisArgument(want)])
            guard let parts = reply.elements, parts.count >= 2, let next = parts[0].text else { break }
            let claimed = StreamReplies.entries(parts[1])
            for e in claimed {
                log("claimed source entry \(e.id) from a worker not heard from in \(Self.format(settings.claimAfter)) s")
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
    func rebalance(_ c: RedisConnection) throws(RedisError) {
        let extra = owned.count - target
        guard extra > 0 else { return }
        for id in owned.keys.sorted().suffix(extra) {
            try release(id, c)
            log("gave up source \(id): \(owned.count) left, the fair share is \(target)", source: id)
        }
    }

    /// Takes the source of a registry entry: its checkpoint restored, its audio after it replayed.
    /// A key of its own that Redis refuses (its audio, checkpoint or events of another type)
    /// fails it alone.
    func take(registryEntry: String, fields: [RedisReply]?, _ c: RedisConnection) throws(RedisError) {
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
        owned[id] = Owned(id: id, registryEntry: registryEntry, lastHeard: WallClock.monotonicMillis())
        try restore(id, c)
    }

    /// Checkpoints a source and puts it back on the registry for another worker.
    func release(_ id: String, _ c: RedisConnection) throws(RedisError) {
        guard let o = owned[id] else { return }
        if o.done { drop(id); return }
        if o.lastSeq > 0 {
            try checkpointOrFail([id], c)
            guard owned[id] != nil else { return }
        }
        let replies = try c.pipeline([["MULTI"], ["XACK", RedisArgument(keys.sources), group, RedisArgument(o.registryEntry)],
                                      ["XADD", RedisArgument(keys.sources), "*", "source", RedisArgument(id)], ["EXEC"]])
        if let e = replies.compactMap(\.errorMessage).first { throw .refused(command: "XADD \(keys.sources)", message: e) }
        summary.sourcesReleased += 1
        drop(id)
    }

    /// Forgets a source here (its channel leaves the set).
    func drop(_ id: String) {
        guard let o = owned.removeValue(forKey: id) else { return }
        if let k = o.channel {
            channels.remove(k)
            byChannel[k] = nil
        }
    }

    /// After a lost connection: everything here is forgotten; the sources are taken up again
    /// from their checkpoints (their registry entries are still pending with this worker).
    func dropAll() {
        for id in Array(owned.keys) { drop(id) }
        readAhead = nil  // its entries stay pending with this worker: replayed when taken up again
    }
}
