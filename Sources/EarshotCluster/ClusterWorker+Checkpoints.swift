import Earshot
import EarshotRedis

/// A source's checkpoints: restoring one when the source is taken (and replaying the audio after
/// it), writing one with the acknowledgement of the audio it covers, and the end of a source that
/// ended or failed alone (a bad entry, a key Redis refuses).
extension ClusterWorker {
    /// A source just taken: its checkpoint restored, its pending audio claimed and replayed.
    /// Its audio stream and checkpoint are touched first: a key of another type there fails
    /// the source alone. (A stream replaced just after, before the replay below, is refused
    /// there as a lost connection is: everything here is dropped, and the next take fails it.)
    func restore(_ id: String, _ c: RedisConnection) throws(RedisError) {
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
                    log("source \(id): checkpoint refused (\(error)); starting it again from its first entry", source: id, level: .warning)
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
        log("took source \(id)" + (o.lastSeq > 0 ? " from its checkpoint at entry \(o.lastSeq)" : ""), source: id)
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
    func replay(_ id: String, _ entries: [(id: String, fields: [RedisReply]?)], _ c: RedisConnection) throws(RedisError) {
        for e in entries {
            guard owned[id]?.done == false else { return }
            try process([id: [e]], c)
        }
    }

    /// The source's snapshot and last seq, with the acknowledgement of its audio, in one script
    /// (refused if a newer checkpoint is there: a worker that lost the source meanwhile).
    func checkpoint(_ id: String, _ c: RedisConnection) throws(RedisError) {
        guard let args = checkpointCommand(id) else { return }
        try c.expect(args)
        checkpointed(id)
    }

    /// The checkpoint script's command for a source owned here (nil for one not owned).
    func checkpointCommand(_ id: String) -> [RedisArgument]? {
        guard let o = owned[id] else { return nil }
        var snapshot: [UInt8] = []
        if let k = o.channel, !o.failed, let s = try? channels.snapshot(k) { snapshot = s.serialized() }
        return ["EVAL", RedisArgument(Self.checkpointScript), "2", RedisArgument(keys.checkpoint(id)), RedisArgument(keys.audio(id)),
                group, RedisArgument(o.lastSeq), RedisArgument(o.lastEntry), RedisArgument(model.contentHash),
                RedisArgument(bytes: snapshot), o.done ? "1" : "0"] + o.unacked.map { RedisArgument($0) }
    }

    /// A checkpoint Redis took: the audio it acknowledged is no longer this worker's to ack.
    private func checkpointed(_ id: String) {
        summary.checkpoints += 1
        owned[id]?.unacked.removeAll()
    }

    /// Checkpoints of the sources given, all in one round trip (each script is atomic on its
    /// own, so a connection lost midway leaves every source at its last or its new checkpoint);
    /// then an ended or failed source leaves the registry. A source whose checkpoint Redis
    /// refuses for its keys fails; another refusal is thrown once every reply is read.
    func checkpointOrFail(_ ids: [String], _ c: RedisConnection) throws(RedisError) {
        var sent: [String] = []
        var commands: [[RedisArgument]] = []
        for id in ids {
            guard let args = checkpointCommand(id) else { continue }
            sent.append(id)
            commands.append(args)
        }
        guard !commands.isEmpty else { return }
        let replies = try c.pipeline(commands)
        var thrown: RedisError?
        for (id, (reply, args)) in zip(sent, zip(replies, commands)) {
            if let message = reply.errorMessage {
                let refusal = RedisError.refused(command: RedisConnection.name(args), message: message)
                if refusal.isKeyFault { try fail(id, reason: refusal.description, c) } else { thrown = thrown ?? refusal }
                continue
            }
            checkpointed(id)
            if owned[id]?.done == true { try finish(id, c) }
        }
        if let thrown { throw thrown }
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
    func finishRegistry(_ o: Owned, _ c: RedisConnection) throws(RedisError) {
        let replies = try c.pipeline([["XACK", RedisArgument(keys.sources), group, RedisArgument(o.registryEntry)],
                                      ["SREM", RedisArgument(keys.active), RedisArgument(o.id)]])
        if let e = replies.compactMap(\.errorMessage).first { throw .refused(command: "XACK \(keys.sources)", message: e) }
        drop(o.id)
    }

    /// Fails one source: an error event with the reason (at `seq`, by default the entry after
    /// the last good one), its checkpoint marked done, and it leaves the registry and the active
    /// set. Its own keys may be the reason: a write to them that Redis refuses is logged, and
    /// the source leaves all the same. (A source failed already has only its checkpoint left.)
    func fail(_ id: String, reason: String, seq: Int? = nil, _ c: RedisConnection) throws(RedisError) {
        guard var o = owned[id] else { return }
        if !o.failed {
            log("source \(id) failed: \(reason)", source: id, level: .warning)
            let at = seq ?? o.lastSeq + 1
            let e = ClusterEvent(source: id, seq: at, index: 0, kind: .error(reason))
            let r = try c.command(["XADD", RedisArgument(keys.events(id)), RedisArgument(e.entryID)] + e.fields)
            if let m = r.errorMessage, !m.contains("equal or smaller") {
                let refusal = RedisError.refused(command: "XADD \(keys.events(id))", message: m)
                guard refusal.isKeyFault else { throw refusal }
                log("source \(id): its error event could not be written: \(refusal)", source: id, level: .warning)
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
            log("source \(id): its checkpoint could not be written: \(error)", source: id, level: .warning)
        }
        try finish(id, c)
    }
}
