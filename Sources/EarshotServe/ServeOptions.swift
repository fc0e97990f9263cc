import Earshot
import EarshotTelemetry
import EarshotWyoming
import Foundation

/// A service's limits and pace. Over a limit a client gets an `error` event and its connection
/// is closed; the server and every other client go on.
public struct ServeOptions: Sendable {
    /// Clients connected at once; one more is answered with an error and closed.
    public var maxClients = 4096
    /// The most bytes of an event's header line, data and payload.
    public var limits = WyomingReader.Limits()
    /// The most audio (seconds) a client may have sent that has not been stepped yet: beyond
    /// it the server stops reading from the client until the next tick has stepped it, so a
    /// client sending faster than real time is slowed by TCP, never buffered without bound.
    public var maxBufferSeconds: Double = 2
    /// A client that sends nothing for this long (seconds) is closed.
    public var idleTimeout: Double = 120
    /// An event whose first bytes came this long ago (seconds) and that is still incomplete
    /// closes its client (a client sending a byte at a time).
    public var eventTimeout: Double = 10
    /// Bytes waiting to be sent to a client that is not reading; more closes it.
    public var maxOutputBytes = 1 << 20
    /// How often the streams with new audio are stepped together (ms). A chunk that arrives
    /// when no tick is due is stepped at once.
    public var tickMs: Double = 10
    /// With this many clients or more, each is read at most every `readBatchMs` (its chunks of
    /// that time in one read: fewer system calls and acknowledgements per chunk, answers up to that
    /// much later) instead of as its data arrives.
    public var readBatchClients = 500
    /// How often clients are read when batched (0: never batched).
    public var readBatchMs: Double = 40
    /// Shards of streams stepped in parallel: one per core by default. With more, one per core
    /// is used at first and one more for each 256 streams, and the cores take them as they come
    /// free. (Four per core gained nothing at 2000 Silero clients on 2 cores: over six runs each
    /// the median p99 was 72.8 ms against 64.8 ms with one per core.)
    public var shards = ProcessInfo.processInfo.activeProcessorCount
    /// Where a line per connection and a periodic summary go (nil: nowhere). Never stdout.
    public var log: (@Sendable (LogRecord) -> Void)?
    /// Seconds between summary lines in the log.
    public var summaryInterval: Double = 10
    /// The service's version in `info`.
    public var version = "1"
    /// Seconds a stopping server waits for its clients to take their last events.
    public var drainSeconds: Double = 5

    /// The defaults.
    public init() {}

    /// Checks every limit against its range.
    /// - Throws: `ServeError.invalidOption` naming the option.
    public func validate() throws(ServeError) {
        func check(_ name: String, _ v: Double, _ range: ClosedRange<Double>) throws(ServeError) {
            guard v.isFinite, range.contains(v) else { throw .invalidOption(name: name, value: "\(v)", expected: "\(range.lowerBound)...\(range.upperBound)") }
        }
        guard (1...1_000_000).contains(maxClients) else { throw .invalidOption(name: "maxClients", value: "\(maxClients)", expected: "1...1000000") }
        try check("maxBufferSeconds", maxBufferSeconds, 0.01...3600)
        try check("idleTimeout", idleTimeout, 0.01...86400 * 7)
        try check("eventTimeout", eventTimeout, 0.01...3600)
        try check("tickMs", tickMs, 0.1...1000)
        try check("readBatchMs", readBatchMs, 0...1000)
        try check("readBatchClients", Double(readBatchClients), 1...1e9)
        try check("summaryInterval", summaryInterval, 0.1...86400)
        try check("drainSeconds", drainSeconds, 0...600)
        guard (1...256).contains(shards) else { throw .invalidOption(name: "shards", value: "\(shards)", expected: "1...256") }
        guard (1024...(1 << 30)).contains(maxOutputBytes) else { throw .invalidOption(name: "maxOutputBytes", value: "\(maxOutputBytes)", expected: "1024...2^30") }
        for (name, v) in [("headerBytes", limits.headerBytes), ("dataBytes", limits.dataBytes), ("payloadBytes", limits.payloadBytes)]
        where !(256...(1 << 30)).contains(v) {
            throw .invalidOption(name: name, value: "\(v)", expected: "256...2^30 bytes")
        }
    }
}

/// What a service did, counted as it ran.
public struct ServeSummary: Sendable {
    /// Connections accepted.
    public var accepted = 0
    /// Connections refused because `maxClients` were connected.
    public var refused = 0
    /// Connections closed by the server: a protocol error, a timeout, a client not reading.
    public var closedByServer = 0
    /// The most clients connected at once.
    public var peakClients = 0
    /// Streams started (audio-start) and finished (audio-stop).
    public var streamsStarted = 0
    /// Streams ended by `audio-stop` (or the server's stop).
    public var streamsFinished = 0
    /// Audio chunks refused (before audio-start, a rate other than the stream's) and their samples.
    public var droppedChunks = 0
    /// Samples of the refused chunks.
    public var droppedSamples = 0
    /// Seconds of audio received.
    public var audioSeconds = 0.0
    /// Model steps run, all models.
    public var steps = 0
    /// Ticks that stepped new audio.
    public var ticks = 0
    /// Reads of a group of clients on the batch timer (`readBatchClients` or more connected),
    /// not as their data arrived.
    public var batchedReads = 0
    /// How long ticks took (every model step of every stream with new audio).
    public var tickTimes = LatencyHistogram()
    /// Errors sent to clients, by the code of the error event (`protocol`, `timeout`,
    /// `audio-format`, `too-many-clients`...).
    public var errors: [String: Int] = [:]
}
