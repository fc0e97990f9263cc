import Testing
@testable import EarshotTraining

/// The microWakeWord trainer's hard negatives: windows of the negatives' streams the network
/// fires on, trained again as the background.
@Suite("Hard negatives mined from the negatives' streams")
struct HardNegativesTests {
    /// 2 streams of 40 steps of 2 channels, each value saying where it is: stream * 1000 + step,
    /// and its negative in the second channel.
    static func streams() -> Frames {
        var values: [Float] = []
        for s in 0..<2 { for t in 0..<40 { values += [Float(s * 1000 + t), -Float(s * 1000 + t)] } }
        return Frames(batch: 2, time: 40, channels: 2, values: values)
    }

    static func hard(limit: Int = 3) -> HardNegatives {
        HardNegatives(streams: streams(), window: 5, lead: 3, cutoff: 0.3, limit: limit, separation: 2)
    }

    @Test("The windows mined are those scoring at or above the cutoff, one a peak, after the lead, highest first, at most the limit; earlier ones are kept after them")
    func mined() {
        var hard = Self.hard()
        var scores = [Float](repeating: 0, count: 80)
        scores[5] = 0.9  // its window would start in the lead (steps 0-2)
        scores[10] = 0.5; scores[11] = 0.6; scores[12] = 0.2  // one peak: 11
        scores[20] = 0.35
        scores[30] = 0.29  // below the cutoff
        scores[40 + 15] = 0.8; scores[40 + 16] = 0.8  // equals: the earlier one
        scores[40 + 39] = 0.4
        hard.mine(scores: scores)
        #expect(hard.mined == [.init(stream: 1, step: 15), .init(stream: 0, step: 11), .init(stream: 1, step: 39)])
        // The window of (0, 11): stream 0's steps 7 to 11, both channels.
        #expect(hard.windows([1]).values == [7, -7, 8, -8, 9, -9, 10, -10, 11, -11])
        #expect(hard.windows([0, 2]).values.enumerated().filter { $0.offset % 2 == 0 }.map(\.element) == [1011, 1012, 1013, 1014, 1015, 1035, 1036, 1037, 1038, 1039])

        // The next pass: what fires now first, then the earlier windows not near it.
        scores = [Float](repeating: 0, count: 80)
        scores[25] = 0.5
        scores[40 + 16] = 0.7  // within 2 steps of (1, 15): replaces it
        hard.mine(scores: scores)
        #expect(hard.mined == [.init(stream: 1, step: 16), .init(stream: 0, step: 25), .init(stream: 0, step: 11)])
    }

    @Test("Streams shorter than the lead and a window give no hard negatives, whatever they score")
    func shortStreams() {
        var hard = HardNegatives(streams: Self.streams(), window: 30, lead: 20, cutoff: 0.3, limit: 3, separation: 2)
        #expect(hard.mine(scores: [Float](repeating: 1, count: 80)) == 0)
        #expect(hard.mined == [])
    }

    @Test("A stream's scores come from pieces each with the steps before it the network needs: every step's score is the one the whole stream gives")
    func scoredInPieces() {
        let hard = Self.hard()
        // A "network" whose score at a step is its value less the value 3 steps before (or 0).
        let scores = hard.scores(piece: 7, context: 3) { x in
            (0..<x.time).map { t in t >= 3 ? (x.values[t * 2] - x.values[(t - 3) * 2]) / 3 : 0 }
        }
        #expect(scores.count == 80)
        // The first 3 steps of each stream have no context; every other step is 1.
        #expect(scores == (0..<80).map { $0 % 40 < 3 ? 0 : 1 })
    }

    @Test("The streams hold each negative clip whole, in a seeded order, with faint noise between them, until the time allowed")
    func streamsOfClips() throws {
        let clips = (1...40).map { [Float](repeating: Float($0), count: 480 * ($0 % 3 + 1)) }
        let frames = try HardNegatives.makeStreams(of: clips, rate: 16000, stepSamples: 480, seed: 7) { clips in
            Frames(batch: clips.count, time: clips[0].count / 480, channels: 480, values: clips.flatMap { $0 })
        }
        #expect(frames.batch == HardNegatives.streamCount)
        // Each clip's samples, as one run, exactly once over the streams.
        var runs: [Float: Int] = [:]
        let length = frames.time * 480
        for s in 0..<frames.batch {
            let audio = frames.values[(s * length)..<((s + 1) * length)]
            var i = audio.startIndex
            while i < audio.endIndex {
                guard audio[i] >= 1 else {
                    #expect(abs(audio[i]) <= 0.001)
                    i += 1
                    continue
                }
                var j = i
                while j < audio.endIndex && audio[j] == audio[i] { j += 1 }
                #expect(j - i == 480 * (Int(audio[i]) % 3 + 1))
                runs[audio[i], default: 0] += 1
                i = j
            }
        }
        #expect(runs == Dictionary(uniqueKeysWithValues: (1...40).map { (Float($0), 1) }))
        // The same seed deals them the same way.
        let again = try HardNegatives.makeStreams(of: clips, rate: 16000, stepSamples: 480, seed: 7) { clips in
            Frames(batch: clips.count, time: clips[0].count / 480, channels: 480, values: clips.flatMap { $0 })
        }
        #expect(again == frames)
    }
}
