import EarshotCommandTestSupport
import EarshotTestSupport
import EarshotFeatures
import EarshotWyoming
import Foundation
import Testing

@testable import Earshot
@testable import EarshotServe

#if canImport(Glibc)
import Glibc
#endif

/// A Wyoming client over loopback, with blocking sockets and a deadline on every read.
final class WyomingTestClient {
    let fd: Int32
    private var reader = WyomingReader()

    init(port: Int) throws {
        fd = try Sockets.connect(.tcp(host: "127.0.0.1", port: port))
    }

    init(unixPath path: String) throws {
        fd = try Sockets.connect(.unix(path: path))
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) {
        var at = 0
        while at < bytes.count {
            let n = bytes[at...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            at += n
        }
    }

    func send(_ event: WyomingEvent) { send(event.encoded) }

    func send(_ type: String, _ data: [String: JSONValue] = [:], payload: [UInt8] = []) {
        send(WyomingEvent(type: type, data: data, payload: payload))
    }

    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Whether the server has dropped the connection without this client reading: a send fails
    /// (the peer reset it) within `seconds`.
    func sendsFail(seconds: Double = 10) -> Bool {
        let ping = WyomingEvent(type: "ping").encoded
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let n = ping.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
            if n < 0 && errno != EAGAIN && errno != EWOULDBLOCK { return true }
            usleep(10_000)
        }
        return false
    }

    /// The next event; nil at the end of the connection or after `seconds` without one.
    func next(seconds: Double = 20) throws -> WyomingEvent? {
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let e = try reader.next() { return e }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32(left * 1000) + 1) > 0 else { return nil }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return nil }
            buffer.withUnsafeBytes { reader.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
    }

    /// Events until one of `types` (included) or the end of the connection.
    func events(until types: Set<String>, seconds: Double = 60) throws -> [WyomingEvent] {
        var out: [WyomingEvent] = []
        while let e = try next(seconds: seconds) {
            out.append(e)
            if types.contains(e.type) { break }
        }
        return out
    }

    /// Whether the server has closed the connection (within `seconds`), after any events.
    func isClosed(seconds: Double = 10) throws -> Bool {
        while let _ = try next(seconds: seconds) {}
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, 0) > 0 else { return false }
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) == 0
    }
}

/// Audio as a client sends it: 16-bit little-endian PCM (the samples come from 16-bit files,
/// so the round trip is exact).
func pcm16(_ samples: [Float]) -> [UInt8] {
    var out = [UInt8]()
    out.reserveCapacity(samples.count * 2)
    for s in samples {
        let v = Int16(max(-32768, min(32767, (s * 32768).rounded())))
        out.append(UInt8(truncatingIfNeeded: v))
        out.append(UInt8(truncatingIfNeeded: v >> 8))
    }
    return out
}

/// An answer compared by what a client reads: its type, name and timestamp.
struct Answer: Equatable, CustomStringConvertible {
    var type: String
    var name: String?
    var timestamp: Int?
    var description: String { "\(type)(\(name ?? "-"), \(timestamp.map(String.init) ?? "-"))" }

    init(type: String, name: String? = nil, timestamp: Int? = nil) {
        self.type = type
        self.name = name
        self.timestamp = timestamp
    }

    init(_ e: WyomingEvent) {
        self.init(type: e.type, name: e.data["name"]?.string, timestamp: e.data["timestamp"]?.integer)
    }
}

enum Serving {
    static let okayNabu = try! Model(contentsOf: Repo.root.appendingPathComponent("Models/okay-nabu"))
    static let wakeWords = try! AudioFile.readMono(path: Repo.path("Tests/EarshotTests/Goldens/microwakeword/wake-words.wav")).samples

    /// A server on a free loopback port, running on its own thread until `stop`; `wait()`
    /// for its summary.
    static func start(_ models: [Model], options: ServeOptions = ServeOptions()) throws -> (WyomingServer, Int) {
        let server = try WyomingServer(uri: .tcp(host: "127.0.0.1", port: 0), models: models.map { ServedModel(model: $0) }, options: options)
        guard case let .tcp(_, port) = server.address else { throw ServeError.noModels }
        server.start()
        return (server, port)
    }

    /// What `earshot label` finds in `samples` with each model, as the answers a client should
    /// read: a detection at the timestamp of the chunk (of `chunkMs`, timestamps from 0) that
    /// holds the sample deciding it; a voice segment as voice-started / voice-stopped at its
    /// bounds in ms.
    static func expected(_ samples: [Float], rate: Int, models: [Model], chunkMs: Int = 20) async throws -> (wake: [Answer], voice: [Answer]) {
        var wake: [Answer] = [], voice: [Answer] = []
        for model in models {
            let stream = try StreamClassifier(model: model, sourceSampleRate: rate)
            let events = try await stream.process(samples) + stream.finish()
            let chunk = max(1, rate * chunkMs / 1000)
            for e in events {
                switch e {
                case let .detected(d):
                    let index = min((d.sample - 1) / chunk, (samples.count - 1) / chunk)
                    wake.append(Answer(type: "detection", name: model.name, timestamp: index * chunkMs))
                case let .started(s): voice.append(Answer(type: "voice-started", timestamp: Int((s.startSeconds * 1000).rounded())))
                case let .ended(s): voice.append(Answer(type: "voice-stopped", timestamp: Int((s.endSeconds * 1000).rounded())))
                default: break
                }
            }
        }
        return (wake, voice)
    }

    /// Streams `samples` as a client does: audio-start, chunks of `chunkMs` with timestamps,
    /// audio-stop; the answers to all of it (a ping after audio-stop is answered after them).
    static func stream(_ client: WyomingTestClient, _ bytes: [UInt8], rate: Int, width: Int = 2, channels: Int = 1, chunkMs: Int = 20,
                       names: [String]? = nil) throws -> [WyomingEvent] {
        if let names { client.send("detect", ["names": .array(names.map(JSONValue.string))]) }
        let format: [String: JSONValue] = ["rate": .number(Double(rate)), "width": .number(Double(width)), "channels": .number(Double(channels))]
        client.send("audio-start", format.merging(["timestamp": 0]) { a, _ in a })
        let frame = width * channels, chunk = rate * chunkMs / 1000 * frame
        var at = 0, index = 0
        while at < bytes.count {
            let n = min(chunk, bytes.count - at)
            client.send("audio-chunk", format.merging(["timestamp": .number(Double(index * chunkMs))]) { a, _ in a }, payload: Array(bytes[at..<(at + n)]))
            at += n
            index += 1
        }
        client.send("audio-stop", ["timestamp": .number(Double(index * chunkMs))])
        client.send("ping")
        return try client.events(until: ["pong"]).filter { $0.type != "pong" }
    }

    static func split(_ events: [WyomingEvent]) -> (wake: [Answer], voice: [Answer]) {
        let answers = events.map(Answer.init)
        return (answers.filter { $0.type == "detection" }, answers.filter { $0.type.hasPrefix("voice-") })
    }
}

@Suite("Wyoming audio decoding")
struct WyomingAudioTests {
    @Test("Chunks split inside frames decode, appended to a buffer that already holds samples, to the whole audio decoded at once")
    func splitChunksAppend() {
        // 24-bit stereo: frames of 6 bytes; a frame's mono sample is the mean of its two channels.
        let format = WyomingAudioFormat(rate: 16000, width: 3, channels: 2)
        let values: [Int32] = [0, 1, -1, 8_388_607, -8_388_608, 4_194_304, -123_456, 77, 3, -3, 1 << 20, -(1 << 20)]
        var bytes: [UInt8] = []
        for v in values { for b in 0..<3 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * b))) } }
        let expected = stride(from: 0, to: values.count, by: 2).map { Float(Int64(values[$0]) + Int64(values[$0 + 1])) / (8_388_608 * 2) }

        var whole: [Float] = [], carry: [UInt8] = []
        format.decode(bytes, carry: &carry, appendingTo: &whole)
        #expect(whole == expected && carry.isEmpty)

        // Already-held samples stay first; pieces of 5, 7, 1 and the rest bytes cut frames apart.
        var buffer: [Float] = [0.25, -0.5]
        carry = []
        var at = 0
        for size in [5, 7, 1, bytes.count - 13] {
            format.decode(Array(bytes[at..<(at + size)]), carry: &carry, appendingTo: &buffer)
            at += size
        }
        #expect(buffer == [0.25, -0.5] + expected && carry.isEmpty)
    }
}

@Suite("A client's timeouts")
struct ClientClocksTests {
    @Test("A client the server holds back (its audio ahead of the model) is not timed out for it: both clocks stop while it is paused and restart when it is read again")
    func pausedClientsAreNotTimedOut() {
        let t0 = ContinuousClock.now
        func at(_ s: Double) -> ContinuousClock.Instant { t0 + .seconds(s) }
        // Mid-event and read: the event timeout (0.5 s) passes, then the idle timeout (1.5 s).
        var read = ClientClocks(lastReceived: t0)
        read.received(at: t0, midEvent: true, completed: false)
        #expect(read.expired(at: at(0.4), eventTimeout: 0.5, idleTimeout: 1.5) == nil)
        #expect(read.expired(at: at(0.6), eventTimeout: 0.5, idleTimeout: 1.5) == .event)
        read.received(at: at(0.3), midEvent: false, completed: true)
        #expect(read.expired(at: at(1.7), eventTimeout: 0.5, idleTimeout: 1.5) == nil)
        #expect(read.expired(at: at(1.9), eventTimeout: 0.5, idleTimeout: 1.5) == .idle)
        // More bytes of the same event do not restart its clock; completing one and starting the next does.
        read.received(at: at(2), midEvent: true, completed: false)
        read.received(at: at(2.4), midEvent: true, completed: false)
        #expect(read.expired(at: at(2.6), eventTimeout: 0.5, idleTimeout: 1.5) == .event)
        read.received(at: at(2.4), midEvent: true, completed: true)
        #expect(read.expired(at: at(2.6), eventTimeout: 0.5, idleTimeout: 1.5) == nil)

        // Paused mid-event for 10 s: nothing expires; read again, it has its whole limits anew.
        var held = ClientClocks(lastReceived: t0)
        held.received(at: t0, midEvent: true, completed: false)
        held.pause()
        #expect(held.expired(at: at(10), eventTimeout: 0.5, idleTimeout: 1.5) == nil)
        held.resume(at: at(10))
        #expect(held.expired(at: at(10.4), eventTimeout: 0.5, idleTimeout: 1.5) == nil)
        #expect(held.expired(at: at(10.6), eventTimeout: 0.5, idleTimeout: 1.5) == .event)
        // Paused between events: the idle clock restarts the same way.
        var between = ClientClocks(lastReceived: t0)
        between.received(at: t0, midEvent: false, completed: true)
        between.pause()
        #expect(between.expired(at: at(10), eventTimeout: 0.5, idleTimeout: 1.5) == nil)
        between.resume(at: at(10))
        #expect(between.expired(at: at(11.4), eventTimeout: 0.5, idleTimeout: 1.5) == nil)
        #expect(between.expired(at: at(11.6), eventTimeout: 0.5, idleTimeout: 1.5) == .idle)
    }
}

@Suite("The service's shards")
struct ServeShardTests {
    @Test("Streams fill one shard per core first, then one more shard for each 256 streams; one that leaves frees its place")
    func shardsOpenAsStreamsCome() throws {
        let model = try Model(contentsOf: Repo.root.appendingPathComponent("Models/silero-vad"))
        let engine = ServeEngine(models: [ServedModel(model: model)], shards: 8, cores: 2)
        var joined: [(shard: Int, channels: [Int?])] = []
        func counts() -> [Int] { engine.shards.map(\.streams) }
        for n in 0..<2000 {
            joined.append(try engine.join(stream: UInt64(n), rate: 16000, wanted: [true]))
            if n == 499 { #expect(counts() == [250, 250, 0, 0, 0, 0, 0, 0]) }
            if n == 999 { #expect(counts() == [256, 256, 256, 232, 0, 0, 0, 0]) }
        }
        #expect(counts() == [256, 256, 256, 256, 256, 256, 256, 208])
        // A stream that leaves frees its place; the next goes to the least loaded shard in use.
        let first = joined[0]
        engine.leave(shard: first.shard, channels: first.channels)
        #expect(counts() == [255, 256, 256, 256, 256, 256, 256, 208])
        #expect(try engine.join(stream: 5000, rate: 16000, wanted: [true]).shard == 7)
        // One shard: every stream on it.
        let single = ServeEngine(models: [ServedModel(model: model)], shards: 1, cores: 2)
        for n in 0..<300 { _ = try single.join(stream: UInt64(n), rate: 16000, wanted: [true]) }
        #expect(single.shards.map(\.streams) == [300])
    }
}

@Suite("earshot serve: the Wyoming service", .serialized)
struct ServeTests {
    @Test("describe → info: the wake words with their phrases, languages and authors; the voice activity model")
    func info() async throws {
        let (server, port) = try Serving.start([Serving.okayNabu, Fixtures.model])
        let client = try WyomingTestClient(port: port)
        client.send("describe")
        let info = try #require(try client.next())
        server.stop()
        _ = server.wait()
        #expect(info.type == "info")
        let wake = try #require(info.data["wake"]?.array?.first)
        #expect(wake["name"] == "earshot" && wake["installed"] == true)
        let models = try #require(wake["models"]?.array)
        #expect(models.count == 1)
        #expect(models[0]["name"] == "okay-nabu" && models[0]["phrase"] == "Okay Nabu" && models[0]["description"] == "Okay Nabu")
        #expect(models[0]["languages"] == ["en", "nl", "fr", "de", "it", "es", "sv"])
        #expect(models[0]["attribution"] == ["name": "Kevin Ahrendt", "url": "https://www.kevinahrendt.com/"])
        #expect(models[0]["installed"] == true)
        #expect(info.data["vad"]?.array?.first?["models"]?.array?.first?["name"] == "silero-vad")
        for key in ["asr", "tts", "handle", "intent", "mic", "snd"] { #expect(info.data[key] == []) }
    }

    @Test("A sound-events model answers each event as sound-event (label, both names, bounds in ms, mean and best score, windows), as label finds them; info lists it under sound_events, naming the event; a wake word beside it is answered as before")
    func soundEvents() async throws {
        let tones = try Model(contentsOf: Repo.root.appendingPathComponent("Tests/Fixtures/tone-events"))
        let (server, port) = try Serving.start([Serving.okayNabu, tones])
        defer { server.stop() }
        let client = try WyomingTestClient(port: port)
        client.send("describe")
        let info = try #require(try client.next())
        let program = try #require(info.data["sound_events"]?.array?.first)
        #expect(program["events"] == ["sound-event"] && program["models"]?.array?.map { $0["name"] } == ["tone-events"])
        #expect(info.data["wake"]?.array?.first?["models"]?.array?.count == 1 && info.data["vad"] == nil)
        // The tones at 8 kHz, in 20 ms chunks: an answer per event, at its end.
        let (samples, rate) = try AudioFile.readMono(path: Repo.path("Tests/EarshotTests/Goldens/sound-events/tones.wav"))
        let stream = try StreamClassifier(model: tones, sourceSampleRate: rate)
        let expected = (try await stream.process(samples) + (try await stream.finish())).compactMap { e -> Segment? in
            if case let .ended(s) = e { return s } else { return nil }
        }
        #expect(expected.count == 10)
        let served = try Serving.stream(client, pcm16(samples), rate: rate)
        let events = served.filter { $0.type == "sound-event" }
        #expect(events.count == expected.count && served.allSatisfy { ["sound-event", "not-detected"].contains($0.type) }, "\(served.map(\.type))")
        for (e, s) in zip(events, expected) {
            let names = s.label.split(separator: "_").map(String.init)
            #expect(e.data["name"] == "tone-events" && e.data["label"]?.string == s.label)
            #expect(e.data["scientific"]?.string == names[0] && e.data["common"]?.string == names[1])
            #expect(e.data["start"]?.integer == Int((s.startSeconds * 1000).rounded()) && e.data["end"]?.integer == Int((s.endSeconds * 1000).rounded()), "\(e.data) \(s)")
            #expect(e.data["score"]?.number == Double(s.confidence) && e.data["best"]?.number == Double(s.best ?? -1) && e.data["windows"]?.integer == s.windows, "\(e.data) \(s)")
        }
        // The wake word heard nothing in tones, and says so as Home Assistant expects.
        #expect(served.last?.type == "not-detected")
    }

    @Test("A served stream's answers equal earshot label on the same audio: 16 kHz, 44.1 kHz, stereo, 24-bit, odd chunk sizes")
    func servedEqualsLabel() async throws {
        let models = [Serving.okayNabu, Fixtures.model]
        let (server, port) = try Serving.start(models)
        defer { server.stop() }
        // The wake-word corpus at 16 kHz, in 20 ms chunks.
        let audio = Serving.wakeWords
        let expected = try await Serving.expected(audio, rate: 16000, models: models)
        #expect(expected.wake.count >= 2 && expected.voice.count >= 4)
        let client = try WyomingTestClient(port: port)
        let served = try Serving.stream(client, pcm16(audio), rate: 16000)
        #expect(Serving.split(served).wake == expected.wake)
        #expect(Serving.split(served).voice == expected.voice)
        #expect(!served.contains { $0.type == "not-detected" || $0.type == "error" })
        // audio-start after audio-stop: a fresh stream, the same answers again.
        let again = try Serving.stream(client, pcm16(audio), rate: 16000)
        #expect(Serving.split(again) == Serving.split(served))

        // 44.1 kHz (resampled); the same audio in 24-bit, and as two identical channels.
        let (speech, rate) = try Fixtures.audio("speech-44k.wav")
        let slow = try await Serving.expected(speech, rate: rate, models: [Fixtures.model])
        #expect(slow.voice.count >= 4)
        let s16 = pcm16(speech)
        #expect(Serving.split(try Serving.stream(client, s16, rate: rate, names: ["okay-nabu"])).voice == slow.voice)
        var s24: [UInt8] = [], stereo: [UInt8] = []
        for i in stride(from: 0, to: s16.count, by: 2) {
            s24 += [0, s16[i], s16[i + 1]]
            stereo += [s16[i], s16[i + 1], s16[i], s16[i + 1]]
        }
        #expect(Serving.split(try Serving.stream(client, s24, rate: rate, width: 3)).voice == slow.voice)
        #expect(Serving.split(try Serving.stream(client, stereo, rate: rate, channels: 2)).voice == slow.voice)
        // Chunks of an odd number of bytes: frames split across chunks are joined, nothing lost.
        let oddClient = try WyomingTestClient(port: port)
        oddClient.send("audio-start", ["rate": 16000, "width": 2, "channels": 1])
        let bytes = pcm16(Array(audio[0..<80000]))
        var at = 0
        var random = SeededRandom.fromEnvironment()
        while at < bytes.count {
            let n = min(2 * Int.random(in: 1...500, using: &random) + 1, bytes.count - at)
            oddClient.send("audio-chunk", ["rate": 16000, "width": 2, "channels": 1], payload: Array(bytes[at..<(at + n)]))
            at += n
        }
        oddClient.send("audio-stop")
        oddClient.send("ping")
        let odd = try oddClient.events(until: ["pong"])
        let whole = try await Serving.expected(Array(audio[0..<80000]), rate: 16000, models: models, chunkMs: 0)
        #expect(Serving.split(odd).voice == whole.voice, "seed \(random.seed)")
        #expect(Serving.split(odd).wake.map(\.name) == whole.wake.map(\.name) && !whole.wake.isEmpty)
        server.stop()
        let summary = server.wait()
        #expect(summary.streamsFinished == 6 && summary.droppedChunks == 0 && summary.closedByServer == 0)
    }

    @Test("detect names the wake words: only they are run and answered; an unknown name is an error")
    func detectNames() async throws {
        let jarvis = try Model(contentsOf: Repo.root.appendingPathComponent("Models/hey-jarvis"))
        let (server, port) = try Serving.start([Serving.okayNabu, jarvis])
        let client = try WyomingTestClient(port: port)
        let audio = pcm16(Serving.wakeWords)
        let nabu = try Serving.stream(client, audio, rate: 16000, names: ["Okay-Nabu"])
        #expect(!nabu.isEmpty && nabu.allSatisfy { $0.type == "detection" && $0["name"] == "okay-nabu" })
        // hey-jarvis finds nothing in this corpus: not-detected after audio-stop.
        let heyJarvis = try Serving.stream(client, audio, rate: 16000, names: ["hey-jarvis"])
        #expect(heyJarvis.map(\.type) == ["not-detected"])
        client.send("detect", ["names": ["hey-siri"]])
        let error = try #require(try client.next())
        #expect(error.type == "error" && error["code"] == "detect")
        #expect(error["text"]?.string == "detect: no wake word hey-siri here; this service has okay-nabu, hey-jarvis; listening for all of them")
        server.stop()
        _ = server.wait()
    }

    @Test("detect with an empty list or names the service lacks still gets its verdict: every wake word listens (as wyoming-openwakeword does), known names alone when some are")
    func detectEmptyOrUnknownNames() async throws {
        let jarvis = try Model(contentsOf: Repo.root.appendingPathComponent("Models/hey-jarvis"))
        let (server, port) = try Serving.start([Serving.okayNabu, jarvis])
        let client = try WyomingTestClient(port: port)
        let audio = pcm16(Serving.wakeWords)
        let all = try Serving.stream(client, audio, rate: 16000)
        #expect(!all.isEmpty && all.allSatisfy { $0.type == "detection" && $0["name"] == "okay-nabu" })
        // names: [] is no names: every wake word, the same answers.
        #expect(try Serving.stream(client, audio, rate: 16000, names: []).map(Answer.init) == all.map(Answer.init))
        // Only a name the service lacks: the client is told, then every wake word listens.
        let unknown = try Serving.stream(client, audio, rate: 16000, names: ["hey-siri"])
        #expect(unknown.first?.type == "error" && unknown.first?["code"] == "detect")
        #expect(unknown.dropFirst().map(Answer.init) == all.map(Answer.init))
        // A known and an unknown name: the known one alone, and audio-stop answers not-detected.
        let mixed = try Serving.stream(client, audio, rate: 16000, names: ["hey-siri", "hey-jarvis"])
        #expect(mixed.map(\.type) == ["error", "not-detected"])
        #expect(mixed.first?["text"]?.string == "detect: no wake word hey-siri here; this service has okay-nabu, hey-jarvis; listening for hey-jarvis")
        // Silence after an empty list: not-detected.
        let silence = pcm16([Float](repeating: 0, count: 16000))
        #expect(try Serving.stream(client, silence, rate: 16000, names: []).map(\.type) == ["not-detected"])
        server.stop()
        _ = server.wait()
    }

    @Test("100 concurrent clients, their chunks interleaved, read as they arrive and read in batches: each client's answers equal its audio run alone",
          arguments: [false, true])
    func concurrentClients(batched: Bool) async throws {
        var options = ServeOptions()
        if batched { options.readBatchClients = 1 }
        // This process writes every client's events in turn; on a loaded machine one of them may
        // stay half-sent for longer than the default event timeout, which is another test's subject.
        options.eventTimeout = 600
        let (server, port) = try Serving.start([Fixtures.model], options: options)
        let (speech, _) = try Fixtures.audio("speech-noise-16k.wav")
        let n = 100, seconds = 6
        let audios = (0..<n).map { k in Array(speech[(k * 3001 % (speech.count - seconds * 16000))...].prefix(seconds * 16000)) }
        let clients = try (0..<n).map { _ in try WyomingTestClient(port: port) }
        let format: [String: JSONValue] = ["rate": 16000, "width": 2, "channels": 1]
        for c in clients { c.send("audio-start", format) }
        let bytes = audios.map(pcm16)
        // Round robin, each client's chunk size its own.
        var offsets = Array(repeating: 0, count: n)
        while offsets.enumerated().contains(where: { $0.element < bytes[$0.offset].count }) {
            for k in 0..<n where offsets[k] < bytes[k].count {
                let size = min(320 * (1 + k % 7), bytes[k].count - offsets[k])
                let payload = Array(bytes[k][offsets[k]..<(offsets[k] + size)])
                if k % 3 == 0 {
                    // The format in the header line: read the general way, not in place.
                    clients[k].send(Array("{\"type\":\"audio-chunk\",\"data\":{\"rate\":16000,\"width\":2,\"channels\":1},\"payload_length\":\(size)}\n".utf8) + payload)
                } else {
                    clients[k].send("audio-chunk", format, payload: payload)
                }
                offsets[k] += size
            }
        }
        for c in clients { c.send("audio-stop") }
        var matched = 0
        for k in 0..<n {
            var got: [Answer] = []
            // The last answer of a stream is its last voice-stopped (VAD only: no not-detected).
            let expected = try await Serving.expected(audios[k], rate: 16000, models: [Fixtures.model]).voice
            while got.count < expected.count, let e = try clients[k].next(seconds: 30) { got.append(Answer(e)) }
            if got == expected { matched += 1 } else { Issue.record("client \(k): \(got) != \(expected)") }
        }
        #expect(matched == n)
        server.stop()
        let summary = server.wait()
        #expect(summary.peakClients == n && summary.streamsFinished == n)
        // Batched: the clients were read on the batch timer (every 10 ms, a group of four at a
        // time, over the seconds the test runs); otherwise only as their data came.
        if batched { #expect(summary.batchedReads >= 20, "\(summary.batchedReads) batched reads") } else { #expect(summary.batchedReads == 0) }
    }

    @Test("Bad input: each gets its answer, and the server and the other clients go on")
    func badInput() async throws {
        var options = ServeOptions()
        options.eventTimeout = 1
        options.idleTimeout = 3
        options.maxClients = 6
        options.maxOutputBytes = 4096
        options.limits.payloadBytes = 100_000
        let (server, port) = try Serving.start([Fixtures.model], options: options)
        func code(_ e: WyomingEvent?) -> String? { e?["code"]?.string }

        // Over --max-clients: one more than the limit is refused with an error.
        var full: [WyomingTestClient] = []
        for _ in 0..<6 { full.append(try WyomingTestClient(port: port)) }
        for c in full { c.send("ping"); #expect(try c.next(seconds: 5)?.type == "pong") }
        let refused = try WyomingTestClient(port: port)
        let refusal = try refused.next(seconds: 5)
        #expect(code(refusal) == "too-many-clients")
        #expect(refusal?["text"] == "the server has 6 clients, its limit (--max-clients)")
        #expect(try refused.isClosed())
        full.removeAll()
        try await Task.sleep(for: .milliseconds(300))  // the server sees the six go

        // Malformed JSON: an error, then the connection is closed.
        let a = try WyomingTestClient(port: port)
        a.send(Array("{\"type\": \"describe\",,}\n".utf8))
        let aError = try a.next()
        #expect(aError?.type == "error" && code(aError) == "protocol")
        #expect(aError?["text"]?.string?.hasPrefix("an event header is not JSON") == true)
        #expect(try a.isClosed())

        // Unknown events are ignored; an audio-chunk before audio-start is an error once; the
        // connection goes on.
        let b = try WyomingTestClient(port: port)
        b.send("transcribe", ["text": "hello"])
        b.send("audio-chunk", ["rate": 16000, "width": 2, "channels": 1], payload: [0, 0, 0, 0])
        b.send("audio-chunk", ["rate": 16000, "width": 2, "channels": 1], payload: [0, 0, 0, 0])
        b.send("ping", ["text": "x"])
        let bEvents = try b.events(until: ["pong"], seconds: 5)
        #expect(bEvents.map(\.type) == ["error", "pong"] && code(bEvents[0]) == "no-audio-start")

        // A rate of 0 and a width of 5 are refused; the stream can then start properly.
        b.send("audio-start", ["rate": 0, "width": 2, "channels": 1])
        let rate0 = try b.next(seconds: 5)
        #expect(code(rate0) == "audio-format" && rate0?["text"] == "audio-start: rate 0 is not an integer in 1000...768000")
        b.send("audio-start", ["rate": 16000, "width": 5, "channels": 1])
        #expect(try b.next(seconds: 5)?["text"] == "audio-start: width 5 is not an integer in 1...4")
        b.send("audio-start", ["rate": 16000, "width": 2, "channels": 1])
        b.send("audio-chunk", ["rate": 8000, "width": 2, "channels": 1], payload: [0, 0])
        let wrongRate = try b.next(seconds: 5)
        #expect(code(wrongRate) == "audio-format" && wrongRate?["text"]?.string?.hasPrefix("audio-chunk at 8000 Hz in a stream started at 16000 Hz") == true)

        // A payload over the limit: an error, closed.
        let c = try WyomingTestClient(port: port)
        c.send(Array("{\"type\": \"audio-chunk\", \"payload_length\": 200000}\n".utf8))
        let big = try c.next(seconds: 5)
        #expect(code(big) == "protocol" && big?["text"] == "an event's payload_length is 200000 bytes: it exceeds --max-payload 100000")
        #expect(try c.isClosed())
        // 2^62: the same (it once read "not a non-negative integer").
        let huge = try WyomingTestClient(port: port)
        huge.send(Array("{\"type\": \"audio-chunk\", \"payload_length\": 4611686018427387904}\n".utf8))
        #expect(try huge.next(seconds: 5)?["text"] == "an event's payload_length is 4611686018427387904 bytes: it exceeds --max-payload 100000")
        #expect(try huge.isClosed())
        // A number beyond a double is quoted as sent (it once read "null").
        let beyond = try WyomingTestClient(port: port)
        beyond.send(Array("{\"type\": \"audio-start\", \"data\": {\"rate\": 1e400, \"width\": 2, \"channels\": 1}}\n".utf8))
        let beyondError = try beyond.next(seconds: 5)
        #expect(code(beyondError) == "protocol"
                && beyondError?["text"] == "an event header is not JSON: the number 1e400 is out of range (beyond ±1.8e308) at byte 41")
        #expect(try beyond.isClosed())

        // A client that disconnects in the middle of a payload.
        let d = try WyomingTestClient(port: port)
        d.send("audio-start", ["rate": 16000, "width": 2, "channels": 1])
        d.send(Array("{\"type\": \"audio-chunk\", \"data\": {\"rate\": 16000, \"width\": 2, \"channels\": 1}, \"payload_length\": 6400}\n".utf8) + [UInt8](repeating: 1, count: 100))
        d.shutdownWrite()
        #expect(try d.isClosed())

        // Slowloris: a header a byte at a time, slower than the event timeout.
        let e = try WyomingTestClient(port: port)
        e.send(Array("{\"ty".utf8))
        let slow = try e.next(seconds: 5)
        #expect(code(slow) == "timeout" && slow?["text"]?.string?.contains("--event-timeout") == true)
        #expect(try e.isClosed())

        // A client that never reads its answers is closed, not buffered without bound.
        let f = try WyomingTestClient(port: port)
        var describes: [UInt8] = []
        for _ in 0..<2000 { describes += WyomingEvent(type: "describe").encoded }
        for _ in 0..<10 { f.send(describes) }
        #expect(f.sendsFail())

        // Through all of it, a good client is served.
        // (Its expected answers are computed before it connects: a client silent for longer than
        // this server's 3 s idle timeout would be closed, as the next case shows.)
        let audio = Array(Serving.wakeWords[0..<64000])
        let expected = try await Serving.expected(audio, rate: 16000, models: [Fixtures.model])
        let good = try WyomingTestClient(port: port)
        let goodEvents = try Serving.stream(good, pcm16(audio), rate: 16000)
        #expect(Serving.split(goodEvents).voice == expected.voice, "\(goodEvents.map { "\($0.type) \($0.data)" })")
        // The idle timeout closes a client that says nothing.
        let idle = try WyomingTestClient(port: port)
        let idleError = try idle.next(seconds: 8)
        #expect(code(idleError) == "timeout" && idleError?["text"]?.string?.contains("--idle-timeout") == true)
        server.stop()
        let summary = server.wait()
        #expect(summary.refused == 1)
        #expect(summary.closedByServer >= 5)  // malformed, payload, slowloris, not reading, idle (and the idle others)
        #expect(summary.droppedChunks == 3)
    }

    @Test("serve --help states the formats audio-start takes, as the server checks them: 64 channels start a stream, 65 do not")
    func helpStatesFormats() throws {
        let help = try runEarshot(["serve", "--help"])
        let flat = help.out.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let (rates, widths, channels) = (WyomingAudioFormat.rates, WyomingAudioFormat.widths, WyomingAudioFormat.channelCounts)
        #expect(flat.contains("(rate \(rates.lowerBound)-\(rates.upperBound) Hz, width \(widths.lowerBound)-\(widths.upperBound) bytes, "
                              + "\(channels.lowerBound)-\(channels.upperBound) channels)"), "\(help.out)")
        #expect(!flat.contains("any channel count") && channels == 1...64)
        let (server, port) = try Serving.start([Fixtures.model])
        let client = try WyomingTestClient(port: port)
        client.send("audio-start", ["rate": 16000, "width": 2, "channels": 65])
        #expect(try client.next(seconds: 5)?["text"] == "audio-start: channels 65 is not an integer in 1...64")
        // 64 channels of one tone's samples mix to that tone: the stream runs and answers as mono would.
        let speech = Array(try Fixtures.audio("speech-noise-16k.wav").0.prefix(80000))
        var interleaved: [Float] = []
        for s in speech { interleaved += [Float](repeating: s, count: 64) }
        let wide = try Serving.stream(client, pcm16(interleaved), rate: 16000, channels: 64)
        let mono = try Serving.stream(client, pcm16(speech), rate: 16000)
        #expect(wide.map(Answer.init) == mono.map(Answer.init) && !mono.isEmpty)
        server.stop()
        _ = server.wait()
    }

    @Test("A client whose events always arrive split across reads, for longer than the event timeout, is served")
    func splitEventsAreNotSlowloris() async throws {
        var options = ServeOptions()
        options.eventTimeout = 1
        let (server, port) = try Serving.start([Fixtures.model], options: options)
        let client = try WyomingTestClient(port: port)
        let audio = Array(Serving.wakeWords[0..<24000])
        let format: [String: JSONValue] = ["rate": 16000, "width": 2, "channels": 1]
        var bytes = WyomingEvent(type: "audio-start", data: format).encoded
        let pcm = pcm16(audio)
        for at in stride(from: 0, to: pcm.count, by: 640) {
            bytes += WyomingEvent(type: "audio-chunk", data: format, payload: Array(pcm[at..<min(at + 640, pcm.count)])).encoded
        }
        bytes += WyomingEvent(type: "audio-stop").encoded + WyomingEvent(type: "ping").encoded
        // Sends that each end in the middle of an event, 20 ms apart: about 3 s in all, three
        // event timeouts, while an event takes a few sends (80 ms; a loaded machine may stall the
        // sender for a while without reaching the timeout).
        let piece = bytes.count / 150 + 7
        for at in stride(from: 0, to: bytes.count, by: piece) {
            client.send(Array(bytes[at..<min(at + piece, bytes.count)]))
            // A blocking sleep: the sends keep their thread, so tests that hold the shared
            // concurrency threads cannot delay a send past the timeout.
            usleep(20_000)
        }
        let answers = try client.events(until: ["pong", "error"])
        let expected = try await Serving.expected(audio, rate: 16000, models: [Fixtures.model])
        #expect(answers.last?.type == "pong")
        #expect(Serving.split(answers).voice == expected.voice && !expected.voice.isEmpty)
        server.stop()
        let summary = server.wait()
        #expect(summary.closedByServer == 0)
    }

    @Test("The periodic summary counts every step, the ticks' and a finished stream's tail, without waiting for a tick")
    func summaryCountsSteps() async throws {
        let lines = Locked<[String]>([])
        var options = ServeOptions()
        options.summaryInterval = 0.1
        options.log = { line in lines.withLock { $0.append(line.description) } }
        let (server, port) = try Serving.start([Fixtures.model], options: options)
        let client = try WyomingTestClient(port: port)
        // Ticks step the whole blocks; audio-stop, later, steps the zero-padded partial one.
        client.send("audio-start", ["rate": 16000, "width": 2, "channels": 1])
        client.send("audio-chunk", ["rate": 16000, "width": 2, "channels": 1], payload: pcm16(Array(Serving.wakeWords[0..<24037])))
        client.send("ping")
        _ = try client.events(until: ["pong"])
        try await Task.sleep(for: .milliseconds(300))
        client.send("audio-stop")
        client.send("ping")
        _ = try client.events(until: ["pong"])
        try await Task.sleep(for: .milliseconds(400))  // summaries after the stream's end
        server.stop()
        let summary = server.wait()
        func steps(_ line: String) -> Int? {
            guard let r = line.range(of: #"[0-9]+ steps, "#, options: .regularExpression) else { return nil }
            return Int(line[r].prefix { $0.isNumber })
        }
        let periodic = lines.withLock { $0 }.filter { $0.contains("steps/s;") }.compactMap(steps)
        #expect(summary.steps > 0 && periodic.last == summary.steps, "\(periodic) vs \(summary.steps)")
        #expect(periodic == periodic.sorted())
    }

    @Test("Stopping (SIGTERM): every open stream is finished, its last answers sent, then the connection closed")
    func gracefulStop() async throws {
        let (server, port) = try Serving.start([Serving.okayNabu, Fixtures.model])
        let client = try WyomingTestClient(port: port)
        let audio = Array(Serving.wakeWords[0..<20000])  // ends inside speech, before any detection
        client.send("audio-start", ["rate": 16000, "width": 2, "channels": 1])
        client.send("audio-chunk", ["rate": 16000, "width": 2, "channels": 1], payload: pcm16(audio))
        client.send("ping")
        var events = try client.events(until: ["pong"])
        server.stop()
        events += try client.events(until: ["never"], seconds: 10)
        let expected = try await Serving.expected(audio, rate: 16000, models: [Serving.okayNabu, Fixtures.model])
        #expect(expected.wake.isEmpty && expected.voice.count == 2)
        #expect(Serving.split(events).voice == expected.voice)
        #expect(events.last?.type == "not-detected")
        let summary = server.wait()
        #expect(summary.streamsFinished == 1)
        #expect(try client.isClosed(seconds: 1))
    }
}

@Suite("earshot serve: unix sockets, standard input and output, signals")
struct ServeTransportTests {
    static let audio = Array(Serving.wakeWords[0..<64000])

    /// A client's whole conversation as bytes: describe, then the audio in 20 ms chunks.
    static func conversation() -> [UInt8] {
        let format: [String: JSONValue] = ["rate": 16000, "width": 2, "channels": 1]
        var bytes = WyomingEvent(type: "describe").encoded + WyomingEvent(type: "audio-start", data: format).encoded
        let pcm = pcm16(audio)
        for at in stride(from: 0, to: pcm.count, by: 640) {
            bytes += WyomingEvent(type: "audio-chunk", data: format, payload: Array(pcm[at..<min(at + 640, pcm.count)])).encoded
        }
        return bytes + WyomingEvent(type: "audio-stop").encoded
    }

    static func answers(_ bytes: [UInt8]) throws -> [WyomingEvent] {
        var reader = WyomingReader()
        reader.append(bytes)
        var out: [WyomingEvent] = []
        while let e = try reader.next() { out.append(e) }
        return out
    }

    @Test("unix://: the same answers as over TCP; the socket file is removed at the stop")
    func unixSocket() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-\(getpid()).sock").path
        let server = try WyomingServer(uri: .unix(path: path), models: [ServedModel(model: Fixtures.model)])
        server.start()
        let client = try WyomingTestClient(unixPath: path)
        let served = try Serving.stream(client, pcm16(Self.audio), rate: 16000)
        let expected = try await Serving.expected(Self.audio, rate: 16000, models: [Fixtures.model])
        #expect(Serving.split(served).voice == expected.voice && expected.voice.count >= 2)
        server.stop()
        _ = server.wait()
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("stdio://: one client on standard input and output, from a pipe or a file; its end stops the service (exit 0)",
          arguments: [false, true])
    func standardIO(fromFile: Bool) async throws {
        let bytes = Self.conversation()
        let run: (status: Int32, out: String, err: String)
        let outPath = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-stdio-\(getpid())-\(fromFile).out").path
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        defer { try? FileManager.default.removeItem(atPath: outPath) }
        if fromFile {
            let inPath = outPath + ".in"
            try Data(bytes).write(to: URL(fileURLWithPath: inPath))
            defer { try? FileManager.default.removeItem(atPath: inPath) }
            run = try runEarshot(["serve", "--uri", "stdio://", "--model", "okay-nabu,silero-vad"], stdin: inPath, stdout: outPath)
        } else {
            run = try runEarshot(["serve", "--uri", "stdio://", "--model", "okay-nabu,silero-vad"], stdinPipe: Data(bytes), stdout: outPath)
        }
        #expect(run.status == 0, "\(run.err)")
        let answers = try Self.answers([UInt8](try Data(contentsOf: URL(fileURLWithPath: outPath))))
        #expect(answers.first?.type == "info")
        let expected = try await Serving.expected(Self.audio, rate: 16000, models: [Serving.okayNabu, Fixtures.model])
        #expect(Serving.split(answers).voice == expected.voice)
        // Chunks without timestamps: a detection is timed by the stream's clock.
        #expect(Serving.split(answers).wake.map(\.name) == expected.wake.map(\.name) && !expected.wake.isEmpty)
    }

    @Test("SIGTERM: earshot serve stops accepting and exits 0")
    func sigterm() throws {
        let run = try runEarshot(["serve", "--uri", "tcp://127.0.0.1:0", "--model", "silero-vad", "--verbose"],
                                 interruptAfter: .milliseconds(300), signal: SIGTERM, readyMarker: "on tcp://127.0.0.1:")
        #expect(run.status == 0, "\(run.err)")
        #expect(run.err.contains("stopping: finishing 0 streams") && run.out.isEmpty)
    }
}

extension WyomingEvent {
    subscript(key: String) -> JSONValue? { data[key] }
}
