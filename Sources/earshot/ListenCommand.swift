import Earshot
import Foundation

enum ListenCommand {
    static func run(_ words: [String]) async throws -> Int32 {
        let args = try Arguments(words, spec: Specs.listen)
        guard args.positionals.isEmpty else {
            throw UsageError("listen takes no files (it captures from --device)", hint: "earshot listen --device default")
        }
        // --model a,b,c and --gate NAME as in label.
        let chosen = try LabelCommand.models(args)
        let printScores = args.flag("scores")
        if printScores && chosen.models.count > 1 { throw UsageError("--scores takes one model", hint: "listen with each model on its own to see its scores") }
        let interactive = isatty(STDOUT_FILENO) != 0
        var listening: [(model: Model, options: LabelOptions)] = []
        for (name, m) in zip(chosen.names, chosen.models) {
            var o = try LabelCommand.options(args, model: m, name: name)
            o.includeScores = printScores || interactive  // the live view shows each step's score
            listening.append((m, o))
        }
        let model = listening[0].model
        let formatName = args.string("format") ?? (interactive ? "text" : "jsonl")
        guard formatName == "text" || formatName == "jsonl" else {
            throw UsageError("--format \(formatName): expected text or jsonl")
        }
        var settings = ALSACapture.Settings()
        settings.device = args.string("device") ?? "default"
        settings.sampleRate = args.int("rate", default: model.sampleRate)
        settings.channels = args.int("channels")
        if let name = args.string("sample-format") {
            guard let format = ALSACapture.SampleFormat(rawValue: name.uppercased())
                ?? ["s16": .s16, "s32": .s32, "float": .float][name.lowercased()] else {
                throw UsageError("--sample-format \(name): expected s16, s32 or float (S16_LE, S32_LE, FLOAT_LE)")
            }
            settings.format = format
        }
        settings.latency = .milliseconds(args.int("latency-ms"))
        if args.string("duration") != nil {
            let seconds = args.double("duration")
            settings.maxFrames = Int(seconds * Double(settings.sampleRate))
        }
        // Audio held between capture and the model before the oldest is dropped (and reported).
        let bufferSeconds = args.double("buffer-seconds")
        settings.queuedFrames = Int(bufferSeconds * Double(settings.sampleRate))
        let capture = try ALSACapture(settings)
        if args.flag("verbose") {
            printError("earshot: capturing '\(settings.device)': \(settings.channels) ch at \(settings.sampleRate) Hz, period \(capture.periodFrames) frames, buffer \(capture.bufferFrames) frames")
        }
        let view = LiveView(model: model, channels: settings.channels, interactive: interactive && formatName == "text",
                            json: formatName == "jsonl", printScores: printScores)
        let labeler = try LiveLabeler(models: listening, gate: chosen.gate, showGate: chosen.showGate)
        // Ctrl-C, SIGTERM (a service manager's stop) and SIGHUP (the terminal went away) stop
        // capture alike; open segments are then closed and printed, and the exit code is 0.
        let work = Task { try await labeler.run(capture) { view.show($0) } }
        view.onWriteFailure = { work.cancel() }  // nowhere to write: stop, and say so
        let stops = [SIGINT, SIGTERM, SIGHUP].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number)
            source.setEventHandler { work.cancel() }
            source.resume()
            return source
        }
        let summary = try await work.value
        for source in stops { source.cancel() }
        view.finish()
        if let failure = view.writeFailure { throw failure }
        if args.flag("verbose") {
            let p50 = summary.latencyPercentile(0.5).map(LiveView.milliseconds) ?? "-"
            let p99 = summary.latencyPercentile(0.99).map(LiveView.milliseconds) ?? "-"
            printError("earshot: \(summary.frames) frames captured, \(summary.droppedFrames) dropped, \(summary.overruns) overruns; delivery latency p50 \(p50) ms, p99 \(p99) ms")
        }
        return 0
    }
}

/// What `listen` prints: in a pipe one line per event; on a terminal a live line per channel
/// (label, score bar, input level, dropped audio) above the finished segments.
/// Every write is checked: the first that fails is kept in `writeFailure` and `onWriteFailure`
/// stops the run.
/// `@unchecked Sendable`: the listening task calls `show` one delivery at a time, and `finish`
/// only after that task has ended (`onWriteFailure` is set before the task's first delivery
/// can fail), so its state is never touched from two threads at once.
final class LiveView: @unchecked Sendable {
    let model: Model
    let interactive: Bool
    let json: Bool
    let printScores: Bool
    private var current: [String]
    private var score: [Float]
    private var level: [Float]
    private var dropped: [Int]
    private var drawnLines = 0
    private var lastDraw = ContinuousClock.now - .seconds(1)
    private let output = OutputFile.standardOutput
    private(set) var writeFailure: OutputError?
    var onWriteFailure: @Sendable () -> Void = {}

    /// Writes text to standard output at once; after a failure, nothing more.
    private func emit(_ text: String) {
        guard writeFailure == nil else { return }
        do {
            try output.write(text: text)
            try output.flush()
        } catch {
            writeFailure = error
            onWriteFailure()
        }
    }

    init(model: Model, channels: Int, interactive: Bool, json: Bool, printScores: Bool) {
        self.model = model
        self.interactive = interactive
        self.json = json
        self.printScores = printScores
        current = Array(repeating: "-", count: channels)
        score = Array(repeating: 0, count: channels)
        level = Array(repeating: -.infinity, count: channels)
        dropped = Array(repeating: 0, count: channels)
    }

    static func milliseconds(_ d: Duration) -> String {
        String(format: "%.1f", Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15)
    }

    func show(_ delivery: LiveLabeler.Delivery) {
        var lines: [String] = []
        let latency = delivery.latency.map(Self.milliseconds)
        for (k, l) in delivery.levels.enumerated() where l.isFinite || delivery.latency != nil { level[k] = l }
        for event in delivery.events {
            switch event {
            case let .scores(s):
                score[s.channel] = s.scores.max() ?? 0
                if printScores && !interactive { lines.append(json ? SegmentFormat.scoresLine(s, labels: model.labels, file: "live") : "") }
            case let .started(s):
                current[s.channel] = s.label
                if !interactive { lines.append(line("started", s, latency)) }
            case let .ended(s):
                current[s.channel] = "-"
                lines.append(line("ended", s, latency))
            case let .detected(d):
                let lat = latency.map { ",\"latencyMs\":\($0)" } ?? ""
                lines.append(json ? "{\"event\":\"detected\",\"channel\":\(d.channel),\"label\":\(SegmentFormat.quotedLabel(d.label)),\"time\":\(String(format: "%.3f", d.seconds)),\"score\":\(String(format: "%.4f", d.score))\(lat)}"
                             : "\(current.count > 1 ? "ch\(d.channel)  " : "")\(SegmentFormat.clock(d.seconds))  detected  \(d.label)  \(String(format: "%.2f", d.score))")
            case let .dropped(channel, samples, total):
                dropped[channel] = total
                lines.append(json ? "{\"event\":\"dropped\",\"channel\":\(channel),\"samples\":\(samples),\"total\":\(total)}"
                             : "ch\(channel)  dropped \(samples) samples (\(total) in all)")
            case let .failed(channel, error):
                lines.append(json ? "{\"event\":\"failed\",\"channel\":\(channel),\"error\":\"\(error)\"}" : "ch\(channel)  failed: \(error)")
            }
        }
        lines = lines.filter { !$0.isEmpty }
        if interactive {
            let now = ContinuousClock.now
            guard !lines.isEmpty || now - lastDraw > .milliseconds(100) else { return }
            lastDraw = now
            clearStatus()
            for l in lines { emit(l + "\n") }
            drawStatus()
        } else if !lines.isEmpty {
            emit(lines.joined(separator: "\n") + "\n")
        }
    }

    func finish() {
        if interactive { clearStatus() }
    }

    private func line(_ kind: String, _ s: Segment, _ latency: String?) -> String {
        if json {
            let end = kind == "ended" ? ",\"end\":\(String(format: "%.3f", s.endSeconds)),\"score\":\(String(format: "%.4f", s.confidence))" : ""
            let lat = latency.map { ",\"latencyMs\":\($0)" } ?? ""
            return "{\"event\":\"\(kind)\",\"channel\":\(s.channel),\"label\":\"\(s.label)\",\"start\":\(String(format: "%.3f", s.startSeconds))\(end)\(lat)}"
        }
        let channel = current.count > 1 ? "ch\(s.channel)  " : ""
        if kind == "started" { return "\(channel)\(SegmentFormat.clock(s.startSeconds))  ...           \(s.label)" }
        return "\(channel)\(SegmentFormat.clock(s.startSeconds))  \(SegmentFormat.clock(s.endSeconds))  \(s.label)  \(String(format: "%.2f", s.confidence))"
    }

    private func clearStatus() {
        if drawnLines > 0 { emit("\u{1B}[\(drawnLines)A\u{1B}[J") }
        drawnLines = 0
    }

    private func drawStatus() {
        for k in current.indices {
            let filled = Int((score[k] * 20).rounded())
            let bar = String(repeating: "#", count: max(0, min(filled, 20))) + String(repeating: ".", count: max(0, 20 - filled))
            let db = level[k].isFinite ? String(format: "%6.1f dB", level[k]) : "  -inf dB"
            emit("ch\(k)  \(current[k].padding(toLength: 10, withPad: " ", startingAt: 0)) [\(bar)] \(String(format: "%.2f", score[k]))  in \(db)  dropped \(dropped[k])\n")
        }
        drawnLines = current.count
    }
}
