import EarshotAudio
import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotModel

enum Silero {
    static func model(_ name: String) throws -> Model {
        try Model(contentsOf: Repo.root.appendingPathComponent("Models/\(name)"))
    }

    /// The audio cut into blocks, the last zero-padded (as the goldens were made).
    static func blocks(_ samples: [Float], size: Int) -> [[Float]] {
        stride(from: 0, to: samples.count, by: size).map { start in
            var block = Array(samples[start..<min(start + size, samples.count)])
            block += [Float](repeating: 0, count: size - block.count)
            return block
        }
    }
}

@Suite("Silero VAD v6 against onnxruntime")
struct SileroTests {
    // Tolerance 1e-4: onnxruntime's own float32 result is up to 1.5e-5 from the exact (float64)
    // value on this audio (the encoder's large weights amplify rounding), and Earshot's float32
    // path has rounding of the same size; 1e-4 holds both with margin.
    @Test("Speech probabilities equal onnxruntime's, chunk by chunk", arguments: [("silero-vad", "silero-vad-16k", "speech-noise-16k.wav"), ("silero-vad-8k", "silero-vad-8k", "speech-8k.wav")])
    func parity(_ names: (String, String, String)) throws {
        let model = try Silero.model(names.0)
        let golden = try Reference.json(Repo.path("Tests/EarshotModelTests/Goldens/\(names.1).json"))
        let expected = try #require(golden["probabilities"] as? [Double]).map(Float.init)
        let (samples, rate) = try AudioFile.readMono(path: Repo.path("AudioSamples/\(names.2)"))
        #expect(rate == model.sampleRate)
        var state = model.makeState()
        let got = try Silero.blocks(samples, size: model.chunkSamples).map { try model.prediction(from: $0, using: &state)[0] }
        #expect(got.count == expected.count)
        let error = maxAbsDifference(got, expected)
        #expect(error <= 1e-4, "max |diff| over \(got.count) chunks: \(error)")
        // The probabilities are not flat: speech and silence both occur.
        #expect((got.max() ?? 0) > 0.9 && (got.min() ?? 1) < 0.1)
    }

    @Test("Many streams in one call equal each stream run alone")
    func batchedEqualsAlone() throws {
        let model = try Silero.model("silero-vad")
        let (samples, _) = try AudioFile.readMono(path: Repo.path("AudioSamples/speech-noise-16k.wav"))
        let streams = [0, 100_000, 300_000].map { Silero.blocks(Array(samples[$0..<($0 + 512 * 40)]), size: 512) }
        var alone: [[Float]] = []
        for blocks in streams {
            var state = model.makeState()
            alone.append(try blocks.flatMap { try model.prediction(from: $0, using: &state) })
        }
        var states = streams.map { _ in model.makeState() }
        var together: [[Float]] = [[], [], []]
        for step in 0..<40 {
            let out = try model.predictions(from: streams.map { $0[step] }, using: &states)
            for s in 0..<3 { together[s] += out[s] }
        }
        #expect(together == alone)
        #expect(throws: ModelError.batchSize(blocks: 2, states: 3)) {
            try model.predictions(from: [streams[0][0], streams[1][0]], using: &states)
        }
    }

    @Test("More streams than one tile (a full tile of 64 and a partial one): each equals its stream alone")
    func tilesEqualAlone() throws {
        let model = try Silero.model("silero-vad")
        let (samples, _) = try AudioFile.readMono(path: Repo.path("AudioSamples/speech-noise-16k.wav"))
        let count = Model.batchTile + 6, steps = 3
        let streams = (0..<count).map { Silero.blocks(Array(samples[($0 * 5_000)..<($0 * 5_000 + 512 * steps)]), size: 512) }
        var alone: [[Float]] = []
        for blocks in streams {
            var state = model.makeState()
            alone.append(try blocks.flatMap { try model.prediction(from: $0, using: &state) })
        }
        var states = streams.map { _ in model.makeState() }
        var together = [[Float]](repeating: [], count: count), flat: [Float] = []
        for step in 0..<steps {
            try model.predictions(from: streams.map { $0[step] }, using: &states, into: &flat)
            for s in 0..<count { together[s].append(flat[s]) }
        }
        #expect(together == alone)
        #expect(Set(alone.map { $0[2] }).count > count / 2)  // the streams really differ
    }

    @Test("Consecutive blocks of one stream in one call equal the blocks one at a time", arguments: ["silero-vad", "silero-vad-8k"])
    func consecutiveEqualsSequential(_ name: String) throws {
        let model = try Silero.model(name)
        let (samples, _) = try AudioFile.readMono(path: Repo.path(name == "silero-vad" ? "AudioSamples/speech-noise-16k.wav" : "AudioSamples/speech-8k.wav"))
        let blocks = Silero.blocks(samples, size: model.chunkSamples)
        var one = model.makeState()
        let sequential = try blocks.map { try model.prediction(from: $0, using: &one) }
        var many = model.makeState()
        var random = SeededRandom.fromEnvironment()
        let together = try inRandomRuns(blocks, maxRun: 300, model: model, state: &many, random: &random)
        #expect(together == sequential, "seed \(random.seed)")
        #expect(many == one)
    }

    @Test("A reset stream equals a fresh one; a restored state continues as the original")
    func resetAndRestore() throws {
        let model = try Silero.model("silero-vad")
        let (samples, _) = try AudioFile.readMono(path: Repo.path("AudioSamples/speech-noise-16k.wav"))
        let blocks = Silero.blocks(Array(samples[0..<(512 * 60)]), size: 512)
        var fresh = model.makeState()
        let reference = try blocks.map { try model.prediction(from: $0, using: &fresh) }

        var used = model.makeState()
        for block in Silero.blocks(Array(samples[200_000..<(200_000 + 512 * 25)]), size: 512) {
            _ = try model.prediction(from: block, using: &used)
        }
        #expect(used != model.makeState())
        used = model.makeState()  // reset
        #expect(try blocks.map { try model.prediction(from: $0, using: &used) } == reference)

        var original = model.makeState()
        for block in blocks[0..<30] { _ = try model.prediction(from: block, using: &original) }
        let bytes = original.serialized()
        var restored = try model.restoreState(bytes)
        #expect(restored == original)
        #expect(restored.byteCount == (64 + 256) * 4)
        let tailOriginal = try blocks[30...].map { try model.prediction(from: $0, using: &original) }
        let tailRestored = try blocks[30...].map { try model.prediction(from: $0, using: &restored) }
        #expect(tailRestored == tailOriginal)
        #expect(tailRestored == Array(reference[30...]))

        let other = try Silero.model("silero-vad-8k")
        #expect(throws: ModelError.stateModelMismatch(expected: other.contentHash, found: model.contentHash)) {
            try other.restoreState(bytes)
        }
        #expect(throws: ModelError.stateFormat(reason: "not an earshot model state (3 bytes, no ESTATE header)")) {
            try model.restoreState([1, 2, 3])
        }
    }

    @Test("Blocks of the wrong size or with NaN are refused")
    func badBlocks() throws {
        let model = try Silero.model("silero-vad")
        var state = model.makeState()
        #expect(throws: ModelError.inputSize(model: "silero-vad", expected: 512, found: 500)) {
            try model.prediction(from: [Float](repeating: 0, count: 500), using: &state)
        }
        var block = [Float](repeating: 0, count: 512)
        block[9] = .nan
        #expect(throws: ModelError.nonFiniteInput(model: "silero-vad", sampleIndex: 9)) {
            try model.prediction(from: block, using: &state)
        }
        // The first bad sample is named wherever it is: in a later vector, at the very end, infinite.
        for (index, value) in [(9, Float.infinity), (300, -.infinity), (511, .nan), (33, .signalingNaN)] {
            var later = [Float](repeating: 0.25, count: 512)
            later[index] = value
            if index < 511 { later[511] = .nan }  // a second bad one after the first
            #expect(throws: ModelError.nonFiniteInput(model: "silero-vad", sampleIndex: index)) {
                try model.prediction(from: later, using: &state)
            }
        }
        #expect(state == model.makeState())
    }
}
