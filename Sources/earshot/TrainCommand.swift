import Earshot
import EarshotAudio
import EarshotModel
import EarshotTraining
import Foundation

/// `earshot train`: a streaming classifier from labelled folders, written as a model package.
enum TrainCommand {
    static func run(_ words: [String]) throws {
        let args = try Arguments(words, spec: Specs.train)
        guard let dataPath = args.string("data") else { throw UsageError("train needs --data FOLDER (one subfolder per label) or a CSV") }
        guard let output = args.string("output") else { throw UsageError("train needs --output FOLDER (e.g. Models/my-classifier)") }
        var options = TrainingOptions()
        options.architecture = args.string("architecture")
        options.features = args.string("features") ?? options.features
        options.epochs = args.optionalInt("epochs")
        options.seed = UInt64(args.int("seed"))
        options.batchSize = args.int("batch-size")
        options.learningRate = Float(args.double("learning-rate"))
        options.patience = args.optionalInt("patience")
        options.negativeWeight = args.optionalDouble("negative-weight")
        options.decisionSeconds = args.double("decision-seconds")
        options.contextSeconds = args.double("context-seconds")
        if let v = args.optionalDouble("clip-seconds") { options.clipSeconds = v }
        if let v = args.optionalInt("sample-rate") { options.sampleRate = v }
        options.background = args.string("background")
        if let stream = args.string("validation-stream") {
            let truth = args.string("validation-truth") ?? ((stream as NSString).deletingPathExtension + ".truth.csv")
            for (option, path) in [("validation-stream", stream), ("validation-truth", truth)] where !FileManager.default.fileExists(atPath: path) {
                throw UsageError("--\(option) \(path): no such file")
            }
            options.validationStream = ValidationStream(audio: stream, truth: truth)
        } else if args.string("validation-truth") != nil {
            throw UsageError("--validation-truth needs --validation-stream FILE")
        }
        options.description = args.string("description")
        options.author = args.string("author")
        options.license = args.string("license")
        // Given: exactly these (none: no augmentation).
        if let kinds = args.string("augment") { options.augment = try augmentations(kinds) }
        options.command = "earshot train " + words.joined(separator: " ")
        // Refused before any training: a run of hours must not end on a folder it may not replace.
        if FileManager.default.fileExists(atPath: output) && !args.flag("force") {
            throw UsageError("--output \(output) exists: refusing to replace it", hint: "add --force to replace it whole, or choose another folder")
        }

        let groupBy = args.string("group-by")
        let all = try Dataset.load(dataPath, groupBy: groupBy)
        let training: Dataset, validation: Dataset
        if let validationPath = args.string("validation") {
            guard args.string("validation-split") == nil else { throw UsageError("give --validation or --validation-split, not both") }
            training = all
            validation = try Dataset.load(validationPath, groupBy: groupBy)
        } else {
            let fraction = args.double("validation-split")
            (training, validation) = try all.split(validationFraction: fraction, seed: options.seed)
        }
        let name = URL(fileURLWithPath: output).lastPathComponent
        let quiet = args.flag("quiet")
        if !quiet { printError("earshot train: \(training.files.count) training and \(validation.files.count) validation files, "
                   + "\(training.labels.count) labels (\(training.labels.joined(separator: " "))), "
                   + "\(Set(training.files.map(\.group)).count) and \(Set(validation.files.map(\.group)).count) groups") }
        if !quiet && options.background == nil {
            printError("earshot train: no --background: a label '\(Trainer.syntheticBackground)' of generated noise and near-silence is added "
                       + "(as many clips as the median label has), so that the model has a label for the moments between events; "
                       + "--background LABEL names the data's own instead")
        }
        // A figure over a handful of clips says little (17 files, 4 of them held out, gave "100%").
        let tooFew = validation.files.count < Trainer.fewestReliableValidationFiles
        let fewNote = "only \(validation.files.count) validation file\(validation.files.count == 1 ? "" : "s"): the validation accuracy is "
            + "unreliable below \(Trainer.fewestReliableValidationFiles) (one file moves it by \(String(format: "%.0f", 100 / Double(max(1, validation.files.count))))%)"
        if tooFew {
            printError("earshot train: warning: \(fewNote); add data, raise --validation-split or give --validation FOLDER")
        }
        let started = Date()
        let show: (EpochReport) -> Void = { report in
            guard !quiet else { return }
            let perEpoch = Date().timeIntervalSince(started) / Double(report.epoch)
            let left = perEpoch * Double(report.epochs - report.epoch)
            var falseSteps = report.validationFalseSteps.map { String(format: "  false steps %.2f%%", $0 * 100) } ?? ""
            if let s = report.stream {
                falseSteps += String(format: "  stream %d/%d found, %d false (%.1f/h)", s.hits, s.words, s.falseAlarms, s.falseAlarmsPerHour)
            }
            printError(String(format: "epoch %3d/%d  loss %.4f  training %5.1f%%  validation %5.1f%% (loss %.4f)%@%@  %.1f s/epoch, at most %@ left",
                              report.epoch, report.epochs, report.loss, report.trainingAccuracy * 100, report.validationAccuracy * 100,
                              report.validationLoss, falseSteps, report.best ? " best" : "     ", perEpoch, duration(left)))
        }
        let trained: TrainedClassifier
        if let embedding = args.string("embedding") {
            trained = try Trainer.trainHead(name: name, training: training, validation: validation, options: options,
                                            embedding: try embeddingFrontEnd(embedding, models: args.string("embedding-models")), progress: show)
        } else {
            trained = try Trainer.train(name: name, training: training, validation: validation, options: options, progress: show)
        }
        try Model.write(manifest: trained.manifest, tensors: trained.tensors, to: URL(fileURLWithPath: output), replacing: args.flag("force"))
        try out(String(format: "%@: validation accuracy %.2f%% after %d epochs, %@ of training; written to %@", name,
                     trained.validationAccuracy * 100, trained.reports.count, duration(Date().timeIntervalSince(started)), output)
                + (tooFew ? " (\(fewNote))" : ""))
    }

    /// The augmentations of `--augment KINDS` (a comma-separated list, or none).
    static func augmentations(_ kinds: String) throws -> Set<Augmentation> {
        var set = Set<Augmentation>()
        for word in kinds.split(separator: ",") where word != "none" {
            guard let kind = Augmentation(rawValue: String(word)) else {
                throw UsageError("--augment \(kinds): expected some of \(Augmentation.allCases.map(\.rawValue).joined(separator: ",")), or none")
            }
            set.insert(kind)
        }
        return set
    }

    /// The catalog's name of openWakeWord's front end files (`earshot models fetch oww-embedding`).
    static let embeddingModels = "oww-embedding"

    /// Without --embedding-models: the folder `earshot models fetch oww-embedding` installs, on the model search path.
    static func fetchedEmbedding() -> String? {
        ModelLocator().folders.lazy.map { URL(fileURLWithPath: $0.path).appendingPathComponent(embeddingModels).path }
            .first { FileManager.default.fileExists(atPath: $0 + "/melspectrogram.onnx") && FileManager.default.fileExists(atPath: $0 + "/embedding_model.onnx") }
    }

    /// The frozen embedding `--embedding NAME` names, read from its models' folder.
    static func embeddingFrontEnd(_ name: String, models: String?) throws -> EmbeddingFrontEnd {
        guard name == "openwakeword" else { throw UsageError("--embedding \(name): expected openwakeword") }
        guard let folder = models ?? fetchedEmbedding() else {
            throw UsageError("--embedding openwakeword needs openWakeWord's melspectrogram.onnx and embedding_model.onnx: no \(embeddingModels) on the model search path",
                             hint: "earshot models fetch \(embeddingModels) --accept-license fetches them; or --embedding-models FOLDER names a folder holding them")
        }
        let mel = (folder as NSString).appendingPathComponent("melspectrogram.onnx")
        let emb = (folder as NSString).appendingPathComponent("embedding_model.onnx")
        for path in [mel, emb] where !FileManager.default.fileExists(atPath: path) {
            throw UsageError("--embedding-models \(folder): no \((path as NSString).lastPathComponent) there", hint: "openWakeWord ships it in openwakeword/resources/models")
        }
        return try EmbeddingFrontEnd.openWakeWord(melspectrogram: mel, embedding: emb)
    }

    static func duration(_ seconds: Double) -> String {
        seconds < 90 ? String(format: "%.0f s", seconds) : String(format: "%.0f min", seconds / 60)
    }
}

/// `earshot evaluate`: accuracy, per-class figures and the confusion matrix on labelled files.
enum EvaluateCommand {
    /// Exit 1 when a file failed (the figures leave it out); `--strict` stops at the first.
    static func run(_ words: [String]) async throws -> Int32 {
        let args = try Arguments(words, spec: Specs.evaluate)
        // No default: a clip classifier or a wake word is what is evaluated, not the default voice activity model.
        guard let modelName = args.string("model") else {
            throw UsageError("evaluate needs --model NAME|PATH", hint: "the classifier or wake word to evaluate, e.g. earshot evaluate -m keywords --data clips/")
        }
        guard !modelName.contains(",") else { throw UsageError("--model \(modelName): evaluate takes one model") }
        let format = args.string("format") ?? "text"
        guard ["text", "csv", "json"].contains(format) else { throw UsageError("--format \(format): expected text, csv or json") }
        let model = try LabelCommand.models(args).models[0]
        if let stream = args.string("stream") {
            guard let truth = args.string("truth") else { throw UsageError("evaluate --stream needs --truth CSV (start,end,label)") }
            let ignored = Set((args.string("ignore") ?? "_unknown_").split(separator: ",").map(String.init))
            try await streamEvaluation(model: model, audio: stream, truth: truth, ignoring: ignored,
                                       options: try LabelCommand.options(args, model: model), json: format == "json", plot: args.string("plot"))
            return 0
        }
        guard let dataPath = args.string("data") else { throw UsageError("evaluate needs --data FOLDER or CSV, or --stream FILE --truth CSV") }
        let groupBy = args.string("group-by")
        let result = try Evaluation.run(model: model, data: try Dataset.load(dataPath, groupBy: groupBy, minimumLabels: 1),
                                        strict: args.flag("strict"))
        for failure in result.failures { printError("earshot: \(failure)") }
        if !result.failures.isEmpty {
            printError("earshot: \(result.failures.count) file\(result.failures.count == 1 ? "" : "s") failed and \(result.failures.count == 1 ? "is" : "are") not counted")
        }
        if let plot = args.string("plot") { try writeSVG(confusionSVG(result, model: model.name), to: plot) }
        switch format {
        case "json": try out(json(result, model: model.name))
        case "csv": try out(csv(result), terminator: "")
        default: try out(text(result, model: model.name, groups: groupBy != nil), terminator: "")
        }
        return result.failures.isEmpty ? 0 : 1
    }

    /// Keyword spotting over a long stream as `listen` runs it: hit rate, false alarms per hour, delay.
    static func streamEvaluation(model: Model, audio path: String, truth: String, ignoring: Set<String>, options: LabelOptions,
                                 json: Bool, plot: String? = nil) async throws {
        let (samples, rate) = try AudioFile.readMono(path: path)
        var ignored = ignoring
        if let background = options.backgroundLabel { ignored.insert(background) }
        let e = try await DetectionEvaluation.run(model: model, audio: samples, sampleRate: rate,
                                                  words: try DetectionEvaluation.words(csv: truth), ignoring: ignored, options: options)
        if let plot { try writeSVG(streamSVG(e, model: model.name, path: path, ignored: ignored), to: plot) }
        let delays = e.delays
        // No word found: no delay to speak of (null in JSON, "-" in text), never "nan".
        func percentile(_ p: Double) -> Double? { delays.isEmpty ? nil : delays[min(delays.count - 1, Int(Double(delays.count) * p))] }
        func seconds(_ p: Double) -> String { percentile(p).map { String(format: "%.2f s", $0) } ?? "-" }
        let hitRate = e.keywordCount > 0 ? e.hitRate : nil
        let kinds = e.falseAlarmKinds
        func count(_ kind: DetectionEvaluation.FalseAlarmKind) -> Int { kinds.filter { $0 == kind }.count }
        if json {
            try out(jsonLine(["model": model.name, "seconds": e.seconds, "keywords": e.keywordCount, "hits": e.hits,
                              "hitRate": hitRate ?? NSNull(), "falseAlarms": e.falseAlarms,
                              "falseAlarmsPerHour": e.falseAlarmsPerHour,
                              "falseAlarmsBy": Dictionary(uniqueKeysWithValues: DetectionEvaluation.FalseAlarmKind.allCases.map { ($0.rawValue, count($0)) }),
                              "delayMedianS": percentile(0.5) ?? NSNull(),
                              "delayP90S": percentile(0.9) ?? NSNull(), "ignored": ignored.sorted()]))
        } else {
            let found = hitRate.map { String(format: " (%.1f%%)", $0 * 100) } ?? ""
            // Where the false alarms fell, when there are any.
            let by = e.falseAlarms == 0 ? "" : String(format: ": %d on another keyword, %d on an uncounted word, %d repeated, %d between words",
                                                      count(.otherWord), count(.uncountedWord), count(.repeated), count(.betweenWords))
            try out(String(format: "%@ on %@ (%.1f min): %d of %d keywords found%@, %d false alarms (%.1f per hour%@); "
                           + "announced %@ after the word ends (median), %@ (p90); not counted: %@",
                           model.name, path, e.seconds / 60, e.hits, e.keywordCount, found, e.falseAlarms, e.falseAlarmsPerHour, by,
                           seconds(0.5), seconds(0.9), ignored.sorted().joined(separator: " ")))
        }
    }

    static func text(_ e: Evaluation, model: String, groups: Bool) -> String {
        var out = String(format: "%@: accuracy %.2f%% (%d of %d files)\n\n", model, e.accuracy * 100,
                         e.labels.indices.reduce(0) { $0 + e.confusion[$1][$1] }, e.predictions.count)
        let width = max(9, (e.labels.map(\.count).max() ?? 0) + 1)
        func pad(_ s: String) -> String { s.count >= width ? s : s + String(repeating: " ", count: width - s.count) }
        out += pad("label") + "precision  recall     F1  files\n"
        for c in e.classes {
            out += pad(c.label) + String(format: "   %6.3f  %6.3f  %6.3f  %5d\n", c.precision, c.recall, c.f1, c.support)
        }
        out += "\nconfusion (rows: true label, columns: predicted)\n" + pad("")
        out += e.labels.map { String($0.prefix(6)).leftPadded(7) }.joined() + "\n"
        for (i, row) in e.confusion.enumerated() {
            out += pad(e.labels[i]) + row.map { String($0).leftPadded(7) }.joined() + "\n"
        }
        if groups {
            out += "\naccuracy by group\n"
            for g in e.groups { out += pad(g.group) + String(format: " %6.2f%%  (%d of %d)\n", Double(g.correct) / Double(g.total) * 100, g.correct, g.total) }
        }
        return out
    }

    static func csv(_ e: Evaluation) -> String {
        var out = "label,precision,recall,f1,files\n"
        for c in e.classes { out += "\(c.label),\(c.precision),\(c.recall),\(c.f1),\(c.support)\n" }
        out += "all,,,,\(e.predictions.count)\naccuracy,\(e.accuracy)\n\ntrue\\predicted," + e.labels.joined(separator: ",") + "\n"
        for (i, row) in e.confusion.enumerated() { out += e.labels[i] + "," + row.map(String.init).joined(separator: ",") + "\n" }
        return out
    }

    static func json(_ e: Evaluation, model: String) -> String {
        jsonLine([
            "model": model, "accuracy": e.accuracy, "files": e.predictions.count, "labels": e.labels, "confusion": e.confusion,
            "classes": e.classes.map { ["label": $0.label, "precision": $0.precision, "recall": $0.recall, "f1": $0.f1, "files": $0.support] },
            "groups": e.groups.map { ["group": $0.group, "correct": $0.correct, "files": $0.total] },
        ])
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}
