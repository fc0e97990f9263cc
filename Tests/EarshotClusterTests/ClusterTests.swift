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

/// A redis-server of the test's own (`RedisServerProcess`), on a free loopback port, in a
/// temporary folder (with an append-only file, so that it can be stopped and started again with
/// its data, and a unix socket).
final class TestRedis {
    let folder: URL
    private let server: RedisServerProcess

    init(password: String? = nil) throws {
        folder = try Repo.temporaryFolder()
        server = try RedisServerProcess(folder: folder, password: password, persistent: true, unixSocket: true)
    }

    var port: Int { server.port }
    /// `requirepass`: every client must AUTH.
    var password: String? { server.password }
    var url: String { server.url }
    /// Its unix socket (in its folder).
    var socket: String { server.socket }
    var endpoint: RedisEndpoint { server.endpoint }

    func start() throws { try server.start() }

    /// Stops the server (it writes its data and exits).
    func stop() { server.stop() }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: folder)
    }
}

/// An `earshot worker` process, its stderr kept.
final class WorkerProcess {
    let name: String
    let process = Process()
    let log: URL

    init(name: String, redis: TestRedis, url: String? = nil, extra: [String] = []) throws {
        self.name = name
        log = redis.folder.appendingPathComponent("\(name)-\(UUID().uuidString.prefix(6)).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.executableURL = earshotBinary
        process.arguments = ["worker", "--redis", url ?? redis.url, "--name", name, "--claim-after", "1.5", "--checkpoint-every", "5"] + extra
        process.currentDirectoryURL = Repo.root
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: log)
        try process.run()
    }

    var stderr: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// The worker's peak resident memory so far (VmHWM, bytes).
    var peakResidentBytes: Int {
        let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        return (Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") ?? 0) * 1024
    }

    func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// SIGTERM: it checkpoints, hands its sources on and exits 0.
    func stop() -> Int32 {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// A test that failed before stopping its worker leaves none behind (a worker whose Redis
    /// is gone retries for ever).
    deinit {
        if process.isRunning { kill9() }
    }
}

@Suite("Workers on Redis Streams: nothing lost, nothing twice", .serialized)
struct ClusterTests {
    @Test("What is worth a retry: a lost connection and Redis's refusals for now (loading after a restart, busy, failover), not other refusals")
    func transientErrors() {
        #expect(RedisError.connection(endpoint: "127.0.0.1:6379", reason: "Connection refused").isTransient)
        #expect(RedisError.refused(command: "XADD earshot:audio:a", message: "LOADING Redis is loading the dataset in memory").isTransient)
        #expect(RedisError.refused(command: "XADD earshot:audio:a", message: "BUSY Redis is busy running a script").isTransient)
        #expect(RedisError.refused(command: "XADD earshot:audio:a", message: "MASTERDOWN Link with MASTER is down").isTransient)
        #expect(!RedisError.refused(command: "XADD earshot:audio:a", message: "WRONGTYPE Operation against a key holding the wrong kind of value").isTransient)
        #expect(!RedisError.refused(command: "XGROUP CREATE k", message: "BUSYGROUP Consumer Group name already exists").isTransient)
        #expect(!RedisError.unexpectedReply(command: "XADD", reply: "an integer").isTransient)
    }

    static let files = ["speech-44k.wav", "speech-8k.wav", "speech-noise-16k.wav"]

    /// What `earshot label` finds in a file: its segments, exactly.
    static func expected(_ file: String) async throws -> [Segment] {
        let (samples, rate) = try Fixtures.audio(file)
        return segments(try await Fixtures.run(samples, rate: rate))
    }

    /// The cluster's events of one source, read back.
    static func events(_ c: RedisConnection, _ source: String) throws -> [ClusterEvent] {
        var all: [ClusterEvent] = []
        var after = "0"
        while true {
            let (page, next) = try ClusterEvents.read(c, source: source, after: after)
            if page.isEmpty { return all }
            all += page
            after = next
        }
    }

    static func segmentsOf(_ events: [ClusterEvent]) -> [Segment] {
        events.compactMap { if case let .segment(s) = $0.kind { return s } else { return nil } }
    }

    /// Publishes every source in rounds, one 100 ms entry per source per round, `pause` between
    /// rounds; `at` runs actions before given rounds.
    static func publish(_ redis: TestRedis, sources: [(id: String, file: String)], pause: Double, at: [Int: () throws -> Void] = [:]) throws {
        let (publishers, audio) = try register(redis, sources)
        var round = 0
        var offsets = [Int](repeating: 0, count: sources.count)
        while publishers.contains(where: { !$0.ended }) {
            try at[round]?()
            for (i, p) in publishers.enumerated() where !p.ended {
                let n = p.sampleRate / 10
                if offsets[i] >= audio[i].count { try p.end(); continue }
                try p.append(Array(audio[i][offsets[i]..<min(offsets[i] + n, audio[i].count)]))
                offsets[i] += n
            }
            round += 1
            Thread.sleep(forTimeInterval: pause)
        }
    }

    /// A publisher per source (registered), and the source's audio.
    static func register(_ redis: TestRedis, _ sources: [(id: String, file: String)]) throws -> ([SourcePublisher], [[Float]]) {
        let c = try RedisConnection(redis.endpoint)
        var publishers: [SourcePublisher] = []
        var audio: [[Float]] = []
        for s in sources {
            let (samples, rate) = try Fixtures.audio(s.file)
            publishers.append(try SourcePublisher(connection: c, source: s.id, sampleRate: rate))
            audio.append(samples)
        }
        return (publishers, audio)
    }

    /// Waits until every source has its end event.
    static func waitForEnds(_ redis: TestRedis, _ ids: [String], timeout: Double) throws -> [String: [ClusterEvent]] {
        let c = try RedisConnection(redis.endpoint)
        let deadline = Date().addingTimeInterval(timeout)
        var result: [String: [ClusterEvent]] = [:]
        while Date() < deadline {
            result = [:]
            for id in ids { result[id] = try events(c, id) }
            if result.values.allSatisfy({ $0.last?.kind == .end }) { return result }
            Thread.sleep(forTimeInterval: 0.2)
        }
        let open = ids.filter { result[$0]?.last?.kind != .end }
        throw FixtureError(message: "\(open.count) sources never ended: \(open.prefix(5))")
    }

    /// `expected` of every file of `files`.
    static func expectedOfFiles() async throws -> [String: [Segment]] {
        var expected: [String: [Segment]] = [:]
        for f in files { expected[f] = try await Self.expected(f) }
        return expected
    }

    /// Every source's events are label's segments of its file, none twice, no error.
    static func expectLabels(_ got: [String: [ClusterEvent]], _ sources: [(id: String, file: String)], _ expected: [String: [Segment]]) {
        for s in sources {
            let events = got[s.id] ?? []
            #expect(segmentsOf(events) == expected[s.file], "\(s.id) (\(s.file))")
            #expect(Set(events.map(\.entryID)).count == events.count, "\(s.id): an event twice")
            #expect(!events.contains { if case .error = $0.kind { return true } else { return false } }, "\(s.id): \(events)")
        }
    }

    @Test("Kill test: 3 workers, 60 sources of real audio; kill -9 one mid-stream, start it again, then a 4th joins: every source's events = earshot label's, none missing, none twice")
    func killRestartRebalance() async throws {
        let redis = try TestRedis()
        let sources = (0..<60).map { (id: "src-\($0)", file: Self.files[$0 % Self.files.count]) }
        let expected = try await Self.expectedOfFiles()
        var workers = try ["w1", "w2", "w3"].map { try WorkerProcess(name: $0, redis: redis) }
        var restarted: WorkerProcess?
        var fourth: WorkerProcess?
        try Self.publish(redis, sources: sources, pause: 0.06, at: [
            20: { workers[0].kill9() },
            60: { restarted = try WorkerProcess(name: "w1", redis: redis) },
            75: { fourth = try WorkerProcess(name: "w4", redis: redis) },
        ])
        let got = try Self.waitForEnds(redis, sources.map(\.id), timeout: 120)
        Self.expectLabels(got, sources, expected)
        var logs = workers.dropFirst().map(\.stderr)
        for w in workers.dropFirst() { #expect(w.stop() == 0) }
        if let restarted { logs.append(restarted.stderr); #expect(restarted.stop() == 0) }
        if let fourth {
            let log = fourth.stderr
            #expect(log.contains("took source"), "the 4th worker took no source: \(log)")
            #expect(fourth.stop() == 0)
        }
        // The dead worker's sources were claimed by the others.
        #expect(logs.joined().contains("claimed source entry"), "\(logs)")
        workers.removeAll()
    }

    @Test("Reading ahead under a backlog: 30 sources' whole audio published at once, one worker reading the next batch while it steps is killed -9 mid-stream and another takes over: every source's events = earshot label's, none twice, and neither worker met a gap in any source's entries")
    func readAheadKilledMidStream() async throws {
        let redis = try TestRedis()
        let sources = (0..<30).map { (id: "ahead-\($0)", file: Self.files[$0 % Self.files.count]) }
        let expected = try await Self.expectedOfFiles()
        try Self.publish(redis, sources: sources, pause: 0)
        let first = try WorkerProcess(name: "r1", redis: redis)
        // Killed once a few sources have events out, before all have ended: mid-stream.
        let c = try RedisConnection(redis.endpoint)
        let deadline = Date().addingTimeInterval(60)
        while try sources.filter({ try !Self.events(c, $0.id).isEmpty }).count < 3 && Date() < deadline { usleep(10_000) }
        first.kill9()
        let endedBefore = try sources.filter { try Self.events(c, $0.id).last?.kind == .end }.count
        #expect(endedBefore < sources.count, "every source ended before the kill")
        let second = try WorkerProcess(name: "r2", redis: redis)
        let got = try Self.waitForEnds(redis, sources.map(\.id), timeout: 120)
        Self.expectLabels(got, sources, expected)
        let logs = first.stderr + second.stderr
        #expect(!logs.contains("are missing here"), "\(logs)")
        #expect(second.stderr.contains("claimed source entry"), "\(second.stderr)")
        #expect(second.stop() == 0)
    }

    @Test("Redis goes away mid-stream and comes back: the worker retries (saying so), and every source's events are still label's")
    func redisRestarts() async throws {
        let redis = try TestRedis()
        let sources = (0..<6).map { (id: "r-\($0)", file: Self.files[$0 % Self.files.count]) }
        let worker = try WorkerProcess(name: "solo", redis: redis)
        // The publisher stops while the server is down, and goes on after.
        var (publishers, audio) = try Self.register(redis, sources)
        // And `earshot publish`, at real-time pace meanwhile, reconnects by itself.
        let cli = Process()
        cli.executableURL = earshotBinary
        cli.arguments = ["publish", "--redis", redis.url, "--source", "cli-r", "--realtime", Repo.path("AudioSamples/speech-8k.wav")]
        let cliErr = Pipe()
        cli.standardError = cliErr
        try cli.run()
        var round = 0
        while publishers.contains(where: { !$0.ended }) {
            round += 1
            if round == 30 {
                redis.stop()
                usleep(1_500_000)
                try redis.start()
                let again = try RedisConnection(redis.endpoint)
                for (i, s) in sources.enumerated() {
                    // The same publisher state on a new connection.
                    publishers[i] = try SourcePublisher(resuming: again, source: s.id, sampleRate: publishers[i].sampleRate, seq: publishers[i].seq)
                }
            }
            for (i, p) in publishers.enumerated() where !p.ended {
                let n = p.sampleRate / 10, at = (p.seq) * n
                if at >= audio[i].count { try p.end(); continue }
                try p.append(Array(audio[i][at..<min(at + n, audio[i].count)]))
            }
            usleep(10_000)
        }
        cli.waitUntilExit()
        let cliLog = String(decoding: cliErr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(cli.terminationStatus == 0, "\(cliLog)")
        #expect(cliLog.contains("reconnecting"), "\(cliLog)")
        let got = try Self.waitForEnds(redis, sources.map(\.id) + ["cli-r"], timeout: 60)
        for s in sources + [(id: "cli-r", file: "speech-8k.wav")] {
            #expect(Self.segmentsOf(got[s.id] ?? []) == (try await Self.expected(s.file)), "\(s.id)")
        }
        let log = worker.stderr
        #expect(log.contains("retrying"), "\(log)")
        #expect(log.contains("connected to") && log.contains("again"), "\(log)")
        #expect(worker.stop() == 0)
    }

    @Test("Bad input fails its source alone with an error event: a bad rate, broken audio, a gap in seq, a snapshot of another model; a good source beside them is label's")
    func badInput() async throws {
        let redis = try TestRedis()
        let c = try RedisConnection(redis.endpoint)
        let (samples, rate) = try Fixtures.audio("speech-44k.wav")
        let good = try SourcePublisher(connection: c, source: "good", sampleRate: rate)
        func raw(_ id: String, _ entries: [[RedisArgument]]) throws {
            _ = try SourcePublisher(connection: c, source: id, sampleRate: 16000)
            for e in entries { try c.expect(["XADD", RedisArgument("earshot:audio:\(id)"), "*"] + e) }
        }
        let pcm = RedisArgument(bytes: [UInt8](repeating: 0, count: 3200))
        try raw("bad-rate", [["seq", "1", "rate", "5", "channels", "1", "format", "s16", "audio", pcm]])
        try raw("bad-audio", [["seq", "1", "rate", "16000", "channels", "1", "format", "s16", "audio", RedisArgument(bytes: [1, 2, 3])]])
        try raw("gap", [["seq", "1", "rate", "16000", "channels", "1", "format", "s16", "audio", pcm],
                        ["seq", "3", "rate", "16000", "channels", "1", "format", "s16", "audio", pcm]])
        try raw("no-seq", [["rate", "16000", "channels", "1", "format", "s16", "audio", pcm]])
        // Numbers at the ends of Int: a seq whose next would overflow is refused; a publish time
        // no publisher wrote is no latency figure, and the source runs.
        try raw("huge-seq", [["seq", "9223372036854775807", "rate", "16000", "channels", "1", "format", "s16", "audio", pcm]])
        try raw("odd-time", [["seq", "1", "rate", "16000", "channels", "1", "format", "s16", "t", "-9223372036854775808", "audio", pcm],
                             ["seq", "2", "end", "1"]])
        // Checkpoints made by another model: with the audio all there, the source starts again
        // from its first entry; with its first entries gone, it fails.
        let wake = try StreamClassifier(model: Fixtures.wakeModel)
        let foreign = await wake.snapshot().serialized()
        let restartable = try SourcePublisher(connection: c, source: "foreign", sampleRate: rate)
        let trimmed = try SourcePublisher(connection: c, source: "trimmed", sampleRate: rate)
        let hugeCheckpoint = try SourcePublisher(connection: c, source: "huge-checkpoint", sampleRate: rate)
        for p in [good, restartable, trimmed, hugeCheckpoint] {
            for at in stride(from: 0, to: samples.count, by: 4410) { try p.append(Array(samples[at..<min(at + 4410, samples.count)])) }
            try p.end()
        }
        for id in ["trimmed", "huge-checkpoint"] {
            let firstIDs = StreamReplies.entries(try c.expect(["XRANGE", RedisArgument("earshot:audio:\(id)"), "-", "+", "COUNT", "3"])).map(\.id)
            try c.expect(["XDEL", RedisArgument("earshot:audio:\(id)")] + firstIDs.map { RedisArgument($0) })
        }
        for id in ["foreign", "trimmed", "huge-checkpoint"] {
            let entry = StreamReplies.entries(try c.expect(["XRANGE", RedisArgument("earshot:audio:\(id)"), "-", "+", "COUNT", "10"])).last?.id ?? ""
            let seq: RedisArgument = id == "huge-checkpoint" ? "9223372036854775807" : "10"
            try c.expect(["HSET", RedisArgument("earshot:checkpoint:\(id)"), "seq", seq, "entry", RedisArgument(entry), "model", "other",
                          "snapshot", RedisArgument(bytes: foreign), "done", "0"])
        }
        let worker = try WorkerProcess(name: "strict", redis: redis)
        let ids = ["good", "bad-rate", "bad-audio", "gap", "no-seq", "huge-seq", "odd-time", "foreign", "trimmed", "huge-checkpoint"]
        let deadline = Date().addingTimeInterval(30)
        var got: [String: [ClusterEvent]] = [:]
        while Date() < deadline {
            for id in ids { got[id] = try Self.events(c, id) }
            if got.values.allSatisfy({ e in e.contains { if case .end = $0.kind { return true }; if case .error = $0.kind { return true }; return false } }) { break }
            usleep(200_000)
        }
        func error(_ id: String) -> String? {
            got[id]?.compactMap { if case let .error(t) = $0.kind { return t } else { return nil } }.first
        }
        let label = try await Self.expected("speech-44k.wav")
        #expect(Self.segmentsOf(got["good"] ?? []) == label)
        #expect(error("good") == nil)
        #expect(error("bad-rate")?.contains("rate must be 1000...384000") == true, "\(got["bad-rate"] ?? [])")
        #expect(error("bad-audio")?.contains("not whole frames") == true, "\(got["bad-audio"] ?? [])")
        #expect(error("gap")?.contains("seq 3 after 1") == true, "\(got["gap"] ?? [])")
        #expect(error("no-seq")?.contains("no seq field") == true, "\(got["no-seq"] ?? [])")
        #expect(Self.segmentsOf(got["foreign"] ?? []) == label, "\(got["foreign"] ?? [])")
        #expect(error("trimmed")?.contains("no longer there") == true, "\(got["trimmed"] ?? [])")
        #expect(error("huge-seq")?.contains("seq 9223372036854775807 is out of range") == true, "\(got["huge-seq"] ?? [])")
        #expect(error("odd-time") == nil && got["odd-time"]?.contains { if case .end = $0.kind { return true }; return false } == true,
                "\(got["odd-time"] ?? [])")
        #expect(error("huge-checkpoint")?.contains("is not an entry number") == true, "\(got["huge-checkpoint"] ?? [])")
        #expect(worker.stderr.contains("starting it again from its first entry"))
        #expect(worker.stop() == 0)
    }

    static let tones = Repo.path("Tests/EarshotTests/Goldens/sound-events/tones.wav")

    /// JSON lines of events as objects, without what only label writes (the names it splits, the file).
    static func objects(_ text: String) throws -> [NSDictionary] {
        try text.split(separator: "\n").map { line in
            var o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            o["scientific"] = nil; o["common"] = nil; o["file"] = nil
            return o as NSDictionary
        }
    }

    /// tones.wav published as source "tones" on a Redis of its own and a worker with `options`
    /// on it: the events it stores (earshot events --format jsonl), after the worker stopped.
    static func workerEvents(_ redis: TestRedis, _ options: [String]) throws -> String {
        let pub = try runEarshot(["publish", "--redis", redis.url, "--source", "tones", "--chunk-ms", "250", tones])
        #expect(pub.status == 0, "\(pub.err)")
        let worker = try WorkerProcess(name: "tones", redis: redis, extra: options)
        // A worker that refused its options exits and never ends the source: nothing to follow.
        let deadline = Date().addingTimeInterval(60)
        while worker.process.isRunning, !worker.stderr.contains(", group "), Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        guard worker.process.isRunning else {
            Issue.record("the worker exited (\(worker.process.terminationStatus)): \(worker.stderr)")
            return ""
        }
        let events = try runEarshot(["events", "--redis", redis.url, "--source", "tones", "--follow", "--format", "jsonl"])
        #expect(events.status == 0, "\(events.err)")
        #expect(worker.stop() == 0, "\(worker.stderr)")
        return events.out
    }

    @Test("A worker running a sound-events model stores its events with their best score and window count (type event): earshot events gives label's, the rule's options (--top-k) applying")
    func soundEvents() throws {
        let redis = try TestRedis()
        let events = try Self.workerEvents(redis, ["-m", "Tests/Fixtures/tone-events", "--top-k", "2"])
        let label = try runEarshot(["label", "-m", "Tests/Fixtures/tone-events", "--top-k", "2", "--format", "jsonl", Self.tones])
        // The same events, values and order; label adds the names it splits by the model's label form.
        let served = try Self.objects(events), labelled = try Self.objects(label.out)
        #expect(served == labelled && labelled.count == 9 && labelled.allSatisfy { $0["windows"] != nil }, "\(events)\n\(label.out)")
        // In a Raven table, selections numbered through, each its Nyquist frequency.
        let raven = try runEarshot(["events", "--redis", redis.url, "--source", "tones", "--format", "raven"])
        let rows = raven.out.split(separator: "\n").dropFirst().map { $0.split(separator: "\t").map(String.init) }
        #expect(rows.map { $0[0] } == (1...9).map(String.init) && rows.allSatisfy { $0[6] == "4000" }, "\(raven.out)")
    }

    @Test("A worker applies --lat/--lon/--week (its model's label filter) and --species-list: the events it stores are label's with the same options, of the labels kept alone")
    func labelFilter() throws {
        let package = try LocatedToneEvents.package()
        let labels = try Model(contentsOf: URL(fileURLWithPath: package)).labels
        let list = try Repo.temporaryFolder().appendingPathComponent("tones.txt")
        try "\(labels[2])\n\(labels[7])\n".write(to: list, atomically: true, encoding: .utf8)
        let all = try Self.objects(try runEarshot(["label", "-m", package, "--format", "jsonl", Self.tones]).out)
        let cases: [([String], Set<String>)] = [
            (["--lat", "45", "--lon", "0", "--week", "10"], LocatedToneEvents.kept(labels: labels, lat: 45, lon: 0, week: 10)),
            (["--species-list", list.path], [labels[2], labels[7]]),
        ]
        #expect(cases[0].1 == Set(labels[1...5]))
        for (options, kept) in cases {
            let events = try Self.workerEvents(try TestRedis(), ["-m", package] + options)
            let label = try runEarshot(["label", "-m", package, "--format", "jsonl"] + options + [Self.tones])
            let stored = try Self.objects(events), labelled = try Self.objects(label.out)
            let found = Set(labelled.map { $0["label"] as? String ?? "" }), before = Set(all.map { $0["label"] as? String ?? "" })
            #expect(stored == labelled, "\(options)\n\(events)\n\(label.out)")
            // Only kept labels, every one that had events still there, and some left out.
            #expect(found.isSubset(of: kept) && before.intersection(kept).isSubset(of: found) && !found.isEmpty && !before.isSubset(of: kept),
                    "\(options): \(found) of \(before)")
        }
    }

    @Test("A worker with --overlap S runs a window stream's windows every window - S seconds: the events it stores are earshot label --overlap S's")
    func overlap() throws {
        let events = try Self.workerEvents(try TestRedis(), ["-m", "Tests/Fixtures/tone-events", "--overlap", "0.15"])
        let label = try runEarshot(["label", "-m", "Tests/Fixtures/tone-events", "--overlap", "0.15", "--format", "jsonl", Self.tones])
        let plain = try runEarshot(["label", "-m", "Tests/Fixtures/tone-events", "--format", "jsonl", Self.tones])
        let stored = try Self.objects(events), labelled = try Self.objects(label.out), unchanged = try Self.objects(plain.out)
        #expect(stored == labelled && !labelled.isEmpty, "\(events)\n\(label.out)")
        // The 1000 Hz tone's first event: ten windows to 1.1 s, where the package's own hop gives nine to 1.125 s.
        #expect(labelled.first?["windows"] as? Int == 10 && labelled.first?["end"] as? Double == 1.1
                && unchanged.first?["windows"] as? Int == 9, "\(label.out)\n\(plain.out)")
    }

    @Test("earshot publish, worker and events from the shell: events in every label format equal label's (file column = source id)")
    func commandLine() throws {
        let redis = try TestRedis()
        let wav = Repo.path("AudioSamples/speech-noise-16k.wav")
        let pub = try runEarshot(["publish", "--redis", redis.url, "--source", "cli-1", "--chunk-ms", "250", wav])
        #expect(pub.status == 0, "\(pub.err)")
        let again = try runEarshot(["publish", "--redis", redis.url, "--source", "cli-1", wav])
        #expect(again.status != 0 && again.err.contains("published once"), "\(again.err)")
        let worker = try WorkerProcess(name: "cli", redis: redis)
        for format in SegmentFormat.allCases {
            let events = try runEarshot(["events", "--redis", redis.url, "--source", "cli-1", "--follow", "--format", format.rawValue])
            #expect(events.status == 0, "\(events.err)")
            let label = try runEarshot(["label", "--format", format.rawValue, wav])
            let id = format == .rttm ? "speech-noise-16k" : wav
            #expect(events.out == label.out.replacingOccurrences(of: id, with: "cli-1"), "\(format)")
        }
        // Live capture (ALSA's file plugin over the same samples) as a source.
        let config = try Fixtures.captureConfigFile(name: "earshot_pub")
        let live = try runEarshot(["publish", "--redis", redis.url, "--source", "mic", "--device", "earshot_pub", "--duration", "36.499", "--buffer-seconds", "60"],
                                  environment: ["ALSA_CONFIG_PATH": config])
        #expect(live.status == 0, "\(live.err)")
        let mic = try runEarshot(["events", "--redis", redis.url, "--source", "mic", "--follow", "--format", "csv"])
        let label = try runEarshot(["label", "--format", "csv", wav])
        #expect(mic.out == label.out.replacingOccurrences(of: wav, with: "mic"))
        // Every source at once, sorted by source.
        let all = try runEarshot(["events", "--redis", redis.url, "--format", "csv"])
        #expect(all.out == label.out.replacingOccurrences(of: wav, with: "cli-1")
                + label.out.split(separator: "\n").dropFirst().map { $0.replacingOccurrences(of: wav, with: "mic") + "\n" }.joined())
        #expect(worker.stop() == 0)
        let bad = try runEarshot(["worker", "--redis", "redis://127.0.0.1:notaport"])
        #expect(bad.status == 64 && bad.err.contains("the port must be"), "\(bad.err)")
    }
}
