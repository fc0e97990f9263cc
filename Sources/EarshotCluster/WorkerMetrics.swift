import Earshot
import EarshotTelemetry

/// What a worker last published for its metrics endpoint (after each iteration, at most every
/// 100 ms, and whenever its connection to Redis is made or lost): read by a scrape on another
/// thread, never waiting for the worker.
public struct WorkerMetrics: Sendable {
    /// The model it runs.
    public var model = ""
    /// Sources it owns now, and those of them with a stream open (audio received).
    public var sources = 0
    public var streams = 0
    /// Model steps run.
    public var steps = 0
    /// What it has counted so far.
    public var summary = WorkerSummary()
    /// How long each round's batched step took (every source with an entry in the round).
    public var stepTimes = LatencyHistogram()
    /// From an entry's publishing to its processing.
    public var entryLatencies = LatencyHistogram()
    /// Connected to Redis (its last command succeeded).
    public var connected = false

    /// Healthy: connected to Redis.
    public var isHealthy: Bool { connected }

    /// The worker's metrics in Prometheus's text format, with the process's own.
    public var text: String {
        var text = MetricsText()
        text.gauge("earshot_redis_connected", "1 when the worker's last command to Redis succeeded, else 0.", connected ? 1 : 0)
        text.gauge("earshot_sources", "Sources this worker owns.", Double(sources))
        text.gauge("earshot_streams", "Sources with a stream open (audio received), per model.", [([("model", model)], Double(streams))])
        text.counter("earshot_sources_taken_total", "Sources taken (new, claimed, or from their checkpoints).", Double(summary.sourcesTaken))
        text.counter("earshot_sources_ended_total", "Sources that ended (their end entry processed).", Double(summary.sourcesEnded))
        text.counter("earshot_sources_released_total", "Sources handed on to other workers.", Double(summary.sourcesReleased))
        text.counter("earshot_entries_total", "Audio entries processed.", Double(summary.entries))
        text.counter("earshot_events_total", "Events appended.", Double(summary.events))
        text.counter("earshot_duplicate_events_total", "Events a replay wrote again, refused by Redis as already there.", Double(summary.duplicateEvents))
        text.counter("earshot_checkpoints_total", "Checkpoints written.", Double(summary.checkpoints))
        text.counter("earshot_steps_total", "Model steps run (its rate is steps per second).", Double(steps))
        text.histogram("earshot_tick_seconds", "How long each round's batched step took.", stepTimes)
        text.histogram("earshot_entry_latency_seconds", "From an entry's publishing to its processing.", entryLatencies)
        text.counter("earshot_errors_total", "Errors, by kind: a source failed (a bad entry, a key Redis refused), the connection to Redis lost.",
                     [([("kind", "source-failed")], Double(summary.sourcesFailed)), ([("kind", "redis")], Double(summary.reconnects))])
        ProcessStats.current().write(to: &text)
        return text.output
    }
}
