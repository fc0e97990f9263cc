import Dispatch
import Earshot
import Foundation

enum ServeCommand {
    static let usage = """
        earshot serve [--uri tcp://HOST:PORT|unix://PATH|stdio://] [--model NAME|PATH[,NAME...]]
                      [--threshold X|NAME=X,...] [--window N|NAME=N,...] [--refractory MS|NAME=MS,...]
                      [--max-clients N] [--max-buffer-seconds S] [--idle-timeout S] [--event-timeout S]
                      [--max-payload BYTES] [--tick-ms MS] [--shards N] [--verbose]
            A Wyoming wake-word and voice-activity service (the protocol of Home Assistant's voice
            satellites): describe → info; detect NAMES; audio-start / audio-chunk (any rate,
            width 1-4, any channel count) / audio-stop; answers detection, not-detected,
            voice-started / voice-stopped and error. Each connection is one stream with its own
            state; every stream of a model steps in one batch.
            --uri          where to listen (default tcp://0.0.0.0:10400)
            --model        the models served (default okay-nabu,hey-jarvis,alexa,hey-mycroft,silero-vad):
                           wake words answer detection; voice activity models voice-started/stopped
            --max-clients  clients at once (default 4096); one more gets an error and is closed
            --max-buffer-seconds  audio read but not yet stepped per client before its socket is
                           no longer read (default 2)
            --idle-timeout seconds without a byte before a client is closed (default 120)
            --event-timeout seconds an event may take to arrive whole (default 10)
            --max-payload  the most bytes of an event's data or payload (default 1048576)
            --tick-ms      how often streams with new audio step together (default 10)
            --shards       threads stepping streams (default: one per core)
            --verbose      a line per connection and a summary every 10 s on stderr
            SIGTERM or Ctrl-C: stops accepting, finishes every stream, exits 0.
        """

    static let defaultModels = "okay-nabu,hey-jarvis,alexa,hey-mycroft,silero-vad"

    static func run(_ words: [String]) async throws {
        if words.contains("--help") {
            try out(usage)
            return
        }
        let args = try Arguments(words, valued: ["uri", "model", "threshold", "window", "refractory", "max-clients", "max-buffer-seconds",
                                                 "idle-timeout", "event-timeout", "max-payload", "tick-ms", "shards", "min-speech", "min-silence", "pad", "max-speech"],
                                 switches: ["verbose"], command: "serve")
        guard args.positionals.isEmpty else {
            throw UsageError("serve takes no files: '\(args.positionals[0])'", hint: "earshot serve --uri tcp://0.0.0.0:10400")
        }
        let uri: ServeURI
        do { uri = try ServeURI(args.string("uri") ?? "tcp://0.0.0.0:\(ServeURI.defaultPort)") } catch {
            throw UsageError("\(error)", hint: "earshot serve --uri tcp://0.0.0.0:10400")
        }
        var modelArgs = args
        if args.string("model") == nil { modelArgs.setOption("model", defaultModels) }
        let chosen = try LabelCommand.models(modelArgs)
        var served: [ServedModel] = []
        for (name, model) in zip(chosen.names, chosen.models) {
            served.append(ServedModel(model: model, options: try LabelCommand.options(modelArgs, model: model, name: name)))
        }
        let names = served.map(\.model.name)
        if let repeated = names.first(where: { n in names.filter { $0 == n }.count > 1 }) {
            throw UsageError("--model: \(repeated) is named twice", hint: "each model once: --model okay-nabu,silero-vad")
        }
        var options = ServeOptions()
        options.maxClients = try args.int("max-clients", default: options.maxClients, range: 1...1_000_000)
        options.maxBufferSeconds = try args.double("max-buffer-seconds", default: options.maxBufferSeconds, range: 0.01...3600)
        options.idleTimeout = try args.double("idle-timeout", default: options.idleTimeout, range: 0.01...604_800)
        options.eventTimeout = try args.double("event-timeout", default: options.eventTimeout, range: 0.01...3600)
        let payload = try args.int("max-payload", default: options.limits.payloadBytes, range: 256...(1 << 30))
        options.limits.payloadBytes = payload
        options.limits.dataBytes = payload
        options.tickMs = try args.double("tick-ms", default: options.tickMs, range: 0.1...1000)
        options.shards = try args.int("shards", default: options.shards, range: 1...256)
        options.version = EarshotCommand.version
        if args.flag("verbose") {
            options.log = { line in printError("earshot serve: \(line)") }
        }
        // A client that goes away while we write to it is an error of that write, not a signal.
        signal(SIGPIPE, SIG_IGN)
        let server = try WyomingServer(uri: uri, models: served, options: options)
        if !args.flag("verbose") { printError("earshot serve: \(names.joined(separator: ", ")) on \(server.address)") }
        // SIGTERM and SIGINT stop it gracefully.
        var sources: [DispatchSourceSignal] = []
        for sig in [SIGTERM, SIGINT] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { server.stop() }
            source.resume()
            sources.append(source)
        }
        let summary = await server.serve()
        for s in sources { s.cancel() }
        if args.flag("verbose") {
            printError("earshot serve: \(summary.accepted) clients served, \(summary.streamsFinished) streams finished, "
                       + "\(summary.droppedChunks) chunks dropped")
        }
    }
}
