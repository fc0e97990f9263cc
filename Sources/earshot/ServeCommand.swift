import Dispatch
import Earshot
import EarshotServe
import EarshotTelemetry
import Foundation

enum ServeCommand {
    static let defaultModels = "okay-nabu,hey-jarvis,alexa,hey-mycroft,silero-vad"

    static func run(_ words: [String]) async throws {
        let args = try Arguments(words, spec: Specs.serve)
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
        options.maxClients = args.int("max-clients")
        options.maxBufferSeconds = args.double("max-buffer-seconds")
        options.idleTimeout = args.double("idle-timeout")
        options.eventTimeout = args.double("event-timeout")
        let payload = args.int("max-payload")
        options.limits.payloadBytes = payload
        options.limits.dataBytes = payload
        options.tickMs = args.double("tick-ms")
        options.readBatchMs = args.double("read-batch-ms")
        options.readBatchClients = args.int("read-batch-clients")
        options.shards = args.int("shards", default: options.shards)
        options.version = EarshotCommand.version
        let log = ServiceTelemetry.log(args, prefix: "earshot serve", context: [("command", "serve")])
        if args.flag("verbose") { options.log = log }
        // A client that goes away while we write to it is an error of that write, not a signal.
        signal(SIGPIPE, SIG_IGN)
        let server = try WyomingServer(uri: uri, models: served, options: options)
        if !args.flag("verbose") { log(LogRecord("\(names.joined(separator: ", ")) on \(server.address)")) }
        let metrics = try ServiceTelemetry.start(args, metrics: { server.metrics.text }, health: { server.metrics.isHealthy }, log: log)
        var zeroconf: ZeroconfResponder?
        if let name = args.string("zeroconf") {
            guard case let .tcp(host, port) = server.address else {
                throw UsageError("--zeroconf announces a tcp:// service; this one is on \(server.address)", hint: "earshot serve --uri tcp://0.0.0.0:10400 --zeroconf")
            }
            // A service bound to one IPv4 address is announced there; else at every interface's.
            let octets = host.split(separator: ".").compactMap { UInt8($0) }
            let addresses = octets.count == 4 && octets != [0, 0, 0, 0] ? [octets] : nil
            let responder: ZeroconfResponder
            do { responder = try ZeroconfResponder(name: name, port: port, addresses: addresses) } catch {
                if case .invalidOption = error { throw UsageError("--zeroconf \(name): a name of 1-63 bytes without a dot", hint: "--zeroconf kitchen-earshot") }
                throw error
            }
            responder.start()
            zeroconf = responder
            log(LogRecord("announcing \(responder.instance) on \(responder.host) over mDNS", [("zeroconf", responder.instance)]))
        }
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
        metrics?.stop()
        zeroconf?.stop()
        if args.flag("verbose") {
            log(LogRecord("\(summary.accepted) clients served, \(summary.streamsFinished) streams finished, \(summary.droppedChunks) chunks dropped"))
        }
    }
}
