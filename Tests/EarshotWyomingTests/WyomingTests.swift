import EarshotTestSupport
import EarshotWyoming
import Foundation
import Testing

/// The events the PyPI `wyoming` package wrote (tools/wyoming_events_reference.py) and what
/// they hold, from the JSON lines beside them (parsed with Foundation, an independent reader).
private func reference() throws -> (bytes: [UInt8], events: [WyomingEvent]) {
    let folder = Repo.root.appendingPathComponent("Tests/EarshotWyomingTests/Goldens")
    let bytes = [UInt8](try Data(contentsOf: folder.appendingPathComponent("events.bin")))
    let lines = try String(contentsOf: folder.appendingPathComponent("events.json"), encoding: .utf8).split(separator: "\n")
    func value(_ any: Any) -> JSONValue {
        guard let tagged = any as? [Any], let kind = tagged.first as? String else { return .null }
        switch kind {
        case "bool": return .bool(tagged[1] as? Bool ?? false)
        case "number": return .number((tagged[1] as? NSNumber)?.doubleValue ?? .nan)
        case "string": return .string(tagged[1] as? String ?? "")
        case "array": return .array((tagged[1] as? [Any] ?? []).map(value))
        case "object": return .object((tagged[1] as? [String: Any] ?? [:]).mapValues(value))
        default: return .null
        }
    }
    let events = try lines.map { line -> WyomingEvent in
        let o = try JSONSerialization.jsonObject(with: Data(line.utf8), options: [.fragmentsAllowed]) as! [String: Any]
        let data = value(o["data"] as Any).object ?? [:]
        return WyomingEvent(type: o["type"] as! String, data: data, payload: (o["payload"] as! [Int]).map { UInt8($0) })
    }
    return (bytes, events)
}

private func readAll(_ pieces: [[UInt8]], limits: WyomingReader.Limits = .init()) throws -> [WyomingEvent] {
    var reader = WyomingReader(limits: limits)
    var out: [WyomingEvent] = []
    for piece in pieces {
        reader.append(piece)
        while let e = try reader.next() { out.append(e) }
    }
    return out
}

@Suite("Wyoming events and their JSON")
struct WyomingTests {
    @Test("The events the wyoming package writes are read back as it wrote them, fed whole or cut anywhere")
    func readsReference() throws {
        let (bytes, expected) = try reference()
        #expect(expected.count == 9)
        #expect(try readAll([bytes]) == expected)
        // One byte at a time, and cut at random places.
        #expect(try readAll(bytes.map { [$0] }) == expected)
        var random = SeededRandom.fromEnvironment()
        var pieces: [[UInt8]] = []
        var at = 0
        while at < bytes.count {
            let n = min(Int.random(in: 1...300, using: &random), bytes.count - at)
            pieces.append(Array(bytes[at..<(at + n)]))
            at += n
        }
        #expect(try readAll(pieces) == expected, "seed \(random.seed)")
        #expect(expected[3].payload.count == 1280 && expected[3].data["rate"] == 16000)
        #expect(expected[1].data["names"]?.array?[1] == "hey \"jarvis\" éè 😀")
    }

    @Test("Events written here are read by the same reader as they were made, data in the data segment")
    func roundTrip() throws {
        let (_, events) = try reference()
        let bytes = events.flatMap(\.encoded)
        #expect(try readAll([bytes]) == events)
        let first = String(decoding: WyomingEvent(type: "detection", data: ["name": "okay-nabu"]).encoded, as: UTF8.self)
        #expect(first == "{\"data_length\":20,\"type\":\"detection\",\"version\":\"\(WyomingEvent.protocolVersion)\"}\n{\"name\":\"okay-nabu\"}")
    }

    @Test("Data in the header line is merged with the data segment; the segment wins")
    func mergesInlineData() throws {
        let text = "{\"type\":\"x\",\"data\":{\"a\":1,\"b\":2},\"data_length\":8}\n{\"b\":3}\n"
        let events = try readAll([Array(text.utf8)])
        #expect(events.count == 1)
        #expect(events[0].data == ["a": 1, "b": 3])
    }

    @Test("Messages hold the data's members in order, the later of a key winning; as events they equal what next() reads")
    func messages() throws {
        let (bytes, expected) = try reference()
        var reader = WyomingReader()
        var random = SeededRandom.fromEnvironment()
        var messages: [WyomingMessage] = []
        var at = 0
        while at < bytes.count {
            let n = min(Int.random(in: 1...300, using: &random), bytes.count - at)
            reader.append(Array(bytes[at..<(at + n)]))
            at += n
            while let m = try reader.nextMessage() { messages.append(m) }
        }
        #expect(messages.map(\.event) == expected, "seed \(random.seed)")
        for (m, e) in zip(messages, expected) {
            #expect(m.type == e.type && m.payload == e.payload)
            for (key, value) in e.data { #expect(m[key] == value, "\(e.type) \(key)") }
            #expect(m["no such key"] == nil)
        }
        var merged = WyomingReader()
        merged.append(Array("{\"type\":\"x\",\"data\":{\"b\":2},\"data_length\":13}\n{\"b\":3,\"c\":4}".utf8))
        let m = try #require(try merged.nextMessage())
        #expect(m.members.map(\.key) == ["b", "b", "c"] && m.members.map(\.value) == [2, 3, 4])
        #expect(m["b"] == 3 && m.event.data == ["b": 3, "c": 4])
    }

    @Test("An audio chunk in the form clients send is framed in place, to the values nextMessage reads; any other form is left to it")
    func audioChunksInPlace() throws {
        let payload: [UInt8] = [1, 2, 3, 4, 5]
        func event(_ header: String, _ data: String) -> [UInt8] { Array((header + "\n" + data).utf8) + payload }
        func chunk(_ data: String, header: String = "") -> [UInt8] {
            event("{\"type\":\"audio-chunk\"\(header),\"data_length\":\(data.utf8.count),\"payload_length\":5}", data)
        }
        let plain = "{\"rate\":16000,\"width\":2,\"channels\":1,\"timestamp\":120}"
        // Read in place: each equals nextMessage's reading.
        let taken: [[UInt8]] = [
            WyomingEvent(type: "audio-chunk", data: ["rate": 16000, "width": 2, "channels": 1, "timestamp": 120], payload: payload).encoded,
            chunk(plain),
            chunk(" { \"rate\" : 22050 ,\r\n \"width\":4,\t\"channels\": 2 } "),
            chunk("{\"rate\":16000,\"width\":2,\"channels\":1,\"timestamp\":\"soon\"}"),
            chunk("{\"rate\":8000,\"rate\":16000,\"width\":2,\"channels\":1,\"timestamp\":5,\"timestamp\":null}"),
            chunk("{\"rate\":-0,\"width\":0,\"channels\":99,\"on\":true,\"off\":false}"),
            chunk(plain, header: ",\"version\":\"1.10.2\",\"data\":null"),
            event("{\"type\":\"audio-chunk\",\"data_length\":\(plain.utf8.count),\"payload_length\":5,\"type\":\"audio-chunk\"}", plain),
        ]
        for bytes in taken {
            var fast = WyomingReader(), general = WyomingReader()
            fast.append(bytes + WyomingEvent(type: "ping").encoded)
            general.append(bytes)
            let head = try #require(fast.peekAudioChunk(), "\(String(decoding: bytes, as: UTF8.self))")
            let m = try #require(try general.nextMessage())
            #expect(m.type == "audio-chunk")
            #expect(head.rate == m["rate"]?.integer && head.width == m["width"]?.integer && head.channels == m["channels"]?.integer)
            #expect(head.timestamp == m["timestamp"]?.integer)
            #expect(fast.payload(of: head) { Array($0) } == m.payload && head.payloadCount == 5)
            fast.consume(head)
            #expect(try fast.nextMessage()?.type == "ping", "the next event follows")
            #expect(!fast.isMidEvent)
        }
        // Left to nextMessage (nothing consumed): it reads each as it reads every event.
        let left: [[UInt8]] = [
            chunk("{\"rate\":16000,\"width\":2,\"channels\":1,\"timestamp\":1.5}"),
            chunk("{\"rate\":\"16000\",\"width\":2,\"channels\":1}"),
            chunk("{\"rate\":16000,\"width\":2}"),
            chunk("{\"rate\":016000,\"width\":2,\"channels\":1}"),
            chunk("{\"rate\":1600000000000000,\"width\":2,\"channels\":1}"),
            chunk("{\"rate\":160000000000000000000000000000000000,\"width\":2,\"channels\":1}"),
            chunk("{\"rate\":16000,\"width\":2,\"channels\":1,\"timestamp\":-99999999999999999999999999999}"),
            chunk("{\"rate\":16000,\"width\":2,\"channels\":1,\"name\":\"a\\\"b\"}"),
            chunk("{\"rate\":16000,\"width\":2,\"channels\":1,\"name\":\"é\"}"),
            chunk("{\"rate\":16000,\"width\":2,\"channels\":1,\"more\":{}}"),
            chunk("{\"rate\":16000,\"width\":2,\"channels\":1,}"),
            chunk("{\"rate\":16000,\"width\":2,\"channels\":1} x"),
            chunk(plain, header: ",\"data\":{\"rate\":8000}"),
            event("{\"type\":\"audio-start\",\"data_length\":\(plain.utf8.count),\"payload_length\":5}", plain),
            event("{\"type\":\"audio-chunk\",\"data_length\":\(plain.utf8.count),\"payload_length\":-5}", plain),
            Array(chunk(plain).dropLast()),
            Array("{\"type\":\"audio-chunk\",\"data_length\":".utf8),
        ]
        for bytes in left {
            var reader = WyomingReader()
            reader.append(bytes)
            #expect(reader.peekAudioChunk() == nil, "\(String(decoding: bytes, as: UTF8.self))")
            #expect(reader.bufferedBytes == bytes.count)
        }
        // Over the limits: left, and nextMessage says why.
        var small = WyomingReader(limits: .init(dataBytes: 16))
        small.append(chunk(plain))
        #expect(small.peekAudioChunk() == nil)
        #expect(throws: WyomingError.tooLarge(field: "data_length", length: "\(plain.utf8.count)", limit: 16)) { try small.nextMessage() }
        // An event that arrives in pieces is read in place once whole.
        var pieces = WyomingReader()
        let whole = chunk(plain)
        pieces.append(Array(whole.prefix(30)))
        #expect(pieces.peekAudioChunk() == nil)
        pieces.append(Array(whole.dropFirst(30)))
        #expect(pieces.peekAudioChunk()?.timestamp == 120)
    }

    @Test("Audio chunks damaged at random: read in place to what nextMessage reads, or left to it; never a trap")
    func damagedAudioChunks() throws {
        var random = SeededRandom.fromEnvironment()
        let whole = WyomingEvent(type: "audio-chunk", data: ["rate": 16000, "width": 2, "channels": 1, "timestamp": 1234567],
                                 payload: [1, 2, 3, 4]).encoded
        let alphabet = Array("0123456789-.eE{}[],:\" \\tnulrfa\n".utf8)
        var inPlace = 0
        for _ in 0..<3000 {
            var bytes = whole
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let at = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<3, using: &random) {
                case 0: bytes[at] = alphabet.randomElement(using: &random)!
                case 1: bytes.insert(contentsOf: (0..<Int.random(in: 1...40, using: &random)).map { _ in UInt8(ascii: "9") }, at: at)
                default: bytes.remove(at: at)
                }
            }
            var fast = WyomingReader(), general = WyomingReader()
            fast.append(bytes)
            general.append(bytes)
            guard let head = fast.peekAudioChunk() else { continue }
            inPlace += 1
            let m = try #require(try general.nextMessage(), "seed \(random.seed)")
            #expect(m.type == "audio-chunk" && head.rate == m["rate"]?.integer && head.width == m["width"]?.integer
                    && head.channels == m["channels"]?.integer && head.timestamp == m["timestamp"]?.integer, "seed \(random.seed)")
            #expect(fast.payload(of: head) { Array($0) } == m.payload, "seed \(random.seed)")
        }
        #expect(inPlace > 100, "some damage leaves a chunk that reads in place (seed \(random.seed))")
    }

    @Test("Malformed and oversized events are typed errors that say what is wrong")
    func errors() throws {
        func firstError(_ text: String, limits: WyomingReader.Limits = .init()) -> WyomingError? {
            do { _ = try readAll([Array(text.utf8)], limits: limits); return nil } catch { return error as? WyomingError }
        }
        #expect(firstError("{\"type\": \"x\"\n") == .malformedHeader(JSONError(offset: 12, reason: "',' or '}' expected in an object")))
        #expect(firstError("[1,2]\n") == .headerNotAnObject)
        #expect(firstError("{\"data\": {}}\n") == .missingType)
        #expect(firstError("{\"type\": 5}\n") == .missingType)
        #expect(firstError("{\"type\": \"x\", \"payload_length\": -4}\n") == .badLength(field: "payload_length", value: "-4"))
        #expect(firstError("{\"type\": \"x\", \"payload_length\": 1.5}\n") == .badLength(field: "payload_length", value: "1.5"))
        #expect(firstError("{\"type\": \"x\", \"payload_length\": 2000000}\n") == .tooLarge(field: "payload_length", length: "2000000", limit: 1 << 20))
        #expect(firstError("{\"type\": \"x\", \"data_length\": 3}\nabc") == .malformedData(JSONError(offset: 0, reason: "unexpected character 'a'")))
        #expect(firstError("{\"type\": \"x\", \"data_length\": 2}\n[]") == .dataNotAnObject)
        #expect(firstError("{\"type\": \"x\", \"data\": 7}\n") == .dataNotAnObject)
        // A header line with no end is refused once it is over the limit, not buffered forever.
        let long = "{\"type\": \"" + String(repeating: "a", count: 300)
        #expect(firstError(long, limits: .init(headerBytes: 256)) == .headerTooLong(limit: 256))
        #expect(firstError("{\"type\":\"x\"}", limits: .init(headerBytes: 256)) == nil)
        #expect(WyomingError.tooLarge(field: "payload_length", length: "5", limit: 4).description
                == "an event's payload_length is 5 bytes, over the limit of 4")
        // A whole number past 2^53, even past Int, is a length over the limit, not "not an integer".
        #expect(firstError("{\"type\": \"x\", \"payload_length\": 4611686018427387904}\n")
                == .tooLarge(field: "payload_length", length: "4611686018427387904", limit: 1 << 20))
        #expect(firstError("{\"type\": \"x\", \"data_length\": 1e300}\n") == .tooLarge(field: "data_length", length: "1e+300", limit: 1 << 20))
        // A number beyond a double is refused quoting its text (it was once shown as null).
        #expect(firstError("{\"type\": \"x\", \"payload_length\": 1e400}\n")
                == .malformedHeader(JSONError(offset: 32, reason: "the number 1e400 is out of range (beyond ±1.8e308)")))
        #expect(WyomingError.malformedHeader(JSONError(offset: 32, reason: "the number 1e400 is out of range (beyond ±1.8e308)")).description
                == "an event header is not JSON: the number 1e400 is out of range (beyond ±1.8e308) at byte 32")
    }

    @Test("JSON: values, escapes, numbers and every kind of malformed text")
    func json() throws {
        let v = try JSONValue.parse(" {\"a\": [1, -2.5e3, true, false, null, \"\\u00e9\\ud83d\\ude00\\n\\\"\"], \"b\": {}} ")
        #expect(v == ["a": [1, -2500, true, false, nil, "é😀\n\""], "b": .object([:])])
        #expect(v.serialized == "{\"a\":[1,-2500,true,false,null,\"é😀\\n\\\"\"],\"b\":{}}")
        #expect(try JSONValue.parse(v.serialized) == v)
        #expect(JSONValue.string("\u{01}\t").serialized == "\"\\u0001\\t\"")
        #expect(JSONValue.number(.nan).serialized == "null")
        #expect(JSONValue.number(0.1).serialized == "0.1")
        #expect(JSONValue.number(16000).integer == 16000 && JSONValue.number(1.5).integer == nil)
        let bad: [(String, JSONError)] = [
            ("", JSONError(offset: 0, reason: "the text ends where a value should be")),
            ("{\"a\" 1}", JSONError(offset: 5, reason: "':' expected after an object key")),
            ("[1,]", JSONError(offset: 3, reason: "unexpected character ']'")),
            ("01", JSONError(offset: 1, reason: "text after the value")),
            ("-", JSONError(offset: 1, reason: "a number needs digits")),
            ("1.", JSONError(offset: 2, reason: "digits expected after '.'")),
            ("\"abc", JSONError(offset: 4, reason: "the text ends inside a string")),
            ("\"\\x\"", JSONError(offset: 3, reason: "unknown escape")),
            ("\"\\ud800\"", JSONError(offset: 7, reason: "a lone surrogate in a \\u escape")),
            ("\"a\u{01}\"", JSONError(offset: 2, reason: "a control character inside a string")),
            ("tru", JSONError(offset: 0, reason: "the text ends inside a literal")),
            ("nul!", JSONError(offset: 0, reason: "unknown literal")),
            (String(repeating: "[", count: 100), JSONError(offset: 64, reason: "nested deeper than 64")),
            ("[1e400]", JSONError(offset: 1, reason: "the number 1e400 is out of range (beyond ±1.8e308)")),
            ("-1E+999", JSONError(offset: 0, reason: "the number -1E+999 is out of range (beyond ±1.8e308)")),
            ("1" + String(repeating: "0", count: 400),
             JSONError(offset: 0, reason: "the number 1000000000000000000000000000000000000000… (401 characters) is out of range (beyond ±1.8e308)")),
        ]
        for (text, error) in bad {
            #expect(throws: error, "\(text)") { try JSONValue.parse(text) }
            #expect(throws: error, "\(text)") { try Array(text.utf8).withUnsafeBytes { raw in try JSONValue.parseMembers(raw) } }
        }
        // An object's members in order, duplicates kept; other values are not objects.
        func members(_ text: String) throws -> [(key: String, value: JSONValue)]? {
            try Array(text.utf8).withUnsafeBytes { raw in try JSONValue.parseMembers(raw) }
        }
        let listed = try #require(try members(" {\"z\": 1, \"a\": {\"n\": [null]}, \"z\": \"two\"} "))
        #expect(listed.map(\.key) == ["z", "a", "z"] && listed.map(\.value) == [1, ["n": [nil]], "two"])
        #expect(try members("{}")?.isEmpty == true)
        #expect(try members("[1]") == nil && members(" 7 ") == nil && members("\"{\"") == nil)
        #expect(throws: JSONError(offset: 3, reason: "text after the value")) { try members("{} x") }
        let deep = "{\"a\":" + String(repeating: "[", count: 100)
        #expect(throws: JSONError(offset: 68, reason: "nested deeper than 64")) { try members(deep) }
        #expect(throws: JSONError(offset: 68, reason: "nested deeper than 64")) { try JSONValue.parse(deep) }
        // Invalid UTF-8 inside a string.
        #expect(throws: JSONError(offset: 1, reason: "a string is not valid UTF-8")) { try JSONValue.parse([0x22, 0xFF, 0x22]) }
    }
}
