import EarshotTelemetry

/// What serve and worker share for their operators: their log lines on stderr (text, or one JSON
/// object a line with --log-format json) and their metrics endpoint (--metrics).
enum ServiceTelemetry {
    static let logFormat = OptionSpec.choice("log-format", ["text", "json"], default: "text",
                                             "stderr's lines: text, or one JSON object a line (time, level, message, and fields such as "
                                             + "client, source, model) for journald or Loki")
    static let metrics = OptionSpec.text("metrics", "tcp://HOST:PORT", default: "none",
                                         "serve Prometheus metrics at http://HOST:PORT/metrics (text format 0.0.4) and /health (200 ok, else 503); "
                                         + "port 0: any free one, named in the log")

    /// Writes a service's log records to stderr as --log-format says: text after `prefix`
    /// ("earshot serve: ..."), or JSON with `context`'s fields (the command, the worker's name).
    static func log(_ args: Arguments, prefix: String, context: [(name: String, value: String)]) -> @Sendable (LogRecord) -> Void {
        let json = args.string("log-format") == "json"
        return { record in printError(json ? record.json(context: context) : "\(prefix): \(record)") }
    }

    /// The metrics endpoint of --metrics, started (nil without the option).
    /// - Throws: `UsageError` for an address that is not tcp://HOST:PORT; `TelemetryError` when it
    ///   cannot be bound.
    static func start(_ args: Arguments, metrics: @escaping @Sendable () -> String, health: @escaping @Sendable () -> Bool,
                      log: @Sendable (LogRecord) -> Void) throws -> MetricsServer? {
        guard let uri = args.string("metrics") else { return nil }
        let server: MetricsServer
        do { server = try MetricsServer(uri: uri, metrics: metrics, health: health) } catch {
            if case .badAddress = error { throw UsageError("\(error)", hint: "--metrics tcp://127.0.0.1:9100") }
            throw error
        }
        server.start()
        log(LogRecord("metrics on \(server.address)/metrics", [("metrics", server.address)]))
        return server
    }
}
