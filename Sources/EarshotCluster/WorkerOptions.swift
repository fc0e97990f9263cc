import Earshot
import EarshotRedis
import EarshotTelemetry

/// How a worker joins a cluster.
public struct WorkerOptions: Sendable {
    /// The Redis server.
    public var endpoint: RedisEndpoint
    /// The consumer group, on the registry and on every audio stream.
    public var group = "earshot"
    /// This worker's consumer name: a worker started again under its name takes its own
    /// sources back first.
    public var name: String
    public var keys = ClusterKeys()
    /// A source's snapshot is written (and its audio acknowledged) every this many entries,
    /// and when it ends or moves.
    public var checkpointEvery = 20
    /// A source whose owner has not been heard from for this long (seconds) is claimed.
    public var claimAfter: Double = 5
    /// Seconds between heartbeats (and rebalancing).
    public var heartbeat: Double = 1
    /// Audio entries read per source at a time.
    public var readCount = 10
    /// Whether the next read of the sources' audio is sent before a batch steps, so that Redis
    /// gathers it meanwhile (false: each read after the batch's writes).
    public var readAhead = true
    /// Threads a round's batched step is split between (its sources cut into that many batches,
    /// each on its own core; the same events as one batch). 1 (the default): the worker's thread
    /// alone, which leaves the other cores to Redis and the publishers where they share the
    /// machine (there, on 2 cores, splitting the step made one worker fall behind sooner).
    public var threads = 1
    /// How long a read waits for audio (ms).
    public var blockMs = 100
    /// The most bytes of audio in one entry. A larger entry fails its source
    /// (`ClusterError.entryTooLarge`); its bytes are dropped as they are read, never held, so a
    /// read holds at most `readCount` entries of this size per source.
    public var maxEntryBytes = ClusterLimits.maxEntryBytes
    /// A source that sends nothing for this long (seconds) is set aside: checkpointed and let go,
    /// its id kept in `P:idle`. At a heartbeat of any worker after its audio stream has a new
    /// entry, it goes back on the registry and is taken up from its checkpoint. 0: never.
    public var idleAfter: Double = 60
    /// Messages for the operator (connection lost and regained, sources taken and given up).
    public var log: @Sendable (LogRecord) -> Void = { _ in }

    public init(endpoint: RedisEndpoint, name: String) {
        self.endpoint = endpoint
        self.name = name
    }
}

/// What a worker did, when it stops.
public struct WorkerSummary: Sendable, Equatable {
    public var sourcesTaken = 0
    public var sourcesEnded = 0
    public var sourcesFailed = 0
    public var sourcesReleased = 0
    /// Sources set aside for sending nothing for `idleAfter`, and sources put back on the
    /// registry when their audio came again.
    public var sourcesIdled = 0
    public var sourcesWoken = 0
    public var entries = 0
    public var events = 0
    /// Events a replay wrote again, which Redis refused as already there.
    public var duplicateEvents = 0
    public var checkpoints = 0
    public var reconnects = 0
}
