import Earshot
import Foundation

enum LabelCommand {
    static let audioExtensions: Set<String> = ["wav", "flac", "ogg", "oga", "opus", "aif", "aiff", "aifc", "au", "snd", "caf", "w64", "rf64", "mp3", "voc"]

    /// The label options of `earshot label` and `earshot listen`: the model's defaults, overridden.
    static func options(_ args: Arguments, model: Model, name: String? = nil) throws -> LabelOptions {
        var options = LabelOptions(model: model)
        if let v = try perModel(args, "threshold", range: 0...1, model: model, name: name) { options.threshold = v }
        if let v = try perModel(args, "window", range: 1...10_000, model: model, name: name) {
            guard v.rounded() == v else { throw UsageError("--window: expected a whole number of steps") }
            options.detectionWindow = Int(v)
        }
        if let v = try perModel(args, "refractory", range: 0...3_600_000, model: model, name: name) { options.refractoryMs = v }
        if let v = args.optionalDouble("min-speech") { options.minSegmentMs = v }
        if let v = args.optionalDouble("min-silence") { options.minSilenceMs = v }
        if let v = args.optionalDouble("pad") { options.padMs = v }
        if let v = args.optionalDouble("max-speech") { options.maxSegmentSeconds = v }
        if var events = options.events {
            if let k = try perModel(args, "top-k", range: 1...100_000, model: model, name: name) {
                guard k.rounded() == k else { throw UsageError("--top-k: expected a whole number of labels") }
                events.topK = Int(k)
            }
            if let gap = args.string("merge-gap") {
                guard gap == "none" || Double(gap).map({ $0.isFinite && (0...86_400).contains($0) }) == true else {
                    throw UsageError("--merge-gap \(gap): expected seconds in 0...86400, or none (every window its own event)")
                }
                events.mergeGapSeconds = Double(gap)
            }
            if let v = args.optionalDouble("min-duration") { events.minDurationSeconds = v }
            // A file's thresholds, then --threshold LABEL=X: each keeps those of the model's labels.
            let own = Set(model.labels)
            if let file = args.string("thresholds") {
                events.labelThresholds.merge(try LabelOptions.Events.thresholds(file: file, labels: model.labels)) { $1 }
            }
            for (label, value) in try labelPairs(args) where own.contains(label) { events.labelThresholds[label] = value }
            if let v = args.optionalDouble("min-confidence") { options.threshold = v }
            if let v = args.optionalDouble("sensitivity") {
                guard events.sensitivity != nil else {
                    throw UsageError("--sensitivity: \(model.name)'s scores are not logits (its events rule has no sensitivity)")
                }
                events.sensitivity = v
            }
            events.onlyLabels = try onlyLabels(args, model: model)
            options.events = events
        }
        options.includeScores = args.flag("scores")
        do { try options.validate() } catch { throw UsageError("\(error)") }
        return options
    }

    /// The labels that can be events: those --species-list FILE lists, or those the model's
    /// label filter keeps for --lat, --lon and --week (`LabelOptions.Events.labels(kept:by:)`);
    /// nil when neither is given.
    static func onlyLabels(_ args: Arguments, model: Model) throws -> Set<String>? {
        let lat = args.optionalDouble("lat"), lon = args.optionalDouble("lon")
        let file = args.string("species-list")
        if file != nil && (lat != nil || lon != nil) {
            throw UsageError("--species-list and --lat/--lon both choose the labels", hint: "give one of them")
        }
        let choice: LabelOptions.Events.LabelChoice
        if let file {
            choice = .list(path: file)
        } else if lat != nil || lon != nil || args.string("week") != nil {
            guard let lat, let lon else { throw UsageError("--lat, --lon and --week go together: give --lat and --lon (and --week, or the whole year)") }
            choice = .place(latitude: lat, longitude: lon, week: args.int("week", default: LabelOptions.Events.LabelChoice.wholeYear))
        } else {
            choice = .all
        }
        do throws(StreamError) {
            return try LabelOptions.Events.labels(kept: choice, by: model)
        } catch {
            // A place out of range, or no filter model: the run's options are wrong (usage).
            guard case let .invalidOption(name, value, expected) = error else { throw error }
            guard name != "labelFilter" else {
                throw UsageError("--lat/--lon: \(model.name) has no label filter model (BirdNET's location model)",
                                 hint: "give --species-list FILE, or a package imported with --label-filter")
            }
            throw UsageError("--\(name) \(value): expected \(expected)")
        }
    }

    /// The LABEL=X pairs of --threshold (a sound-events model's labels; models' names are
    /// `perModel`'s), in order.
    static func labelPairs(_ args: Arguments) throws(UsageError) -> [(label: String, value: Double)] {
        guard let text = args.string("threshold"), text.contains("=") else { return [] }
        return try text.split(separator: ",").map { pair throws(UsageError) in
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let value = Double(parts[1]), (0...1).contains(value) else {
                throw UsageError("--threshold \(text): expected X or NAME=X,... with X in 0...1")
            }
            return (parts[0], value)
        }
    }

    /// The models of --model NAME[,NAME...] and --gate NAME (added when not among them), loaded;
    /// the gate's index, and whether its own events are shown (it was asked for with --model).
    static func models(_ args: Arguments) throws -> (names: [String], models: [Model], gate: Int?, showGate: Bool) {
        var names = (args.string("model") ?? ModelLocator.defaultModel).split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard !names.isEmpty, names.allSatisfy({ !$0.isEmpty }) else { throw UsageError("--model: expected NAME or NAME,NAME,...") }
        let gateName = args.string("gate")
        let showGate = gateName.map { names.contains($0) } ?? true
        if let gateName, !names.contains(gateName) { names.append(gateName) }
        let locator = ModelLocator(args)
        var models = try names.map { try PrecisionOption.load(args, locator, $0) }
        // --overlap: a sound-events window stream's hop, the window less the overlap.
        if let overlap = args.optionalDouble("overlap") {
            for (i, m) in models.enumerated() where m.manifest.decision?.events != nil {
                let window = m.manifest.audio.contextSamples + m.chunkSamples, rate = Double(m.sampleRate)
                let hop = Int(((Double(window) / rate) - overlap) * rate)
                guard hop >= 1 else {
                    throw UsageError("--overlap \(overlap): \(m.name)'s windows are \(Double(window) / rate) s", hint: "give less than the window")
                }
                models[i] = try PrecisionOption.load(args, locator, names[i], stepSamples: hop)
            }
        }
        try checkModelNames(args, given: names, models: models)
        try checkEventOptions(args, models: models)
        return (names, models, gateName.flatMap { names.firstIndex(of: $0) }, showGate)
    }

    /// The options of a sound-events rule need a model that has one; --thresholds names labels
    /// of those models (a file is read whole here, once, so that its every line is checked).
    static func checkEventOptions(_ args: Arguments, models: [Model]) throws {
        let events = models.filter { $0.manifest.decision?.events != nil }
        guard events.isEmpty else {
            if let file = args.string("thresholds") {
                _ = try LabelOptions.Events.thresholds(file: file, labels: events.flatMap(\.labels))
            }
            return
        }
        for option in Specs.eventRules where args.string(option) != nil {
            throw UsageError("--\(option): \(models.map(\.name).joined(separator: ", ")) \(models.count == 1 ? "has" : "have") no sound-events rule",
                             hint: "it applies to models whose decision has \"events\" (many labels at once); see earshot inspect MODEL")
        }
    }

    /// The options that take a value per model (`--threshold okay-nabu=0.9,alexa=0.95`).
    static let perModelOptions = ["threshold", "window", "refractory", "top-k", "precision"]

    /// Every MODEL of a per-model option's MODEL=X pairs names one of the models given (as given
    /// to --model or --gate, or by the package's own name): another is a usage error naming it,
    /// the models given and the nearest of them. Every command that takes these options loads its
    /// models through `models(_:)`, so this is the one place that decides.
    static func checkModelNames(_ args: Arguments, given names: [String], models: [Model]) throws(UsageError) {
        var known: [String] = []
        for name in names + models.map(\.name) where !known.contains(name) { known.append(name) }
        // --threshold may also name a label of a sound-events model (that label's threshold).
        let labels = models.filter { $0.manifest.decision?.events != nil }.flatMap(\.labels)
        let knownLabels = Set(labels)
        for option in perModelOptions {
            guard let text = args.string(option), text.contains("=") else { continue }
            for pair in text.split(separator: ",") {
                let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
                guard !known.contains(name), option != "threshold" || !knownLabels.contains(name) else { continue }
                let guess = closest(name, in: known + (option == "threshold" ? labels : [])).map { "did you mean \($0)? " } ?? ""
                let what = option == "threshold" && !labels.isEmpty ? "none of the models given (\(names.joined(separator: ", "))) nor their labels"
                    : "none of the models given (\(names.joined(separator: ", ")))"
                throw UsageError("--\(option) \(text): '\(name)' is \(what)",
                                 hint: guess + "name a model given with --model, or give one value for all: --\(option) X")
            }
        }
    }

    /// --NAME X (every model) or --NAME MODEL=X,MODEL=X (each model its own; the others keep
    /// their defaults): the value for `model` (asked for as `name`), nil when none is given.
    static func perModel(_ args: Arguments, _ option: String, range: ClosedRange<Double>, model: Model, name: String?) throws(UsageError) -> Double? {
        guard let text = args.string(option) else { return nil }
        guard text.contains("=") else {
            guard let x = Double(text), x.isFinite, range.contains(x) else {
                throw UsageError("--\(option) \(text): expected a number in \(range.lowerBound)...\(range.upperBound)", hint: "earshot \(args.spec.name) --help")
            }
            return x
        }
        var found: Double?
        for pair in text.split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, let value = Double(parts[1]), range.contains(value) else {
                throw UsageError("--\(option) \(text): expected X or MODEL=X,... with X in \(range.lowerBound)...\(range.upperBound)")
            }
            if parts[0] == name || parts[0] == model.name { found = value }
        }
        return found
    }

    /// Raw PCM on standard input (--rate, --sample-format, --raw-channels), or nil.
    static func rawFormat(_ args: Arguments, files: [String]) throws(UsageError) -> RawPCMFormat? {
        guard let rate = args.optionalInt("rate") else {
            for name in ["sample-format", "raw-channels"] where args.string(name) != nil {
                throw UsageError("--\(name) describes raw PCM on standard input: it needs --rate HZ", hint: "earshot label --rate 16000 -")
            }
            return nil
        }
        guard files.contains("-") else {
            throw UsageError("--rate reads standard input as raw PCM: name it as '-'", hint: "arecord -t raw -f S16_LE -r 16000 | earshot label --rate 16000 -")
        }
        let encoding = RawPCMFormat.Encoding(rawValue: args.string("sample-format") ?? "s16") ?? .s16
        return RawPCMFormat(sampleRate: rate, channelCount: args.int("raw-channels"), encoding: encoding)
    }

    /// Files named, and audio files found in folders named (sorted), in order. Symbolic links
    /// are followed, to folders as to files (a folder named by a link, and linked folders inside
    /// it); a folder reached twice (a link back to a parent) is walked once.
    static func inputs(_ paths: [String]) -> [String] {
        paths.flatMap { path -> [String] in
            if path == "-" { return [path] }
            guard let folder = FileIdentity(path: path), folder.isFolder else { return [path] }
            var seen: Set<FileIdentity> = [folder]
            return audioFiles(in: path, relative: "", seen: &seen).sorted().map { URL(fileURLWithPath: path).appendingPathComponent($0).path }
        }
    }

    /// The audio files under `root/relative`, as paths relative to `root`.
    private static func audioFiles(in root: String, relative: String, seen: inout Set<FileIdentity>) -> [String] {
        let folder = relative.isEmpty ? root : root + "/" + relative
        var found: [String] = []
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] {
            let path = relative.isEmpty ? name : relative + "/" + name
            if let sub = FileIdentity(path: root + "/" + path), sub.isFolder {
                if seen.insert(sub).inserted { found += audioFiles(in: root, relative: path, seen: &seen) }
            } else if audioExtensions.contains(URL(fileURLWithPath: name).pathExtension.lowercased()) {
                found.append(path)
            }
        }
        return found
    }

    static func run(_ words: [String]) async throws -> Int32 {
        let args = try Arguments(words, spec: Specs.label)
        guard !args.positionals.isEmpty else {
            throw UsageError("label needs audio files or folders", hint: "earshot label AudioSamples/speech-noise-16k.wav")
        }
        let outputPath = args.string("output").flatMap { $0 == "-" ? nil : $0 }
        let interactive = isatty(STDOUT_FILENO) != 0 && outputPath == nil
        let formatName = args.string("format") ?? (interactive ? "text" : "jsonl")
        guard let format = SegmentFormat(rawValue: formatName) else {
            throw UsageError("--format \(formatName): expected one of \(SegmentFormat.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        let channelsName = args.string("channels") ?? "mix"
        guard let channels = FileLabeler.Channels(rawValue: channelsName) else {
            throw UsageError("--channels \(channelsName): expected mix or each")
        }
        // --model a,b,c: each model labels the audio with its own state; --gate NAME keeps only the
        // detections its segments overlap.
        let chosen = try models(args)
        // --threads: a window classifier's steps on that many threads; files labelled side by side share them.
        let files = inputs(args.positionals)
        let threads = args.optionalInt("threads") ?? FileLabeler.defaultThreads
        let fileThreads = max(1, threads / max(1, min(files.count, FileLabeler.defaultThreads)))
        var labelers: [FileLabeler] = []
        for (name, m) in zip(chosen.names, chosen.models) {
            labelers.append(FileLabeler(model: m, options: try options(args, model: m, name: name), channels: channels, threads: fileThreads))
        }
        let labeler = labelers[0]
        let multi = labelers.count > 1 ? MultiLabeler(labelers: labelers, gate: chosen.gate, showGate: chosen.showGate) : nil
        if multi != nil && args.flag("scores") {
            throw UsageError("--scores takes one model", hint: "label with each model on its own to see its scores")
        }
        if args.flag("scores") && [.audacity, .rttm, .raven, .birdnet].contains(format) {
            let name = [SegmentFormat.rttm: "RTTM", .raven: "a Raven selection table", .birdnet: "BirdNET-Analyzer's CSV"][format] ?? "an Audacity label track"
            throw UsageError("--scores: \(name) cannot carry scores", hint: "use -f jsonl (a line per step) or -f csv (a table of step scores)")
        }
        // '-': standard input, read as it arrives where its format allows (its events are named '-').
        let raw = try rawFormat(args, files: files)
        @Sendable func open(_ file: String) throws -> AudioFile {
            guard file == "-" else { return try AudioFile(path: file) }
            do { return try AudioFile(raw: raw) } catch AudioError.empty(path: "-") {
                throw UsageError("standard input is empty: pipe audio in, e.g. sox in.mp3 -t wav - | earshot label -")
            }
        }
        if let outputPath, let target = FileIdentity(path: outputPath),
           let input = files.first(where: { FileIdentity(path: $0) == target }) {
            throw UsageError("--output \(outputPath) is also an input (\(input)): refusing to overwrite audio being labelled",
                             hint: "write the labels elsewhere, e.g. --output labels.jsonl")
        }
        // Written to a temporary file beside the output and renamed into place at the end, so
        // that nothing at the output path changes unless the whole run was written.
        let output = try OutputFile.open(outputPath)
        var failures = 0
        var code: Int32?
        let showProgress = isatty(STDERR_FILENO) != 0 && !args.flag("quiet")
        let context = Context(format: format, labelers: labelers, channels: channels, output: output, multipleFiles: files.count > 1,
                              rttmIDs: SegmentFormat.rttmIDs(files), scoreTable: format == .csv && labeler.options.includeScores)
        try context.header()
        if labeler.options.includeScores {
            // Every step's scores: one file at a time, written as they come (memory stays flat
            // however long the file).
            for file in files {
                do {
                    try context.heading(file)
                    let result = try await labeler.label(file: open(file), progress: { fraction in
                        if showProgress { ProgressBar.draw(fraction, label: file) }
                    }) { events, channelCount throws(OutputError) in
                        let failed = try context.write(events, file: file, channelCount: channelCount)
                        if failed > 0 && code == nil { code = ExitCode.dataError }
                        failures += failed
                    }
                    context.finished(result)
                } catch let error as OutputError {
                    throw error
                } catch {
                    printError("earshot: \(error)")
                    if code == nil { code = ExitCode.of(error) }
                    failures += 1
                }
                if showProgress { ProgressBar.clear() }
            }
        } else {
            (failures, code) = try await labelInParallel(files, context: context, showProgress: showProgress) { file, progress in
                if let multi { return try await multi.label(file: open(file)) }
                return try await labeler.label(file: open(file), progress: progress)
            }
        }
        try output.commit()
        if files.isEmpty { printError("earshot: no audio files in \(args.positionals.joined(separator: " "))") }
        if files.isEmpty { return ExitCode.noInput }
        return failures > 0 ? code ?? ExitCode.failure : 0
    }

    /// Files labelled in parallel, as many at once as there are cores, and written in the
    /// order given. Returns how many failed, and the exit code of the first that did.
    static func labelInParallel(_ files: [String], context: Context, showProgress: Bool,
                                label: @escaping @Sendable (String, @escaping @Sendable (Double) -> Void) async throws -> FileLabeler.Result)
    async throws -> (failures: Int, code: Int32?) {
        let width = max(1, ProcessInfo.processInfo.activeProcessorCount)
        typealias Outcome = (index: Int, result: Result<FileLabeler.Result, Error>)
        var pending: [Int: Result<FileLabeler.Result, Error>] = [:]
        var nextToPrint = 0
        var failures = 0
        var code: Int32?
        func writeReady() throws(OutputError) {
            while let outcome = pending.removeValue(forKey: nextToPrint) {
                let file = files[nextToPrint]
                nextToPrint += 1
                switch outcome {
                case let .success(result):
                    try context.heading(file)
                    let failed = try context.write(result.events, file: file, channelCount: result.channelCount)
                    context.finished(result)
                    if failed > 0 && code == nil { code = ExitCode.dataError }
                    failures += failed
                case let .failure(error):
                    printError("earshot: \(error)")
                    if code == nil { code = ExitCode.of(error) }
                    failures += 1
                }
            }
        }
        try await withThrowingTaskGroup(of: Outcome.self) { group in
            var started = 0
            func startNext() {
                guard started < files.count else { return }
                let position = started
                let file = files[position]
                started += 1
                group.addTask {
                    do {
                        let progress: @Sendable (Double) -> Void = { fraction in
                            if showProgress && files.count == 1 { ProgressBar.draw(fraction, label: file) }
                        }
                        let result = try await label(file, progress)
                        return (position, .success(result))
                    } catch {
                        return (position, .failure(error))
                    }
                }
            }
            for _ in 0..<width { startNext() }
            for try await outcome in group {
                pending[outcome.index] = outcome.result
                if showProgress {
                    ProgressBar.clear()
                    if files.count > 1 { ProgressBar.draw(Double(outcome.index + 1) / Double(files.count), label: "\(files.count) files") }
                }
                startNext()
                try writeReady()
            }
        }
        if showProgress { ProgressBar.clear() }
        return (failures, code)
    }
}

extension LabelCommand {
    /// How one run writes its events: the format, what it needs of the models (their label
    /// forms, rates and rules), and what runs from file to file (a Raven table's selection
    /// numbers and each file's start in it).
    /// `@unchecked Sendable`: the run writes from one task at a time (files in order), so the
    /// counters are never touched from two threads at once.
    final class Context: @unchecked Sendable {
        let format: SegmentFormat
        let model: Model
        let channels: FileLabeler.Channels
        let output: OutputFile
        let multipleFiles: Bool
        /// Each input's RTTM file id, unique in the run.
        let rttmIDs: [String: String]
        /// CSV with --scores: the table of step scores, and nothing else.
        let scoreTable: Bool
        /// The run's sound-events model's label form, rate and rule, if one of its models has one.
        let eventModel: (model: Model, options: LabelOptions)?
        /// The Raven table's last selection number, and where the next file starts in it (seconds).
        private var selection = 0
        private var timeOffset = 0.0

        init(format: SegmentFormat, labelers: [FileLabeler], channels: FileLabeler.Channels, output: OutputFile, multipleFiles: Bool,
             rttmIDs: [String: String], scoreTable: Bool) {
            self.format = format
            model = labelers[0].model
            self.channels = channels
            self.output = output
            self.multipleFiles = multipleFiles
            self.rttmIDs = rttmIDs
            self.scoreTable = scoreTable
            eventModel = labelers.first { $0.options.events != nil }.map { ($0.model, $0.options) }
        }

        /// What every line of the run shares.
        private var lineContext: SegmentFormat.LineContext {
            var c = SegmentFormat.LineContext()
            c.labelForm = (eventModel?.model ?? model).manifest.outputs.labelForm ?? .plain
            c.labelCodes = (eventModel?.model ?? model).manifest.outputs.labelCodes ?? [:]
            c.eventColumns = eventModel != nil
            c.channelColumn = channels == .each
            return c
        }

        /// The k best labels a --scores line of a sound-events model shows.
        var topCount: Int { min(eventModel?.options.events?.topK ?? 5, model.labels.count) }

        /// The line before the events, if the format has one (CSV's columns, a Raven table's).
        func header() throws(OutputError) {
            if scoreTable {
                try output.write(eventModel != nil ? SegmentFormat.topScoresHeader(k: topCount) : SegmentFormat.scoresHeader(labels: model.labels))
            } else if let header = format.header(lineContext) {
                try output.write(header)
            }
        }

        /// Text output names each file before its segments when there are several.
        func heading(_ file: String) throws(OutputError) {
            if format == .text && multipleFiles { try output.write("== \(file)") }
        }

        /// A file is written whole: the next starts after it in a Raven table.
        func finished(_ result: FileLabeler.Result) {
            timeOffset += Double(result.frames) / Double(max(result.sampleRate, 1))
        }

        /// Writes events of one file; returns how many of its channels failed.
        func write(_ events: [ClassifierEvent], file: String, channelCount: Int) throws(OutputError) -> Int {
            var failures = 0
            // Channels are told apart when each is labelled on its own and there are several.
            let multiChannel = channels == .each && channelCount > 1
            let name = format == .rttm ? rttmIDs[file] ?? file : file
            // An Audacity label track has no file or channel column: with several, each label says them.
            let tagged = format == .audacity && (multipleFiles || multiChannel)
            var line = lineContext
            line.timeOffset = timeOffset
            let background = eventModel?.options.backgroundLabel.flatMap { model.labels.firstIndex(of: $0) }
            // The next row's context: its label's prefix, its selection number and frequency box.
            func row(channel: Int, sampleRate: Int) -> SegmentFormat.LineContext {
                if tagged { line.labelPrefix = "\(file):\(channel) " }
                selection += 1
                line.selection = selection
                line.highFrequency = min(min(sampleRate, model.sampleRate) / 2, eventModel?.model.manifest.decision?.events?.highFrequency ?? .max)
                return line
            }
            for event in events {
                switch event {
                case let .ended(segment) where !scoreTable:
                    let context = row(channel: segment.channel, sampleRate: segment.sampleRate)
                    try output.write(format.line(segment, file: name, multiChannel: multiChannel, context: context))
                case let .detected(detection) where !scoreTable:
                    let context = row(channel: detection.channel, sampleRate: detection.sampleRate)
                    try output.write(format.line(detection, file: name, multiChannel: multiChannel, context: context))
                case let .scores(step) where eventModel != nil && (format == .csv || format == .jsonl || format == .text):
                    // A sound-events model's labels are many: each window's best, not a column each.
                    try output.write(format.topScores(step, labels: model.labels, top: TopLabels.best(topCount, of: step.scores, excluding: background), file: file))
                case let .scores(step) where format == .csv:
                    try output.write(SegmentFormat.scoresRow(step, file: file))
                case let .scores(step) where format == .jsonl || format == .text:
                    try output.write(format == .jsonl ? SegmentFormat.scoresLine(step, labels: model.labels, file: file)
                                     : SegmentFormat.scoresText(step, labels: model.labels))
                case let .failed(channel, error):
                    printError("earshot: \(file): channel \(channel): \(error)")
                    failures += 1
                default:
                    break
                }
            }
            return failures
        }
    }
}

/// A one-line progress bar on stderr (only when stderr is a terminal).
enum ProgressBar {
    static func draw(_ fraction: Double, label: String) {
        let width = 30, filled = Int((fraction * Double(width)).rounded(.down))
        let bar = String(repeating: "#", count: min(filled, width)) + String(repeating: ".", count: max(0, width - filled))
        FileHandle.standardError.write(Data("\r[\(bar)] \(Int(fraction * 100))% \(label.suffix(40))".utf8))
    }

    static func clear() {
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}
