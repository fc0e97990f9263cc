import Earshot
import EarshotAudio
import EarshotModel
import EarshotTraining
import Foundation

/// `earshot train-wake "PHRASE"`: a wake word from its text. The phrase is spoken by every
/// text-to-speech voice found here (`WakeDataSet`), a model is trained on that data set (the
/// architecture chosen by `WakeArchitecture`), and scored on the held-out voices' streams.
enum TrainWakeCommand {
    /// The model trained on the data set. Each is one `Trainer` entry point.
    enum WakeArchitecture: String, CaseIterable {
        /// `MicroWakeWordTrainer`: microWakeWord's streaming int8 network over TFLite Micro's
        /// front end, trained with quantization-aware steps (`earshot export --format microwakeword`).
        case microWakeWord = "microwakeword"
        /// `Trainer.train`'s streaming log-mel classifier (conv, GRU), trained from scratch.
        case logMel = "log-mel"
        /// `Trainer.trainHead` on openWakeWord's frozen speech embedding.
        case openWakeWord = "openwakeword"
    }

    static func run(_ words: [String]) async throws {
        let args = try Arguments(words, spec: Specs.trainWake)
        let piperVoice = args.string("piper-voice") ?? defaultPiperVoice()
        let inventory = WakeVoiceInventory.find(piperVoice: piperVoice)
        if args.flag("list-voices") {
            try out(inventory.summary.joined(separator: "\n"))
            return
        }
        guard args.positionals.count == 1, let phrase = args.positionals.first else {
            throw UsageError("train-wake needs one PHRASE (in quotes when it has spaces)", hint: "earshot train-wake \"hey computer\" --output Models/hey-computer")
        }
        guard let output = args.string("output") else { throw UsageError("train-wake needs --output FOLDER (e.g. Models/hey-computer)") }
        if FileManager.default.fileExists(atPath: output) && !args.flag("force") {
            throw UsageError("--output \(output) exists: refusing to replace it", hint: "add --force to replace it whole, or choose another folder")
        }
        // The best model at hand: a head on openWakeWord's embedding when it was fetched (or named),
        // else the log-mel classifier; --embedding none asks for the latter. The embedding is
        // loaded before any data is made: a run must not end on a missing file.
        // --architecture names one (microwakeword, openwakeword, log-mel) or gives the layers.
        let named = args.string("architecture").flatMap(WakeArchitecture.init(rawValue:))
        let asked = args.string("embedding") ?? (named == .openWakeWord || (named == nil && (args.string("embedding-models") != nil
            || TrainCommand.fetchedEmbedding() != nil)) ? "openwakeword" : "none")
        let architecture = named ?? (asked == "none" ? .logMel : .openWakeWord)
        if architecture != .openWakeWord && asked != "none" {
            throw UsageError("--architecture \(architecture.rawValue) takes no --embedding \(asked)", hint: "leave --embedding out, or use --architecture openwakeword")
        }
        if architecture == .openWakeWord && asked == "none" {
            throw UsageError("--architecture openwakeword needs openWakeWord's embedding, not --embedding none")
        }
        let embedding = architecture == .openWakeWord ? try TrainCommand.embeddingFrontEnd(asked, models: args.string("embedding-models")) : nil
        let quiet = args.flag("quiet")
        func say(_ text: String) { if !quiet { printError("earshot train-wake: " + text) } }

        var engines = Set(inventory.voices.keys)
        if let asked = args.string("voices") {
            var chosen = Set<WakeEngine>()
            for word in asked.split(separator: ",") {
                guard let e = WakeEngine(rawValue: String(word)) else {
                    throw UsageError("--voices \(asked): expected some of \(WakeEngine.allCases.map(\.rawValue).joined(separator: ","))")
                }
                guard engines.contains(e) else { throw UsageError("--voices \(asked): \(e.rawValue) \(inventory.missing[e] ?? "not found")") }
                chosen.insert(e)
            }
            engines = chosen
        }
        for e in WakeEngine.allCases where inventory.voices[e] == nil { say("skipping \(e.rawValue): \(inventory.missing[e] ?? "not found")") }
        guard !engines.isEmpty else {
            throw WakeDataError.noVoices(missing: WakeEngine.allCases.map { "\($0.rawValue): \(inventory.missing[$0] ?? "not asked for")" })
        }
        let seed = UInt64(args.int("seed"))
        var recipe = WakeDataSet.Recipe(
            phrase: phrase,
            voices: WakeVoiceInventory(voices: inventory.voices.filter { engines.contains($0.key) }, missing: inventory.missing)
                .sweep(espeakVariants: args.int("espeak-variants"), seed: seed))
        recipe.seed = seed
        recipe.negatives = (args.string("negatives") ?? "").split(separator: ",").map(String.init)
        for n in recipe.negatives where !FileManager.default.fileExists(atPath: n) { throw UsageError("--negatives \(n): no such folder") }
        let dataFolder = args.string("data") ?? (output.hasSuffix("/") ? String(output.dropLast()) : output) + ".data"

        let started = Date()
        let data = try WakeDataSet.make(recipe, in: dataFolder, progress: say)
        say((data.reused ? "reusing \(dataFolder): " : "\(dataFolder): ")
            + "\(data.trainingTakes) takes of \"\(phrase)\" and \(data.trainingNegatives) negatives in training (\(data.distractors) distractors, "
            + "\(data.speech) real speech, \(data.noise) noise, \(data.music) music: generated, no recordings); held out: \(data.heldOutTakes) takes, "
            + "\(data.heldOutNegatives) distractors" + (data.reused ? "" : String(format: " (%.0f s)", Date().timeIntervalSince(started))))
        if !data.failures.isEmpty {
            say("\(data.failures.count) takes could not be made, e.g. \(data.failures.prefix(3).joined(separator: "; "))")
        }

        var options = TrainingOptions()
        options.seed = seed
        options.background = "other"
        options.epochs = args.optionalInt("epochs")
        options.negativeWeight = args.optionalDouble("negative-weight")
        options.augment = try TrainCommand.augmentations(args.string("augment") ?? defaultAugment)
        if architecture == .microWakeWord { options.architecture = MicroWakeWordTrainer.architectureName }
        if let a = args.string("architecture"), named == nil { options.architecture = a }
        options.description = "Wake phrase \"\(phrase)\", trained from its text alone by earshot train-wake (\(architecture.rawValue))."
        options.command = "earshot train-wake " + words.joined(separator: " ")
        let training = try Dataset.load(dataFolder + "/train"), validation = try Dataset.load(dataFolder + "/test")
        let name = URL(fileURLWithPath: output).lastPathComponent
        switch architecture {
        case .microWakeWord: say("training microWakeWord's streaming int8 network (float, then quantization-aware steps; earshot export --format microwakeword writes it for ESPHome)")
        case .openWakeWord: say("training a head on openWakeWord's embedding")
        case .logMel: say("training a log-mel streaming classifier (from scratch); a head on openWakeWord's embedding carries to real speakers better (earshot models fetch \(TrainCommand.embeddingModels))")
        }
        let trainingStarted = Date()
        let show: (EpochReport) -> Void = { r in
            say(String(format: "epoch %d/%d  loss %.4f  validation %.1f%%%@", r.epoch, r.epochs, r.loss, r.validationAccuracy * 100, r.best ? " best" : ""))
        }
        var trained: TrainedClassifier
        switch architecture {
        case .openWakeWord:
            guard let embedding else { throw UsageError("--embedding openwakeword: no embedding") }
            trained = try Trainer.trainHead(name: name, training: training, validation: validation, options: options, embedding: embedding, progress: show)
        case .logMel, .microWakeWord:
            trained = try Trainer.train(name: name, training: training, validation: validation, options: options, progress: show)
        }
        let trainingSeconds = Date().timeIntervalSince(trainingStarted)
        // What ESPHome's manifest says of it (earshot export --format microwakeword).
        trained.manifest.phrase = phrase
        trained.manifest.languages = trained.manifest.languages ?? ["en"]
        try Model.write(manifest: trained.manifest, tensors: trained.tensors, to: URL(fileURLWithPath: output), replacing: args.flag("force"))

        // The held-out voices, as listen runs the model.
        let model = try Model(contentsOf: URL(fileURLWithPath: output))
        func score(_ audio: String, _ truth: String) throws -> DetectionEvaluation {
            let (samples, rate) = try AudioFile.readMono(path: dataFolder + "/" + audio)
            return try DetectionEvaluation.evaluate(model: model, audio: samples, sampleRate: rate,
                                                    words: try DetectionEvaluation.words(csv: dataFolder + "/" + truth), ignoring: ["other"])
        }
        let found = try score("stream.wav", "stream.truth.csv"), none = try score("distractors.wav", "none.truth.csv")
        try out(String(format: "%@: %@, trained in %@ (%d epochs, validation %.1f%%); held-out voices: %d of %d takes found, "
                       + "%d false accepts in %.1f min of their distractors; written to %@",
                       name, architecture.rawValue, TrainCommand.duration(trainingSeconds), trained.reports.count, trained.validationAccuracy * 100,
                       found.hits, found.keywordCount, found.falseAlarms + none.falseAlarms, (found.seconds + none.seconds) / 60, output))
    }

    /// openWakeWord's and microWakeWord's augmentations: noise at 5-25 dB SNR, gain, a shift,
    /// speed, a generated room.
    static let defaultAugment = "gain,noise,reverb,shift,speed"

    /// Piper's voice on the model search path: `piper/en_US-joe-medium.onnx`.
    static func defaultPiperVoice() -> String? {
        ModelLocator().folders.lazy.map { $0.path + "/piper/en_US-joe-medium.onnx" }.first { FileManager.default.fileExists(atPath: $0) }
    }
}
