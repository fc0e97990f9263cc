import EarshotRedis
import Glibc

/// Redis replies in the shapes the stream commands give.
package enum StreamReplies {
    /// `[[id, [field, value, ...]], ...]`: entries (a deleted entry's fields are nil).
    static func entries(_ reply: RedisReply) -> [(id: String, fields: [RedisReply]?)] {
        (reply.elements ?? []).compactMap { e in
            guard let pair = e.elements, pair.count == 2, let id = pair[0].text else { return nil }
            return (id, pair[1].elements)
        }
    }

    /// XREADGROUP / XREAD: `[[key, entries], ...]` (nil when nothing came).
    static func streams(_ reply: RedisReply) -> [(key: String, entries: [(id: String, fields: [RedisReply]?)])] {
        (reply.elements ?? []).compactMap { s in
            guard let pair = s.elements, pair.count == 2, let key = pair[0].text else { return nil }
            return (key, entries(pair[1]))
        }
    }

    /// XRANGE entries as dictionaries of text.
    package static func entriesOf(_ reply: RedisReply) -> [[String: String]] {
        entries(reply).map { e in pairs(e.fields ?? []).mapValues { String(decoding: $0, as: UTF8.self) } }
    }

    /// HGETALL as a dictionary of bytes.
    static func hash(_ reply: RedisReply) -> [String: [UInt8]] { pairs(reply.elements ?? []) }

    /// `[field, value, field, value, ...]` (an entry's fields, a hash) as a dictionary of bytes.
    static func pairs(_ items: [RedisReply]) -> [String: [UInt8]] { fields(items).compactMapValues(\.bytes) }

    /// `[field, value, field, value, ...]` as a dictionary of replies (values of any kind: a
    /// number, nil, a string not read for its length).
    static func fields(_ items: [RedisReply]) -> [String: RedisReply] {
        var map: [String: RedisReply] = [:]
        var i = 0
        while i + 1 < items.count {
            if let k = items[i].text { map[k] = items[i + 1] }
            i += 2
        }
        return map
    }
}

/// Wall-clock time (for heartbeats and latency figures shared between machines).
package enum WallClock {
    package static func micros() -> Int {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return ts.tv_sec * 1_000_000 + ts.tv_nsec / 1000
    }
    package static func millis() -> Int { micros() / 1000 }

    /// Milliseconds on the monotonic clock (for how long something lasted on this machine).
    package static func monotonicMillis() -> Int {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
    }
}
