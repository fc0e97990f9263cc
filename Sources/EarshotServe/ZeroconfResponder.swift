#if canImport(Glibc)
import Glibc
#endif
import EarshotTelemetry
import Foundation

/// Announces a Wyoming service over multicast DNS (RFC 6762, DNS-SD RFC 6763) as Wyoming's own
/// services do, so that Home Assistant discovers it: `NAME._wyoming._tcp.local` with the
/// service's port, on `HOST.local` at this machine's IPv4 addresses, no TXT properties.
/// It answers the questions for the service type, the instance and the host (multicast; a query
/// from a port other than 5353 gets a unicast answer), announces the records when it starts
/// (twice, a second apart) and says goodbye (TTL 0) when it stops. One thread, one UDP socket
/// shared with any other responder of the machine (SO_REUSEADDR, SO_REUSEPORT). It does not
/// probe for a name already in use on the network (RFC 6762 §8): the name is the operator's.
public final class ZeroconfResponder: Sendable {
    /// The service type Home Assistant browses for.
    public static let serviceType = "_wyoming._tcp.local"
    /// The service's instance name (NAME._wyoming._tcp.local).
    public let instance: String
    /// The host name its SRV record points at (HOST.local).
    public let host: String
    public let port: Int
    /// The IPv4 addresses its A record gives.
    public let addresses: [[UInt8]]
    private let fd: Int32
    private let thread = ServiceThread()

    static let mdnsPort: UInt16 = 5353
    static let group = "224.0.0.251"

    /// Opens the mDNS socket for a service on `port`.
    /// - Parameters:
    ///   - name: the instance name: 1-63 bytes of UTF-8, no dot.
    ///   - addresses: the A record's addresses (default: every IPv4 address of an interface that
    ///     is up, not loopback; loopback when there is none).
    /// - Throws: `ServeError.invalidOption` for a bad name, `.socket` when UDP port 5353 cannot
    ///   be bound or the group joined.
    public init(name: String, port: Int, addresses: [[UInt8]]? = nil) throws(ServeError) {
        guard !name.isEmpty, name.utf8.count <= 63, !name.contains("."), (1...65535).contains(port) else {
            throw .invalidOption(name: "zeroconf", value: name, expected: "a name of 1-63 bytes without a dot")
        }
        instance = "\(name).\(Self.serviceType)"
        var hostName = [CChar](repeating: 0, count: 256)
        gethostname(&hostName, 255)
        let hostBytes = hostName.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        let shortHost = String(decoding: hostBytes, as: UTF8.self).split(separator: ".").first.map(String.init) ?? "earshot"
        host = "\(shortHost.isEmpty ? "earshot" : shortHost).local"
        self.port = port
        self.addresses = addresses ?? Self.interfaceAddresses()
        let s = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { throw .socket(operation: "socket", address: "udp://0.0.0.0:5353", reason: String(cString: strerror(errno))) }
        func fail(_ what: String) -> ServeError {
            let reason = String(cString: strerror(errno))
            close(s)
            return .socket(operation: what, address: "udp://0.0.0.0:5353 (mDNS)", reason: reason)
        }
        var one: Int32 = 1
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(Self.mdnsPort.bigEndian)
        address.sin_addr.s_addr = INADDR_ANY
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0 else { throw fail("bind") }
        var membership = ip_mreq()
        membership.imr_multiaddr.s_addr = inet_addr(Self.group)
        membership.imr_interface.s_addr = INADDR_ANY
        guard setsockopt(s, Int32(IPPROTO_IP), IP_ADD_MEMBERSHIP, &membership, socklen_t(MemoryLayout<ip_mreq>.size)) == 0 else {
            throw fail("joining \(Self.group)")
        }
        var ttl: UInt8 = 255
        setsockopt(s, Int32(IPPROTO_IP), IP_MULTICAST_TTL, &ttl, socklen_t(1))
        // Browsers on this machine (Home Assistant beside it) hear the answers too.
        var loop: UInt8 = 1
        setsockopt(s, Int32(IPPROTO_IP), IP_MULTICAST_LOOP, &loop, socklen_t(1))
        fd = s
    }

    deinit { close(fd) }

    /// Every IPv4 address of an interface that is up and not loopback; 127.0.0.1 when none.
    static func interfaceAddresses() -> [[UInt8]] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [[127, 0, 0, 1]] }
        defer { freeifaddrs(list) }
        var found: [[UInt8]] = []
        var p = list
        while let entry = p {
            defer { p = entry.pointee.ifa_next }
            let flags = Int32(entry.pointee.ifa_flags)
            guard let a = entry.pointee.ifa_addr, a.pointee.sa_family == sa_family_t(AF_INET),
                  flags & Int32(IFF_UP) != 0, flags & Int32(IFF_LOOPBACK) == 0 else { continue }
            let ip = a.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt32(bigEndian: $0.pointee.sin_addr.s_addr) }
            let bytes = [UInt8(ip >> 24), UInt8((ip >> 16) & 0xFF), UInt8((ip >> 8) & 0xFF), UInt8(ip & 0xFF)]
            if !found.contains(bytes) { found.append(bytes) }
        }
        return found.isEmpty ? [[127, 0, 0, 1]] : found
    }

    // MARK: records

    /// The records, with `ttl` (0: goodbye) for the shared PTR and `hostTTL` for the others.
    func records(ttl: UInt32 = 4500, hostTTL: UInt32 = 120) -> (ptr: DNSMessage.Record, srv: DNSMessage.Record, txt: DNSMessage.Record, a: [DNSMessage.Record]) {
        (DNSMessage.Record(name: Self.serviceType, type: .ptr, cacheFlush: false, ttl: ttl, data: .ptr(instance)),
         DNSMessage.Record(name: instance, type: .srv, cacheFlush: true, ttl: hostTTL, data: .srv(priority: 0, weight: 0, port: UInt16(port), target: host)),
         DNSMessage.Record(name: instance, type: .txt, cacheFlush: true, ttl: ttl, data: .txt([])),
         addresses.map { DNSMessage.Record(name: host, type: .a, cacheFlush: true, ttl: hostTTL, data: .a($0)) })
    }

    /// The answer to `query` (nil: none of its questions is about this service).
    func answer(_ query: DNSMessage, legacy: Bool) -> DNSMessage? {
        guard !query.isResponse else { return nil }
        // A legacy (one-shot, not port 5353) asker gets short TTLs, no cache-flush bits, its id
        // and its questions back (RFC 6762 §6.7).
        let r = records(ttl: legacy ? 10 : 4500, hostTTL: legacy ? 10 : 120)
        var answers: [DNSMessage.Record] = []
        var additional: [DNSMessage.Record] = []
        func add(_ list: [DNSMessage.Record], to section: inout [DNSMessage.Record]) {
            for record in list where !section.contains(record) { section.append(record) }
        }
        for q in query.questions {
            let name = q.name.lowercased()
            let any = q.type == DNSMessage.RecordType.any.rawValue
            if name == Self.serviceType.lowercased(), any || q.type == DNSMessage.RecordType.ptr.rawValue {
                add([r.ptr], to: &answers)
                add([r.srv, r.txt] + r.a, to: &additional)
            } else if name == "_services._dns-sd._udp.local", any || q.type == DNSMessage.RecordType.ptr.rawValue {
                add([DNSMessage.Record(name: "_services._dns-sd._udp.local", type: .ptr, cacheFlush: false, ttl: r.ptr.ttl, data: .ptr(Self.serviceType))], to: &answers)
            } else if name == instance.lowercased() {
                if any || q.type == DNSMessage.RecordType.srv.rawValue { add([r.srv], to: &answers); add(r.a, to: &additional) }
                if any || q.type == DNSMessage.RecordType.txt.rawValue { add([r.txt], to: &answers) }
            } else if name == host.lowercased(), any || q.type == DNSMessage.RecordType.a.rawValue {
                add(r.a, to: &answers)
            }
        }
        guard !answers.isEmpty else { return nil }
        additional.removeAll { answers.contains($0) }
        if legacy {
            func plain(_ list: [DNSMessage.Record]) -> [DNSMessage.Record] { list.map { var x = $0; x.cacheFlush = false; return x } }
            return DNSMessage(id: query.id, isResponse: true, questions: query.questions, answers: plain(answers), additional: plain(additional))
        }
        return DNSMessage(isResponse: true, answers: answers, additional: additional)
    }

    /// Every record, unasked: the announcement, or with TTL 0 the goodbye.
    func announcement(goodbye: Bool = false) -> DNSMessage {
        let r = records(ttl: goodbye ? 0 : 4500, hostTTL: goodbye ? 0 : 120)
        return DNSMessage(isResponse: true, answers: [r.ptr, r.srv, r.txt] + r.a)
    }

    // MARK: running

    /// Announces the service and answers on a thread of its own until `stop`.
    public func start() { thread.start(name: "earshot zeroconf") { self.run() } }

    /// Says goodbye and stops (from any thread); returns when the thread has ended.
    public func stop() { thread.stop() }

    private func run() {
        send(announcement().bytes, to: nil)
        var nextAnnouncement: ContinuousClock.Instant? = .now + .seconds(1)
        var buffer = [UInt8](repeating: 0, count: 9000)
        while !thread.isStopping {
            if let at = nextAnnouncement, ContinuousClock.now >= at {
                send(announcement().bytes, to: nil)
                nextAnnouncement = nil
            }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 200) > 0 else { continue }
            var from = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let n = buffer.withUnsafeMutableBytes { b in
                withUnsafeMutablePointer(to: &from) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, b.baseAddress, b.count, 0, $0, &length) } }
            }
            guard n > 0, let query = DNSMessage(Array(buffer[0..<n])) else { continue }
            let legacy = UInt16(bigEndian: from.sin_port) != Self.mdnsPort
            guard let reply = answer(query, legacy: legacy) else { continue }
            // A legacy asker, or one asking for a unicast answer, is answered directly.
            let unicast = legacy || query.questions.contains { $0.unicastResponse }
            send(reply.bytes, to: unicast ? from : nil)
        }
        send(announcement(goodbye: true).bytes, to: nil)
    }

    /// Sends `bytes` to `peer`, or to the group (224.0.0.251:5353).
    private func send(_ bytes: [UInt8], to peer: sockaddr_in?) {
        var target = peer ?? {
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = in_port_t(Self.mdnsPort.bigEndian)
            a.sin_addr.s_addr = inet_addr(Self.group)
            return a
        }()
        _ = bytes.withUnsafeBytes { b in
            withUnsafePointer(to: &target) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(fd, b.baseAddress, b.count, Int32(MSG_NOSIGNAL), $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            } }
        }
    }
}
