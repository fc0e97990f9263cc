import EarshotRedis
import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot
@testable import EarshotCluster

#if canImport(Glibc)
import Glibc
#endif

/// Hostile and careless input to a cluster, each on a live redis-server of the test's own: keys
/// of another type, sources that never send, an entry of 100 MB, seqs out of range, a Redis that
/// is not there or asks for a password. Each reproduction is the test's input.
@Suite("Workers on Redis Streams: one bad source or key stops nothing", .serialized)
struct ClusterReliabilityTests {
    /// Registers a source and publishes a file's audio in 100 ms entries, then its end.
    static func publishWhole(_ c: RedisConnection, _ id: String, _ file: String) throws {
        let (samples, rate) = try Fixtures.audio(file)
        let p = try SourcePublisher(connection: c, source: id, sampleRate: rate)
        for at in stride(from: 0, to: samples.count, by: rate / 10) { try p.append(Array(samples[at..<min(at + rate / 10, samples.count)])) }
        try p.end()
    }

    /// Waits for `condition`, failing with `what` after `seconds`.
    static func waitUntil(_ seconds: Double, _ what: String, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return }
            usleep(100_000)
        }
        throw FixtureError(message: "\(what): not within \(seconds) s")
    }

    static func errorText(_ events: [ClusterEvent]) -> String? {
        events.compactMap { if case let .error(t) = $0.kind { return t } else { return nil } }.first
    }

    /// Waits until every source has an error or an end event; their events.
    static func waitForOutcomes(_ c: RedisConnection, _ ids: [String], timeout: Double) throws -> [String: [ClusterEvent]] {
        var got: [String: [ClusterEvent]] = [:]
        try waitUntil(timeout, "an end or error event for each of \(ids)") {
            for id in ids { got[id] = try ClusterTests.events(c, id) }
            return got.values.allSatisfy { $0.contains { e in if case .end = e.kind { return true }; return errorText([e]) != nil } }
        }
        return got
    }

    /// `earshot ARGS`, killed after `seconds` if it is still running (status -1 then).
    static func runBounded(_ args: [String], seconds: Double) throws -> (status: Int32, err: String, took: Double) {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let errFile = folder.appendingPathComponent("stderr")
        _ = FileManager.default.createFile(atPath: errFile.path, contents: nil)
        let p = Process()
        p.executableURL = earshotBinary
        p.arguments = args
        p.currentDirectoryURL = Repo.root
        p.standardOutput = FileHandle.nullDevice
        p.standardError = try FileHandle(forWritingTo: errFile)
        let start = Date()
        try p.run()
        while p.isRunning && Date().timeIntervalSince(start) < seconds { usleep(50_000) }
        let took = Date().timeIntervalSince(start)
        var status: Int32 = -1
        if p.isRunning { kill(p.processIdentifier, SIGKILL); p.waitUntilExit() } else { status = p.terminationStatus }
        return (status, (try? String(contentsOf: errFile, encoding: .utf8)) ?? "", took)
    }

    // MARK: Keys of another type

    @Test("One bad key stops no worker: SET earshot:audio:bad hello; SADD earshot:active bad; XADD earshot:sources * source bad fails that source alone with Redis's WRONGTYPE (as do sources whose checkpoint or events key is a string, and one whose stream becomes a string while held); a good source registered after them is label's, none stays held or active, and the worker never retries")
    func badKeysFailTheirSourceAlone() async throws {
        let redis = try TestRedis()
        let c = try RedisConnection(redis.endpoint)
        // The reproduction, as typed into redis-cli.
        try c.expect(["SET", "earshot:audio:bad", "hello"])
        try c.expect(["SADD", "earshot:active", "bad"])
        try c.expect(["XADD", "earshot:sources", "*", "source", "bad"])
        // A source's other keys as strings.
        try c.expect(["SET", "earshot:checkpoint:bad-checkpoint", "x"])
        try c.expect(["SET", "earshot:events:bad-events", "x"])
        for id in ["bad-checkpoint", "bad-events"] { try Self.publishWhole(c, id, "speech-8k.wav") }
        // A source held by the worker, whose stream then becomes a string.
        let replaced = try SourcePublisher(connection: c, source: "replaced", sampleRate: 16000)
        try replaced.append([Float](repeating: 0, count: 1600))
        let worker = try WorkerProcess(name: "keys", redis: redis)
        try Self.waitUntil(20, "the worker takes 'replaced' and reads its entry") {
            try worker.stderr.contains("took source replaced")
                && c.expect(["XPENDING", "earshot:audio:replaced", "earshot"]).elements?.first?.integer == 1
        }
        try c.expect(["DEL", "earshot:audio:replaced"])
        try c.expect(["SET", "earshot:audio:replaced", "x"])
        try Self.publishWhole(c, "good", "speech-44k.wav")

        let got = try Self.waitForOutcomes(c, ["good", "bad", "bad-checkpoint", "replaced"], timeout: 40)
        try Self.waitUntil(10, "bad-events leaves the active set") {
            (try c.expect(["SISMEMBER", "earshot:active", "bad-events"])).integer == 0
        }
        #expect(ClusterTests.segmentsOf(got["good"] ?? []) == (try await ClusterTests.expected("speech-44k.wav")))
        #expect(Self.errorText(got["good"] ?? []) == nil)
        let wrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"
        #expect(Self.errorText(got["bad"] ?? []) == "Redis refused XGROUP CREATE earshot:audio:bad: \(wrongType)", "\(got["bad"] ?? [])")
        #expect(Self.errorText(got["bad-checkpoint"] ?? []) == "Redis refused HGETALL earshot:checkpoint:bad-checkpoint: \(wrongType)")
        #expect(Self.errorText(got["replaced"] ?? []) == "Redis refused XREADGROUP earshot:audio:replaced: \(wrongType)")
        #expect(got["replaced"]?.first?.seq == 2, "the error follows the entry read before the stream was replaced")
        let log = worker.stderr
        #expect(log.contains("source bad-events failed: Redis refused XADD earshot:events:bad-events: \(wrongType)"), "\(log)")
        #expect(log.contains("source bad-events: its error event could not be written"), "\(log)")
        // Nothing left held or active, and no retry of the whole worker.
        #expect((try c.expect(["SMEMBERS", "earshot:active"])).elements == [])
        #expect((try c.expect(["XPENDING", "earshot:sources", "earshot"])).elements?.first?.integer == 0)
        #expect(!log.contains("retrying"), "\(log)")
        #expect(worker.stop() == 0)
    }

    // MARK: Sources that send nothing

    @Test("A source that never sends blocks none: with XADD earshot:sources * source ghost (no audio stream, not in earshot:active) held by the only worker, a source published after it is label's; the ghost is still held, counted in the share")
    func silentSourceStarvesNone() async throws {
        let redis = try TestRedis()
        let c = try RedisConnection(redis.endpoint)
        try c.expect(["XADD", "earshot:sources", "*", "source", "ghost"])
        let worker = try WorkerProcess(name: "lone", redis: redis)
        try Self.waitUntil(15, "the worker takes the ghost") { worker.stderr.contains("took source ghost") }
        try Self.publishWhole(c, "after-ghost", "speech-8k.wav")
        let got = try ClusterTests.waitForEnds(redis, ["after-ghost"], timeout: 30)
        #expect(ClusterTests.segmentsOf(got["after-ghost"] ?? []) == (try await ClusterTests.expected("speech-8k.wav")))
        let pending = try c.expect(["XPENDING", "earshot:sources", "earshot"])
        #expect(pending.elements?.first?.integer == 1, "the ghost's registry entry, still held: \(pending)")
        #expect(worker.stop() == 0)
    }

    @Test("--idle-after 1: the ghost is set aside (earshot:idle holds it with entry 0-0, the registry holds nothing), and audio published to it later is label's; a source that pauses mid-stream until it is set aside is taken up again from its checkpoint, still label's")
    func idleSourcesSetAsideAndWoken() async throws {
        let redis = try TestRedis()
        let c = try RedisConnection(redis.endpoint)
        try c.expect(["XADD", "earshot:sources", "*", "source", "ghost"])
        let worker = try WorkerProcess(name: "idler", redis: redis, extra: ["--idle-after", "1"])
        try Self.waitUntil(15, "the ghost is set aside") { worker.stderr.contains("source ghost sent nothing for 1 s: set aside") }
        #expect((try c.expect(["HGET", "earshot:idle", "ghost"])).text == "0-0")
        #expect((try c.expect(["XPENDING", "earshot:sources", "earshot"])).elements?.first?.integer == 0)

        let (samples, rate) = try Fixtures.audio("speech-44k.wav")
        let pausing = try SourcePublisher(connection: c, source: "pausing", sampleRate: rate)
        let half = samples.count / 2 / 4410 * 4410
        for at in stride(from: 0, to: half, by: 4410) { try pausing.append(Array(samples[at..<at + 4410])) }
        try Self.waitUntil(15, "the pausing source is set aside") { worker.stderr.contains("source pausing sent nothing") }
        for at in stride(from: half, to: samples.count, by: 4410) { try pausing.append(Array(samples[at..<min(at + 4410, samples.count)])) }
        try pausing.end()
        let (ghostAudio, ghostRate) = try Fixtures.audio("speech-8k.wav")
        let ghost = try SourcePublisher(resuming: c, source: "ghost", sampleRate: ghostRate, seq: 0)
        for at in stride(from: 0, to: ghostAudio.count, by: 800) { try ghost.append(Array(ghostAudio[at..<min(at + 800, ghostAudio.count)])) }
        try ghost.end()

        let got = try ClusterTests.waitForEnds(redis, ["ghost", "pausing"], timeout: 40)
        #expect(ClusterTests.segmentsOf(got["pausing"] ?? []) == (try await ClusterTests.expected("speech-44k.wav")))
        #expect(ClusterTests.segmentsOf(got["ghost"] ?? []) == (try await ClusterTests.expected("speech-8k.wav")))
        let log = worker.stderr
        #expect(log.contains("source ghost has new audio: back on the registry"), "\(log)")
        #expect(log.contains("took source pausing from its checkpoint"), "\(log)")
        #expect((try c.expect(["HLEN", "earshot:idle"])).integer == 0)
        #expect(worker.stop() == 0)
    }

    // MARK: Size

    @Test("A 100 MB audio entry fails its source naming the size and the 1 MiB limit; the worker never holds it (its peak memory grows by less than 20 MB) and a source after it is label's")
    func oversizedEntryFailsItsSource() async throws {
        let redis = try TestRedis()
        let c = try RedisConnection(redis.endpoint)
        let worker = try WorkerProcess(name: "bounded", redis: redis)
        try Self.publishWhole(c, "first", "speech-8k.wav")
        _ = try ClusterTests.waitForEnds(redis, ["first"], timeout: 30)
        let before = worker.peakResidentBytes
        _ = try SourcePublisher(connection: c, source: "huge", sampleRate: 16000)
        let entry = try c.expect(["XADD", "earshot:audio:huge", "*", "seq", "1", "rate", "16000", "channels", "1", "format", "s16",
                                  "audio", RedisArgument(bytes: [UInt8](repeating: 0, count: 100 << 20))]).text ?? ""
        try c.expect(["XADD", "earshot:audio:huge", "*", "seq", "2", "end", "1"])
        try Self.publishWhole(c, "after", "speech-44k.wav")
        let got = try Self.waitForOutcomes(c, ["huge", "after"], timeout: 60)
        #expect(Self.errorText(got["huge"] ?? [])
                == "source huge, entry \(entry): 104857600 bytes of audio, over the limit of 1048576 bytes an entry (--max-entry-bytes)")
        #expect(ClusterTests.segmentsOf(got["after"] ?? []) == (try await ClusterTests.expected("speech-44k.wav")))
        let grew = worker.peakResidentBytes - before
        #expect(before > 0 && grew < 20 << 20, "the worker's peak memory went from \(before) by \(grew) bytes")
        #expect(worker.stop() == 0)
    }

    @Test("A reply's string over maxStringBytes is never held: strings of 1001 bytes to 3 MiB (and 20 seeded sizes) over a 1000-byte limit come back as .oversized with their lengths, the replies after them whole; an XRANGE keeps the entries around a huge one")
    func oversizedStringsAreSkipped() throws {
        let redis = try TestRedis()
        let c = try RedisConnection(redis.endpoint)
        var random = SeededRandom(seed: 45)
        let sizes = [1001, 2000, 16_383, 16_384, 16_385, 16_490, 70_000, 1 << 20, 3 << 20] + (0..<20).map { _ in Int.random(in: 1001...400_000, using: &random) }
        for (k, n) in sizes.enumerated() {
            let value = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ k) }
            try c.expect(["SET", "big", RedisArgument(bytes: value)])
            let replies = try c.pipeline([["GET", "big"], ["ECHO", "after"], ["GET", "big"]], maxStringBytes: 1000)
            #expect(replies[0] == .oversized(bytes: n), "\(n) bytes (seed 45)")
            #expect(replies[1] == .string(Array("after".utf8)))
            #expect(replies[2] == .oversized(bytes: n))
            #expect((try c.command(["GET", "big"])).bytes == value, "\(n) bytes without a limit")
        }
        let small = RedisArgument(bytes: Array("small".utf8))
        try c.expect(["XADD", "s", "1-1", "a", small])
        try c.expect(["XADD", "s", "1-2", "a", RedisArgument(bytes: [UInt8](repeating: 7, count: 3 << 20))])
        try c.expect(["XADD", "s", "1-3", "a", small, "b", "2"])
        let entries = StreamReplies.entries(try c.expect(["XRANGE", "s", "-", "+"], maxStringBytes: 1000))
        #expect(entries.map(\.id) == ["1-1", "1-2", "1-3"])
        #expect(entries.map(\.fields) == [[.string(Array("a".utf8)), .string(Array("small".utf8))],
                                          [.string(Array("a".utf8)), .oversized(bytes: 3 << 20)],
                                          [.string(Array("a".utf8)), .string(Array("small".utf8)), .string(Array("b".utf8)), .string(Array("2".utf8))]])
        #expect((try c.command(["PING"])) == .status("PONG"))
        // Strings past two reads (16 KB each) are dropped as they come, not buffered whole.
        let past = sizes.filter { $0 > 32_768 }.count * 2 + 1, over = sizes.count * 2 + 1
        #expect((past...over).contains(c.stringsSkipped), "\(c.stringsSkipped) skipped; expected \(past)...\(over)")
    }

    // MARK: Messages

    @Test("An entry's seq says what is wrong with it: missing, not a whole number, or out of 1...2^53 with its value")
    func seqMessages() async throws {
        let redis = try TestRedis()
        let c = try RedisConnection(redis.endpoint)
        let range = "expected 1...2^53 (9007199254740992)"
        let cases: [(id: String, seq: String?, message: String)] = [
            ("no-seq", nil, "no seq field (a whole number in 1...2^53)"),
            ("seq-zero", "0", "seq 0 is out of range: \(range)"),
            ("seq-negative", "-3", "seq -3 is out of range: \(range)"),
            ("seq-past", "9007199254740993", "seq 9007199254740993 is out of range: \(range)"),
            ("seq-int-max", "9223372036854775807", "seq 9223372036854775807 is out of range: \(range)"),
            ("seq-beyond-int", "99999999999999999999", "seq 99999999999999999999 is out of range: \(range)"),
            ("seq-text", "12abc", "seq '12abc' is not a whole number (expected 1...2^53)"),
            ("seq-decimal", "1.5", "seq '1.5' is not a whole number (expected 1...2^53)"),
        ]
        var entries: [String: String] = [:]
        for k in cases {
            _ = try SourcePublisher(connection: c, source: k.id, sampleRate: 16000)
            let seq: [RedisArgument] = k.seq.map { ["seq", RedisArgument($0)] } ?? []
            entries[k.id] = try c.expect(["XADD", RedisArgument("earshot:audio:\(k.id)"), "*"] + seq
                                         + ["rate", "16000", "channels", "1", "format", "s16", "audio", RedisArgument(bytes: [UInt8](repeating: 0, count: 320))]).text
        }
        let worker = try WorkerProcess(name: "seqs", redis: redis)
        let got = try Self.waitForOutcomes(c, cases.map(\.id), timeout: 30)
        for k in cases {
            #expect(Self.errorText(got[k.id] ?? []) == "source \(k.id), entry \(entries[k.id] ?? ""): \(k.message)")
        }
        #expect(worker.stop() == 0)
    }

    // MARK: Connections

    @Test("events and publish give up on a Redis that is not there: a wrong port and a missing unix socket exit 69 after --retry-for (1 s here; the default 10 s timed once), saying so")
    func oneOffCommandsGiveUp() throws {
        let port = try RedisServerProcess.freeLoopbackPort()  // nothing listens there
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let missing = folder.appendingPathComponent("none.sock").path
        let wav = Repo.path("AudioSamples/speech-8k.wav")
        let runs: [(args: [String], bound: Double)] = [
            (["events", "--redis", "redis://127.0.0.1:\(port)", "--retry-for", "1"], 1),
            (["events", "--redis", "unix://\(missing)", "--source", "s", "--follow", "--retry-for", "1"], 1),
            (["publish", "--redis", "unix://\(missing)", "--source", "s", "--retry-for", "1", wav], 1),
            (["publish", "--redis", "redis://127.0.0.1:\(port)", "--source", "s", wav], 10),
        ]
        for run in runs {
            let r = try Self.runBounded(run.args, seconds: run.bound + 30)
            #expect(r.status == 69, "\(run.args): \(r.err)")
            #expect(r.err.contains("gave up after \(Int(run.bound)) s (--retry-for)"), "\(run.args): \(r.err)")
            #expect(r.err.contains("retrying in"), "\(run.args): \(r.err)")
            #expect(r.took >= run.bound && r.took < run.bound + 5, "\(run.args) took \(r.took) s")
        }
    }

    @Test("Redis URLs: credentials (:PASSWORD@, USER:PASSWORD@ with %XX escapes, unix ?user=&password=), never shown; rediss:// refused with what to do")
    func redisURLs() throws {
        let e = try RedisEndpoint(url: "redis://alice:pa%3Ass%40wo%2Frd@10.0.0.2:6380/3")
        #expect(e == RedisEndpoint(address: .tcp(host: "10.0.0.2", port: 6380), database: 3, username: "alice", password: "pa:ss@wo/rd"))
        #expect(e.description == "redis://alice@10.0.0.2:6380/3")
        #expect(try RedisEndpoint(url: "redis://:se@cret@host") == RedisEndpoint(address: .tcp(host: "host", port: 6379), password: "se@cret"))
        let unix = try RedisEndpoint(url: "unix:///run/redis.sock?db=2&user=bob&password=x%26y")
        #expect(unix == RedisEndpoint(address: .unix(path: "/run/redis.sock"), database: 2, username: "bob", password: "x&y"))
        #expect(unix.description == "unix:///run/redis.sock?db=2&user=bob")
        func refusal(_ url: String) -> String {
            do { _ = try RedisEndpoint(url: url); return "accepted" } catch { return error.description }
        }
        #expect(refusal("redis://secret@host") == "Redis URL redis://secret@host: credentials are :PASSWORD@ or USER:PASSWORD@ (redis://:secret@HOST)")
        #expect(refusal("redis://alice:@host") == "Redis URL redis://alice:***@host: the password after ':' is empty")
        #expect(refusal("redis://:a%zz@host") == "Redis URL redis://:***@host: the password holds a '%' that is not followed by two hex digits")
        #expect(refusal("unix:///s.sock?user=bob") == "Redis URL unix:///s.sock?user=bob: a user needs its password (?user=USER&password=PASSWORD)")
        #expect(refusal("rediss://:secret@host:6380").hasPrefix("Redis URL rediss://:***@host:6380: TLS (rediss://) is not supported"))
        #expect(refusal("rediss://host").contains("stunnel") && refusal("rediss://host").contains("unix:///PATH"))
    }

    @Test("AUTH on a redis-server with --requirepass and an ACL user: publish (redis://:PASSWORD@, escaped), worker (redis://USER:PASSWORD@) and events (unix socket, ?user=&password=) give label's events, also after every connection is killed; a wrong or missing password exits 69 naming WRONGPASS or NOAUTH, never the password; rediss:// exits 64 saying TLS is not supported")
    func auth() throws {
        let redis = try TestRedis(password: "pa:ss@wo/rd")
        let c = try RedisConnection(redis.endpoint)
        try c.expect(["ACL", "SETUSER", "alice", "on", ">wonder", "~*", "&*", "+@all"])
        let worker = try WorkerProcess(name: "auth", redis: redis, url: "redis://alice:wonder@127.0.0.1:\(redis.port)")
        let wav = Repo.path("AudioSamples/speech-noise-16k.wav")
        let pub = try runEarshot(["publish", "--redis", "redis://:pa%3Ass%40wo%2Frd@127.0.0.1:\(redis.port)", "--source", "locked", wav])
        #expect(pub.status == 0, "\(pub.err)")
        _ = try ClusterTests.waitForEnds(redis, ["locked"], timeout: 30)
        // Every other client's connection killed: the worker connects again, with AUTH.
        try c.expect(["CLIENT", "KILL", "TYPE", "normal"])
        let again = try runEarshot(["publish", "--redis", "redis://:pa%3Ass%40wo%2Frd@127.0.0.1:\(redis.port)", "--source", "locked-2", wav])
        #expect(again.status == 0, "\(again.err)")
        let label = try runEarshot(["label", "--format", "csv", wav])
        for id in ["locked", "locked-2"] {
            let events = try runEarshot(["events", "--redis", "unix://\(redis.socket)?user=alice&password=wonder", "--source", id, "--follow", "--format", "csv"])
            #expect(events.status == 0, "\(events.err)")
            #expect(events.out == label.out.replacingOccurrences(of: wav, with: id), "\(id)")
        }
        let log = worker.stderr
        #expect(log.contains("connected to redis://alice@127.0.0.1:\(redis.port) again"), "\(log)")
        #expect(!log.contains("wonder"), "\(log)")
        #expect(worker.stop() == 0)

        let wrong = try Self.runBounded(["events", "--redis", "redis://:nope@127.0.0.1:\(redis.port)"], seconds: 30)
        #expect(wrong.status == 69 && wrong.err.contains("Redis refused AUTH: WRONGPASS") && !wrong.err.contains("nope"), "\(wrong.err)")
        let none = try Self.runBounded(["events", "--redis", redis.url], seconds: 30)
        #expect(none.status == 69 && none.err.contains("NOAUTH"), "\(none.err)")
        let tls = try Self.runBounded(["events", "--redis", "rediss://:nope@127.0.0.1:\(redis.port)"], seconds: 30)
        #expect(tls.status == 64 && tls.err.contains("TLS (rediss://) is not supported") && tls.err.contains("stunnel") && !tls.err.contains("nope"),
                "\(tls.err)")
    }

    // MARK: Help

    @Test("publish --source is marked required: in publish --help, the synopsis, the usage error (64, with an example) and the completions")
    func publishSourceRequired() throws {
        let help = try runEarshot(["publish", "--help"])
        #expect(help.out.split(separator: "\n").contains { $0.contains("--source ID") && $0.contains("(required)") }, "\(help.out)")
        let missing = try runEarshot(["publish", Repo.path("AudioSamples/speech-8k.wav")])
        #expect(missing.status == 64 && missing.err.contains("publish needs --source ID")
                && missing.err.contains("hint: earshot publish --source room-1 AudioSamples/speech-44k.wav"), "\(missing.err)")
        let reference = try runEarshot(["help", "--reference"])
        #expect(reference.out.contains("earshot publish [--redis URL] [--group NAME] [--prefix NAME] --source ID [--device PCM]"), "\(reference.out)")
        let fish = try runEarshot(["completions", "fish"])
        #expect(fish.out.contains("-l source -r -d 'the source\\'s id (1-200 printable characters, no spaces) (required)'"), "\(fish.out)")
        let zsh = try runEarshot(["completions", "zsh"])
        #expect(zsh.out.contains("'--source[the source'\\''s id (1-200 printable characters, no spaces) (required)]"), "\(zsh.out)")
    }
}
