#if canImport(Glibc)
import Glibc
#endif
import CEarshotSystem

/// The system's text for an errno value.
package func systemError(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

/// Sockets and epoll through Glibc: listening, accepting, connecting, non-blocking reads and writes.
package enum Sockets {
    /// A listening, non-blocking socket for `uri`, and the address it is bound to (the port
    /// chosen when 0 was asked for).
    package static func listen(_ uri: ServeURI, backlog: Int32 = 1024) throws(ServeError) -> (fd: Int32, bound: ServeURI) {
        switch uri {
        case .stdio:
            throw .invalidURI(uri.description, reason: "stdio:// does not listen")
        case let .unix(path):
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw .socket(operation: "socket", address: uri.description, reason: systemError()) }
            // A socket file left by a service that stopped is replaced, as the Wyoming services do.
            var st = stat()
            if lstat(path, &st) == 0 {
                guard (st.st_mode & S_IFMT) == S_IFSOCK else {
                    close(fd)
                    throw .socket(operation: "bind", address: uri.description, reason: "the path exists and is not a socket")
                }
                unlink(path)
            }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { dst in
                for (i, b) in path.utf8.enumerated() where i < dst.count - 1 { dst[i] = b }
            }
            let ok = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard ok == 0 else {
                let reason = systemError()
                close(fd)
                throw .socket(operation: "bind", address: uri.description, reason: reason)
            }
            guard Glibc.listen(fd, backlog) == 0 else {
                let reason = systemError()
                close(fd)
                throw .socket(operation: "listen", address: uri.description, reason: reason)
            }
            return (fd, uri)
        case let .tcp(host, port):
            let fd = try firstSocket(uri, host: host, port: port, passive: true, flags: Int32(SOCK_NONBLOCK.rawValue), operation: "bind") { fd, a in
                var one: Int32 = 1
                setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
                return bind(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 && Glibc.listen(fd, backlog) == 0
            }
            return (fd, .tcp(host: host, port: localPort(fd) ?? port))
        }
    }

    /// The first of `host`'s addresses on which a new stream socket passes `use` (bind or
    /// connect); the others' sockets are closed.
    private static func firstSocket(_ uri: ServeURI, host: String, port: Int, passive: Bool, flags: Int32, operation: String,
                                    _ use: (Int32, UnsafeMutablePointer<addrinfo>) -> Bool) throws(ServeError) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = (passive ? AI_PASSIVE : 0) | AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw .socket(operation: "resolve", address: uri.description, reason: String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(list) }
        var lastError = "no address"
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let a = entry {
            entry = a.pointee.ai_next
            let fd = socket(a.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | flags | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { lastError = systemError(); continue }
            if use(fd, a) { return fd }
            lastError = systemError()
            close(fd)
        }
        throw .socket(operation: operation, address: uri.description, reason: lastError)
    }

    /// A blocking connection to a service at `uri` (a client's: tests, `earshot bench serve`);
    /// over TCP each write goes out at once (no Nagle delay), as the wyoming package's clients send.
    package static func connect(_ uri: ServeURI) throws(ServeError) -> Int32 {
        switch uri {
        case .stdio:
            throw .invalidURI(uri.description, reason: "stdio:// is not a place to connect to")
        case let .unix(path):
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw .socket(operation: "socket", address: uri.description, reason: systemError()) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { dst in
                for (i, b) in path.utf8.enumerated() where i < dst.count - 1 { dst[i] = b }
            }
            let ok = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard ok == 0 else {
                let reason = systemError()
                close(fd)
                throw .socket(operation: "connect", address: uri.description, reason: reason)
            }
            return fd
        case let .tcp(host, port):
            let fd = try firstSocket(uri, host: host, port: port, passive: false, flags: 0, operation: "connect") { fd, a in
                Glibc.connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            return fd
        }
    }

    static func localPort(_ fd: Int32) -> Int? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard ok == 0 else { return nil }
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) } }
        case AF_INET6:
            return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) } }
        default: return nil
        }
    }

    /// The peer's address as text (for logs).
    static func peerName(_ fd: Int32) -> String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard ok == 0 else { return "?" }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let status = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &host, socklen_t(host.count), &service, socklen_t(service.count), NI_NUMERICHOST | NI_NUMERICSERV)
            }
        }
        guard status == 0 else { return Int32(storage.ss_family) == AF_UNIX ? "unix" : "?" }
        let h = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let s = String(decoding: service.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return h.isEmpty ? "unix" : "\(h):\(s)"
    }

    static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK) }
    }

    static func setBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
    }
}

/// An epoll instance; each registered descriptor carries a token.
final class Epoll {
    let fd: Int32
    static let capacity = 256
    private var tokens = [UInt64](repeating: 0, count: Epoll.capacity)
    private var masks = [UInt32](repeating: 0, count: Epoll.capacity)

    init() throws(ServeError) {
        fd = earshot_epoll_create()
        guard fd >= 0 else { throw .socket(operation: "epoll_create1", address: "epoll", reason: systemError()) }
    }

    deinit { close(fd) }

    static let input = earshot_epollin
    static let readable = earshot_epollin | earshot_epollrdhup
    static let writable = earshot_epollout
    static let hangUp = earshot_epollhup | earshot_epollerr | earshot_epollrdhup

    /// Registers `descriptor`; false when it cannot be polled (a regular file: always ready).
    @discardableResult
    func add(_ descriptor: Int32, events mask: UInt32, token: UInt64) -> Bool {
        earshot_epoll_ctl(fd, 0, descriptor, mask, token) == 0
    }

    func modify(_ descriptor: Int32, events mask: UInt32, token: UInt64) {
        _ = earshot_epoll_ctl(fd, 1, descriptor, mask, token)
    }

    func remove(_ descriptor: Int32) {
        _ = earshot_epoll_ctl(fd, 2, descriptor, 0, 0)
    }

    /// Waits up to `timeoutMs` (0: no wait); how many descriptors are ready, each then
    /// `ready(i)` until the next wait (nothing is allocated per wait).
    func wait(timeoutMs: Int32) -> Int {
        let n = tokens.withUnsafeMutableBufferPointer { t in
            masks.withUnsafeMutableBufferPointer { m in earshot_epoll_wait(fd, t.baseAddress, m.baseAddress, Int32(t.count), timeoutMs) }
        }
        return max(0, Int(n))
    }

    /// The token and event mask of the `i`th descriptor the last wait found ready.
    func ready(_ i: Int) -> (token: UInt64, events: UInt32) { (tokens[i], masks[i]) }
}

/// An eventfd another thread writes to wake the loop (to stop it).
final class WakeSignal: Sendable {
    let fd: Int32

    init() throws(ServeError) {
        fd = earshot_eventfd()
        guard fd >= 0 else { throw .socket(operation: "eventfd", address: "wake", reason: systemError()) }
    }

    deinit { close(fd) }

    func signal() {
        var one: UInt64 = 1
        _ = write(fd, &one, 8)
    }

    func clear() {
        var value: UInt64 = 0
        _ = read(fd, &value, 8)
    }
}
