import Earshot
import EarshotRedis

/// The round loop: a read of every source's audio in one command, then its entries in rounds of at
/// most one entry per source, each round one batched step whose events are appended together.
extension ClusterWorker {
    func iteration(_ c: RedisConnection) throws(RedisError) {
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
        let ahead = readAhead
        readAhead = nil
        if reading.isEmpty {
            // Nothing to run: wait for a source on the registry.
            let reply = try c.expect(["XREADGROUP", "GROUP", group, me, "COUNT", "1", "BLOCK", RedisArgument(settings.blockMs),
                                      "STREAMS", RedisArgument(keys.sources), ">"])
            for e in StreamReplies.streams(reply).first?.entries ?? [] { try take(registryEntry: e.id, fields: e.fields, c) }
            return
        }
        // The read sent while the last batch stepped, if it brought audio; else one that waits.
        let reply: RedisReply
        if let ahead { reply = ahead } else { reply = try c.command(read(reading, waiting: true), maxStringBytes: settings.maxEntryBytes) }
        var batch: [String: [(id: String, fields: [RedisReply]?)]] = [:]
        if let message = reply.errorMessage {
            // One source's stream replaced by another type, or deleted (while the read waits,
            // Redis ends it with UNBLOCKED): each is read alone, and the ones Redis refuses fail.
            let refusal = RedisError.refused(command: "XREADGROUP", message: message)
            guard refusal.isKeyFault || message.hasPrefix("UNBLOCKED") else { throw refusal }
            batch = try readEach(reading, c)
        } else {
            let prefix = keys.audio("")
            for s in StreamReplies.streams(reply) where s.key.hasPrefix(prefix) {
                batch[String(s.key.dropFirst(prefix.count))] = s.entries
            }
        }
        if !batch.isEmpty { try process(batch, c, readingAhead: settings.readAhead ? reading : []) }
    }

    /// The read of the sources' new audio (at most `readCount` entries each); `waiting`: for up
    /// to `blockMs` when none has any.
    func read(_ ids: [String], waiting: Bool) -> [RedisArgument] {
        ["XREADGROUP", "GROUP", group, me, "COUNT", RedisArgument(settings.readCount)]
            + (waiting ? ["BLOCK", RedisArgument(settings.blockMs)] : []) + ["STREAMS"]
            + ids.map { RedisArgument(keys.audio($0)) } + ids.map { _ in ">" }
    }

    /// Each source's audio read by a command of its own (not waiting); a source whose stream
    /// Redis refuses fails with the refusal.
    func readEach(_ ids: [String], _ c: RedisConnection) throws(RedisError) -> [String: [(id: String, fields: [RedisReply]?)]] {
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

    /// A read's entries: in rounds of at most one entry per source, so that each step's events
    /// belong to one entry; every source of a round steps in one batch. `readingAhead`: the
    /// sources the batch was read from, in order; the next read (not waiting) of those not done
    /// (none has joined since, and only a failure in `readEach` ends one) is sent before the
    /// steps and its reply taken after them, so that Redis
    /// gathers the next batch while this one steps. Its entries come after this batch's in each
    /// stream, so each source's order holds; they are pending with this worker from the moment
    /// Redis answers, so a worker killed before processing them loses nothing (whoever takes a
    /// source claims its pending audio), and entries of a source given up meanwhile stay
    /// pending for its next owner.
    func process(_ batch: [String: [(id: String, fields: [RedisReply]?)]], _ c: RedisConnection, readingAhead: [String] = []) throws(RedisError) {
        let aheadOf = readingAhead.filter { owned[$0]?.done == false }
        if !aheadOf.isEmpty { try c.send(read(aheadOf, waiting: false)) }
        var commands: [[RedisArgument]] = []
        var writers: [String] = []  // the source of each command
        var retake: Set<String> = []
        let rounds = batch.values.map(\.count).max() ?? 0
        let now = WallClock.micros()
        let heard = WallClock.monotonicMillis()
        for r in 0..<rounds {
            var pushed: [String: Int] = [:]  // source → seq pushed this round
            var events: [String: [ClusterEvent]] = [:]
            var ending: [(id: String, seq: Int)] = []
            for (id, entries) in batch where r < entries.count && !retake.contains(id) {
                guard var o = owned[id], !o.done else { continue }
                let raw = entries[r]
                o.lastRead = raw.id
                o.lastHeard = heard
                do {
                    guard let fields = raw.fields else { throw ClusterError.malformedEntry(source: id, entry: raw.id, reason: "the entry was deleted") }
                    let entry = try AudioEntry(id: raw.id, fields: fields, source: id, maxBytes: settings.maxEntryBytes)
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
                            owned[id] = o
                            continue
                        }
                        throw ClusterError.malformedEntry(source: id, entry: raw.id, reason: "seq \(entry.seq) after \(o.lastSeq): entries are missing")
                    }
                    summary.entries += 1
                    entriesSinceStats += 1
                    if let t = entry.publishedMicros {
                        latencies.add(.microseconds(max(0, now - t)))
                        entryLatencies.add(.microseconds(max(0, now - t)))
                    }
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
                    log("source \(id) failed: \(error)", source: id, level: .warning)
                    o.unacked.append(raw.id)
                    owned[id] = o
                    events[id, default: []].append(ClusterEvent(source: id, seq: o.lastSeq + 1, index: 0, kind: .error("\(error)")))
                    markFailed(id)
                }
            }
            // One batched step of every source pushed this round.
            let stepStart = ContinuousClock.now
            let stepped = channels.drain()
            if !pushed.isEmpty { stepTimes.add(ContinuousClock.now - stepStart) }
            for event in stepped {
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
                    writers.append(id)
                    if case .error = e.kind { markFailed(id) }
                }
            }
        }
        if !aheadOf.isEmpty {
            // Kept only if it brought audio (nil: none yet); a refusal is met again by the next
            // read, which waits, and handled there.
            let reply = try c.receive(maxStringBytes: settings.maxEntryBytes)
            if reply.elements?.isEmpty == false { readAhead = reply }
        }
        // The events go before the checkpoints that cover their audio. A source whose events
        // stream Redis refuses (another type) fails.
        var refused: [String: String] = [:]
        if !commands.isEmpty {
            let replies = try c.pipeline(commands)
            for ((r, cmd), id) in zip(zip(replies, commands), writers) {
                if let e = r.errorMessage {
                    if e.contains("equal or smaller") { summary.duplicateEvents += 1; continue }
                    let refusal = RedisError.refused(command: RedisConnection.name(cmd), message: e)
                    guard refusal.isKeyFault else { throw refusal }
                    refused[id] = refused[id] ?? refusal.description
                    continue
                }
                summary.events += 1
            }
        }
        // The checkpoints due, after the events they cover, in one round trip.
        var due: [String] = []
        for id in batch.keys.sorted() where !retake.contains(id) {
            guard let o = owned[id] else { continue }
            if let reason = refused[id] {
                try fail(id, reason: reason, c)
            } else if o.done || o.unacked.count >= settings.checkpointEvery {
                due.append(id)
            }
        }
        try checkpointOrFail(due, c)
        for id in retake.sorted() {
            guard let o = owned[id] else { continue }
            log("source \(id): entries after \(o.lastSeq) are missing here; taking it up again from its checkpoint", source: id, level: .warning)
            drop(id)
            try take(registryEntry: o.registryEntry, fields: [.string(Array("source".utf8)), .string(Array(id.utf8))], c)
        }
    }

    /// A stream's events as cluster events (failures become the source's error).
    func record(_ events: [ClassifierEvent], source: String, seq: Int, from: Int) -> [ClusterEvent] {
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

    func markFailed(_ id: String) {
        guard var o = owned[id], !o.done else { return }
        o.done = true
        o.failed = true
        owned[id] = o
    }
}
