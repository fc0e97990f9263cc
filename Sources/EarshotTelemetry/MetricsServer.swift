#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Why a metrics endpoint could not start.
public enum TelemetryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not tcp://HOST:PORT.
    case badAddress(String, reason: String)
    /// The address could not be bound.
    case cannotListen(address: String, reason: String)

    public var description: String {
        switch self {
        case let .badAddress(a, reason): return "--metrics \(a): \(reason) (expected tcp://HOST:PORT)"
        case let .cannotListen(a, reason): return "cannot listen on \(a) for metrics: \(reason)"
        }
    }
}

/// A minimal HTTP/1.1 responder for a service's metrics, on a thread of its own: `GET /metrics`
/// (Prometheus's text format, from `metrics`), `GET /health` (200 "ok" when `health` says so,
/// else 503), any other path 404 and any other method 405. Bounded: one connection at a time
/// (the kernel's queue holds 16 more; beyond, connections are refused), a request line and
/// headers of at most 8 KiB, 2 s to send them and to take the answer; the connection closes
/// after each answer. Scrapes never wait for the service's loop: the closures read what it
/// last published.
public final class MetricsServer: Sendable {
    /// Where it listens (the port chosen, when 0 was asked for): tcp://HOST:PORT.
    public let address: String
    /// The port it listens on.
    public let port: Int
    private let listener: Int32
    private let metrics: @Sendable () -> String
    private let health: @Sendable () -> Bool
    private let thread = ServiceThread()

    static let maxRequestBytes = 8192
    static let timeoutSeconds = 2

    /// Binds `uri` (tcp://HOST:PORT; port 0: any free one).
    /// - Throws: `TelemetryError.badAddress` when it is not tcp://HOST:PORT, `.cannotListen`
    ///   naming the address and the system's reason.
    public init(uri: String, metrics: @escaping @Sendable () -> String, health: @escaping @Sendable () -> Bool) throws(TelemetryError) {
        guard uri.hasPrefix("tcp://") else { throw .badAddress(uri, reason: "not a tcp:// address") }
        let rest = String(uri.dropFirst(6))
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]), (0...65535).contains(port) else {
            throw .badAddress(uri, reason: "no port 0...65535")
        }
        var host = String(rest[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw .badAddress(uri, reason: "no host") }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let info = found else {
            throw .cannotListen(address: uri, reason: String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(found) }
        let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .cannotListen(address: uri, reason: String(cString: strerror(errno))) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0, Glibc.listen(fd, 16) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw .cannotListen(address: uri, reason: reason)
        }
        var bound = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        let boundPort: Int = withUnsafePointer(to: &bound) { p in
            p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
        listener = fd
        self.port = boundPort
        address = "tcp://\(host.contains(":") ? "[\(host)]" : host):\(boundPort)"
        self.metrics = metrics
        self.health = health
    }

    deinit { close(listener) }

    /// Starts answering on a thread of its own.
    public func start() { thread.start(name: "earshot metrics") { self.run() } }

    /// Stops answering (from any thread) and waits for the thread to end (within 0.2 s and the
    /// answer in progress).
    public func stop() { thread.stop() }

    private func run() {
        while !thread.isStopping {
            var p = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 200) > 0 else { continue }
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { continue }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var timeout = timeval(tv_sec: Self.timeoutSeconds, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            answer(fd)
            close(fd)
        }
    }

    /// Reads one request (its line and headers) and answers it.
    private func answer(_ fd: Int32) {
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        let deadline = ContinuousClock.now + .seconds(Self.timeoutSeconds)
        while request.count <= Self.maxRequestBytes {
            if headersEnded(request) { break }
            guard ContinuousClock.now < deadline else { return }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            request += buffer[0..<n]
        }
        guard request.count <= Self.maxRequestBytes else {
            return send(fd, status: "431 Request Header Fields Too Large", body: "request too large\n")
        }
        let line = String(decoding: request.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self).split(separator: " ")
        guard line.count == 3, line[2].hasPrefix("HTTP/1.") else { return send(fd, status: "400 Bad Request", body: "bad request\n") }
        let method = String(line[0])
        let path = String(line[1].prefix { $0 != "?" })
        guard path == "/metrics" || path == "/health" else { return send(fd, status: "404 Not Found", body: "not found: /metrics or /health\n") }
        guard method == "GET" || method == "HEAD" else {
            return send(fd, status: "405 Method Not Allowed", body: "GET or HEAD\n", headers: "Allow: GET, HEAD\r\n")
        }
        let head = method == "HEAD"
        if path == "/metrics" {
            send(fd, status: "200 OK", body: metrics(), contentType: MetricsText.contentType, head: head)
        } else if health() {
            send(fd, status: "200 OK", body: "ok\n", head: head)
        } else {
            send(fd, status: "503 Service Unavailable", body: "unavailable\n", head: head)
        }
    }

    private func headersEnded(_ request: [UInt8]) -> Bool {
        guard request.count >= 4 else { return false }
        return request.withUnsafeBufferPointer { b in
            (0...(b.count - 4)).contains { b[$0] == 13 && b[$0 + 1] == 10 && b[$0 + 2] == 13 && b[$0 + 3] == 10 }
        }
    }

    private func send(_ fd: Int32, status: String, body: String, contentType: String = "text/plain; charset=utf-8",
                      headers: String = "", head: Bool = false) {
        let bodyBytes = Array(body.utf8)
        var bytes = Array("HTTP/1.1 \(status)\r\nContent-Type: \(contentType)\r\nContent-Length: \(bodyBytes.count)\r\n\(headers)Connection: close\r\n\r\n".utf8)
        if !head { bytes += bodyBytes }
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            sent += n
        }
    }
}
