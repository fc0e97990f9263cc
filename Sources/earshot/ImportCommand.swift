import Earshot
import EarshotImport
import EarshotJSON
import Foundation

/// `earshot import MODEL.onnx|MODEL.tflite --output FOLDER`: an ONNX or TFLite model as an Earshot package.
enum ImportCommand {
    static func run(_ words: [String]) throws {
        try out(try importPackage(words))
    }

    /// Imports and writes the package `words` (import's arguments) describe; the line that
    /// says what was written. `earshot models fetch` imports through it too.
    static func importPackage(_ words: [String]) throws -> String {
        // --set and --state may repeat: gathered here before the rest is parsed.
        var rest: [String] = [], sets: [String] = [], statePairs: [String] = []
        var i = 0
        while i < words.count {
            let word = words[i]
            if word == "--set" || word == "--state", i + 1 < words.count {
                if word == "--set" { sets.append(words[i + 1]) } else { statePairs.append(words[i + 1]) }
                i += 2
                continue
            }
            if word.hasPrefix("--set=") { sets.append(String(word.dropFirst(6))); i += 1; continue }
            if word.hasPrefix("--state=") { statePairs.append(String(word.dropFirst(8))); i += 1; continue }
            rest.append(word)
            i += 1
        }
        let args = try Arguments(rest, spec: Specs.importModel)
        guard args.positionals.count == 1, let source = args.positionals.first else {
            throw UsageError("import takes one .onnx or .tflite file", hint: "earshot import --help")
        }
        guard let output = args.string("output") else { throw UsageError("import needs --output FOLDER (e.g. Models/my-model)", hint: "earshot import --help") }
        if FileManager.default.fileExists(atPath: output) && !args.flag("force") {
            throw UsageError("--output \(output) exists: refusing to replace it", hint: "add --force to replace it whole, or choose another folder")
        }
        var options = ImportOptions()
        for pair in sets {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, let value = Double(parts[1]), value.isFinite else {
                throw UsageError("--set \(pair): expected NAME=NUMBER, e.g. --set sr=16000")
            }
            options.fixed[parts[0]] = value
        }
        for pair in statePairs {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw UsageError("--state \(pair): expected INPUT=OUTPUT, e.g. --state state=stateN")
            }
            options.states.append((parts[0], parts[1]))
        }
        options.audioInput = args.string("input")
        options.scoreOutput = args.string("score")
        options.sampleRate = args.int("rate")
        if let v = args.optionalInt("chunk") { options.chunkSamples = v }
        options.contextSamples = args.int("context")
        options.windowSamples = args.optionalInt("window")
        options.hopSamples = args.optionalInt("hop")
        if options.windowed && (args.optionalInt("chunk") != nil || options.contextSamples != 0) {
            throw UsageError("--window/--hop and --chunk/--context both say how the model streams",
                             hint: "give --window N --hop H for a fixed-window classifier, or --chunk and --context, not both")
        }
        let frontEnd = args.string("front-end")
        guard frontEnd.map({ ["samples", "features", "microfrontend", "openwakeword"].contains($0) }) ?? true else {
            throw UsageError("--front-end \(frontEnd ?? ""): expected samples (a block of audio), features (a block of features you compute), "
                             + "microfrontend (TFLite Micro's audio front end, for microWakeWord models) or openwakeword (an openWakeWord "
                             + "head with its melspectrogram and embedding models)")
        }
        options.frontEnd = frontEnd
        var metadata = try args.string("manifest").map { path in try ImportSidecar.read(path: path) } ?? ModelManifest.Metadata()
        if args.string("labels") != nil && args.string("labels-file") != nil {
            throw UsageError("--labels and --labels-file both name the scores", hint: "give one of them")
        }
        if let labels = args.string("labels") { metadata.labels = labels.split(separator: ",").map(String.init) }
        if let file = args.string("labels-file") {
            metadata.labels = try LabelsFile.read(path: file)
            options.labelsFile = file
        }
        metadata.name = args.string("name") ?? metadata.name ?? URL(fileURLWithPath: output).lastPathComponent
        metadata.description = args.string("description") ?? metadata.description
        metadata.author = args.string("author") ?? metadata.author
        metadata.license = args.string("license") ?? metadata.license
        metadata.source = args.string("source") ?? metadata.source
        var decision = metadata.decision ?? ModelManifest.Decision()
        if let v = args.optionalDouble("threshold") { decision.threshold = v }
        if let v = args.optionalDouble("min-speech") { decision.minSegmentMs = v }
        if let v = args.optionalDouble("min-silence") { decision.minSilenceMs = v }
        if let v = args.optionalDouble("pad") { decision.padMs = v }
        if let v = args.optionalDouble("max-speech") { decision.maxSegmentSeconds = v }
        if let text = args.string("events") { decision.events = try ImportSidecar.eventRule(text) }
        metadata.decision = decision == ModelManifest.Decision() ? nil : decision
        let labelFilter = args.string("label-filter")
        if labelFilter != nil && decision.events?.labelFilter == nil {
            throw UsageError("--label-filter needs the events rule's labelFilter: its inputs and threshold",
                             hint: "e.g. --events '{\"labelFilter\": {\"inputs\": [\"lat\", \"lon\", \"week\"], \"threshold\": 0.03}}'")
        }
        if let filter = decision.events?.labelFilter, labelFilter == nil, filter.model == nil {
            throw UsageError("--events: a labelFilter names its model folder, or --label-filter FILE gives it")
        }

        let tflite = source.lowercased().hasSuffix(".tflite")
        if tflite, let config = TFLiteImporter.MicroWakeWordConfig(beside: source) {
            if metadata.labels?.isEmpty ?? true { metadata.labels = [config.wakeWord] }
            if metadata.author == nil { metadata.author = config.author }
            if metadata.url == nil { metadata.url = config.website }
            if metadata.phrase == nil { metadata.phrase = config.wakeWord }
            if metadata.languages == nil, !config.languages.isEmpty { metadata.languages = config.languages }
            if metadata.description == nil {
                metadata.description = "microWakeWord model for the wake phrase '\(config.wakeWord)'"
                    + (config.languages.isEmpty ? "" : " (trained on \(config.languages.joined(separator: ", ")))")
            }
            var d = metadata.decision ?? ModelManifest.Decision()
            if d.threshold == nil { d.threshold = config.probabilityCutoff }
            if d.detectionWindow == nil { d.detectionWindow = config.slidingWindowSize }
            metadata.decision = d
            if args.string("front-end") == nil { options.frontEnd = "microfrontend" }
        }
        options.metadata = metadata
        var (manifest, tensors) = frontEnd == "openwakeword"
            ? try OpenWakeWordImporter.importModel(head: source, melspectrogram: args.string("melspectrogram"), embedding: args.string("embedding"),
                                                   options: options)
            : tflite ? try TFLiteImporter.importModel(path: source, options: options)
            : try OnnxImporter.importModel(path: source, options: options)
        if let form = args.string("label-form") { manifest.outputs.labelForm = ModelManifest.LabelForm(rawValue: form) }
        if let file = args.string("label-codes") { manifest.outputs.labelCodes = try LabelCodes.read(path: file, labels: manifest.outputs.labels) }
        // The label filter model (BirdNET's location model): a package in the package, of the same labels.
        var filterPackage: (folder: String, manifest: ModelManifest, tensors: [String: Tensor])?
        if let file = labelFilter, let rule = manifest.decision?.events?.labelFilter {
            var filterOptions = ImportOptions()
            filterOptions.metadata.name = "\(manifest.name)-label-filter"
            filterOptions.metadata.labels = manifest.outputs.labels
            filterOptions.metadata.license = manifest.license
            filterOptions.metadata.author = manifest.author
            let folder = rule.model ?? ModelManifest.EventRule.LabelFilter.defaultFolder
            let (m, t) = file.lowercased().hasSuffix(".tflite") ? try TFLiteImporter.importModel(path: file, options: filterOptions)
                : try OnnxImporter.importModel(path: file, options: filterOptions)
            let filter = try Model(manifest: m, tensors: t, name: file)
            guard filter.labels.count == manifest.outputs.labels.count else {
                throw UsageError("--label-filter \(file): \(filter.labels.count) scores for \(manifest.outputs.labels.count) labels")
            }
            let inputs = manifest.decision?.events?.labelFilter?.inputs.count ?? 0
            guard filter.manifest.frontEnd.type == .features, filter.chunkSamples == inputs else {
                throw UsageError("--label-filter \(file): its input takes \(filter.chunkSamples) values; the rule's labelFilter names \(inputs)")
            }
            manifest.decision?.events?.labelFilter?.model = folder
            filterPackage = (folder, m, t)
        }
        // Loaded as any package is (every check of a package on disk) before it is written.
        let model = try Model(manifest: manifest, tensors: tensors, name: output)
        try Model.write(manifest: manifest, tensors: tensors, to: URL(fileURLWithPath: output), replacing: args.flag("force"))
        if let filterPackage {
            do {
                try Model.write(manifest: filterPackage.manifest, tensors: filterPackage.tensors,
                                to: URL(fileURLWithPath: output).appendingPathComponent(filterPackage.folder))
            } catch {
                try? FileManager.default.removeItem(atPath: output)  // nothing half-made
                throw error
            }
        }
        let graph = manifest.graph
        return ("\(manifest.name): \(graph?.nodes.count ?? 0) nodes (\(Set(graph?.nodes.map(\.op) ?? []).sorted().joined(separator: " "))), "
                + (options.windowed ? "a window of \(manifest.audio.contextSamples + manifest.audio.chunkSamples) samples, "
                    + "\(manifest.audio.chunkSamples) new a step, " : "")
                + "\(graph?.states.count ?? 0) state tensors (\(model.makeState().byteCount) bytes per stream), "
                + "\(tensors.values.reduce(0) { $0 + $1.values.count }) parameters; written to \(output)")
    }
}

/// `--manifest FILE.json`: what the package says of itself. Unknown keys are refused, so a
/// misspelt one is not silently dropped.
enum ImportSidecar {
    /// `--events JSON`: a many-label events rule (`ModelManifest.EventRule`; `{}` the defaults),
    /// its keys checked as the sidecar's are, its values against their ranges.
    static func eventRule(_ text: String) throws -> ModelManifest.EventRule {
        guard let object = (try? JSONValue.parse(Array(text.utf8)))?.object else {
            throw UsageError("--events \(text): not a JSON object", hint: "e.g. --events '{\"topK\": 3, \"merge\": false}'")
        }
        let known = Set(Mirror(reflecting: ModelManifest.EventRule()).children.compactMap(\.label))
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            throw UsageError("--events: unknown key '\(unknown)'", hint: "known keys: \(known.sorted().joined(separator: ", "))")
        }
        let rule: ModelManifest.EventRule
        do { rule = try JSONDecoder().decode(ModelManifest.EventRule.self, from: Data(text.utf8)) } catch {
            throw UsageError("--events: \(error)")
        }
        if let bad = rule.firstInvalid() { throw UsageError("--events: \(bad.field) \(bad.value): expected \(bad.expected)") }
        return rule
    }

    static func read(path: String) throws -> ModelManifest.Metadata {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw UsageError("--manifest \(path): cannot read the file")
        }
        let known = Set(ModelManifest.Metadata.CodingKeys.allCases.map(\.rawValue))
        guard let object = (try? JSONValue.parse([UInt8](data)))?.object else {
            throw UsageError("--manifest \(path): not a JSON object")
        }
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            throw UsageError("--manifest \(path): unknown key '\(unknown)'", hint: "known keys: \(known.sorted().joined(separator: ", "))")
        }
        do {
            return try JSONDecoder().decode(ModelManifest.Metadata.self, from: data)
        } catch {
            throw UsageError("--manifest \(path): \(error)")
        }
    }
}
