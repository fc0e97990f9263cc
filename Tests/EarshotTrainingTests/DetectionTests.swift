import Earshot
import EarshotModel
import EarshotTestSupport
import Foundation
import Testing
@testable import EarshotTraining

@Suite("Keyword spotting in a stream")
struct DetectionTests {
    static func detection(_ label: String, at announced: Double) -> DetectionEvaluation.Detection {
        .init(segment: Segment(channel: 0, label: label, start: 0, end: 0, sampleRate: 16000, confidence: 1), announced: announced)
    }

    @Test("Hits, misses, false alarms and delays are counted word by word")
    func scoring() {
        let words = [DetectionEvaluation.Word(start: 1, end: 1.5, label: "yes"), .init(start: 4, end: 4.4, label: "no"),
                     .init(start: 8, end: 8.6, label: "yes"), .init(start: 12, end: 12.5, label: "_unknown_")]
        let detections = [Self.detection("yes", at: 1.7),   // finds word 1, 0.2 s after its end
                          Self.detection("yes", at: 1.9),   // a second report of the same word: a false alarm
                          Self.detection("yes", at: 4.2),   // during "no", of another label: a false alarm
                          Self.detection("yes", at: 8.0),   // finds word 3 at its very start (-0.6 s)
                          Self.detection("no", at: 8.0),    // with it, during "yes": a false alarm
                          Self.detection("no", at: 12.8),   // during the unknown word: a false alarm
                          Self.detection("no", at: 20)]     // nothing there
        let e = DetectionEvaluation(words: words, detections: detections, seconds: 1800, window: 1.0, ignored: ["_unknown_"])
        #expect(e.keywordCount == 3)
        #expect(e.hits == 2)
        #expect(e.matches.map { $0.detection?.announced } == [1.7, nil, 8.0])
        #expect(e.falseAlarms == 5)
        #expect(e.falseAlarmsPerHour == 10)
        #expect(e.falseAlarmKinds == [.repeated, .otherWord, .otherWord, .uncountedWord, .betweenWords])
        #expect(e.delays.count == 2 && zip(e.delays, [-0.6, 0.2]).allSatisfy { abs($0 - $1) < 1e-12 })
    }

    @Test("A model trained on tone bursts over noise finds the bursts of a long stream, as listen runs it")
    func streamOfTones() async throws {
        // Three labels: "quiet" (noise alone, the background), "high" and "low" tones over noise.
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-bursts-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        var random = SeededRandom(seed: 31)
        func noise(_ n: Int) -> [Float] { (0..<n).map { _ in Float.random(in: -0.02...0.02, using: &random) } }
        for (label, band) in [("high", 1500.0...2500.0), ("low", 300.0...500.0), ("quiet", 0.0...0.0)] {
            try FileManager.default.createDirectory(atPath: root + "/" + label, withIntermediateDirectories: true)
            for i in 0..<12 {
                // 0.3 s of noise, then 0.3 s of tone (or noise), then 0.2 s of noise.
                let f = Double.random(in: band, using: &random)
                let middle = f > 0 ? zip(sine(frequency: f, sampleRate: 8000, count: 2400, amplitude: 0.3), noise(2400)).map(+) : noise(2400)
                try writeAudio("\(root)/\(label)/s\(i / 3)_\(i).wav", samples: noise(2400) + middle + noise(1600), channels: 1, sampleRate: 8000)
            }
        }
        var options = TrainerTests.options(epochs: 20)
        options.background = "quiet"
        options.augment = []
        options.contextSeconds = 0.5  // each clip after another and a gap, as in a stream
        options.patience = 20
        let (training, validation) = try Dataset.load(root, groupBy: "^(s[0-9]+)_").split(validationFraction: 0.25, seed: 3)
        let trained = try Trainer.train(name: "bursts", training: training, validation: validation, options: options)
        let model = try Model(manifest: trained.manifest, tensors: trained.tensors)
        // 20 bursts of 0.4 s, 1.2 s apart, alternating high and low, in noise.
        var audio: [Float] = [], words: [DetectionEvaluation.Word] = []
        for k in 0..<20 {
            audio += noise(9600)
            let label = k % 2 == 0 ? "high" : "low"
            words.append(.init(start: Double(audio.count) / 8000, end: Double(audio.count + 3200) / 8000, label: label))
            audio += zip(sine(frequency: k % 2 == 0 ? 2000 : 400, sampleRate: 8000, count: 3200, amplitude: 0.3), noise(3200)).map(+)
        }
        audio += noise(9600)
        let e = try await DetectionEvaluation.run(model: model, audio: audio, sampleRate: 8000, words: words, ignoring: [])
        print("bursts: \(e.hits) of \(e.keywordCount) found, \(e.falseAlarms) false alarms, delays \(e.delays)")
        #expect(e.hits == 20)
        #expect(e.falseAlarms == 0)
        #expect(e.delays.allSatisfy { $0 < 0.5 })
    }

    @Test("Early stopping: a better stream score wins over clip accuracy; without a stream, accuracy then loss; patience counts after its start")
    func earlyStoppingOrder() {
        var stopping = EarlyStopping(patience: 2, from: 1)
        func stream(_ hits: Int, _ falseAlarms: Int) -> StreamScore { StreamScore(words: 10, hits: hits, falseAlarms: falseAlarms, falseAlarmsPerHour: 0) }
        let kept1 = stopping.offer(epoch: 1, accuracy: 0.9, loss: 0.5, stream: stream(6, 1), parameters: [[1]])
        #expect(kept1)
        let kept2 = stopping.offer(epoch: 2, accuracy: 0.99, loss: 0.1, stream: stream(6, 2), parameters: [[2]])
        #expect(!kept2)  // 4 < 5: not better
        let kept3 = stopping.offer(epoch: 3, accuracy: 0.5, loss: 0.9, stream: stream(8, 1), parameters: [[3]])
        #expect(kept3)
        let kept4 = stopping.offer(epoch: 4, accuracy: 0.5, loss: 0.9, stream: stream(8, 1), parameters: [[4]])
        #expect(!kept4)   // the same: not better
        #expect(!stopping.shouldStop)
        let kept5 = stopping.offer(epoch: 5, accuracy: 0.4, loss: 0.9, stream: stream(7, 0), parameters: [[5]])
        #expect(!kept5)
        #expect(stopping.shouldStop && stopping.best?.parameters == [[3]])
        var clips = EarlyStopping(patience: 5, from: 0)
        let kept6 = clips.offer(epoch: 1, accuracy: 0.8, loss: 0.5, stream: nil, parameters: [[1]])
        #expect(kept6)
        let kept7 = clips.offer(epoch: 2, accuracy: 0.8, loss: 0.4, stream: nil, parameters: [[2]])
        #expect(kept7)
        let kept8 = clips.offer(epoch: 3, accuracy: 0.7, loss: 0.1, stream: nil, parameters: [[3]])
        #expect(!kept8)
    }

    @Test("With a validation stream each epoch's package runs over it as listen runs it; the model kept is the epoch that scored best there")
    func validationStream() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-vstream-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        var random = SeededRandom(seed: 32)
        func noise(_ n: Int) -> [Float] { (0..<n).map { _ in Float.random(in: -0.02...0.02, using: &random) } }
        for (label, band) in [("high", 1500.0...2500.0), ("quiet", 0.0...0.0)] {
            try FileManager.default.createDirectory(atPath: root + "/" + label, withIntermediateDirectories: true)
            for i in 0..<8 {
                let f = Double.random(in: band, using: &random)
                let middle = f > 0 ? zip(sine(frequency: f, sampleRate: 8000, count: 2400, amplitude: 0.3), noise(2400)).map(+) : noise(2400)
                try writeAudio("\(root)/\(label)/s\(i / 2)_\(i).wav", samples: noise(2400) + middle + noise(1600), channels: 1, sampleRate: 8000)
            }
        }
        var audio: [Float] = [], truth = "start,end,label\n"
        for _ in 0..<8 {
            audio += noise(9600)
            truth += "\(Double(audio.count) / 8000),\(Double(audio.count + 3200) / 8000),high\n"
            audio += zip(sine(frequency: 1800, sampleRate: 8000, count: 3200, amplitude: 0.3), noise(3200)).map(+)
        }
        audio += noise(9600)
        try writeAudio(root + "/stream.wav", samples: audio, channels: 1, sampleRate: 8000)
        try truth.write(toFile: root + "/stream.truth.csv", atomically: true, encoding: .utf8)
        var options = TrainerTests.options(epochs: 20)
        options.background = "quiet"
        options.augment = []
        options.contextSeconds = 0.5
        options.patience = 20
        options.validationStream = ValidationStream(audio: root + "/stream.wav", truth: root + "/stream.truth.csv")
        let (training, validation) = try Dataset.load(root, groupBy: "^(s[0-9]+)_").split(validationFraction: 0.25, seed: 3)
        let trained = try Trainer.train(name: "high", training: training, validation: validation, options: options)
        let scores = trained.reports.compactMap(\.stream)
        #expect(scores.count == trained.reports.count && scores.allSatisfy { $0.words == 8 })
        let kept = try #require(trained.reports.last(where: \.best)?.stream)
        #expect(scores.allSatisfy { $0.hits - $0.falseAlarms <= kept.hits - kept.falseAlarms })
        #expect(kept.hits >= 6 && Set(scores.map(\.hits)).count > 1, "the stream tells epochs apart")
        // The package written is that epoch's: run over the stream again, the same score.
        let model = try Model(manifest: trained.manifest, tensors: trained.tensors)
        let e = try DetectionEvaluation.evaluate(model: model, audio: audio, sampleRate: 8000,
                                                 words: try DetectionEvaluation.words(csv: root + "/stream.truth.csv"), ignoring: ["quiet", "_unknown_"])
        print("validation stream: per epoch \(scores.map { "\($0.hits)/\($0.falseAlarms)" }), kept \(kept.hits)/\(kept.falseAlarms)")
        #expect(e.hits == kept.hits && e.falseAlarms == kept.falseAlarms)
        // A missing stream is named.
        options.validationStream = ValidationStream(audio: root + "/none.wav", truth: root + "/stream.truth.csv")
        #expect(throws: TrainingError.self) { try Trainer.train(name: "high", training: training, validation: validation, options: options) }
    }
}
