import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotServe

#if canImport(Glibc)
import Glibc
#endif

/// A UDP socket of the test's: sends a query and reads the DNS messages that come back.
final class MDNSTestSocket {
    let fd: Int32

    /// On an ephemeral port (a legacy asker), or on 5353 in the group (to hear announcements).
    init(group: Bool) throws {
        fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw FixtureError(message: "socket: \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t((group ? UInt16(5353) : 0).bigEndian)
        address.sin_addr.s_addr = INADDR_ANY
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        if group {
            var membership = ip_mreq()
            membership.imr_multiaddr.s_addr = inet_addr("224.0.0.251")
            membership.imr_interface.s_addr = INADDR_ANY
            setsockopt(fd, Int32(IPPROTO_IP), IP_ADD_MEMBERSHIP, &membership, socklen_t(MemoryLayout<ip_mreq>.size))
        }
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8], to host: String) {
        var target = sockaddr_in()
        target.sin_family = sa_family_t(AF_INET)
        target.sin_port = in_port_t(UInt16(5353).bigEndian)
        target.sin_addr.s_addr = inet_addr(host)
        _ = bytes.withUnsafeBytes { b in
            withUnsafePointer(to: &target) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(fd, b.baseAddress, b.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            } }
        }
    }

    /// The first message within `seconds` that `accept` takes.
    func receive(within seconds: Double, _ accept: (DNSMessage) -> Bool) -> DNSMessage? {
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 9000)
        while Date() < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 100) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0, let m = DNSMessage(Array(buffer[0..<n])), accept(m) { return m }
        }
        return nil
    }
}

@Suite("serve --zeroconf: the service announced over mDNS as Wyoming's services are", .serialized)
struct ZeroconfTests {
    static func unique() -> String { "earshot-test-\(getpid())-\(Int.random(in: 0..<1_000_000))" }

    @Test("A PTR question for _wyoming._tcp.local is answered with the instance, its SRV (port, host), empty TXT and A; others are not answered")
    func answers() throws {
        let responder = try ZeroconfResponder(name: "kitchen", port: 10400, addresses: [[192, 0, 2, 7]])
        let query = DNSMessage(id: 7, isResponse: false, questions: [.init(name: "_wyoming._tcp.local", type: 12, unicastResponse: false)])
        // The query as bytes and back (names, types).
        #expect(DNSMessage(query.bytes) == query)
        let read = try #require(DNSMessage(query.bytes))
        let reply = try #require(responder.answer(read, legacy: false))
        let parsed = try #require(DNSMessage(reply.bytes))
        #expect(parsed.isResponse && parsed.id == 0 && parsed.questions.isEmpty)
        #expect(parsed.answers == [.init(name: "_wyoming._tcp.local", type: .ptr, cacheFlush: false, ttl: 4500, data: .ptr("kitchen._wyoming._tcp.local"))])
        #expect(parsed.additional.contains { $0.type == .srv && $0.cacheFlush && $0.data == .srv(priority: 0, weight: 0, port: 10400, target: responder.host) })
        #expect(parsed.additional.contains { $0.name == "kitchen._wyoming._tcp.local" && $0.data == .txt([]) })
        #expect(parsed.additional.contains { $0.name == responder.host && $0.data == .a([192, 0, 2, 7]) && $0.ttl == 120 })
        // A legacy asker: its id and question back, short TTLs, no cache-flush bits.
        let legacy = try #require(responder.answer(query, legacy: true))
        #expect(legacy.id == 7 && legacy.questions == query.questions)
        #expect((legacy.answers + legacy.additional).allSatisfy { $0.ttl == 10 && !$0.cacheFlush })
        // Case does not matter; SRV and A asked alone; another service is not ours.
        let srv = responder.answer(DNSMessage(isResponse: false, questions: [.init(name: "KITCHEN._wyoming._tcp.local", type: 33, unicastResponse: false)]), legacy: false)
        #expect(srv?.answers.map(\.type) == [.srv] && srv?.additional.map(\.type) == [.a])
        #expect(responder.answer(DNSMessage(isResponse: false, questions: [.init(name: "_http._tcp.local", type: 12, unicastResponse: false)]), legacy: false) == nil)
        #expect(responder.answer(DNSMessage(isResponse: true, answers: parsed.answers), legacy: false) == nil)
        // Goodbye: every record with TTL 0.
        #expect(responder.announcement(goodbye: true).answers.allSatisfy { $0.ttl == 0 } && responder.announcement(goodbye: true).answers.count == 4)
        // Bad packets are not messages: a pointer to itself, a label past the end, a short header.
        #expect(DNSMessage([0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xC0, 12, 0, 12, 0, 1]) == nil)
        #expect(DNSMessage([0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 9, 65]) == nil)
        #expect(DNSMessage([0, 0, 0]) == nil)
        #expect(throws: ServeError.self) { try ZeroconfResponder(name: "a.b", port: 10400) }
    }

    @Test("Running: announced at start on 224.0.0.251:5353, a query over UDP answered with the port and name, goodbye (TTL 0) at stop")
    func running() throws {
        let name = Self.unique()
        let listener = try MDNSTestSocket(group: true)
        let responder = try ZeroconfResponder(name: name, port: 10477)
        responder.start()
        let instance = "\(name)._wyoming._tcp.local"
        let announced = listener.receive(within: 5) { $0.isResponse && $0.answers.contains { $0.data == .ptr(instance) } }
        #expect(announced?.answers.contains { $0.name == instance && $0.data == .srv(priority: 0, weight: 0, port: 10477, target: responder.host) } == true)
        #expect(announced?.answers.contains { $0.type == .a && $0.name == responder.host } == true)
        let asker = try MDNSTestSocket(group: false)
        let query = DNSMessage(id: 4242, isResponse: false, questions: [.init(name: "_wyoming._tcp.local", type: 12, unicastResponse: false)])
        var reply: DNSMessage?
        for _ in 0..<3 where reply == nil {
            asker.send(query.bytes, to: "224.0.0.251")
            reply = asker.receive(within: 1) { $0.id == 4242 && $0.answers.contains { $0.data == .ptr(instance) } }
        }
        let answer = try #require(reply)
        #expect(answer.questions == query.questions)
        #expect(answer.additional.contains { $0.name == instance && $0.data == .srv(priority: 0, weight: 0, port: 10477, target: responder.host) })
        #expect(answer.additional.contains { $0.name == responder.host && $0.type == .a })
        responder.stop()
        let goodbye = listener.receive(within: 3) { $0.isResponse && $0.answers.contains { $0.data == .ptr(instance) } && $0.answers.allSatisfy { $0.ttl == 0 } }
        #expect(goodbye != nil)
    }
}
