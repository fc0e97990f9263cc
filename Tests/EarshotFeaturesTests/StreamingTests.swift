import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotFeatures

@Suite("Streaming features equal whole-signal features")
struct StreamingTests {
    /// Configurations covering centring with both pad modes, no centring, odd FFT sizes,
    /// short windows and every stage.
    static let configs: [FeatureConfig] = GoldenCase.all.map(\.config) + [
        FeatureConfig(sampleRate: 8000, stft: STFTConfig(nFFT: 255, hopLength: 100, center: true, padMode: .reflect, spectrum: .magnitude)),
        FeatureConfig(sampleRate: 16000, stft: STFTConfig(nFFT: 400, hopLength: 400, winLength: 257, window: .hamming, center: false),
                      mel: MelConfig(melCount: 23), log: LogScale(kind: .natural, offset: 1e-6)),
    ]

    @Test("Random chunkings give the same frames, bit for bit", arguments: 0..<configs.count)
    func chunkInvariance(_ index: Int) throws {
        let config = Self.configs[index]
        var random = SeededRandom.fromEnvironment()
        // Lengths around the edge cases: shorter than half a frame, than a frame, and long.
        for length in [1, config.stft.nFFT / 2, config.stft.nFFT - 1, config.stft.nFFT + 7, 12_345] {
            let signal = random.gaussian(count: length, deviation: 0.1)
            let whole = try FeatureExtractor.features(of: signal, config: config)
            #expect(whole.frameCount == config.stft.frameCount(forSamples: length))
            for _ in 0..<4 {
                var extractor = try FeatureExtractor(config: config)
                var streamed = FeatureMatrix(featureCount: config.featureCount)
                var offset = 0
                let sizes = random.chunkSizes(total: length, maxChunk: Int.random(in: 1...3000, using: &random))
                for size in sizes {
                    streamed.append(try extractor.process(Array(signal[offset..<(offset + size)])))
                    offset += size
                }
                streamed.append(extractor.finish())
                #expect(streamed == whole, "seed \(random.seed), config \(index), length \(length), chunks \(sizes.prefix(20))")
            }
        }
    }

    @Test("A copy is a snapshot that continues on its own; finish starts a fresh stream")
    func snapshotAndReuse() throws {
        let config = Self.configs[0]
        var random = SeededRandom.fromEnvironment()
        let signal = random.gaussian(count: 8000, deviation: 0.1)
        let whole = try FeatureExtractor.features(of: signal, config: config)

        var extractor = try FeatureExtractor(config: config)
        var first = try extractor.process(Array(signal[0..<3000]))
        var snapshot = extractor
        // The original goes on with other audio; the snapshot must not notice.
        _ = try extractor.process(random.gaussian(count: 2000, deviation: 0.5))
        first.append(try snapshot.process(Array(signal[3000...])))
        first.append(snapshot.finish())
        #expect(first == whole, "seed \(random.seed)")

        // After finish, the same extractor gives a fresh stream's output.
        var again = try snapshot.process(signal)
        again.append(snapshot.finish())
        #expect(again == whole)
    }

    @Test("Extractors on many tasks at once agree with one run alone")
    func concurrentUse() async throws {
        let config = Self.configs[1]
        let signal = sine(frequency: 440, sampleRate: 22050, count: 22050)
        let alone = try FeatureExtractor.features(of: signal, config: config)
        let results = try await withThrowingTaskGroup(of: FeatureMatrix.self) { group in
            for _ in 0..<8 { group.addTask { try FeatureExtractor.features(of: signal, config: config) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 8)
        for r in results { #expect(r == alone) }
    }

    @Test("NaN or infinite samples are refused with their position")
    func nonFinite() throws {
        var extractor = try FeatureExtractor(config: Self.configs[0])
        _ = try extractor.process([Float](repeating: 0.1, count: 1000))
        var bad = [Float](repeating: 0.1, count: 50)
        bad[17] = .nan
        #expect(throws: FeatureError.nonFiniteInput(sampleIndex: 1017)) { try extractor.process(bad) }
        bad[17] = 0.1
        bad[40] = -.infinity
        var fresh = try FeatureExtractor(config: Self.configs[0])
        #expect(throws: FeatureError.nonFiniteInput(sampleIndex: 40)) { try fresh.process(bad) }
    }

    @Test("Invalid settings are refused with the parameter and the expected range")
    func invalidSettings() throws {
        var c = Self.configs[0]
        c.stft.hopLength = 0
        #expect(throws: FeatureError.invalidParameter(name: "hopLength", value: "0", expected: ">= 1")) {
            try FeatureExtractor(config: c)
        }
        c = Self.configs[0]
        c.stft.winLength = 600
        #expect(throws: FeatureError.invalidParameter(name: "winLength", value: "600", expected: "1...512 (nFFT)")) {
            try FeatureExtractor(config: c)
        }
        c = Self.configs[0]
        c.mel?.fmax = 9000
        #expect(throws: FeatureError.invalidParameter(name: "fmax", value: "9000.0", expected: "<= 8000.0 Hz (half the sample rate)")) {
            try FeatureExtractor(config: c)
        }
        c = Self.configs[0]
        c.mfcc = MFCCConfig(coefficientCount: 65)
        #expect(throws: FeatureError.invalidParameter(name: "mfcc.coefficientCount", value: "65", expected: "1...64 (the mel count)")) {
            try FeatureExtractor(config: c)
        }
    }

    @Test("Windows match their definitions (scipy.signal.get_window)")
    func windows() {
        // Periodic Hann of 4: 0, 0.5, 1, 0.5. Symmetric Hann of 5: 0, 0.5, 1, 0.5, 0.
        #expect(Window.make(.hann, length: 4, periodic: true) == [0, 0.5, 1, 0.5])
        #expect(Window.make(.hann, length: 5, periodic: false) == [0, 0.5, 1, 0.5, 0])
        // Symmetric Hamming of 3: 0.08, 1, 0.08.
        let hamming = Window.make(.hamming, length: 3, periodic: false)
        #expect(maxAbsDifference(hamming, [0.08, 1, 0.08]) < 1e-7)
        #expect(Window.padded([1, 1], toLength: 5) == [0, 1, 1, 0, 0])
    }

    @Test("Mel scales round-trip and meet their anchors")
    func melScale() {
        // Slaney: 1000 Hz is mel 15; HTK: 700 Hz is 2595 * log10(2).
        #expect(abs(MelConfig.hzToMel(1000, scale: .slaney) - 15) < 1e-12)
        #expect(abs(MelConfig.hzToMel(700, scale: .htk) - 2595 * log10(2.0)) < 1e-9)
        for hz in [0.0, 123.4, 999.9, 1000, 4321, 11025] {
            for scale in [MelConfig.Scale.slaney, .htk] {
                #expect(abs(MelConfig.melToHz(MelConfig.hzToMel(hz, scale: scale), scale: scale) - hz) < 1e-6)
            }
        }
    }
}
