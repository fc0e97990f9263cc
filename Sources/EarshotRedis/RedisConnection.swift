import CHiredis
import Glibc

/// Where a Redis server listens, and the credentials it asks for:
/// `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]` or `unix:///PATH[?db=DB&user=USER&password=PASSWORD]`
/// (`%XX` escapes in the user and the password). TLS (`rediss://`) is refused: hiredis 0.14
/// has none.
public struct RedisEndpoint: Sendable, Equatable, CustomStringConvertible {
    public enum Address: Sendable, Equatable {
        case tcp(host: String, port: Int)
        case unix(path: String)
    }

    public var address: Address
    /// The database number (SELECT), 0 by default.
    public var database: Int
    /// An ACL user (Redis 6 and later); nil: the default user.
    public var username: String?
    /// Sent with AUTH on every connection (and every reconnection) when given.
    public var password: String?

    public init(address: Address, database: Int = 0, username: String? = nil, password: String? = nil) {
        self.address = address
        self.database = database
        self.username = username
        self.password = password
    }

    /// Parses a URL; throws `RedisError.badURL` naming what is wrong.
    public init(url: String) throws(RedisError) {
        func bad(_ why: String) -> RedisError { .badURL(url: Self.redacted(url), reason: why) }
        if url.hasPrefix("rediss://") {
            throw bad("TLS (rediss://) is not supported: this build's hiredis has no TLS. Reach Redis through a local TLS tunnel "
                      + "(stunnel, spiped or ssh -L listening on 127.0.0.1) as redis://127.0.0.1:PORT, or through its unix socket as unix:///PATH")
        }
        if url.hasPrefix("unix://") {
            var rest = String(url.dropFirst("unix://".count))
            var db = 0
            var user: String?, password: String?
            if let q = rest.firstIndex(of: "?") {
                for item in rest[rest.index(after: q)...].split(separator: "&") {
                    let parts = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                    let value = parts.count == 2 ? String(parts[1]) : ""
                    switch parts[0] {
                    case "db":
                        guard let n = Int(value), n >= 0 else { throw bad("db must be a number >= 0") }
                        db = n
                    case "user": user = try Self.unescape(value, what: "user", url: url)
                    case "password": password = try Self.unescape(value, what: "password", url: url)
                    default: throw bad("expected db=N, user=USER or password=PASSWORD after ?, not '\(parts[0])'")
                    }
                }
                rest = String(rest[..<q])
            }
            guard rest.hasPrefix("/") else { throw bad("a unix socket needs an absolute path (unix:///run/redis.sock)") }
            guard password != nil || user == nil else { throw bad("a user needs its password (?user=USER&password=PASSWORD)") }
            self.init(address: .unix(path: rest), database: db, username: user, password: password)
            return
        }
        guard url.hasPrefix("redis://") else { throw bad("expected redis://HOST:PORT[/DB] or unix:///PATH") }
        var rest = Substring(url.dropFirst("redis://".count))
        var user: String?, password: String?
        if let at = rest.lastIndex(of: "@") {
            // USER:PASSWORD or :PASSWORD (a password may hold '@' or '/': everything up to the last '@').
            let info = rest[..<at]
            guard let colon = info.firstIndex(of: ":") else {
                throw bad("credentials are :PASSWORD@ or USER:PASSWORD@ (redis://:secret@HOST)")
            }
            let name = try Self.unescape(String(info[..<colon]), what: "user", url: url)
            password = try Self.unescape(String(info[info.index(after: colon)...]), what: "password", url: url)
            guard password?.isEmpty == false else { throw bad("the password after ':' is empty") }
            user = name.isEmpty ? nil : name
            rest = rest[rest.index(after: at)...]
        }
        var db = 0
        if let slash = rest.firstIndex(of: "/") {
            let tail = rest[rest.index(after: slash)...]
            if !tail.isEmpty {
                guard let n = Int(tail), n >= 0 else { throw bad("the database after / must be a number >= 0") }
                db = n
            }
            rest = rest[..<slash]
        }
        var host = String(rest), port = 6379
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw bad("an IPv6 address needs its closing ]") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") {
                guard let p = Int(after.dropFirst()), (1...65535).contains(p) else { throw bad("the port must be 1...65535") }
                port = p
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            guard let p = Int(rest[rest.index(after: colon)...]), (1...65535).contains(p) else { throw bad("the port must be 1...65535") }
            port = p
        }
        guard !host.isEmpty else { throw bad("no host") }
        self.init(address: .tcp(host: host, port: port), database: db, username: user, password: password)
    }

    /// `%XX` escapes decoded (a password holding ':' or '@' written as %3A, %40).
    private static func unescape(_ text: String, what: String, url: String) throws(RedisError) -> String {
        var bytes: [UInt8] = []
        var i = text.utf8.startIndex
        let utf8 = text.utf8
        while i < utf8.endIndex {
            let b = utf8[i]
            if b == UInt8(ascii: "%") {
                let hex = String(decoding: utf8[utf8.index(after: i)...].prefix(2), as: UTF8.self)
                guard hex.count == 2, let v = UInt8(hex, radix: 16) else {
                    throw .badURL(url: redacted(url), reason: "the \(what) holds a '%' that is not followed by two hex digits")
                }
                bytes.append(v)
                i = utf8.index(i, offsetBy: 3)
            } else {
                bytes.append(b)
                i = utf8.index(after: i)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The URL with its password hidden, for messages.
    static func redacted(_ url: String) -> String {
        if url.hasPrefix("unix://") {
            // ...?db=1&password=SECRET&user=U
            guard let q = url.firstIndex(of: "?") else { return url }
            let items = url[url.index(after: q)...].split(separator: "&", omittingEmptySubsequences: false)
                .map { $0.hasPrefix("password=") ? "password=***" : String($0) }
            return String(url[...q]) + items.joined(separator: "&")
        }
        guard let scheme = url.firstIndex(of: "/"), let at = url.lastIndex(of: "@"), at > scheme else { return url }
        let start = url.index(scheme, offsetBy: 2, limitedBy: at) ?? at
        let authority = url[start..<at]
        guard let colon = authority.firstIndex(of: ":") else { return url }
        return String(url[...colon]) + "***" + String(url[at...])
    }

    /// The address, the user if any and the database; never the password.
    public var description: String {
        switch address {
        case let .tcp(host, port):
            return "redis://" + (username.map { "\($0)@" } ?? "") + "\(host.contains(":") ? "[\(host)]" : host):\(port)" + (database == 0 ? "" : "/\(database)")
        case let .unix(path):
            var query: [String] = []
            if database != 0 { query.append("db=\(database)") }
            if let username { query.append("user=\(username)") }
            return "unix://\(path)" + (query.isEmpty ? "" : "?" + query.joined(separator: "&"))
        }
    }
}

/// What a Redis server answered.
public indirect enum RedisReply: Sendable, Equatable {
    case string([UInt8])
    case status(String)
    case integer(Int)
    case null
    /// The server refused the command (its message, e.g. "ERR ..." or "BUSYGROUP ...").
    case error(String)
    case array([RedisReply])
    /// A string longer than the read's `maxStringBytes`: its bytes were read from the socket and
    /// dropped, never held (its length).
    case oversized(bytes: Int)

    /// The bytes of a string or status reply.
    public var bytes: [UInt8]? {
        switch self {
        case let .string(b): return b
        case let .status(s): return Array(s.utf8)
        default: return nil
        }
    }

    /// A string, status or integer reply as text.
    public var text: String? {
        switch self {
        case let .string(b): return String(decoding: b, as: UTF8.self)
        case let .status(s): return s
        case let .integer(i): return String(i)
        default: return nil
        }
    }

    public var integer: Int? {
        switch self {
        case let .integer(i): return i
        case let .string(b): return Int(String(decoding: b, as: UTF8.self))
        default: return nil
        }
    }

    public var elements: [RedisReply]? { if case let .array(a) = self { return a } else { return nil } }

    public var errorMessage: String? { if case let .error(e) = self { return e } else { return nil } }
}

/// Redis failures: the connection (the server is down, went away, or timed out) or a reply
/// that was not what the command expects.
public enum RedisError: Error, Sendable, Equatable, CustomStringConvertible {
    case badURL(url: String, reason: String)
    /// Could not connect, or the connection broke: make a new connection.
    case connection(endpoint: String, reason: String)
    /// The server refused a command.
    case refused(command: String, message: String)
    /// A reply of another shape than the command gives.
    case unexpectedReply(command: String, reply: String)

    public var description: String {
        switch self {
        case let .badURL(url, reason): return "Redis URL \(url): \(reason)"
        case let .connection(endpoint, reason): return "Redis at \(endpoint): \(reason)"
        case let .refused(command, message): return "Redis refused \(command): \(message)"
        case let .unexpectedReply(command, reply): return "Redis answered \(command) with \(reply)"
        }
    }

    /// True when the connection is gone (retry on a new one).
    public var isConnectionLost: Bool { if case .connection = self { return true } else { return false } }

    /// True when a retry may succeed: the connection is gone, or the server refused the command
    /// only for now (restarting and loading its data, busy with a script, a failover).
    public var isTransient: Bool {
        switch self {
        case .connection: return true
        case let .refused(_, message): return Self.transientRefusals.contains { message.hasPrefix($0) }
        default: return false
        }
    }

    /// The error prefixes Redis answers with while it cannot serve a command yet.
    static let transientRefusals = ["LOADING", "BUSY ", "TRYAGAIN", "MASTERDOWN", "CLUSTERDOWN"]

    /// True when the server refused the command for the data of the keys it names, not for the
    /// server's own state: a key of another type (WRONGTYPE, from a script too), or a stream
    /// without the consumer group (NOGROUP, the stream deleted meanwhile).
    public var isKeyFault: Bool {
        guard case let .refused(_, message) = self else { return false }
        return message.hasPrefix("WRONGTYPE") || message.hasPrefix("NOGROUP")
    }
}

/// One argument of a command: bytes (text as UTF-8, numbers in decimal).
public struct RedisArgument: Sendable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    public let bytes: [UInt8]
    public init(bytes: [UInt8]) { self.bytes = bytes }
    public init(_ text: String) { bytes = Array(text.utf8) }
    public init(_ number: Int) { bytes = Array(String(number).utf8) }
    public init(stringLiteral value: String) { self.init(value) }
    public init(integerLiteral value: Int) { self.init(value) }
}

/// A connection to one Redis server, on hiredis. Blocking calls with a timeout; one thread at
/// a time uses it (a worker owns its connection). After a `.connection` error the connection is
/// closed: make a new one.
public final class RedisConnection {
    public let endpoint: RedisEndpoint
    private var context: UnsafeMutablePointer<redisContext>?
    /// What stands in a reply for a string not read (see `readReply`): this connection's own
    /// random prefix, then the length.
    /// Strings longer than a read's `maxStringBytes` dropped as they came, never buffered whole.
    public private(set) var stringsSkipped = 0
    private let oversizedMark: [UInt8] = Array("\u{1}earshot-oversized-".utf8) + (0..<16).map { _ in UInt8.random(in: 0x61...0x7A) } + [0x3A]

    /// Connects (and SELECTs the endpoint's database).
    /// - Parameter timeout: seconds for the connection and for each reply.
    public init(_ endpoint: RedisEndpoint, timeout: Double = 5) throws(RedisError) {
        self.endpoint = endpoint
        let tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        let c: UnsafeMutablePointer<redisContext>?
        switch endpoint.address {
        case let .tcp(host, port): c = redisConnectWithTimeout(host, Int32(port), tv)
        case let .unix(path): c = redisConnectUnixWithTimeout(path, tv)
        }
        guard let c else { throw .connection(endpoint: endpoint.description, reason: "out of memory") }
        if c.pointee.err != 0 {
            let reason = Self.message(c)
            redisFree(c)
            throw .connection(endpoint: endpoint.description, reason: reason)
        }
        redisSetTimeout(c, tv)
        context = c
        if let password = endpoint.password {
            // The password is never part of a message.
            let who = endpoint.username.map { " \($0)" } ?? ""
            let reply = try command(["AUTH"] + (endpoint.username.map { [RedisArgument($0)] } ?? []) + [RedisArgument(password)])
            if let e = reply.errorMessage { close(); throw .refused(command: "AUTH\(who)", message: e) }
        }
        if endpoint.database != 0 {
            let reply = try command(["SELECT", RedisArgument(endpoint.database)])
            if let e = reply.errorMessage { close(); throw .refused(command: "SELECT \(endpoint.database)", message: e) }
        }
    }

    deinit { close() }

    /// Closes the connection (later commands throw `.connection`).
    public func close() {
        if let context { redisFree(context) }
        context = nil
    }

    private static func message(_ c: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: c.pointee.errstr) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    private func lost(_ c: UnsafeMutablePointer<redisContext>) -> RedisError {
        let why = Self.message(c)
        close()
        return .connection(endpoint: endpoint.description, reason: why.isEmpty ? "the connection was lost" : why)
    }

    /// Runs one command; a refusal comes back as `.error` (see `expect` for a typed one).
    /// - Parameter maxStringBytes: a string of the reply longer than this is not held: it comes
    ///   back as `.oversized(bytes:)` (nil: any length).
    public func command(_ args: [RedisArgument], maxStringBytes: Int? = nil) throws(RedisError) -> RedisReply {
        try pipeline([args], maxStringBytes: maxStringBytes)[0]
    }

    /// Sends many commands at once and reads their replies in order (one round trip). Refused
    /// while a reply of `send` is unread (it would be taken for theirs).
    public func pipeline(_ commands: [[RedisArgument]], maxStringBytes: Int? = nil) throws(RedisError) -> [RedisReply] {
        guard let c = context else { throw .connection(endpoint: endpoint.description, reason: "the connection is closed") }
        guard unread == 0 else { throw .connection(endpoint: endpoint.description, reason: "a command was sent ahead and its reply is not read yet") }
        for args in commands { try append(args, c) }
        var replies: [RedisReply] = []
        replies.reserveCapacity(commands.count)
        for _ in commands { replies.append(try reply(c, maxStringBytes: maxStringBytes)) }
        return replies
    }

    /// Replies to commands of `send` that `receive` has not read yet.
    public private(set) var unread = 0

    /// Writes a command to the server and returns without its reply, which `receive` reads: the
    /// server works on it meanwhile. Until then only `send` and `receive` use the connection.
    public func send(_ args: [RedisArgument]) throws(RedisError) {
        guard let c = context else { throw .connection(endpoint: endpoint.description, reason: "the connection is closed") }
        try append(args, c)
        var done: Int32 = 0
        repeat { guard redisBufferWrite(c, &done) == REDIS_OK else { throw lost(c) } } while done == 0
        unread += 1
    }

    /// The reply to the oldest command of `send` not yet answered here.
    public func receive(maxStringBytes: Int? = nil) throws(RedisError) -> RedisReply {
        guard let c = context else { throw .connection(endpoint: endpoint.description, reason: "the connection is closed") }
        guard unread > 0 else { throw .connection(endpoint: endpoint.description, reason: "no command was sent ahead") }
        unread -= 1
        return try reply(c, maxStringBytes: maxStringBytes)
    }

    private func reply(_ c: UnsafeMutablePointer<redisContext>, maxStringBytes: Int?) throws(RedisError) -> RedisReply {
        let raw = try readReply(c, maxStringBytes: maxStringBytes)
        defer { freeReplyObject(raw) }
        return convert(raw.assumingMemoryBound(to: redisReply.self), maxStringBytes: maxStringBytes)
    }

    /// A command into hiredis's output buffer (written with the first reply read).
    private func append(_ args: [RedisArgument], _ c: UnsafeMutablePointer<redisContext>) throws(RedisError) {
        var pointers: [UnsafePointer<CChar>?] = []
        var lengths: [Int] = []
        let storage = args.map { a -> UnsafeMutablePointer<CChar> in
            let p = UnsafeMutablePointer<CChar>.allocate(capacity: max(a.bytes.count, 1))
            a.bytes.withUnsafeBufferPointer { b in
                if let base = b.baseAddress { UnsafeMutableRawPointer(p).copyMemory(from: base, byteCount: b.count) }
            }
            return p
        }
        defer { storage.forEach { $0.deallocate() } }
        for (p, a) in zip(storage, args) { pointers.append(UnsafePointer(p)); lengths.append(a.bytes.count) }
        let status = pointers.withUnsafeMutableBufferPointer { pb in
            lengths.withUnsafeBufferPointer { lb in redisAppendCommandArgv(c, Int32(args.count), pb.baseAddress, lb.baseAddress) }
        }
        if status != REDIS_OK { throw lost(c) }
    }

    /// One reply, read as `redisGetReply` reads it, except that a string longer than
    /// `maxStringBytes` is never buffered whole: `skipOversized` drops its bytes as they come.
    private func readReply(_ c: UnsafeMutablePointer<redisContext>, maxStringBytes: Int?) throws(RedisError) -> UnsafeMutableRawPointer {
        var raw: UnsafeMutableRawPointer?
        guard redisGetReplyFromReader(c, &raw) == REDIS_OK else { throw lost(c) }
        if let raw { return raw }
        var done: Int32 = 0
        repeat { guard redisBufferWrite(c, &done) == REDIS_OK else { throw lost(c) } } while done == 0
        while true {
            let skipped = try maxStringBytes.map { limit throws(RedisError) in try skipOversized(c, limit: limit) } ?? false
            if !skipped { guard redisBufferRead(c) == REDIS_OK else { throw lost(c) } }
            guard redisGetReplyFromReader(c, &raw) == REDIS_OK else { throw lost(c) }
            if let raw { return raw }
        }
    }

    /// When hiredis's reader waits for the rest of a string longer than `limit` (it has consumed
    /// the `$` and holds `N\r\n` and the first bytes: a complete line would have been parsed,
    /// so digits and CRLF at its cursor can only be a bulk string's length), the buffered part
    /// is rewritten in place as a string of the same total size holding this connection's mark
    /// and N, and the rest of the N bytes are read from the socket and dropped. The reply goes
    /// on after it as if nothing happened; `convert` turns the mark into `.oversized`.
    /// Returns false when there is nothing to skip (or not yet enough buffered to rewrite).
    private func skipOversized(_ c: UnsafeMutablePointer<redisContext>, limit: Int) throws(RedisError) -> Bool {
        guard let r = c.pointee.reader, let base = r.pointee.buf else { return false }
        let pos = r.pointee.pos, len = r.pointee.len
        let buf = UnsafeMutableRawPointer(base).assumingMemoryBound(to: UInt8.self)
        var i = pos, n = 0
        while i < len, (0x30...0x39).contains(buf[i]) {
            n = min(n * 10 + Int(buf[i] - 0x30), 1 << 53)
            i += 1
        }
        guard i > pos, n > limit, i + 1 < len, buf[i] == 0x0D, buf[i + 1] == 0x0A else { return false }
        let buffered = len - pos, total = (i + 2 - pos) + n + 2
        let mark = oversizedMark + Array("\(n);".utf8)
        // "m\r\n" + m bytes + "\r\n" in exactly `buffered` bytes (none fits some sizes, such
        // as 106: then more is read first).
        guard buffered < total,
              let m = (1...20).lazy.map({ buffered - 4 - $0 }).first(where: { $0 >= mark.count && String($0).utf8.count == buffered - 4 - $0 })
        else { return false }
        let substitute = Array("\(m)\r\n".utf8) + mark + [UInt8](repeating: 0x20, count: m - mark.count) + [0x0D, 0x0A]
        for (k, b) in substitute.enumerated() { buf[pos + k] = b }
        var left = total - buffered
        var scratch = [UInt8](repeating: 0, count: 1 << 16)
        while left > 0 {
            let got = scratch.withUnsafeMutableBytes { Glibc.read(c.pointee.fd, $0.baseAddress, min(left, $0.count)) }
            if got > 0 { left -= got; continue }
            if got < 0 && errno == EINTR { continue }
            let why = got == 0 ? "the server closed the connection" : String(cString: strerror(errno))
            close()
            throw .connection(endpoint: endpoint.description, reason: why)
        }
        stringsSkipped += 1
        return true
    }

    private func convert(_ r: UnsafeMutablePointer<redisReply>, maxStringBytes: Int?) -> RedisReply {
        let reply = r.pointee
        func bytes() -> [UInt8] {
            guard let s = reply.str else { return [] }
            return Array(UnsafeRawBufferPointer(start: s, count: reply.len).bindMemory(to: UInt8.self))
        }
        switch reply.type {
        case REDIS_REPLY_STRING:
            if reply.len > oversizedMark.count, let s = reply.str,
               UnsafeRawBufferPointer(start: s, count: oversizedMark.count).elementsEqual(oversizedMark) {
                let digits = UnsafeRawBufferPointer(start: s, count: reply.len).dropFirst(oversizedMark.count).prefix { $0 != 0x3B }
                return .oversized(bytes: Int(String(decoding: digits, as: UTF8.self)) ?? 0)
            }
            // Longer than the limit but read whole (it came in one read): not copied either.
            if let maxStringBytes, reply.len > maxStringBytes { return .oversized(bytes: reply.len) }
            return .string(bytes())
        case REDIS_REPLY_STATUS: return .status(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_ERROR: return .error(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_INTEGER: return .integer(Int(reply.integer))
        case REDIS_REPLY_ARRAY:
            var items: [RedisReply] = []
            items.reserveCapacity(reply.elements)
            for i in 0..<reply.elements {
                if let e = reply.element[i] { items.append(convert(e, maxStringBytes: maxStringBytes)) } else { items.append(.null) }
            }
            return .array(items)
        default: return .null
        }
    }

    /// Runs a command and throws `.refused` when the server refuses it.
    @discardableResult
    public func expect(_ args: [RedisArgument], maxStringBytes: Int? = nil) throws(RedisError) -> RedisReply {
        let reply = try command(args, maxStringBytes: maxStringBytes)
        if let e = reply.errorMessage { throw .refused(command: Self.name(args), message: e) }
        return reply
    }

    /// The command's name and first key, for messages.
    public static func name(_ args: [RedisArgument]) -> String {
        args.prefix(2).map { String(decoding: $0.bytes.prefix(64), as: UTF8.self) }.joined(separator: " ")
    }
}
