/// Where a Wyoming service listens, written as the Wyoming services write it:
/// `tcp://HOST:PORT` (port 0: any free port), `unix://PATH` or `stdio://` (one client on
/// standard input and output).
public enum ServeURI: Sendable, Equatable, CustomStringConvertible {
    case tcp(host: String, port: Int)
    case unix(path: String)
    case stdio

    /// Wyoming services listen on 10400 by default.
    public static let defaultPort = 10400

    /// Reads a URI.
    /// - Throws: `ServeError.invalidURI` saying what is wrong with it.
    public init(_ text: String) throws(ServeError) {
        if text == "stdio://" {
            self = .stdio
        } else if text.hasPrefix("unix://") {
            let path = String(text.dropFirst("unix://".count))
            guard !path.isEmpty else { throw .invalidURI(text, reason: "a unix socket needs a path, e.g. unix:///run/earshot.sock") }
            guard path.utf8.count < 108 else { throw .invalidURI(text, reason: "the socket path is \(path.utf8.count) bytes; Linux allows 107") }
            self = .unix(path: path)
        } else if text.hasPrefix("tcp://") {
            let rest = String(text.dropFirst("tcp://".count))
            // HOST:PORT, with an IPv6 host in brackets ([::1]:10400); the port may be left out.
            var host = rest, portText: Substring? = nil
            if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
                host = String(rest[rest.index(after: rest.startIndex)..<close])
                let after = rest[rest.index(after: close)...]
                if after.hasPrefix(":") { portText = after.dropFirst() } else if !after.isEmpty {
                    throw .invalidURI(text, reason: "expected tcp://[HOST]:PORT")
                }
            } else if let colon = rest.lastIndex(of: ":") {
                host = String(rest[..<colon])
                portText = rest[rest.index(after: colon)...]
            }
            guard !host.isEmpty else { throw .invalidURI(text, reason: "no host; e.g. tcp://0.0.0.0:10400") }
            var port = Self.defaultPort
            if let portText {
                guard let p = Int(portText), (0...65535).contains(p) else {
                    throw .invalidURI(text, reason: "port '\(portText)' is not in 0...65535")
                }
                port = p
            }
            self = .tcp(host: host, port: port)
        } else {
            throw .invalidURI(text, reason: "expected tcp://HOST:PORT, unix://PATH or stdio://")
        }
    }

    public var description: String {
        switch self {
        case let .tcp(host, port): return host.contains(":") ? "tcp://[\(host)]:\(port)" : "tcp://\(host):\(port)"
        case let .unix(path): return "unix://\(path)"
        case .stdio: return "stdio://"
        }
    }
}
