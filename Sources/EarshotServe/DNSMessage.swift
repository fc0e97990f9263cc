/// DNS messages as multicast DNS uses them (RFC 1035 §4, RFC 6762): the questions of a query
/// read (names with compression pointers), answers written (names uncompressed).
struct DNSMessage: Equatable {
    enum RecordType: UInt16 {
        case a = 1, ptr = 12, txt = 16, aaaa = 28, srv = 33, any = 255
    }

    struct Question: Equatable {
        var name: String
        var type: UInt16
        /// The top bit of the class: the asker wants a unicast answer (QU).
        var unicastResponse: Bool
    }

    struct Record: Equatable {
        var name: String
        var type: RecordType
        /// The top bit of the class (records this host alone owns: SRV, TXT, A).
        var cacheFlush: Bool
        var ttl: UInt32
        var data: RData
    }

    enum RData: Equatable {
        case a([UInt8])
        case ptr(String)
        case srv(priority: UInt16, weight: UInt16, port: UInt16, target: String)
        case txt([String])
    }

    var id: UInt16 = 0
    var isResponse = false
    var questions: [Question] = []
    var answers: [Record] = []
    var additional: [Record] = []

    static let classIN: UInt16 = 1

    // MARK: reading

    /// Reads a message: its header, questions and (for a response) its records; nil when it is
    /// not one (short, a label or pointer out of bounds, a pointer loop).
    init?(_ bytes: [UInt8]) {
        var at = 0
        func u16() -> UInt16? {
            guard at + 2 <= bytes.count else { return nil }
            defer { at += 2 }
            return UInt16(bytes[at]) << 8 | UInt16(bytes[at + 1])
        }
        func u32() -> UInt32? {
            guard let hi = u16(), let lo = u16() else { return nil }
            return UInt32(hi) << 16 | UInt32(lo)
        }
        guard let id = u16(), let flags = u16(), let qd = u16(), let an = u16(), let ns = u16(), let ar = u16() else { return nil }
        self.id = id
        isResponse = flags & 0x8000 != 0
        for _ in 0..<qd {
            guard let name = Self.readName(bytes, &at), let type = u16(), let cls = u16() else { return nil }
            questions.append(Question(name: name, type: type, unicastResponse: cls & 0x8000 != 0))
        }
        for section in 0..<3 {
            for _ in 0..<[an, ns, ar][section] {
                guard let name = Self.readName(bytes, &at), let type = u16(), let cls = u16(), let ttl = u32(), let length = u16(),
                      at + Int(length) <= bytes.count else { return nil }
                let start = at, end = at + Int(length)
                at = end
                guard let known = RecordType(rawValue: type) else { continue }
                var data: RData?
                switch known {
                case .a where length == 4: data = .a(Array(bytes[start..<end]))
                case .ptr:
                    var p = start
                    data = Self.readName(bytes, &p).map { .ptr($0) }
                case .srv where length >= 7:
                    var p = start + 6
                    let word = { (i: Int) in UInt16(bytes[start + i]) << 8 | UInt16(bytes[start + i + 1]) }
                    data = Self.readName(bytes, &p).map { .srv(priority: word(0), weight: word(2), port: word(4), target: $0) }
                case .txt:
                    var strings: [String] = []
                    var p = start
                    while p < end {
                        let n = Int(bytes[p])
                        guard p + 1 + n <= end else { return nil }
                        if n > 0 { strings.append(String(decoding: bytes[(p + 1)..<(p + 1 + n)], as: UTF8.self)) }
                        p += 1 + n
                    }
                    data = .txt(strings)
                default: break
                }
                guard let data else { continue }
                let record = Record(name: name, type: known, cacheFlush: cls & 0x8000 != 0, ttl: ttl, data: data)
                if section == 0 { answers.append(record) } else if section == 2 { additional.append(record) }
            }
        }
    }

    init(id: UInt16 = 0, isResponse: Bool, questions: [Question] = [], answers: [Record] = [], additional: [Record] = []) {
        self.id = id
        self.isResponse = isResponse
        self.questions = questions
        self.answers = answers
        self.additional = additional
    }

    /// A name at `at` (labels, or a pointer to them), dotted, without the root's dot; `at` moves
    /// past it. At most 255 bytes and 32 pointers.
    static func readName(_ bytes: [UInt8], _ at: inout Int) -> String? {
        var labels: [String] = []
        var p = at
        var jumped = false
        var jumps = 0
        var total = 0
        while true {
            guard p < bytes.count else { return nil }
            let n = Int(bytes[p])
            if n == 0 {
                if !jumped { at = p + 1 }
                return labels.joined(separator: ".")
            }
            if n & 0xC0 == 0xC0 {
                guard p + 1 < bytes.count, jumps < 32 else { return nil }
                if !jumped { at = p + 2 }
                jumped = true
                jumps += 1
                p = (n & 0x3F) << 8 | Int(bytes[p + 1])
                continue
            }
            guard n < 64, p + 1 + n <= bytes.count else { return nil }
            total += n + 1
            guard total <= 255 else { return nil }
            labels.append(String(decoding: bytes[(p + 1)..<(p + 1 + n)], as: UTF8.self))
            p += 1 + n
        }
    }

    // MARK: writing

    /// The message's bytes (an authoritative answer when a response).
    var bytes: [UInt8] {
        var out: [UInt8] = []
        func u16(_ v: UInt16) { out += [UInt8(v >> 8), UInt8(v & 0xFF)] }
        u16(id)
        u16(isResponse ? 0x8400 : 0)
        u16(UInt16(questions.count))
        u16(UInt16(answers.count))
        u16(0)
        u16(UInt16(additional.count))
        for q in questions {
            out += Self.name(q.name)
            u16(q.type)
            u16(Self.classIN | (q.unicastResponse ? 0x8000 : 0))
        }
        for r in answers + additional {
            out += Self.name(r.name)
            u16(r.type.rawValue)
            u16(Self.classIN | (r.cacheFlush ? 0x8000 : 0))
            u16(UInt16(r.ttl >> 16))
            u16(UInt16(r.ttl & 0xFFFF))
            var data: [UInt8] = []
            switch r.data {
            case let .a(address): data = address
            case let .ptr(target): data = Self.name(target)
            case let .srv(priority, weight, port, target):
                data = [UInt8(priority >> 8), UInt8(priority & 0xFF), UInt8(weight >> 8), UInt8(weight & 0xFF),
                        UInt8(port >> 8), UInt8(port & 0xFF)] + Self.name(target)
            case let .txt(strings):
                // An empty TXT record holds one empty string (RFC 6763 §6.1).
                for s in strings.isEmpty ? [""] : strings {
                    let b = Array(s.utf8.prefix(255))
                    data += [UInt8(b.count)] + b
                }
            }
            u16(UInt16(data.count))
            out += data
        }
        return out
    }

    /// A dotted name as labels (each at most 63 bytes), ending with the root.
    static func name(_ dotted: String) -> [UInt8] {
        var out: [UInt8] = []
        for label in dotted.split(separator: ".") {
            let b = Array(label.utf8.prefix(63))
            out += [UInt8(b.count)] + b
        }
        return out + [0]
    }
}
