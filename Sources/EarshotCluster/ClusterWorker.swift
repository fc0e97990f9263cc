import Earshot
import EarshotRedis
import EarshotTelemetry
import Glibc

/// A worker of a cluster on Redis Streams: it owns sources (one stream of audio each), runs
/// all of them in one batched channel set of one model, appends their events, and checkpoints
/// each source's whole-stream snapshot atomically with the acknowledgement of its audio. A
/// worker that dies loses nothing: another claims its sources, restores their last snapshots
/// and replays the audio after them; the events it writes again carry the same ids and are
/// refused. Workers share the sources evenly, by a heartbeat count of the live ones.
///
/// One thread runs it (`run`), and a round's batched step takes `WorkerOptions.threads` cores; Redis errors are retried with backoff, never thrown. A source
/// whose own keys Redis refuses (a key of another type, a group deleted) fails alone.
/// By concern: its options (`WorkerOptions.swift`), the round loop (`+Rounds`: reading and
/// stepping the sources' audio), ownership (`+Ownership`: heartbeat, fair share, taking and
/// giving back sources), checkpoints (`+Checkpoints`: restoring, writing, a source's end or
/// failure) and idle sources (`+Idle`).
public final class ClusterWorker {
    public let model: Model
    public let options: LabelOptions
    public let settings: WorkerOptions
    var channels: ChannelSet
    private var connection: RedisConnection?
    var owned: [String: Owned] = [:]
    var byChannel: [Int: String] = [:]
    var summary = WorkerSummary()
    /// The fair share: sources this worker should hold.
    var target = 1
    var nextHeartbeat = 0
    /// From the publishing of each entry processed since the last heartbeat to its processing.
    var latencies = LatencyHistogram()
    var entriesSinceStats = 0
    /// Per source, the last seq after which a gap made it be taken up again.
    var gapRetried: [String: Int] = [:]
    /// Where the next look at `P:idle` starts (HSCAN's cursor).
    var idleCursor = "0"
    /// Every round's batched step, and every entry's latency, since the worker started.
    var stepTimes = LatencyHistogram()
    var entryLatencies = LatencyHistogram()
    /// The reply of the read sent while the last batch stepped, when it brought audio.
    var readAhead: RedisReply?
    private let published = Locked(WorkerMetrics())
    private var lastPublished = 0

    /// What the worker last published for a metrics endpoint: its figures, its health and `text`
    /// for a scrape. Never waits for the worker.
    public var metrics: WorkerMetrics { published.withLock { $0 } }

    /// `metrics` for another thread (a metrics endpoint's): a copy under the worker's lock.
    public var metricsReader: @Sendable () -> WorkerMetrics {
        let published = self.published
        return { published.withLock { $0 } }
    }

    /// One source this worker owns.
    struct Owned {
        let id: String
        /// Its registry entry, pending with this worker while it owns the source.
        var registryEntry: String
        var channel: Int?
        var lastSeq = 0
        var lastEntry = "0-0"
        /// The last audio entry read from its stream (processed, skipped or refused).
        var lastRead = "0-0"
        /// When an entry last came, or when it was taken (ms on the monotonic clock).
        var lastHeard: Int
        /// Audio entries processed since the last checkpoint.
        var unacked: [String] = []
        var done = false
        var failed = false
    }

    /// The largest checkpoint snapshot read (a stream's snapshot is kilobytes; a larger one is
    /// refused as damaged, not held).
    static let maxSnapshotBytes = 64 << 20

    public init(model: Model, options: LabelOptions? = nil, settings: WorkerOptions) throws(StreamError) {
        self.model = model
        self.options = options ?? LabelOptions(model: model)
        try self.options.validate()
        self.settings = settings
        guard settings.threads >= 1 else { throw .invalidOption(name: "threads", value: "\(settings.threads)", expected: ">= 1") }
        channels = ChannelSet(model: model, options: self.options)
        channels.threads = settings.threads
    }

    var keys: ClusterKeys { settings.keys }
    var group: RedisArgument { RedisArgument(settings.group) }
    var me: RedisArgument { RedisArgument(settings.name) }

    /// Sources owned now.
    public var ownedSources: [String] { owned.keys.sorted() }

    /// Runs until `shouldStop` says so, then checkpoints and hands back every source it owns.
    /// The wait between attempts doubles up to 5 s until an iteration succeeds again.
    public func run(shouldStop: () -> Bool) -> WorkerSummary {
        var backoff = 0.1
        var failing = false
        while !shouldStop() {
            do {
                if connection == nil {
                    let c = try RedisConnection(settings.endpoint, timeout: max(5, settings.claimAfter))
                    connection = c
                    try setUp(c)
                    if failing { log("connected to \(settings.endpoint) again") }
                    try recoverOwn(c)
                }
                if let c = connection { try iteration(c) }
                backoff = 0.1
                failing = false
                publish(connected: true)
            } catch {
                log("\(error); retrying in \(Self.format(backoff)) s (sources resume from their checkpoints)", level: .warning)
                failing = true
                dropAll()
                connection?.close()
                connection = nil
                summary.reconnects += 1
                publish(connected: false, now: true)
                var slept = 0.0
                while slept < backoff && !shouldStop() { usleep(50_000); slept += 0.05 }
                backoff = min(backoff * 2, 5)
            }
        }
        if let c = connection {
            do {
                for id in owned.keys.sorted() { try release(id, c) }
                try c.expect(["ZREM", RedisArgument(keys.workers), me])
            } catch {
                log("stopping: \(error); the sources' pending audio will be claimed after \(Self.format(settings.claimAfter)) s", level: .warning)
            }
        }
        publish(connected: false, now: true)
        return summary
    }

    /// A line for the operator, naming the source it is about.
    func log(_ message: String, source: String? = nil, level: LogLevel = .info) {
        settings.log(LogRecord(message, level: level, [("model", model.name)] + (source.map { [("source", $0)] } ?? [])))
    }

    /// Publishes the worker's figures for the metrics endpoint: at most every 100 ms, unless `now`.
    private func publish(connected: Bool, now: Bool = false) {
        let ms = WallClock.monotonicMillis()
        guard now || ms - lastPublished >= 100 || !published.withLock({ $0.connected }) else { return }
        lastPublished = ms
        let figures = WorkerMetrics(model: model.name, sources: owned.count, streams: owned.values.filter { $0.channel != nil }.count,
                                    steps: channels.stepsRun, summary: summary, stepTimes: stepTimes,
                                    entryLatencies: entryLatencies, connected: connected)
        published.withLock { $0 = figures }
    }

    /// Seconds as people read them in a log: whole seconds bare, else to the millisecond (0.1, 1.6).
    static func format(_ s: Double) -> String {
        let ms = Int((s * 1000).rounded())
        return ms % 1000 == 0 ? String(ms / 1000) : String(Double(ms) / 1000)
    }

    private func setUp(_ c: RedisConnection) throws(RedisError) {
        try createGroup(keys.sources, c)
        try heartbeat(c)
    }

    func createGroup(_ key: String, _ c: RedisConnection) throws(RedisError) {
        let r = try c.command(["XGROUP", "CREATE", RedisArgument(key), group, "0", "MKSTREAM"])
        if let e = r.errorMessage, !e.hasPrefix("BUSYGROUP") { throw .refused(command: "XGROUP CREATE \(key)", message: e) }
    }

    /// After a restart or a lost connection: the registry entries still pending with this name
    /// are this worker's sources; it takes them up from their checkpoints.
    private func recoverOwn(_ c: RedisConnection) throws(RedisError) {
        var after = "0"
        while true {
            let reply = try c.expect(["XREADGROUP", "GROUP", group, me, "COUNT", "100", "STREAMS", RedisArgument(keys.sources), RedisArgument(after)])
            let entries = StreamReplies.streams(reply).first?.entries ?? []
            if entries.isEmpty { return }
            for e in entries { try take(registryEntry: e.id, fields: e.fields, c) }
            after = entries[entries.count - 1].id
        }
    }
}
