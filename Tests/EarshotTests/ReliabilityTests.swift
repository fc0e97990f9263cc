import CSndFile
import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot
@testable import EarshotModel

/// The reproductions of the reliability defects users hit, each now a clear error or a correct
/// run: no crash, no lost data, bounded memory.
@Suite("Reliability: library")
struct ReliabilityLibraryTests {
    @Test("Label options that would overflow (padMs 1e18) are an error, not a trap")
    func hugeOptions() throws {
        var options = LabelOptions()
        options.padMs = 1e18
        #expect(throws: StreamError.invalidOption(name: "padMs", value: "1e+18", expected: "0...86400000 ms")) {
            try StreamClassifier(model: Fixtures.model, options: options)
        }
        options = LabelOptions()
        options.maxSegmentSeconds = .infinity
        #expect(throws: StreamError.self) { try Session(model: Fixtures.model, channelCount: 1, options: options) }
    }

    @Test("A channel ended with several blocks not yet stepped (a service's audio-stop within a tick) steps its partial last block too: the events and steps of the stream run alone")
    func partialTailAfterWholeBlocks() async throws {
        let (samples, rate) = try AudioFile.readMono(path: Repo.path(ToneEvents.audio))
        #expect(samples.count % ToneEvents.hop == 500)
        let alone = try StreamClassifier(model: ToneEvents.model, sourceSampleRate: rate)
        let expected = try await alone.process(samples) + (try await alone.finish())
        // Whole blocks stepped as they come, then the last 4500 samples pushed and the channel ended at once.
        var set = ChannelSet(model: ToneEvents.model, options: LabelOptions(model: ToneEvents.model))
        let k = try set.add(sourceRate: rate, kind: .live)
        let cut = samples.count - 4500
        var events = set.push(Array(samples[..<cut]), channel: k) + set.drain()
        events += set.push(Array(samples[cut...]), channel: k)
        events += set.finish(channel: k)
        #expect(set.stepsRun == 97)
        #expect(events == expected && segments(expected).last?.end == samples.count, "\(segments(events).last.map { "\($0)" } ?? "none")")
    }

    @Test("A stream restored at the step limit goes on without trapping")
    func stepLimit() async throws {
        var state = Fixtures.model.makeState()
        state.steps = ModelState.maxSteps
        let stream = try StreamClassifier(model: Fixtures.model)
        try await stream.restoreState(state.serialized())
        _ = try await stream.process([Float](repeating: 0.01, count: 16000))
        #expect(await stream.state.steps == ModelState.maxSteps)
    }

    @Test("Every step's scores of a file are handed out chunk by chunk, equal to the whole run's")
    func streamedScores() async throws {
        var options = Fixtures.withScores
        options.includeScores = true
        let labeler = FileLabeler(model: Fixtures.model, options: options, chunkSamples: 8000)
        let path = Repo.path("AudioSamples/speech-noise-16k.wav")
        var handed: [[ClassifierEvent]] = []
        let streamed = try await labeler.label(path: path) { events, channels in
            #expect(channels == 1)
            handed.append(events)
        }
        #expect(streamed.events.isEmpty)  // nothing held: all went to the handler
        let whole = try await labeler.label(path: path)
        #expect(handed.flatMap { $0 } == whole.events)
        // Each handing carries at most a chunk's worth of steps (8000 samples: 16 steps of 512).
        #expect(handed.count > 70)
        #expect(handed.map { $0.filter { if case .scores = $0 { return true } else { return false } }.count }.max() ?? 0 <= 16)
    }

    @Test("Audio lost in a live stream stands as silence in bounded pieces")
    func silencePieces() async throws {
        let channels = try Fixtures.channels("speech-noise-16k.wav")
        // A queue of 0.1 s and a consumer slower than the file PCM: long stretches are dropped.
        let capture = try LiveFixture.capture(name: "earshot_gap_listen", channels: [Array(channels[0][0..<320_000])], queuedFrames: 1600)
        let (events, summary) = try await LiveFixture.listen(capture, slow: true, options: Fixtures.withScores)
        #expect(summary.droppedFrames > LiveLabeler.silencePieceFrames)
        // The steps cover the whole clock, as before, though no piece exceeded the bound.
        #expect(scoreEvents(events).count == (320_000 + 511) / 512)
    }

    @Test("Latency percentiles come from a histogram of fixed size")
    func latencyHistogram() {
        var h = LatencyHistogram()
        #expect(h.percentile(0.5) == nil)
        for ms in 1...1000 { h.add(.milliseconds(ms)) }
        let p50 = h.percentile(0.5).map { Double($0.components.attoseconds) / 1e15 + Double($0.components.seconds) * 1000 } ?? 0
        let p99 = h.percentile(0.99).map { Double($0.components.attoseconds) / 1e15 + Double($0.components.seconds) * 1000 } ?? 0
        #expect(abs(p50 - 500) < 500 * 0.03, "\(p50)")
        #expect(abs(p99 - 990) < 990 * 0.03, "\(p99)")
        #expect(h.count == 1000)
    }
}

func scoreEvents(_ events: [ClassifierEvent]) -> [StepScores] {
    events.compactMap { if case let .scores(s) = $0 { return s } else { return nil } }
}

@Suite("Reliability: the command line")
struct ReliabilityCommandTests {
    static let sample = "AudioSamples/speech-noise-16k.wav"

    @Test("A model whose manifest says padMs 1e18: exit 65 naming the field, not a crash")
    func hugePad() throws {
        let folder = try editedPackage { m in
            var decision = m["decision"] as? [String: Any] ?? [:]
            decision["padMs"] = 1e18
            m["decision"] = decision
        }
        defer { try? FileManager.default.removeItem(at: folder) }
        let result = try runEarshot(["label", "--model", folder.path, Self.sample])
        #expect(result.status == 65)
        #expect(result.err.contains("decision.padMs 1e+18 in the model's manifest: expected 0...86400000 ms"), "\(result.err)")
    }

    @Test("--output that is one of the inputs is refused and the input is left whole")
    func outputIsInput() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let input = folder.appendingPathComponent("a.wav").path
        try FileManager.default.copyItem(atPath: Repo.path(Self.sample), toPath: input)
        let before = try Data(contentsOf: URL(fileURLWithPath: input))
        for output in [input, folder.path + "/./a.wav"] {
            for inputs in [[input], [folder.path]] {
                let result = try runEarshot(["label", "--output", output] + inputs)
                #expect(result.status == 64, "\(result.err)")
                #expect(result.err.contains("is also an input"), "\(result.err)")
                #expect(try Data(contentsOf: URL(fileURLWithPath: input)) == before)
            }
        }
    }

    @Test("--output is written to a temporary file and renamed into place: the old file is never truncated")
    func atomicOutput() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let output = folder.appendingPathComponent("labels.csv").path
        let keep = folder.appendingPathComponent("previous.csv").path
        try "old\n".write(toFile: output, atomically: false, encoding: .utf8)
        try FileManager.default.linkItem(atPath: output, toPath: keep)  // a second name for the old file
        let result = try runEarshot(["label", "--format", "csv", "--output", output, Self.sample])
        #expect(result.status == 0, "\(result.err)")
        let written = try String(contentsOfFile: output, encoding: .utf8)
        #expect(written.hasPrefix("file,channel,label,start,end,score\n") && written.split(separator: "\n").count == 7)
        #expect(try String(contentsOfFile: keep, encoding: .utf8) == "old\n")  // replaced, not overwritten in place
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["labels.csv", "previous.csv"])
        // An output folder that does not exist: 73, and nothing is left behind.
        let missing = try runEarshot(["label", "--output", folder.path + "/no/such/labels.csv", Self.sample])
        #expect(missing.status == 73, "\(missing.err)")
        #expect(missing.err.contains("/no/such/labels.csv: cannot create"))
    }

    @Test("A full disk is an error naming the path, exit 74: for --output and for standard output")
    func fullDisk() throws {
        let toFile = try runEarshot(["label", "--output", "/dev/full", Self.sample])
        #expect(toFile.status == 74, "\(toFile.err)")
        #expect(toFile.err.contains("/dev/full: cannot write: No space left on device"), "\(toFile.err)")
        let toStdout = try runEarshot(["label", Self.sample], stdout: "/dev/full")
        #expect(toStdout.status == 74, "\(toStdout.err)")
        #expect(toStdout.err.contains("standard output: cannot write: No space left on device"), "\(toStdout.err)")
        let inspect = try runEarshot(["inspect", "silero-vad"], stdout: "/dev/full")
        #expect(inspect.status == 74, "\(inspect.err)")
    }

    @Test("SIGTERM and SIGHUP stop listen as Ctrl-C does: open segments closed, summary printed, exit 0", arguments: [SIGTERM, SIGHUP])
    func stopSignals(_ number: Int32) throws {
        let config = try Fixtures.captureConfigFile(name: "earshot_signal")
        let result = try runEarshot(["listen", "--device", "earshot_signal", "--format", "jsonl", "--buffer-seconds", "600", "--verbose"],
                                    environment: ["ALSA_CONFIG_PATH": config], interruptAfter: .milliseconds(1500), signal: number,
                                    readyMarker: "capturing")
        #expect(result.status == 0, "\(result.err)")
        #expect(result.out.contains("\"event\":\"ended\""))
        #expect(result.err.contains("frames captured"), "\(result.err)")
    }

    @Test("listen on unpaced input with a small buffer keeps its memory bounded")
    func unpacedMemory() throws {
        let config = try Fixtures.captureConfigFile(name: "earshot_unpaced")
        let process = Process()
        process.executableURL = earshotBinary
        process.arguments = ["listen", "--device", "earshot_unpaced", "--format", "jsonl", "--buffer-seconds", "0.05", "--verbose"]
        process.environment = ProcessInfo.processInfo.environment.merging(["ALSA_CONFIG_PATH": config]) { $1 }
        process.currentDirectoryURL = Repo.root
        let err = Pipe()
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = err
        try process.run()
        // Four seconds of capture from when it runs (a sanitizer build takes long to start).
        var started = Data()
        let deadline = Date().addingTimeInterval(120)
        while !String(decoding: started, as: UTF8.self).contains("capturing"), Date() < deadline {
            let chunk = err.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            started += chunk
        }
        Thread.sleep(forTimeInterval: 4)
        let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
        process.terminate()
        let errText = String(decoding: started + err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let peakKB = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }
            .flatMap { $0.split(separator: " ").compactMap { Int($0) }.first } ?? -1
        #expect(peakKB > 0 && peakKB < 200_000, "peak RSS \(peakKB) kB")
        #expect(process.terminationStatus == 0, "\(errText)")
        // Audio was lost (the input outruns the model) and said so.
        #expect(errText.contains("dropped"), "\(errText)")
    }

    @Test("train refuses an existing --output unless --force, before any training")
    func trainOutputExists() throws {
        let root = try toneFolder(files: 4)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let output = root + "/existing"
        try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
        try "keep".write(toFile: output + "/notes.txt", atomically: true, encoding: .utf8)
        let result = try runEarshot(["train", "--data", root, "--output", output, "--epochs", "1"])
        #expect(result.status == 64, "\(result.err)")
        #expect(result.err.contains("--output \(output) exists: refusing to replace it") && result.err.contains("--force"))
        #expect(!result.err.contains("epoch"))
        #expect(try String(contentsOfFile: output + "/notes.txt", encoding: .utf8) == "keep")
    }

    @Test("A folder that is not a package is a missing model, exit 66 naming it, for every command that loads one (serve once said exit 74, \"file doesn't exist\")")
    func folderWithoutPackage() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let dir = folder.path, audio = "AudioSamples/speech-8k.wav"
        let commands: [[String]] = [
            ["serve", "-m", dir, "--uri", "tcp://127.0.0.1:0"], ["label", "-m", dir, audio], ["inspect", dir],
            ["plot", "-m", dir, audio, "-o", dir + "/p.svg"], ["evaluate", "-m", dir, "--stream", audio, "--truth", "AudioSamples/speech-8k.truth.csv"],
            ["worker", "-m", dir, "--redis", "redis://127.0.0.1:1"],
        ]
        let advice = "not a model package (a package holds model.json and weights.safetensors; earshot import and earshot train write one)"
        for words in commands {
            let run = try runEarshot(words)
            #expect(run.status == 66, "\(words[0]): \(run.err)")
            #expect(run.err == "earshot: no model.json in \(dir): \(advice)\n", "\(words[0])")
        }
        // A manifest without its weights: the same, naming the weights.
        try Data(contentsOf: Repo.root.appendingPathComponent("Models/silero-vad/model.json")).write(to: folder.appendingPathComponent("model.json"))
        let noWeights = try runEarshot(["label", "-m", dir, audio])
        #expect(noWeights.status == 66 && noWeights.err == "earshot: no weights.safetensors in \(dir): \(advice)\n", "\(noWeights.err)")
    }

    @Test("bench offline on NaN audio fails naming the file; bench streams validates --counts")
    func benchValidation() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let nan = folder.appendingPathComponent("nan.wav").path
        try writeAudio(nan, samples: [Float](repeating: 0.1, count: 8000) + [.nan] + [Float](repeating: 0.1, count: 8000),
                       channels: 1, sampleRate: 16000)
        let offline = try runEarshot(["bench", "offline", "--audio", nan, "--repeat", "1"])
        #expect(offline.status == 65, "\(offline.out)")
        #expect(offline.err.contains("NaN or infinite"), "\(offline.err)")
        for counts in ["0", "-5", "abc", "10,,20", "2000000"] {
            let streams = try runEarshot(["bench", "streams", "--counts", counts, "--ticks", "10"])
            #expect(streams.status == 64, "\(counts): \(streams.err)")
            #expect(streams.err.contains("--counts \(counts)"), "\(streams.err)")
        }
    }

    @Test("A folder run names the file whose rate no resampler takes, and goes on with the others")
    func badRateNamed() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let slow = folder.appendingPathComponent("a-slow.wav").path
        try writeAudio(slow, samples: [Float](repeating: 0, count: 400), channels: 1, sampleRate: 400)
        try FileManager.default.copyItem(atPath: Repo.path(Self.sample), toPath: folder.appendingPathComponent("b.wav").path)
        let result = try runEarshot(["label", "--format", "csv", folder.path])
        #expect(result.status == 65)
        #expect(result.err.contains("\(slow): unsupported sample rate 400.0 Hz"), "\(result.err)")
        #expect(result.out.split(separator: "\n").count == 7)  // the header and b.wav's six segments
    }

    /// Folders 0 and 1 (labels of the digits model), each a tone in good.wav.
    static func toneFiles(in folder: URL) throws {
        for label in ["0", "1"] {
            try FileManager.default.createDirectory(at: folder.appendingPathComponent(label), withIntermediateDirectories: true)
            try writeAudio(folder.appendingPathComponent("\(label)/good.wav").path,
                           samples: sine(frequency: label == "0" ? 300 : 900, sampleRate: 8000, count: 6000), channels: 1, sampleRate: 8000)
        }
    }

    @Test("evaluate goes on past a bad file, naming it (or stops at it with --strict); an empty truth prints no nan")
    func evaluateBadFile() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try Self.toneFiles(in: folder)
        let bad = folder.appendingPathComponent("1/bad.wav").path
        try writeAudio(bad, samples: [Float](repeating: 0.1, count: 3000) + [.nan] + [Float](repeating: 0.1, count: 3000), channels: 1, sampleRate: 8000)
        let result = try runEarshot(["evaluate", "--model", "digits", "--data", folder.path, "--format", "json"])
        #expect(result.status == 1)
        #expect(result.err.contains("\(bad): sample 3000 is nan: audio must be finite"), "\(result.err)")
        let figures = try JSONSerialization.jsonObject(with: Data(result.out.utf8)) as? [String: Any]
        #expect(figures?["files"] as? Int == 2)
        let strict = try runEarshot(["evaluate", "--model", "digits", "--data", folder.path, "--strict"])
        #expect(strict.status == 1 && strict.out.isEmpty)
        #expect(strict.err.contains(bad))

        let truth = folder.appendingPathComponent("truth.csv").path
        try "start,end,label\n".write(toFile: truth, atomically: true, encoding: .utf8)
        for format in ["text", "json"] {
            let stream = try runEarshot(["evaluate", "--model", "digits", "--stream", folder.appendingPathComponent("0/good.wav").path,
                                         "--truth", truth, "--format", format])
            #expect(stream.status == 0, "\(stream.err)")
            #expect(!stream.out.lowercased().contains("nan"), "\(stream.out)")
        }
        // --plot for a stream: a lane of words and one of detections per label; detections as marks.
        try "start,end,label\n0.1,0.5,0\n".write(toFile: truth, atomically: true, encoding: .utf8)
        let svgPath = folder.appendingPathComponent("stream.svg").path
        let plotted = try runEarshot(["evaluate", "--model", "digits", "--stream", folder.appendingPathComponent("0/good.wav").path,
                                      "--truth", truth, "--plot", svgPath])
        #expect(plotted.status == 0, "\(plotted.err)")
        let svg = SVGElements.parse(try String(contentsOfFile: svgPath, encoding: .utf8))
        #expect(svg.error == nil && svg.withClass("truth").contains { $0["data-label"] == "words 0" })
        #expect(svg.elements.filter { $0.attributes["class"] == "span" }.count == 1)
        #expect(try runEarshot(["evaluate", "--model", "digits", "--data", folder.path, "--plot", "x.png"]).status == 64)
    }

    @Test("evaluate --plot: nothing clipped (title, slanted column labels); hits, misses and false alarms each their colour and mark, with a legend")
    func evaluatePlotsReadable() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // The confusion matrix of two labels: its title is longer than the grid is wide.
        try Self.toneFiles(in: folder)
        let confusionPath = folder.appendingPathComponent("confusion.svg").path
        let confusion = try runEarshot(["evaluate", "--model", "digits", "--data", folder.path, "--plot", confusionPath])
        #expect(confusion.status == 0, "\(confusion.err)")
        let matrix = SVGElements.parse(try String(contentsOfFile: confusionPath, encoding: .utf8))
        #expect(matrix.error == nil && matrix.withClass("cell").count >= 4)
        #expect(matrix.strings.contains { $0.hasPrefix("digits: accuracy") && $0.hasSuffix("(rows: true, columns: predicted)") })
        #expect(matrix.textsOutsideCanvas().isEmpty, "\(matrix.textsOutsideCanvas())")
        // The wake words over time: a word found, a word missed, a detection on no word.
        let wav = "Tests/EarshotTests/Goldens/microwakeword/wake-words.wav"
        let times = try runEarshot(["label", "-m", "okay-nabu", "-f", "csv", wav]).out.split(separator: "\n").dropFirst()
            .compactMap { Double($0.split(separator: ",")[3]) }
        #expect(times.count == 2)
        let truth = folder.appendingPathComponent("truth.csv").path
        try "start,end,label\n\(times[0] - 0.8),\(times[0] - 0.1),Okay Nabu\n0.05,0.3,Okay Nabu\n".write(toFile: truth, atomically: true, encoding: .utf8)
        let streamPath = folder.appendingPathComponent("stream.svg").path
        let stream = try runEarshot(["evaluate", "--model", "okay-nabu", "--stream", wav, "--truth", truth, "--format", "json", "--plot", streamPath])
        #expect(stream.status == 0, "\(stream.err)")
        let figures = try JSONSerialization.jsonObject(with: Data(stream.out.utf8)) as? [String: Any]
        #expect(figures?["hits"] as? Int == 1 && figures?["falseAlarms"] as? Int == 1 && figures?["keywords"] as? Int == 2)
        let svg = SVGElements.parse(try String(contentsOfFile: streamPath, encoding: .utf8))
        #expect(svg.error == nil)
        #expect(svg.textsOutsideCanvas().isEmpty, "\(svg.textsOutsideCanvas())")
        let words = svg.spansByLane()["words Okay Nabu"]?.map { $0["data-outcome"] ?? "" }
        #expect(words == ["hit", "miss"] || words == ["miss", "hit"], "\(String(describing: words))")
        let marks = svg.withClass("mark").map { $0["data-outcome"] ?? "" }
        #expect(marks == ["hit", "false-alarm"], "\(marks)")
        // Distinct marks: a circle for the hit, a cross for the false alarm.
        let shapes = svg.elements.enumerated().filter { $0.element.attributes["class"] == "mark" }.map { svg.elements[$0.offset + 1].name }
        #expect(shapes == ["circle", "path"])
        #expect(svg.withClass("legend-entry").map { $0["data-outcome"] ?? "" } == ["hit", "miss", "false-alarm"])
        #expect(["hit", "miss", "false alarm"].allSatisfy(svg.strings.contains))
    }

    @Test("An Ogg file through a pipe is labelled as the file is")
    func oggPipe() throws {
        let ogg = "AudioSamples/speech-noise-16k.ogg"
        let direct = try runEarshot(["label", "--format", "csv", ogg])
        let piped = try runEarshot(["label", "--format", "csv", "/dev/stdin"], stdinPipe: Data(contentsOf: Repo.root.appendingPathComponent(ogg)))
        #expect(piped.status == 0, "\(piped.err)")
        let rows = { (text: String) in text.split(separator: "\n").map { $0.split(separator: ",").dropFirst().joined(separator: ",") } }
        #expect(rows(piped.out) == rows(direct.out))
        #expect(rows(direct.out).count == 7)
    }

    @Test("label --scores streams every step's scores (one line per step)")
    func scoresStreamed() throws {
        let result = try runEarshot(["label", "--scores", "--format", "jsonl", Self.sample])
        #expect(result.status == 0, "\(result.err)")
        let lines = result.out.split(separator: "\n")
        #expect(lines.filter { $0.contains("\"scores\"") }.count == (583_984 + 511) / 512)
        #expect(lines.filter { $0.contains("\"label\"") }.count == 6)
    }
}
