import EarshotJSON
import EarshotTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One answer of an HTTP endpoint: its status code, headers and body.
public struct HTTPAnswer: Sendable {
    public var status: Int
    public var headers: [String: String]
    public var body: String
}

/// A JSON value's text ("" when it is not a string).
public func jsonText(_ value: JSONValue?) -> String {
    if case let .string(s)? = value { return s }
    return ""
}

/// A request to 127.0.0.1:`port` as a scraper sends it (HTTP/1.1, the connection closed after),
/// read to the end. `raw` replaces the request (for bad ones).
public func httpRequest(port: Int, _ path: String, method: String = "GET", raw: String? = nil) throws -> HTTPAnswer {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw FixtureError(message: "socket: \(errno)") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    guard connected == 0 else { throw FixtureError(message: "connect to \(port): errno \(errno)") }
    let request = Array((raw ?? "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUser-Agent: test\r\n\r\n").utf8)
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { break }
        bytes += buffer[0..<n]
    }
    let text = String(decoding: bytes, as: UTF8.self)
    guard let split = text.range(of: "\r\n\r\n") else { throw FixtureError(message: "no HTTP answer: \(text.prefix(200))") }
    let head = text[..<split.lowerBound].components(separatedBy: "\r\n")
    let statusLine = head.first?.split(separator: " ") ?? []
    guard statusLine.count >= 2, statusLine[0] == "HTTP/1.1", let status = Int(statusLine[1]) else { throw FixtureError(message: "status line: \(head.first ?? "")") }
    var headers: [String: String] = [:]
    for line in head.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    let body = String(text[split.upperBound...])
    if let length = headers["content-length"].flatMap(Int.init), method != "HEAD" {
        guard body.utf8.count == length else { throw FixtureError(message: "Content-Length \(length), body \(body.utf8.count) bytes") }
    }
    return HTTPAnswer(status: status, headers: headers, body: body)
}

/// Prometheus's text exposition format 0.0.4, read strictly: every sample's family declared by
/// `# HELP` and `# TYPE` lines before it (once each), names and label names of the allowed
/// characters, label values with their escapes, values as Go's ParseFloat reads them.
/// ref: https://prometheus.io/docs/instrumenting/exposition_formats/
public struct PrometheusScrape: Sendable {
    public struct Sample: Sendable {
        public var name: String
        public var labels: [String: String]
        public var value: Double
    }
    public var samples: [Sample] = []
    /// Family name → counter, gauge, histogram...
    public var types: [String: String] = [:]
    public var help: [String: String] = [:]

    public init(_ text: String) throws {
        guard text.hasSuffix("\n") else { throw FixtureError(message: "the exposition does not end with a line feed") }
        func validName(_ s: Substring) -> Bool {
            guard let first = s.first, first.isASCII, first.isLetter || first == "_" || first == ":" else { return false }
            return s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == ":") }
        }
        for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            func bad(_ why: String) -> FixtureError { FixtureError(message: "line \(n + 1) '\(line)': \(why)") }
            if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
                guard parts.count == 4, validName(parts[2]) else { throw bad("a HELP or TYPE line needs a name and text") }
                let name = String(parts[2])
                if parts[1] == "TYPE" {
                    guard ["counter", "gauge", "histogram", "summary", "untyped"].contains(parts[3]) else { throw bad("unknown type") }
                    guard types[name] == nil else { throw bad("a second TYPE line") }
                    guard !samples.contains(where: { Self.family($0.name, types) == name }) else { throw bad("TYPE after samples") }
                    types[name] = String(parts[3])
                } else {
                    guard help[name] == nil else { throw bad("a second HELP line") }
                    help[name] = String(parts[3])
                }
                continue
            }
            guard !line.hasPrefix("#"), !line.isEmpty else { continue }
            var rest = Substring(line)
            let name = rest.prefix { $0 != "{" && $0 != " " }
            guard validName(name) else { throw bad("bad metric name") }
            rest = rest.dropFirst(name.count)
            var labels: [String: String] = [:]
            if rest.first == "{" {
                rest = rest.dropFirst()
                while rest.first != "}" {
                    let label = rest.prefix { $0 != "=" }
                    guard validName(label), rest.dropFirst(label.count).hasPrefix("=\"") else { throw bad("bad label") }
                    rest = rest.dropFirst(label.count + 2)
                    var value = ""
                    while let c = rest.first, c != "\"" {
                        rest = rest.dropFirst()
                        if c == "\\" {
                            switch rest.first {
                            case "\\": value += "\\"
                            case "\"": value += "\""
                            case "n": value += "\n"
                            default: throw bad("bad escape")
                            }
                            rest = rest.dropFirst()
                        } else {
                            value.append(c)
                        }
                    }
                    guard rest.first == "\"" else { throw bad("unterminated label value") }
                    rest = rest.dropFirst()
                    guard labels[String(label)] == nil else { throw bad("label twice") }
                    labels[String(label)] = value
                    if rest.first == "," { rest = rest.dropFirst() } else if rest.first != "}" { throw bad("expected , or }") }
                }
                rest = rest.dropFirst()
            }
            guard rest.first == " " else { throw bad("no value") }
            let fields = rest.dropFirst().split(separator: " ")
            guard (1...2).contains(fields.count) else { throw bad("value and at most a timestamp") }
            let value: Double
            switch fields[0] {
            case "+Inf": value = .infinity
            case "-Inf": value = -.infinity
            case "NaN": value = .nan
            default:
                guard let v = Double(fields[0]) else { throw bad("bad value") }
                value = v
            }
            guard let family = Self.family(String(name), types) else { throw bad("no TYPE line before the sample") }
            guard help[family] != nil else { throw bad("no HELP line before the sample") }
            samples.append(Sample(name: String(name), labels: labels, value: value))
        }
    }

    /// The family a sample belongs to (a histogram's _bucket, _sum and _count are its own).
    static func family(_ name: String, _ types: [String: String]) -> String? {
        if types[name] != nil { return name }
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
            let base = String(name.dropLast(suffix.count))
            if types[base] == "histogram" || types[base] == "summary" { return base }
        }
        return nil
    }

    /// The value of the one sample of `name` with `labels`; nil when there is none.
    public func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
    }

    /// A histogram's buckets (upper bound, cumulative count) in order, its sum and count.
    public func histogram(_ name: String) -> (buckets: [(le: Double, count: Double)], sum: Double, count: Double)? {
        guard types[name] == "histogram", let sum = value(name + "_sum"), let count = value(name + "_count") else { return nil }
        let buckets = samples.filter { $0.name == name + "_bucket" }.compactMap { s -> (le: Double, count: Double)? in
            guard let le = s.labels["le"] else { return nil }
            return (le == "+Inf" ? .infinity : Double(le) ?? .nan, s.value)
        }
        return (buckets, sum, count)
    }
}
