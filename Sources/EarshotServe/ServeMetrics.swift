import Earshot
import EarshotTelemetry

/// What a service's loop last published for its metrics endpoint (every 250 ms, and when it
/// stops): read by a scrape on another thread, never waiting for the loop.
public struct ServeMetrics: Sendable {
    /// The models served, in order.
    public var models: [String] = []
    /// Clients connected now.
    public var clients = 0
    /// Open streams per model (`models`' order).
    public var streams: [Int] = []
    /// What the loop has counted so far (its steps as of the last tick that ended).
    public var summary = ServeSummary()
    /// When the loop last published (it runs: at least every 250 ms).
    public var published = ContinuousClock.now
    /// The loop has stopped.
    public var stopped = false

    /// Whether the loop runs: not stopped, and heard from within 5 s.
    public var isHealthy: Bool { !stopped && ContinuousClock.now - published < .seconds(5) }

    /// The service's metrics in Prometheus's text format, with the process's own.
    public var text: String {
        var text = MetricsText()
        text.gauge("earshot_clients", "Clients connected.", Double(clients))
        text.gauge("earshot_streams", "Open streams, per model.", zip(models, streams).map { ([("model", $0.0)], Double($0.1)) })
        text.counter("earshot_connections_accepted_total", "Connections accepted.", Double(summary.accepted))
        text.counter("earshot_connections_refused_total", "Connections refused (--max-clients reached, or stopping).", Double(summary.refused))
        text.counter("earshot_connections_closed_by_server_total", "Connections the server closed: a protocol error, a timeout, a client not reading.",
                     Double(summary.closedByServer))
        text.counter("earshot_streams_started_total", "Streams started (audio-start).", Double(summary.streamsStarted))
        text.counter("earshot_streams_finished_total", "Streams finished (audio-stop, or the server's stop).", Double(summary.streamsFinished))
        text.counter("earshot_audio_seconds_total", "Seconds of audio received.", summary.audioSeconds)
        text.counter("earshot_steps_total", "Model steps run, all models (its rate is steps per second).", Double(summary.steps))
        text.counter("earshot_ticks_total", "Ticks that stepped new audio.", Double(summary.ticks))
        text.histogram("earshot_tick_seconds", "How long each tick's steps took (every model step of every stream with new audio).", summary.tickTimes)
        text.counter("earshot_dropped_chunks_total", "Audio chunks refused (before audio-start, a format other than the stream's).",
                     Double(summary.droppedChunks))
        text.counter("earshot_dropped_samples_total", "Samples of the refused chunks.", Double(summary.droppedSamples))
        text.counter("earshot_errors_total", "Errors sent to clients, by kind (the code of Wyoming's error event).",
                     summary.errors.keys.sorted().map { ([("kind", $0)], Double(summary.errors[$0] ?? 0)) })
        ProcessStats.current().write(to: &text)
        return text.output
    }
}
