import Earshot
import Foundation

/// `earshot plot`: a self-contained SVG of a file's audio and what the models make of it:
/// waveform, log-mel spectrogram, each label's score over time with its threshold, the segments
/// and detections as lanes, an optional truth lane, and a time axis. The file is streamed, once
/// for the waveform, once per channel for the spectrogram and once per model, each lane reduced
/// to the picture's pixel columns as it goes: memory and the picture follow `--width`, not
/// the audio's length.
enum PlotCommand {
    static func run(_ words: [String]) async throws -> Int32 {
        let args = try Arguments(words, spec: Specs.plot)
        guard args.positionals.count == 1, let path = args.positionals.first else {
            throw UsageError("plot takes one audio file", hint: "earshot plot AudioSamples/speech-noise-16k.wav -o speech.svg")
        }
        let output = args.string("output") ?? URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent + ".svg"
        let png = output.lowercased().hasSuffix(".png")
        guard png || output.lowercased().hasSuffix(".svg") || output == "-" else {
            throw UsageError("--output \(output): expected a .svg or .png file, or - for standard output")
        }
        let each = (args.string("channels") ?? "mix") == "each"
        let chosen = try LabelCommand.models(args)
        var labelers: [FileLabeler] = []
        for (name, m) in zip(chosen.names, chosen.models) {
            var options = try LabelCommand.options(args, model: m, name: name)
            options.includeScores = true
            labelers.append(FileLabeler(model: m, options: options, channels: each ? .each : .mix))
        }
        let truth = try args.string("truth").map(readTruth) ?? []
        let svg = try await draw(path: path, labelers: labelers, each: each, truth: truth, width: args.int("width"))
        if output == "-" {
            try out(svg, terminator: "")
            return 0
        }
        let svgPath = png ? FileManager.default.temporaryDirectory.appendingPathComponent("earshot-plot-\(getpid()).svg").path : output
        let file = try OutputFile.open(svgPath)
        try file.write(svg)
        try file.commit()
        if png {
            defer { try? FileManager.default.removeItem(atPath: svgPath) }
            let tool = ["/usr/bin/rsvg-convert", "/usr/local/bin/rsvg-convert"].first { FileManager.default.isExecutableFile(atPath: $0) }
            guard let tool else {
                throw UsageError("--output \(output): a PNG needs rsvg-convert (Debian: apt-get install librsvg2-bin)", hint: "write an .svg instead")
            }
            let convert = Process()
            convert.executableURL = URL(fileURLWithPath: tool)
            convert.arguments = ["-o", output, svgPath]
            try convert.run()
            convert.waitUntilExit()
            guard convert.terminationStatus == 0 else { throw OutputError(path: output, reason: "rsvg-convert failed (exit \(convert.terminationStatus))", cannotCreate: true) }
        }
        if !args.flag("quiet") { printError("earshot plot: \(output)") }
        return 0
    }

    /// The lanes of a picture, top to bottom, for each channel in turn.
    enum Lane {
        case waveform(channel: Int)
        case spectrogram(channel: Int)
        case scores(model: Int, channel: Int)
        /// A model's segments and detections of one of its shown labels.
        case events(model: Int, channel: Int, label: Int)
        case truth(channel: Int, label: String)
    }

    /// The front end of the spectrogram lane: librosa's log-mel at 16 kHz, 10 ms hops.
    static let spectrogram = FeatureConfig.logMel(sampleRate: 16000, nFFT: 512, hopLength: 160, melCount: 64, log: .decibels(topDB: 80))

    /// The SVG of `path` with each labeller's scores and events, and the truth (true spans of a
    /// label a model has are judged against its segments and detections: hits, misses, false alarms).
    static func draw(path: String, labelers: [FileLabeler], each: Bool, truth: [TruthSpan], width: Int) async throws -> String {
        let file = try AudioFile(path: path)
        // Read more than once, from its start: a regular file whose length is known.
        var status = stat()
        guard let total = file.frameCount, stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            throw UsageError("plot \(path): not a regular file of known length (a pipe?); plot reads its file more than once",
                             hint: "save it to a file first: sox INPUT recording.wav; earshot plot recording.wav")
        }
        let rate = file.sampleRate, channelCount = each ? file.channelCount : 1
        let mel = spectrogram.mel ?? MelConfig(melCount: spectrogram.featureCount)
        let seconds = Double(total) / Double(rate)
        // Each model's lanes: its labels but the background; a sound-events model's labels are
        // many, so its lanes are the labels it heard (a first pass over the file finds them).
        var shown = labelers.map { l in l.model.labels.filter { $0 != l.options.backgroundLabel } }
        for (m, labeler) in labelers.enumerated() where labeler.options.events != nil {
            shown[m] = try await heardLabels(labeler, path: path)
        }
        let shownIndices = zip(labelers, shown).map { l, names in names.compactMap { l.model.labels.firstIndex(of: $0) } }
        let truthLabels = Array(Set(truth.map(\.label))).sorted()
        var lanes: [Lane] = []
        for k in 0..<channelCount {
            lanes += [.waveform(channel: k), .spectrogram(channel: k)]
            for m in labelers.indices {
                lanes.append(.scores(model: m, channel: k))
                lanes += shown[m].indices.map { .events(model: m, channel: k, label: $0) }
            }
            lanes += truthLabels.map { .truth(channel: k, label: $0) }
        }
        func caption(_ lane: Lane) -> String {
            func on(_ k: Int) -> String { channelCount > 1 ? "ch \(k) " : "" }
            switch lane {
            case let .waveform(k): return on(k) + "waveform"
            case let .spectrogram(k): return on(k) + "log-mel"
            case let .scores(m, k): return on(k) + labelers[m].model.name + " scores"
            case let .events(m, k, i): return on(k) + shown[m][i]
            case let .truth(k, l): return on(k) + "truth " + l
            }
        }
        var plot = Plot(width: width, seconds: seconds, title: path, captions: lanes.map(caption))
        let n = plot.columns

        // The waveform: the file a chunk at a time, each sample into its column.
        var waves = (0..<channelCount).map { _ in ColumnExtremes(count: n, length: total) }
        var position = 0
        while true {
            let chunk = each ? try file.readChannels(maxFrames: 65536) : [try file.readMono(maxFrames: 65536)]
            guard let frames = chunk.first?.count, frames > 0 else { break }
            for (k, samples) in chunk.enumerated() { waves[k].add(samples: samples[...], from: position) }
            position += frames
        }
        // The spectrogram of each channel: each frame at its centre, in the file's clock.
        let hop = Double(spectrogram.stft.hopLength) * Double(rate) / Double(spectrogram.sampleRate)
        var spectra: [ColumnExtremes] = []
        for k in 0..<channelCount {
            var s = ColumnExtremes(count: n, length: total, width: mel.melCount)
            var frame = 0
            let features = FileFeatures(config: spectrogram, channels: channelCount > 1 || file.channelCount == 1 ? .channel(k) : .mix)
            try features.run(path: path) { m in
                for t in 0..<m.frameCount {
                    s.add(m[frame: t], at: Int(Double(frame) * hop))
                    frame += 1
                }
            }
            spectra.append(s)
        }
        // Each model's scores and events; a true span is found by any model of its label.
        let judged = Set(shown.joined()).intersection(truthLabels)
        var matches: [[String: TruthMatch]] = (0..<channelCount).map { _ in
            Dictionary(uniqueKeysWithValues: judged.map { l in
                (l, TruthMatch(spans: truth.filter { $0.label == l }.map { ($0.start, $0.end) }, window: DetectionEvaluation.defaultWindow))
            })
        }
        var scores = shown.map { labels in (0..<channelCount).map { _ in ColumnExtremes(count: n, length: total, width: labels.count) } }
        var marks = shown.map { labels in (0..<channelCount).map { _ in labels.map { _ in SpanLane(columns: n, seconds: seconds) } } }
        for (m, labeler) in labelers.enumerated() {
            _ = try await labeler.label(path: path) { events, _ in
                for event in events where (0..<channelCount).contains(event.channel) {
                    let k = event.channel
                    switch event {
                    case let .scores(s):
                        scores[m][k].add(shownIndices[m].map { s.scores[$0] }, at: s.end - 1)
                    case let .ended(s):
                        guard let i = shown[m].firstIndex(of: s.label) else { break }
                        marks[m][k][i].span(s.startSeconds, s.endSeconds, matches[k][s.label]?.segment(s.startSeconds, s.endSeconds) ?? .detected)
                    case let .detected(d):
                        guard let i = shown[m].firstIndex(of: d.label) else { break }
                        marks[m][k][i].mark(d.seconds, matches[k][d.label]?.detection(d.seconds) ?? .detected)
                    case let .failed(_, error):
                        printError("earshot plot: \(path): channel \(k) of \(labeler.model.name) stopped: \(error)")
                    default: break
                    }
                }
            }
        }

        for lane in lanes {
            switch lane {
            case let .waveform(k): plot.waveform(waves[k], label: caption(lane))
            case let .spectrogram(k): plot.spectrogram(spectra[k], mel: mel, sampleRate: spectrogram.sampleRate, label: caption(lane))
            case let .scores(m, k):
                plot.scores(scores[m][k], labels: shown[m], shown: shown[m], threshold: labelers[m].options.threshold, label: caption(lane))
            case let .events(m, k, i): plot.lane(marks[m][k][i], label: caption(lane), kind: "segments")
            case let .truth(k, l):
                var spans = SpanLane(columns: n, seconds: seconds)
                if let match = matches[k][l] {
                    for (span, found) in zip(match.spans, match.found) { spans.span(span.start, span.end, found ? .hit : .miss) }
                } else {
                    for t in truth.filter({ $0.label == l }).sorted(by: { $0.start < $1.start }) { spans.span(t.start, t.end, .truth) }
                }
                plot.lane(spans, label: caption(lane), kind: "truth")
            }
        }
        return plot.finish()
    }

    /// The most lanes of one sound-events model's labels.
    static let maxEventLanes = 24

    /// The labels a sound-events model heard in the file, as its lanes: those with events (the
    /// earliest first), then those that were ever among a window's k best (the rule's, or 5; the
    /// best score first), at most `maxEventLanes` (a note says how many more).
    static func heardLabels(_ labeler: FileLabeler, path: String) async throws -> [String] {
        let labels = labeler.model.labels
        let background = labeler.options.backgroundLabel.flatMap { labels.firstIndex(of: $0) }
        let k = labeler.options.events?.topK ?? 5
        var firstEvent: [Int: Double] = [:], bestTop: [Int: Float] = [:]
        _ = try await labeler.label(path: path) { events, _ in
            for event in events {
                switch event {
                case let .scores(s):
                    for i in TopLabels.best(k, of: s.scores, excluding: background) { bestTop[i] = max(bestTop[i] ?? 0, s.scores[i]) }
                case let .ended(e):
                    if let i = labels.firstIndex(of: e.label) { firstEvent[i] = min(firstEvent[i] ?? .infinity, e.startSeconds) }
                default: break
                }
            }
        }
        let withEvents = firstEvent.sorted { ($0.value, $0.key) < ($1.value, $1.key) }.map(\.key)
        let topOnly = bestTop.filter { firstEvent[$0.key] == nil }.sorted { (-$0.value, $0.key) < (-$1.value, $1.key) }.map(\.key)
        let all = withEvents + topOnly
        if all.count > maxEventLanes {
            printError("earshot plot: \(labeler.model.name): \(all.count) labels heard; the \(maxEventLanes) first drawn (those with events first)")
        }
        return all.prefix(maxEventLanes).map { labels[$0] }
    }

    struct TruthSpan { var start: Double; var end: Double; var label: String }

    /// start,end,label in seconds, one per line; a header line that names the columns (start,
    /// end, label, and channel, as AudioSamples' truth files have) picks them out.
    static func readTruth(_ path: String) throws -> [TruthSpan] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw UsageError("--truth \(path): cannot read the file") }
        var lines = text.split(whereSeparator: \.isNewline).map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        var columns = (start: 0, end: 1, label: 2)
        if let header = lines.first, Double(header.first ?? "") == nil {
            guard let s = header.firstIndex(of: "start"), let e = header.firstIndex(of: "end"), let l = header.firstIndex(of: "label") else {
                throw UsageError("--truth \(path): the header names no start, end and label columns")
            }
            columns = (s, e, l)
            lines.removeFirst()
        }
        var spans: [TruthSpan] = []
        for (n, parts) in lines.enumerated() {
            guard parts.count > max(columns.start, columns.end, columns.label), let s = Double(parts[columns.start]),
                  let e = Double(parts[columns.end]), e >= s else {
                throw UsageError("--truth \(path): line \(n + 2) is not start,end,label in seconds")
            }
            spans.append(TruthSpan(start: s, end: e, label: parts[columns.label]))
        }
        return spans
    }
}
