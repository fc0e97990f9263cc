import EarshotRedis

/// Reads the events a cluster wrote.
public enum ClusterEvents {
    /// The sources that have events, sorted.
    public static func sources(_ connection: RedisConnection, keys: ClusterKeys = ClusterKeys()) throws(ClusterError) -> [String] {
        var found: Set<String> = []
        var cursor = "0"
        let prefix = keys.events("")
        repeat {
            let reply: RedisReply
            do { reply = try connection.expect(["SCAN", RedisArgument(cursor), "MATCH", RedisArgument(prefix + "*"), "COUNT", "1000"]) } catch { throw .redis(error) }
            guard let parts = reply.elements, parts.count == 2, let next = parts[0].text else { break }
            for k in parts[1].elements ?? [] { if let key = k.text, key.hasPrefix(prefix) { found.insert(String(key.dropFirst(prefix.count))) } }
            cursor = next
        } while cursor != "0"
        return found.sorted()
    }

    /// A source's events after the entry id `after` ("0" from the start), at most `count`;
    /// waiting up to `blockMs` for the first when given. Returns them and the id to read after next.
    public static func read(_ connection: RedisConnection, source: String, after: String = "0", count: Int = 1000, blockMs: Int? = nil,
                            keys: ClusterKeys = ClusterKeys()) throws(ClusterError) -> (events: [ClusterEvent], next: String) {
        var args: [RedisArgument] = ["XREAD", "COUNT", RedisArgument(count)]
        if let blockMs { args += ["BLOCK", RedisArgument(blockMs)] }
        args += ["STREAMS", RedisArgument(keys.events(source)), RedisArgument(after)]
        let reply: RedisReply
        do { reply = try connection.expect(args) } catch { throw .redis(error) }
        let entries = StreamReplies.streams(reply).first?.entries ?? []
        return (entries.compactMap { e in e.fields.flatMap { ClusterEvent(source: source, id: e.id, fields: $0) } }, entries.last?.id ?? after)
    }
}
