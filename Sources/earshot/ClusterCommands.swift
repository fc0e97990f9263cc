import Dispatch
import Earshot
import EarshotCluster
import EarshotRedis
import EarshotTelemetry
import Foundation
import Synchronization

/// Ctrl-C and SIGTERM set it; the command's loop sees it and stops cleanly.
/// `@unchecked Sendable`: `sources` is written once, in `init`, and only cancelled after; the
/// flag is atomic.
final class StopSignal: @unchecked Sendable {
    private final class Flag: Sendable { let value = Atomic<Bool>(false) }
    private let flag = Flag()
    private var sources: [DispatchSourceSignal] = []

    init(_ signals: [Int32] = [SIGINT, SIGTERM]) {
        let flag = self.flag
        for number in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { flag.value.store(true, ordering: .relaxed) }
            source.resume()
            sources.append(source)
        }
    }

    var stopped: Bool { flag.value.load(ordering: .relaxed) }

    func cancel() { sources.forEach { $0.cancel() } }
}

/// Redis not reached (or refusing only for now) for the whole of `--retry-for`: exit 69.
struct RedisUnavailable: Error, CustomStringConvertible {
    let error: RedisError
    let seconds: Double
    var description: String { "\(error); gave up after \(OptionSpec.format(seconds)) s (--retry-for)" }
}

enum ClusterCommands {
    static func endpoint(_ args: Arguments) throws(UsageError) -> RedisEndpoint {
        do { return try RedisEndpoint(url: args.string("redis") ?? "redis://127.0.0.1:6379") } catch {
            throw UsageError("--redis: \(error)", hint: "--redis redis://127.0.0.1:6379")
        }
    }

    static func keys(_ args: Arguments) -> ClusterKeys { ClusterKeys(prefix: args.string("prefix") ?? "earshot") }

    /// Connects, retrying with backoff while the server is not there yet (a note on stderr),
    /// for `--retry-for` seconds at most; then `RedisUnavailable` (exit 69). A refusal that
    /// waiting cannot mend (a wrong password) is thrown at once.
    static func connect(_ endpoint: RedisEndpoint, stop: StopSignal, command: String, retryFor: Double) throws -> RedisConnection {
        var wait = 0.1
        let start = Date()
        while true {
            let left = retryFor - Date().timeIntervalSince(start)
            do { return try RedisConnection(endpoint, timeout: max(0.1, min(5, left))) } catch {
                guard error.isTransient, !stop.stopped else { throw error }
                let now = retryFor - Date().timeIntervalSince(start)
                guard now > 0 else { throw RedisUnavailable(error: error, seconds: retryFor) }
                printError("earshot \(command): \(error); retrying in \(String(format: "%.1f", min(wait, now))) s")
                Thread.sleep(forTimeInterval: min(wait, now))
                wait = min(wait * 2, 5)
            }
        }
    }

    static func retryFor(_ args: Arguments) -> Double { args.double("retry-for") }

    /// A source's publisher that rides out a lost connection: it reconnects with backoff
    /// (saying so) and sends the entry again under the same seq (a worker skips a seq it has),
    /// for `retryFor` seconds an outage at most.
    final class Publishing {
        let endpoint: RedisEndpoint
        let stop: StopSignal
        let retryFor: Double
        var publisher: SourcePublisher

        init(_ endpoint: RedisEndpoint, stop: StopSignal, retryFor: Double, _ publisher: SourcePublisher) {
            self.endpoint = endpoint
            self.stop = stop
            self.retryFor = retryFor
            self.publisher = publisher
        }

        /// Runs `op` until it succeeds; a lost connection or a refusal the server gives only
        /// for now (loading its data after a restart, say) is waited out, with backoff, for
        /// `retryFor` seconds from the first failure.
        func send(_ op: (SourcePublisher) throws(ClusterError) -> Void) throws {
            var wait = 0.1
            var since: Date?
            while true {
                do { return try op(publisher) } catch {
                    let start = since ?? Date()
                    since = start
                    try waitOut(error, wait: &wait, since: start)
                    publisher = try resumed(since: start)
                }
            }
        }

        /// A publisher on a new connection, resuming the source at its seq.
        private func resumed(since start: Date) throws -> SourcePublisher {
            var wait = 0.1
            while true {
                let p = publisher
                let left = retryFor - Date().timeIntervalSince(start)
                let c = try ClusterCommands.connect(endpoint, stop: stop, command: "publish", retryFor: max(0, left))
                do {
                    let resumed = try SourcePublisher(resuming: c, source: p.source, sampleRate: p.sampleRate, channels: p.channels,
                                                      format: p.format, seq: p.seq, keys: p.keys)
                    resumed.maxEntryBytes = p.maxEntryBytes
                    return resumed
                } catch {
                    c.close()
                    try waitOut(error, wait: &wait, since: start)
                }
            }
        }

        /// Says what failed and sleeps (doubling `wait`) when it is transient and time is left;
        /// rethrows otherwise (`RedisUnavailable` once `retryFor` has passed).
        private func waitOut(_ error: ClusterError, wait: inout Double, since start: Date) throws {
            guard case let .redis(e) = error, e.isTransient, !stop.stopped else { throw error }
            let left = retryFor - Date().timeIntervalSince(start)
            guard left > 0 else { throw RedisUnavailable(error: e, seconds: retryFor) }
            if e.isConnectionLost {
                printError("earshot publish: \(e); reconnecting")
            } else {
                printError("earshot publish: \(e); retrying in \(String(format: "%.1f", min(wait, left))) s")
                Thread.sleep(forTimeInterval: min(wait, left))
                wait = min(wait * 2, 5)
            }
        }

        func append(_ samples: [Float]) throws { try send { p throws(ClusterError) in _ = try p.append(samples) } }
        func end() throws { try send { p throws(ClusterError) in try p.end() } }
        var seq: Int { publisher.seq }
    }

    // MARK: worker

    static func worker(_ words: [String]) throws {
        let args = try Arguments(words, spec: Specs.worker)
        let chosen = try LabelCommand.models(args)
        guard chosen.models.count == 1, let model = chosen.models.first else {
            throw UsageError("--model: a worker runs one model", hint: "start one worker per model: --model okay-nabu")
        }
        let options = try LabelCommand.options(args, model: model, name: chosen.names[0])
        var settings = WorkerOptions(endpoint: try endpoint(args), name: args.string("name") ?? defaultName())
        settings.group = args.string("group") ?? "earshot"
        settings.keys = keys(args)
        settings.checkpointEvery = args.int("checkpoint-every")
        settings.claimAfter = args.double("claim-after")
        settings.heartbeat = min(1, settings.claimAfter / 3)
        settings.maxEntryBytes = args.int("max-entry-bytes")
        settings.idleAfter = args.double("idle-after")
        settings.threads = args.optionalInt("threads") ?? 1
        let quiet = args.flag("quiet")
        let name = settings.name
        let write = ServiceTelemetry.log(args, prefix: "earshot worker \(name)", context: [("command", "worker"), ("worker", name)])
        let log: @Sendable (LogRecord) -> Void = { record in if !quiet { write(record) } }
        settings.log = log
        let worker = try ClusterWorker(model: model, options: options, settings: settings)
        let stop = StopSignal()
        log(LogRecord("\(model.name) on \(settings.endpoint), group \(settings.group)", [("model", model.name)]))
        let published = worker.metricsReader
        let metrics = try ServiceTelemetry.start(args, metrics: { published().text }, health: { published().isHealthy }, log: log)
        let summary = worker.run { stop.stopped }
        stop.cancel()
        metrics?.stop()
        log(LogRecord("stopped; \(summary.entries) entries, \(summary.events) events (\(summary.duplicateEvents) already there), "
                      + "\(summary.sourcesEnded) sources ended, \(summary.sourcesFailed) failed, \(summary.sourcesReleased) handed on, "
                      + "\(summary.sourcesIdled) set aside idle, \(summary.sourcesWoken) woken, \(summary.checkpoints) checkpoints", [("model", model.name)]))
    }

    static func defaultName() -> String {
        "\(ProcessInfo.processInfo.hostName)-\(getpid())"
    }

    // MARK: publish

    static func publish(_ words: [String]) async throws {
        let args = try Arguments(words, spec: Specs.publish)
        let source = args.string("source") ?? ""
        let device = args.string("device")
        guard (device == nil) == (args.positionals.count == 1), args.positionals.count <= 1 else {
            throw UsageError("publish takes one FILE or --device PCM", hint: "earshot publish --source room-1 recording.wav")
        }
        let chunkMs = args.double("chunk-ms")
        let format: ClusterSampleFormat = args.string("sample-format") == "f32" ? .f32 : .s16
        let maxEntryBytes = args.int("max-entry-bytes")
        /// An entry of --chunk-ms at `rate` within --max-entry-bytes, or a usage error.
        func checkEntrySize(rate: Int) throws {
            let bytes = max(1, Int(chunkMs / 1000 * Double(rate))) * (format == .f32 ? 4 : 2)
            guard bytes <= maxEntryBytes else {
                throw UsageError("--chunk-ms \(OptionSpec.format(chunkMs)) at \(rate) Hz \(format.rawValue) makes entries of \(bytes) bytes, over --max-entry-bytes \(maxEntryBytes)",
                                 hint: "a shorter --chunk-ms, or a larger --max-entry-bytes here and for the workers")
            }
        }
        let stop = StopSignal()
        let retry = retryFor(args)
        if let device {
            var settings = ALSACapture.Settings()
            settings.device = device
            settings.sampleRate = args.int("rate", default: 16000)
            settings.channels = 1
            settings.latency = .milliseconds(max(1, min(40, Int(chunkMs))))
            if args.string("duration") != nil { settings.maxFrames = Int(args.double("duration") * Double(settings.sampleRate)) }
            // Audio held for a slow Redis before the oldest is dropped (and published as silence).
            settings.queuedFrames = Int(args.double("buffer-seconds") * Double(settings.sampleRate))
            try checkEntrySize(rate: settings.sampleRate)
            let redis = try connect(try endpoint(args), stop: stop, command: "publish", retryFor: retry)
            let capture = try ALSACapture(settings)
            let publisher = Publishing(try endpoint(args), stop: stop, retryFor: retry,
                                       try SourcePublisher(connection: redis, source: source, sampleRate: settings.sampleRate, format: format,
                                                           group: args.string("group") ?? "earshot", keys: keys(args)))
            publisher.publisher.maxEntryBytes = maxEntryBytes
            let frames = max(1, Int(chunkMs / 1000 * Double(settings.sampleRate)))
            var pending: [Float] = []
            var next = 0, dropped = 0
            func flush(_ all: Bool) throws {
                while pending.count >= frames || (all && !pending.isEmpty) {
                    let n = min(frames, pending.count)
                    try publisher.append(Array(pending[..<n]))
                    pending.removeFirst(n)
                }
            }
            do {
                for try await chunk in capture.chunks() {
                    if stop.stopped { break }
                    if chunk.firstFrame > next {
                        // Frames the capture dropped: silence in their place keeps the source's clock.
                        dropped += chunk.firstFrame - next
                        pending += [Float](repeating: 0, count: chunk.firstFrame - next)
                    }
                    next = chunk.firstFrame + chunk.frames
                    pending += chunk.samples
                    try flush(false)
                }
                try flush(true)
            } catch {
                await capture.stop()
                throw error
            }
            await capture.stop()
            try publisher.end()
            if dropped > 0 { printError("earshot publish: \(source): \(dropped) frames dropped by the capture (Redis too slow), published as silence") }
            if !args.flag("quiet") { printError("earshot publish: \(source): \(publisher.seq - 1) entries from \(device)") }
            return
        }
        let path = args.positionals[0]
        let file = try AudioFile(path: path)
        let rate = file.sampleRate
        let frames = max(1, Int(chunkMs / 1000 * Double(rate)))
        try checkEntrySize(rate: rate)
        let redis = try connect(try endpoint(args), stop: stop, command: "publish", retryFor: retry)
        let publisher = Publishing(try endpoint(args), stop: stop, retryFor: retry,
                                   try SourcePublisher(connection: redis, source: source, sampleRate: rate, format: format,
                                                       group: args.string("group") ?? "earshot", keys: keys(args)))
        publisher.publisher.maxEntryBytes = maxEntryBytes
        let realtime = args.flag("realtime")
        let start = DispatchTime.now().uptimeNanoseconds
        var sent = 0
        while !stop.stopped {
            let chunk = try file.readMono(maxFrames: frames)
            if chunk.isEmpty { break }
            if realtime {
                let due = start + UInt64(Double(sent) / Double(rate) * 1e9)
                let now = DispatchTime.now().uptimeNanoseconds
                if due > now { usleep(UInt32(min(1_000_000, (due - now) / 1000))) }
            }
            try publisher.append(chunk)
            sent += chunk.count
        }
        try publisher.end()
        stop.cancel()
        if !args.flag("quiet") {
            printError("earshot publish: \(source): \(publisher.seq - 1) entries, \(String(format: "%.1f", Double(sent) / Double(rate))) s at \(rate) Hz")
        }
    }

    // MARK: events

    static func events(_ words: [String]) throws -> Int32 {
        let args = try Arguments(words, spec: Specs.events)
        let keys = keys(args)
        let follow = args.flag("follow")
        let formatName = args.string("format") ?? (isatty(STDOUT_FILENO) != 0 ? "text" : "jsonl")
        guard let format = SegmentFormat(rawValue: formatName) else { throw UsageError("--format \(formatName): expected \(SegmentFormat.allCases.map(\.rawValue).joined(separator: ", "))") }
        let only = args.string("source")
        if let only { try ClusterKeys.validate(source: only) }
        let stop = StopSignal()
        let endpoint = try endpoint(args), retry = retryFor(args)
        var redis = try connect(endpoint, stop: stop, command: "events", retryFor: retry)
        let out = try OutputFile.open(args.string("output"))
        if let header = format.header { try out.write(header) }
        // A Raven table's selections run through the output; its frequency box is each event's Nyquist.
        var line = SegmentFormat.LineContext()
        line.selection = 0
        func row(_ rate: Int) -> SegmentFormat.LineContext {
            line.selection += 1
            line.highFrequency = rate / 2
            return line
        }
        var cursors: [String: String] = [:]
        var ended: Set<String> = []
        var failed = false
        var lastScan = 0.0
        func pass(block: Int?) throws {
            let now = Date().timeIntervalSince1970
            if only == nil && now - lastScan > 1 {
                for s in try ClusterEvents.sources(redis, keys: keys) where cursors[s] == nil { cursors[s] = "0" }
                lastScan = now
            } else if let only, cursors[only] == nil { cursors[only] = "0" }
            for source in cursors.keys.sorted() where !ended.contains(source) {
                while true {
                    let (events, next) = try ClusterEvents.read(redis, source: source, after: cursors[source] ?? "0", blockMs: cursors.count == 1 ? block : nil, keys: keys)
                    cursors[source] = next
                    for e in events {
                        switch e.kind {
                        case let .segment(s): try out.write(format.line(s, file: source, multiChannel: false, context: row(s.sampleRate)))
                        case let .detection(d): try out.write(format.line(d, file: source, multiChannel: false, context: row(d.sampleRate)))
                        case let .error(text): printError("earshot events: \(source): \(text)"); failed = true
                        case .end: ended.insert(source)
                        }
                    }
                    if events.isEmpty || ended.contains(source) { break }
                }
            }
        }
        try pass(block: nil)
        if follow {
            // Until every source followed has ended (one source), or until stopped (all sources);
            // a lost connection is made again (for --retry-for at most), reading on from the
            // same places.
            while !stop.stopped {
                if let only, ended.contains(only) { break }
                try out.flush()
                do { try pass(block: 500) } catch let ClusterError.redis(e) where e.isTransient {
                    printError("earshot events: \(e); reconnecting")
                    redis.close()
                    redis = try connect(endpoint, stop: stop, command: "events", retryFor: retry)
                }
                if cursors.count != 1 { Thread.sleep(forTimeInterval: 0.2) }
            }
        }
        stop.cancel()
        try out.commit()
        return failed ? ExitCode.dataError : 0
    }
}
