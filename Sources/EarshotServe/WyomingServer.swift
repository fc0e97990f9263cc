/// A Wyoming wake-word and voice-activity service: every connection is one stream with its own
/// explicit state, and every stream of a model steps in one batch per tick, spread over the
/// cores. `describe` → `info`; `detect` names the wake words to listen for; `audio-start`,
/// `audio-chunk` (1000-768000 Hz, 1-4 bytes a sample, 1-64 channels: `WyomingAudioFormat`; mixed
/// and resampled) and `audio-stop` stream the audio; answers are `detection`, `not-detected`
/// (after `audio-stop` when nothing was detected), `voice-started` / `voice-stopped` (voice
/// activity models) and `error`.
///
/// One thread (the caller of `run`) owns the sockets and every connection; a tick steps the
/// shards on worker threads, one core each, while that thread goes on reading, and its answers
/// are sent when it ends. (`ServeLoop` is that thread's loop; `WyomingSession` the protocol on
/// each connection.)
public final class WyomingServer: Sendable {
    /// Where it listens (with the port chosen, when 0 was asked for).
    public var address: ServeURI { loop.address }
    /// The models every stream runs.
    public let models: [ServedModel]
    /// Its limits and pace.
    public let options: ServeOptions
    private let loop: ServeLoop<WyomingSession>

    /// Binds `uri` (for stdio://, takes standard input and output as its one client).
    ///
    ///     let server = try WyomingServer(uri: try ServeURI("tcp://0.0.0.0:10400"),
    ///                                    models: [ServedModel(model: try Model.bundled("okay-nabu"))])
    ///     let summary = await server.serve()   // until server.stop() (from any thread)
    ///
    /// - Parameters:
    ///   - uri: `.tcp(host:port:)` (port 0: any free one; `address` tells which), `.unix(path:)`
    ///     or `.stdio`.
    ///   - models: the models every stream runs (wake words answer `detection`, voice activity
    ///     models `voice-started` / `voice-stopped`).
    ///   - options: limits and pace.
    /// - Throws: `ServeError.invalidOption` for options out of range, `.socket` naming the
    ///   address when it cannot be bound, `.noModels`.
    public init(uri: ServeURI, models: [ServedModel], options: ServeOptions = ServeOptions()) throws(ServeError) {
        guard !models.isEmpty else { throw .noModels }
        try options.validate()
        for m in models {
            do { try m.options.validate() } catch { throw .invalidOption(name: "options of \(m.model.name)", value: "\(error)", expected: "valid label options") }
        }
        self.models = models
        self.options = options
        loop = try ServeLoop(uri: uri, engine: ServeEngine(models: models, shards: options.shards),
                             service: WyomingService(models: models, version: options.version), options: options)
    }

    /// Asks the server to stop (from any thread, e.g. on SIGTERM): it stops accepting, finishes
    /// every stream (their last events, `not-detected`), sends what is queued and `run` returns.
    public func stop() { loop.stop() }

    /// Runs the loop on a thread of its own until the server stops.
    public func serve() async -> ServeSummary { await loop.serve() }

    /// Starts the loop on a thread of its own and returns at once (no task needs to be
    /// scheduled for it to start); `wait()` gives its summary once it has stopped.
    public func start() { loop.start() }

    /// Blocks until a loop started with `start()` has stopped; what it did.
    public func wait() -> ServeSummary { loop.wait() }

    /// What the loop last published for a metrics endpoint (every 250 ms): its figures, its
    /// health, and `text` for a scrape. Safe from any thread; never waits for the loop.
    public var metrics: ServeMetrics { loop.metrics.withLock { $0 } }

    /// Runs the loop on this thread until the server stops; what it did.
    public func run() -> ServeSummary { loop.run() }
}
