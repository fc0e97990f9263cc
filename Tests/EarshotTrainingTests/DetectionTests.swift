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
                          Self.detection("no", at: 20)]     // nothing there
        let e = DetectionEvaluation(words: words, detections: detections, seconds: 1800, window: 1.0, ignored: ["_unknown_"])
        #expect(e.keywordCount == 3)
        #expect(e.hits == 2)
        #expect(e.matches.map { $0.detection?.announced } == [1.7, nil, 8.0])
        #expect(e.falseAlarms == 3)
        #expect(e.falseAlarmsPerHour == 6)
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
}
