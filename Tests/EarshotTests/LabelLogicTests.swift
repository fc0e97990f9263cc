import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot

/// Cases of Goldens/vad_segments.json: silero-vad 6.2.3's own get_speech_timestamps on given
/// probabilities (tools/vad_segments_reference.py).
struct VADCase: CustomTestStringConvertible, Sendable {
    let name: String
    let sampleRate: Int
    let chunkSamples: Int
    let audioSamples: Int
    let probabilities: [Double]
    let options: LabelOptions
    let segments: [SegmentTracker.Output]
    var testDescription: String { name }

    static let all: [VADCase] = {
        guard let root = try? Reference.json(Repo.path("Tests/EarshotTests/Goldens/vad_segments.json")),
              let sequences = root["sequences"] as? [String: [String: Any]],
              let cases = root["cases"] as? [[String: Any]] else { return [] }
        return cases.compactMap { c in
            guard let sequence = sequences[c["sequence"] as? String ?? ""],
                  let s = c["resolvedSettings"] as? [String: Any] else { return nil }
            var o = LabelOptions()
            o.threshold = s["threshold"] as? Double ?? 0.5
            o.negativeThreshold = s["neg_threshold"] as? Double
            o.minSegmentMs = s["min_speech_duration_ms"] as? Double ?? 250
            o.minSilenceMs = s["min_silence_duration_ms"] as? Double ?? 100
            o.padMs = s["speech_pad_ms"] as? Double ?? 30
            o.maxSegmentSeconds = s["max_speech_duration_s"] as? Double
            o.minSilenceAtMaxSegmentMs = s["min_silence_at_max_speech"] as? Double ?? 98
            o.splitAtLongestSilence = s["use_max_poss_sil_at_max_speech"] as? Bool ?? true
            let segments = (c["segments"] as? [[String: Int]] ?? []).map { SegmentTracker.Output.ended(start: $0["start"] ?? -1, end: $0["end"] ?? -1) }
            return VADCase(name: c["name"] as? String ?? "?", sampleRate: c["sampleRate"] as? Int ?? 0,
                           chunkSamples: c["chunkSamples"] as? Int ?? 0, audioSamples: c["audioSamples"] as? Int ?? 0,
                           probabilities: sequence["probabilities"] as? [Double] ?? [], options: o, segments: segments)
        }
    }()
}

@Suite("Label logic against silero-vad's get_speech_timestamps")
struct LabelLogicTests {
    @Test("The reference holds the default and non-default settings on four sequences")
    func coverage() {
        #expect(VADCase.all.count == 36)
        #expect(VADCase.all.contains { $0.options.maxSegmentSeconds != nil && !$0.options.splitAtLongestSilence })
        #expect(VADCase.all.reduce(0) { $0 + $1.segments.count } > 300)
    }

    @Test("Segments equal silero's, sample for sample", arguments: VADCase.all)
    func parity(_ c: VADCase) {
        var tracker = SegmentTracker(options: c.options, sampleRate: c.sampleRate, stepSamples: c.chunkSamples)
        var ended: [SegmentTracker.Output] = []
        var started: [Int] = []
        for p in c.probabilities {
            for output in tracker.add(p) {
                if case let .started(start) = output { started.append(start) } else { ended.append(output) }
            }
        }
        ended += tracker.finish(audioLength: c.audioSamples)
        #expect(ended == c.segments, "\(c.name)")
        // Every segment was announced while it ran, before its end was known.
        #expect(started.count >= ended.count - 1, "\(c.name): \(started.count) starts for \(ended.count) segments")
    }
}
