import Earshot
import Foundation

enum ListenCommand {
    static func run(_ words: [String]) async throws -> Int32 {
        let args = try Arguments(words, spec: Specs.listen)
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
        let labeler = try LiveLabeler(models: listening, gate: chosen.gate, showGate: chosen.showGate)
        let view = LiveView(models: listening, shown: labeler.shownModels, channels: settings.channels,
                            interactive: interactive && formatName == "text", json: formatName == "jsonl", printScores: printScores)
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

/// What `listen` prints: in a pipe one line per event; on a terminal, above the finished
/// segments, a live line per model (per channel and model when there are several channels):
/// the model, the label it hears (its open segment's, or its best-scoring), that label's score
/// as a bar, whether a segment is open or a detection just came, and the channel's input level
/// and dropped audio on the channel's first line. A sound-events model's line shows the
/// window's best labels with their scores (those in an open event marked), and a line under it
/// what was heard in the last minutes: each label's events, the latest first.
/// Every write is checked: the first that fails is kept in `writeFailure` and `onWriteFailure`
/// stops the run.
/// `@unchecked Sendable`: the listening task calls `show` one delivery at a time, and `finish`
/// only after that task has ended (`onWriteFailure` is set before the task's first delivery
/// can fail), so its state is never touched from two threads at once.
final class LiveView: @unchecked Sendable {
    let models: [(model: Model, options: LabelOptions)]
    /// The models with a live line (indices into `models`; a gate asked for only as a gate has none).
    let shown: [Int]
    let interactive: Bool
    let json: Bool
    let printScores: Bool
    let channels: Int

    /// One model on one channel, as its events leave it.
    struct Row {
        /// The open segment's label.
        var open: String?
        /// The label heard most (not the background) and its score at the last step.
        var label: String
        var score: Float = 0
        /// The last detection and when it came (seconds of the stream).
        var detected: (label: String, at: Double)?
        /// The stream's time at the last step (seconds).
        var now: Double = 0
        /// A sound-events model: the last window's best labels and their scores, the labels
        /// with an open event, and the events heard lately (oldest first).
        var top: [(label: String, score: Float)] = []
        var on: Set<String> = []
        var heard: [Segment] = []
    }
    /// [channel][model]
    private(set) var rows: [[Row]]
    private var level: [Float]
    private var dropped: [Int]
    private var drawnLines = 0
    private var lastDraw = ContinuousClock.now - .seconds(1)
    private let output = OutputFile.standardOutput
    private(set) var writeFailure: OutputError?
    var onWriteFailure: @Sendable () -> Void = {}

    /// A detection is shown on its line this long (seconds of the stream).
    static let detectionShownSeconds = 1.5
    /// A sound-events model's history: the events of this long (seconds of the stream), at most
    /// `historyEvents` of them; the live line shows the best `topShown` labels of a window.
    static let historySeconds = 300.0
    static let historyEvents = 200
    static let topShown = 3

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

    init(models: [(model: Model, options: LabelOptions)], shown: [Int]? = nil, channels: Int, interactive: Bool, json: Bool, printScores: Bool) {
        self.models = models
        self.shown = shown ?? Array(models.indices)
        self.interactive = interactive
        self.json = json
        self.printScores = printScores
        self.channels = channels
        let firstRows = models.map { m in Row(label: Self.labels(of: m).first ?? "-") }
        rows = Array(repeating: firstRows, count: channels)
        level = Array(repeating: -.infinity, count: channels)
        dropped = Array(repeating: 0, count: channels)
    }

    /// A model's labels but its background.
    static func labels(of m: (model: Model, options: LabelOptions)) -> [String] {
        m.model.labels.filter { $0 != m.options.backgroundLabel }
    }

    static func milliseconds(_ d: Duration) -> String {
        String(format: "%.1f", LatencyHistogram.milliseconds(d))
    }

    func show(_ delivery: LiveLabeler.Delivery) {
        let lines = record(delivery)
        if interactive {
            let now = ContinuousClock.now
            guard !lines.isEmpty || now - lastDraw > .milliseconds(100) else { return }
            lastDraw = now
            clearStatus()
            for l in lines { emit(l + "\n") }
            let status = statusLines()
            for l in status { emit(l + "\n") }
            drawnLines = status.count
        } else if !lines.isEmpty {
            emit(lines.joined(separator: "\n") + "\n")
        }
    }

    /// Takes a delivery's events into the rows; the lines it prints above them (or in a pipe).
    func record(_ delivery: LiveLabeler.Delivery) -> [String] {
        var lines: [String] = []
        let latency = delivery.latency.map(Self.milliseconds)
        for (k, l) in delivery.levels.enumerated() where k < channels && (l.isFinite || delivery.latency != nil) { level[k] = l }
        for (n, event) in delivery.events.enumerated() {
            let m = n < delivery.models.count ? delivery.models[n] : 0
            guard models.indices.contains(m), (0..<channels).contains(event.channel) else { continue }
            let k = event.channel
            switch event {
            case let .scores(s) where models[m].options.events != nil:
                rows[k][m].now = Double(s.end) / Double(max(s.sampleRate, 1))
                let labels = models[m].model.labels
                let background = models[m].options.backgroundLabel.flatMap { labels.firstIndex(of: $0) }
                let top = TopLabels.best(printScores ? topCount(m) : Self.topShown, of: s.scores, excluding: background)
                rows[k][m].top = top.prefix(Self.topShown).map { (labels[$0], s.scores[$0]) }
                if let best = rows[k][m].top.first { (rows[k][m].label, rows[k][m].score) = best }
                if printScores && !interactive {
                    lines.append(SegmentFormat(rawValue: json ? "jsonl" : "text")?.topScores(s, labels: labels, top: top, file: "live") ?? "")
                }
            case let .scores(s):
                rows[k][m].now = Double(s.end) / Double(max(s.sampleRate, 1))
                let labels = models[m].model.labels
                // The open segment's label, or the best of the labels but the background.
                let candidates = rows[k][m].open.map { [$0] } ?? Self.labels(of: models[m])
                var best: (label: String, score: Float)?
                for l in candidates {
                    guard let i = labels.firstIndex(of: l), i < s.scores.count else { continue }
                    if let b = best, b.score >= s.scores[i] { continue }
                    best = (l, s.scores[i])
                }
                if let best { (rows[k][m].label, rows[k][m].score) = best }
                if printScores && !interactive { lines.append(json ? SegmentFormat.scoresLine(s, labels: labels, file: "live") : "") }
            case let .started(s) where s.isEvent:
                rows[k][m].on.insert(s.label)
                if !interactive { lines.append(line("started", s, latency, form: form(m))) }
            case let .ended(s) where s.isEvent:
                rows[k][m].on.remove(s.label)
                rows[k][m].heard.append(s)
                let since = rows[k][m].now - Self.historySeconds
                rows[k][m].heard.removeAll { $0.endSeconds < since }
                if rows[k][m].heard.count > Self.historyEvents { rows[k][m].heard.removeFirst(rows[k][m].heard.count - Self.historyEvents) }
                lines.append(line("ended", s, latency, form: form(m)))
            case let .started(s):
                rows[k][m].open = s.label
                rows[k][m].label = s.label
                if !interactive { lines.append(line("started", s, latency)) }
            case let .ended(s):
                rows[k][m].open = nil
                lines.append(line("ended", s, latency))
            case let .detected(d):
                rows[k][m].detected = (d.label, d.seconds)
                rows[k][m].label = d.label
                let lat = latency.map { ",\"latencyMs\":\($0)" } ?? ""
                lines.append(json ? "{\"event\":\"detected\",\"channel\":\(d.channel),\"label\":\(SegmentFormat.quotedLabel(d.label)),\"time\":\(String(format: "%.3f", d.seconds)),\"score\":\(String(format: "%.4f", d.score))\(lat)}"
                             : "\(channels > 1 ? "ch\(d.channel)  " : "")\(SegmentFormat.clock(d.seconds))  detected  \(d.label)  \(String(format: "%.2f", d.score))")
            case let .dropped(channel, samples, total):
                dropped[channel] = total
                lines.append(json ? "{\"event\":\"dropped\",\"channel\":\(channel),\"samples\":\(samples),\"total\":\(total)}"
                             : "ch\(channel)  dropped \(samples) samples (\(total) in all)")
            case let .failed(channel, error):
                lines.append(json ? "{\"event\":\"failed\",\"channel\":\(channel),\"error\":\"\(error)\"}" : "ch\(channel)  failed: \(error)")
            }
        }
        return lines.filter { !$0.isEmpty }
    }

    func finish() {
        if interactive { clearStatus() }
    }

    /// How model `m` writes its labels.
    private func form(_ m: Int) -> ModelManifest.LabelForm { models[m].model.manifest.outputs.labelForm ?? .plain }

    /// The k best labels of model `m` that --scores shows (its rule's, or 5).
    private func topCount(_ m: Int) -> Int { models[m].options.events?.topK ?? 5 }

    /// A label as the live view shows it: a "Scientific_Common" label by its common name.
    private static func shown(_ label: String, _ form: ModelManifest.LabelForm) -> String { form.names(label).common }

    private func line(_ kind: String, _ s: Segment, _ latency: String?, form: ModelManifest.LabelForm = .plain) -> String {
        if json {
            let end = kind == "ended" ? ",\"end\":\(String(format: "%.3f", s.endSeconds)),\"score\":\(String(format: "%.4f", s.confidence))" : ""
            // An event's best window and window count (so far, when it starts).
            let event = s.isEvent ? ",\"best\":\(String(format: "%.4f", s.best ?? s.confidence)),\"windows\":\(s.windows ?? 1)" : ""
            let lat = latency.map { ",\"latencyMs\":\($0)" } ?? ""
            return "{\"event\":\"\(kind)\",\"channel\":\(s.channel),\"label\":\(SegmentFormat.quotedLabel(s.label)),\"start\":\(String(format: "%.3f", s.startSeconds))\(end)\(event)\(lat)}"
        }
        let channel = channels > 1 ? "ch\(s.channel)  " : ""
        let label = Self.shown(s.label, form)
        if kind == "started" { return "\(channel)\(SegmentFormat.clock(s.startSeconds))  ...           \(label)" }
        let extra = s.isEvent ? "  best \(String(format: "%.2f", s.best ?? s.confidence)), \(s.windows ?? 1) window\(s.windows == 1 ? "" : "s")" : ""
        return "\(channel)\(SegmentFormat.clock(s.startSeconds))  \(SegmentFormat.clock(s.endSeconds))  \(label)  \(String(format: "%.2f", s.confidence))\(extra)"
    }

    private func clearStatus() {
        if drawnLines > 0 { emit("\u{1B}[\(drawnLines)A\u{1B}[J") }
        drawnLines = 0
    }

    /// A sound-events model's live line: the window's best labels with their scores, an open
    /// event's label marked with '*'.
    private func eventsLine(_ row: Row, form: ModelManifest.LabelForm) -> String {
        let top = row.top.map { "\(Self.padded((row.on.contains($0.label) ? "*" : "") + Self.shown($0.label, form), 22)) \(String(format: "%.2f", $0.score))" }
        return Self.padded(top.joined(separator: "  "), Self.topShown * 27 + (Self.topShown - 1) * 2)
    }

    /// What a sound-events model heard in the last minutes: each label once, the latest first,
    /// with its events' count, best score and the last one's start.
    private func heardLine(_ row: Row, form: ModelManifest.LabelForm) -> String {
        guard !row.heard.isEmpty else { return "heard: nothing in the last \(Int(Self.historySeconds / 60)) min" }
        var order: [String] = []
        var counts: [String: (count: Int, best: Float, last: Double)] = [:]
        for e in row.heard.reversed() {
            if counts[e.label] == nil { order.append(e.label) }
            let c = counts[e.label] ?? (0, 0, e.startSeconds)
            counts[e.label] = (c.count + 1, max(c.best, e.best ?? e.confidence), c.last)
        }
        let items = order.prefix(4).compactMap { label in
            counts[label].map { "\(SegmentFormat.clock($0.last).prefix(8)) \(Self.shown(label, form)) \(String(format: "%.2f", $0.best))\($0.count > 1 ? " ×\($0.count)" : "")" }
        }
        let more = order.count > 4 ? " (+\(order.count - 4) more)" : ""
        return "heard (\(Int(Self.historySeconds / 60)) min): " + items.joined(separator: " · ") + more
    }

    static func padded(_ s: String, _ width: Int) -> String {
        s.count > width ? String(s.prefix(width - 1)) + "…" : s.padding(toLength: width, withPad: " ", startingAt: 0)
    }

    /// The live lines: per channel, one per shown model with its label, score bar and state;
    /// the channel's level and dropped audio on its first line.
    func statusLines() -> [String] {
        let nameWidth = min(24, shown.map { models[$0].model.name.count }.max() ?? 1)
        let labelWidth = min(20, max(5, shown.flatMap { Self.labels(of: models[$0]).map(\.count) }.max() ?? 1))
        var out: [String] = []
        for k in rows.indices {
            for (n, m) in shown.enumerated() {
                let row = rows[k][m]
                let filled = Int((row.score * 20).rounded())
                let bar = String(repeating: "#", count: max(0, min(filled, 20))) + String(repeating: ".", count: max(0, 20 - min(max(filled, 0), 20)))
                let state: String
                if row.open != nil {
                    state = "on"
                } else if let d = row.detected, row.now - d.at < Self.detectionShownSeconds {
                    state = "detected"
                } else {
                    state = ""
                }
                let events = models[m].options.events != nil
                var line = "ch\(k)  \(Self.padded(models[m].model.name, nameWidth))  "
                    + (events ? eventsLine(row, form: form(m))
                              : "\(Self.padded(row.label, labelWidth))  [\(bar)] \(String(format: "%.2f", row.score))  \(Self.padded(state, 8))")
                if n == 0 {
                    let db = level[k].isFinite ? String(format: "%6.1f dB", level[k]) : "  -inf dB"
                    line += "  in \(db)  dropped \(dropped[k])"
                }
                while line.hasSuffix(" ") { line.removeLast() }
                out.append(line)
                if events { out.append(String(repeating: " ", count: 7 + nameWidth) + heardLine(row, form: form(m))) }
            }
        }
        return out
    }
}
