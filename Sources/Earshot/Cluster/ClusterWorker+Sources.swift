import EarshotRedis

/// A worker's sources one by one: taking one up from its checkpoint, running its audio,
/// checkpointing it, and failing it alone (a bad entry, a key Redis refuses).
extension ClusterWorker {
    // MARK: Taking a source

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

    /// A source just taken: its checkpoint restored, its pending audio claimed and replayed.
    /// Its audio stream and checkpoint are touched first: a key of another type there fails
    /// the source alone. (A stream replaced just after, before the replay below, is refused
    /// there as a lost connection is: everything here is dropped, and the next take fails it.)
    private func restore(_ id: String, _ c: RedisConnection) throws(RedisError) {
        guard var o = owned[id] else { return }
        let reply: RedisReply
        do {
            try createGroup(keys.audio(id), c)
            reply = try c.expect(["HGETALL", RedisArgument(keys.checkpoint(id))], maxStringBytes: Self.maxSnapshotBytes)
        } catch {
            guard error.isKeyFault else { throw error }
            return try fail(id, reason: error.description, c)
        }
        try c.expect(["HDEL", RedisArgument(keys.idle), RedisArgument(id)])
        let checkpoint = StreamReplies.hash(reply)
        func text(_ k: String) -> String? { checkpoint[k].map { String(decoding: $0, as: UTF8.self) } }
        if text("done") == "1" {
            try finishRegistry(o, c)
            return
        }
        var replayFromStart = false
        var snapshotSize: Int?
        if case let .oversized(n)? = StreamReplies.fields(reply.elements ?? [])["snapshot"] { snapshotSize = n }
        if checkpoint["snapshot"] != nil || snapshotSize != nil, let seqText = text("seq"), let entry = text("entry") {
            // A number out of range stands as 0 in what the failure says; the checkpoint is refused.
            let seq = Int(seqText).flatMap { (0...AudioEntry.maxSeq).contains($0) ? $0 : nil }
            do {
                guard let seq else { throw StreamError.snapshot(reason: "the checkpoint's seq '\(seqText)' is not an entry number (0...2^53)") }
                guard let bytes = checkpoint["snapshot"] else {
                    throw StreamError.snapshot(reason: "its snapshot of \(snapshotSize ?? 0) bytes is over \(Self.maxSnapshotBytes) bytes")
                }
                let snapshot = try StreamSnapshot(serialized: bytes)
                o.channel = try channels.add(restoring: snapshot, kind: .live)
                o.lastSeq = seq
                o.lastEntry = entry
                o.lastRead = entry
            } catch {
                // Another model's snapshot, or a damaged one: start the source again from its
                // first entry, if its audio is all still there.
                let first = StreamReplies.entries(try c.expect(["XRANGE", RedisArgument(keys.audio(id)), "-", "+", "COUNT", "1"],
                                                               maxStringBytes: settings.maxEntryBytes)).first
                let firstSeq = first.flatMap { e in e.fields.flatMap { try? AudioEntry(id: e.id, fields: $0, source: id, maxBytes: settings.maxEntryBytes).seq } }
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
                let page = StreamReplies.entries(try c.expect(["XRANGE", RedisArgument(keys.audio(id)), RedisArgument(from), RedisArgument(until), "COUNT", "500"],
                                                              maxStringBytes: settings.maxEntryBytes))
                if page.isEmpty { break }
                try replay(id, page, c)
                guard owned[id]?.done == false, let last = page.last?.id else { return }
                from = "(" + last
            }
        }
        var after = "0"
        while owned[id]?.done == false {
            let reply = try c.expect(["XREADGROUP", "GROUP", group, me, "COUNT", "500", "STREAMS", RedisArgument(keys.audio(id)), RedisArgument(after)],
                                     maxStringBytes: settings.maxEntryBytes)
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
    func process(_ batch: [String: [(id: String, fields: [RedisReply]?)]], _ c: RedisConnection) throws(RedisError) {
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
                    if let t = entry.publishedMicros { latencies.add(.microseconds(max(0, now - t))) }
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
                    writers.append(id)
                    if case .error = e.kind { markFailed(id) }
                }
            }
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
        for id in batch.keys.sorted() where !retake.contains(id) {
            guard let o = owned[id] else { continue }
            if let reason = refused[id] {
                try fail(id, reason: reason, c)
            } else if o.done || o.unacked.count >= settings.checkpointEvery {
                try checkpointOrFail(id, c)
            }
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

    func markFailed(_ id: String) {
        guard var o = owned[id], !o.done else { return }
        o.done = true
        o.failed = true
        owned[id] = o
    }

    /// Fails one source: an error event with the reason (at `seq`, by default the entry after
    /// the last good one), its checkpoint marked done, and it leaves the registry and the active
    /// set. Its own keys may be the reason: a write to them that Redis refuses is logged, and
    /// the source leaves all the same. (A source failed already has only its checkpoint left.)
    func fail(_ id: String, reason: String, seq: Int? = nil, _ c: RedisConnection) throws(RedisError) {
        guard var o = owned[id] else { return }
        if !o.failed {
            settings.log("source \(id) failed: \(reason)")
            let at = seq ?? o.lastSeq + 1
            let e = ClusterEvent(source: id, seq: at, index: 0, kind: .error(reason))
            let r = try c.command(["XADD", RedisArgument(keys.events(id)), RedisArgument(e.entryID)] + e.fields)
            if let m = r.errorMessage, !m.contains("equal or smaller") {
                let refusal = RedisError.refused(command: "XADD \(keys.events(id))", message: m)
                guard refusal.isKeyFault else { throw refusal }
                settings.log("source \(id): its error event could not be written: \(refusal)")
            }
            o.done = true
            o.failed = true
            o.lastSeq = max(o.lastSeq, at)
            owned[id] = o
        }
        do {
            try checkpoint(id, c)
        } catch {
            guard error.isKeyFault else { throw error }
            settings.log("source \(id): its checkpoint could not be written: \(error)")
        }
        try finish(id, c)
    }

    // MARK: Checkpoints

    /// The source's snapshot and last seq, with the acknowledgement of its audio, in one script
    /// (refused if a newer checkpoint is there: a worker that lost the source meanwhile).
    func checkpoint(_ id: String, _ c: RedisConnection) throws(RedisError) {
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
    }

    /// A checkpoint; an ended or failed source then leaves the registry. A source whose
    /// checkpoint Redis refuses for its keys fails.
    func checkpointOrFail(_ id: String, _ c: RedisConnection) throws(RedisError) {
        do {
            try checkpoint(id, c)
        } catch {
            guard error.isKeyFault else { throw error }
            return try fail(id, reason: error.description, c)
        }
        if owned[id]?.done == true { try finish(id, c) }
    }

    static let checkpointScript = """
        local current = tonumber(redis.call('HGET', KEYS[1], 'seq') or '-1')
        if current > tonumber(ARGV[2]) then return 0 end
        redis.call('HSET', KEYS[1], 'seq', ARGV[2], 'entry', ARGV[3], 'model', ARGV[4], 'snapshot', ARGV[5], 'done', ARGV[6])
        if #ARGV > 6 then redis.call('XACK', KEYS[2], ARGV[1], unpack(ARGV, 7)) end
        return 1
        """

    /// A source that ended or failed: counted, and it leaves the registry and the active set.
    func finish(_ id: String, _ c: RedisConnection) throws(RedisError) {
        guard let o = owned[id] else { return }
        if o.failed { summary.sourcesFailed += 1 } else { summary.sourcesEnded += 1 }
        try finishRegistry(o, c)
    }

    /// An ended source leaves the registry and the active set.
    private func finishRegistry(_ o: Owned, _ c: RedisConnection) throws(RedisError) {
        let replies = try c.pipeline([["XACK", RedisArgument(keys.sources), group, RedisArgument(o.registryEntry)],
                                      ["SREM", RedisArgument(keys.active), RedisArgument(o.id)]])
        if let e = replies.compactMap(\.errorMessage).first { throw .refused(command: "XACK \(keys.sources)", message: e) }
        drop(o.id)
    }

    /// Checkpoints a source and puts it back on the registry for another worker.
    func release(_ id: String, _ c: RedisConnection) throws(RedisError) {
        guard let o = owned[id] else { return }
        if o.done { drop(id); return }
        if o.lastSeq > 0 {
            try checkpointOrFail(id, c)
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
    }
}
