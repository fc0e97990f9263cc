import EarshotRedis
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A redis-server of its own on a free loopback port, its files in a folder the caller gives:
/// what the cluster's tests and `earshot bench cluster` run against. Not for production: no
/// persistence unless asked, bound to 127.0.0.1.
package final class RedisServerProcess {
    /// Where redis-server is looked for when none is named.
    package static let knownPaths = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]

    package let binary: String
    package let port: Int
    package let folder: URL
    /// `requirepass`: every client must AUTH.
    package let password: String?
    /// An append-only file written at every command, so that the server can be stopped and
    /// started again with its data.
    package let persistent: Bool
    /// Whether it also listens on a unix socket (`socket`).
    package let unixSocket: Bool
    private var process: Process?

    /// Why a server did not start: what to do about it.
    package struct StartError: Error, CustomStringConvertible {
        package let description: String
    }

    /// Starts one (and waits until it answers PING).
    /// - Parameters:
    ///   - binary: the redis-server to run; nil: the first of `knownPaths` there is.
    ///   - folder: its working folder (its log, its data, its socket); the caller removes it.
    /// - Throws: `StartError` when there is no redis-server or it does not answer within 5 s.
    package init(binary: String? = nil, folder: URL, password: String? = nil, persistent: Bool = false, unixSocket: Bool = false) throws {
        guard let path = binary ?? Self.knownPaths.first(where: { FileManager.default.isExecutableFile(atPath: $0) }),
              FileManager.default.isExecutableFile(atPath: path) else {
            throw StartError(description: "redis-server \(binary ?? "") not found: apt-get install redis-server (scripts/install-packages.sh)")
        }
        self.binary = path
        self.folder = folder
        self.password = password
        self.persistent = persistent
        self.unixSocket = unixSocket
        port = try Self.freeLoopbackPort()
        try start()
    }

    package var url: String { "redis://127.0.0.1:\(port)" }
    /// Its unix socket (in its folder), when it has one.
    package var socket: String { folder.appendingPathComponent("redis.sock").path }
    package var endpoint: RedisEndpoint { RedisEndpoint(address: .tcp(host: "127.0.0.1", port: port), password: password) }
    /// Its process id while it runs.
    package var processIdentifier: Int32? { process?.processIdentifier }

    /// Starts it (again, after `stop`, with its data when `persistent`).
    package func start() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = ["--port", "\(port)", "--bind", "127.0.0.1", "--dir", folder.path, "--save", "",
                       "--logfile", folder.appendingPathComponent("redis.log").path]
            + (persistent ? ["--appendonly", "yes", "--appendfsync", "always"] : ["--appendonly", "no"])
            + (unixSocket ? ["--unixsocket", socket, "--unixsocketperm", "700"] : [])
            + (password.map { ["--requirepass", $0] } ?? [])
        try p.run()
        process = p
        for _ in 0..<200 {
            if let c = try? RedisConnection(endpoint, timeout: 1), (try? c.command(["PING"]))?.text == "PONG" { return }
            usleep(25_000)
        }
        throw StartError(description: "redis-server on port \(port) did not answer PING (see \(folder.path)/redis.log)")
    }

    /// Stops the server (SHUTDOWN: it writes its data, when persistent, and exits; a signal may
    /// be blocked in a process the tests start, so the command is used, then SIGKILL if it is
    /// still there after 2 s).
    package func stop() {
        guard let p = process else { return }
        if let c = try? RedisConnection(endpoint, timeout: 2) { _ = try? c.command(persistent ? ["SHUTDOWN"] : ["SHUTDOWN", "NOSAVE"]) }
        for _ in 0..<100 where p.isRunning { usleep(20_000) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        process = nil
    }

    deinit { stop() }

    /// A loopback TCP port free now (bound to port 0 and released).
    package static func freeLoopbackPort() throws -> Int {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw StartError(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { throw StartError(description: "a free loopback port: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
