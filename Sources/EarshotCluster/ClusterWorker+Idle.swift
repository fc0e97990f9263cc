import EarshotRedis

/// Sources that send nothing: set aside after `idleAfter` (so that a source whose publisher
/// never came, or went quiet, holds no place in a worker), and put back on the registry by any
/// worker once their audio stream has a new entry.
extension ClusterWorker {
    /// Every source held here that has sent nothing for `idleAfter` is checkpointed, its
    /// registry entry acknowledged, and its id kept in `P:idle` with the last entry read; one
    /// whose audio came meanwhile stays.
    func setIdleAside(_ c: RedisConnection) throws(RedisError) {
        guard settings.idleAfter > 0 else { return }
        let now = WallClock.monotonicMillis(), quiet = Int(settings.idleAfter * 1000)
        for id in owned.keys.sorted() {
            guard let o = owned[id], !o.done, now - o.lastHeard >= quiet else { continue }
            if !o.unacked.isEmpty { try checkpointOrFail([id], c) }
            guard let o = owned[id], !o.done else { continue }
            let r = try c.command(["EVAL", RedisArgument(Self.setAsideScript), "3", RedisArgument(keys.sources), RedisArgument(keys.idle),
                                   RedisArgument(keys.audio(id)), group, RedisArgument(o.registryEntry), RedisArgument(id), RedisArgument(o.lastRead), me])
            if let e = r.errorMessage { throw .refused(command: "EVAL (setting \(id) aside)", message: e) }
            switch r.integer {
            case 1:
                log("source \(id) sent nothing for \(Self.format(settings.idleAfter)) s: set aside until its audio stream has a new entry", source: id)
                summary.sourcesIdled += 1
                drop(id)
            case -1:
                log("source \(id) was claimed by another worker; letting it go", source: id)
                drop(id)
            default:
                owned[id]?.lastHeard = now  // audio came meanwhile: the next read has it
            }
        }
    }

    /// Set-aside sources whose audio stream has an entry after the last one read go back on the
    /// registry (each by one script: one worker puts it back). Up to 1000 are looked at a
    /// heartbeat, from where the last look stopped.
    func wakeIdle(_ c: RedisConnection) throws(RedisError) {
        var pages = 0
        repeat {
            let reply = try c.expect(["HSCAN", RedisArgument(keys.idle), RedisArgument(idleCursor), "COUNT", "200"])
            guard let parts = reply.elements, parts.count == 2, let next = parts[0].text else { return }
            idleCursor = next
            let items = parts[1].elements ?? []
            let ids = stride(from: 0, to: items.count - 1, by: 2).compactMap { items[$0].text }
            if !ids.isEmpty {
                let woken = try c.expect(["EVAL", RedisArgument(Self.wakeScript), "2", RedisArgument(keys.idle), RedisArgument(keys.sources),
                                          RedisArgument(keys.audio(""))] + ids.map { RedisArgument($0) })
                for id in (woken.elements ?? []).compactMap(\.text) {
                    log("source \(id) has new audio: back on the registry", source: id)
                    summary.sourcesWoken += 1
                }
            }
            pages += 1
        } while idleCursor != "0" && pages < 5
    }

    /// KEYS: the registry, `P:idle`, the source's audio; ARGV: the group, the registry entry,
    /// the source, the last audio entry read, the consumer. Returns -1 when the entry is no
    /// longer this consumer's, 0 when the stream has an entry after the last one read, 1 when
    /// the source was set aside.
    static let setAsideScript = """
        local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
        if not (p[1] and p[1][2] == ARGV[5]) then return -1 end
        local after = redis.pcall('XREVRANGE', KEYS[3], '+', '(' .. ARGV[4], 'COUNT', 1)
        if type(after) == 'table' and after[1] then return 0 end
        redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
        redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
        return 1
        """

    /// KEYS: `P:idle`, the registry; ARGV: the audio keys' prefix, then sources. Each still set
    /// aside whose stream has an entry after the one recorded leaves `P:idle` and is registered
    /// again. Returns those sources.
    static let wakeScript = """
        local woken = {}
        for i = 2, #ARGV do
          local seen = redis.call('HGET', KEYS[1], ARGV[i])
          if seen then
            local after = redis.pcall('XREVRANGE', ARGV[1] .. ARGV[i], '+', '(' .. seen, 'COUNT', 1)
            if type(after) == 'table' and after[1] then
              redis.call('HDEL', KEYS[1], ARGV[i])
              redis.call('XADD', KEYS[2], '*', 'source', ARGV[i])
              woken[#woken + 1] = ARGV[i]
            end
          end
        end
        return woken
        """
}
