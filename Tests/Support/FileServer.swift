import Foundation

/// A small HTTP server on 127.0.0.1 for the download tests (no Python, no network): a GET of
/// one of its paths answers that path's bytes, any other path 404. One thread accepts and
/// answers each connection in turn, and records what was asked.
///
/// `@unchecked Sendable`: `requests` is guarded by `lock`; the rest is set once in `init`.
public final class FileServer: @unchecked Sendable {
    public let port: UInt16
    /// Answer without a Content-Length (the body ends when the connection closes), so a client
    /// cannot know the size before it has read the bytes.
    public let omitLength: Bool
    private let listener: Int32
    private let files: [String: Data]
    private let lock = NSLock()
    private var asked: [String] = []
    private let done = DispatchSemaphore(value: 0)

    public init(files: [String: Data], omitLength: Bool = false) throws {
        self.files = files
        self.omitLength = omitLength
        (listener, port) = try Self.listen()
        Thread { [self] in serve() }.start()
    }

    deinit { stop() }

    /// `http://127.0.0.1:PORT` and the path.
    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// The paths asked for, in order.
    public var requests: [String] {
        lock.lock()
        defer { lock.unlock() }
        return asked
    }

    private var stopped = false

    /// Stops listening and waits for the server's thread to end.
    public func stop() {
        lock.lock()
        let first = !stopped
        stopped = true
        lock.unlock()
        guard first else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        done.wait()
    }

    /// A port of 127.0.0.1 on which nothing listens: one bound, then closed.
    public static func closedPort() throws -> UInt16 {
        let (fd, port) = try listen()
        close(fd)
        return port
    }

    private static func listen() throws -> (Int32, UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw FixtureError(message: "socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p in
                bind(fd, p, length) == 0 && Glibc.listen(fd, 16) == 0 && getsockname(fd, p, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            throw FixtureError(message: "bind 127.0.0.1: \(String(cString: strerror(errno)))")
        }
        return (fd, UInt16(bigEndian: address.sin_port))
    }

    private func serve() {
        defer { done.signal() }
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            answer(client)
            close(client)
        }
    }

    private func answer(_ client: Int32) {
        var request = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while request.count < 16_384, !String(decoding: request, as: UTF8.self).contains("\r\n\r\n") {
            let n = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return }
            request += buffer[0..<n]
        }
        let words = String(decoding: request, as: UTF8.self).split(separator: " ", maxSplits: 2)
        let path = words.count > 1 ? String(words[1]) : ""
        lock.lock()
        asked.append(path)
        lock.unlock()
        var head: String
        let body: Data
        if words.first == "GET", let data = files[path] {
            head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
            if !omitLength { head += "Content-Length: \(data.count)\r\n" }
            body = data
        } else {
            body = Data("no such file\n".utf8)
            head = "HTTP/1.1 404 Not Found\r\nContent-Length: \(body.count)\r\n"
        }
        head += "Connection: close\r\n\r\n"
        // A client that stops reading (a download over its bound) ends the answer: MSG_NOSIGNAL
        // keeps its closed socket from raising SIGPIPE here.
        for part in [Data(head.utf8), body] {
            var sent = 0
            while sent < part.count {
                let n = part.withUnsafeBytes { send(client, $0.baseAddress! + sent, part.count - sent, Int32(MSG_NOSIGNAL)) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                sent += n
            }
        }
    }
}
