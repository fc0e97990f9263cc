import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotFeatures

/// The three reference configurations of tools/make_feature_goldens.py (see Goldens/README.md
/// and each folder's meta.json for the librosa calls).
struct GoldenCase: CustomTestStringConvertible, Sendable {
    let folder: String
    let config: FeatureConfig
    /// Whole-signal top_db applied after the stream (librosa's power_to_db(top_db=...)).
    let offlineTopDB: Float?

    var testDescription: String { folder }

    static let all: [GoldenCase] = [
        GoldenCase(
            folder: "16k-n512-h160-m64",
            config: FeatureConfig(
                sampleRate: 16000,
                stft: STFTConfig(nFFT: 512, hopLength: 160, window: .hann, periodic: true, center: true,
                                 padMode: .reflect, spectrum: .power),
                mel: MelConfig(melCount: 64, fmin: 0, fmax: 8000, scale: .slaney, normalization: .slaney),
                log: .decibels(reference: 1, floor: 1e-10), mfcc: MFCCConfig(coefficientCount: 20)),
            offlineTopDB: nil),
        GoldenCase(
            folder: "22k-n2048-h512-m128",
            config: FeatureConfig(
                sampleRate: 22050,
                stft: STFTConfig(nFFT: 2048, hopLength: 512, window: .hann, periodic: true, center: true,
                                 padMode: .constant, spectrum: .power),
                mel: MelConfig(melCount: 128, fmin: 20, fmax: 8000, scale: .htk, normalization: .slaney),
                log: .decibels(reference: 1, floor: 1e-10, topDB: 80), mfcc: MFCCConfig(coefficientCount: 13)),
            offlineTopDB: 80),
        GoldenCase(
            folder: "16k-n512-w400-h160-m40-hamming",
            config: FeatureConfig(
                sampleRate: 16000,
                stft: STFTConfig(nFFT: 512, hopLength: 160, winLength: 400, window: .hamming, periodic: false,
                                 center: false, spectrum: .magnitude),
                mel: MelConfig(melCount: 40, fmin: 20, fmax: 7600, scale: .htk, normalization: .none),
                log: LogScale(kind: .log10, offset: 1e-6), mfcc: MFCCConfig(coefficientCount: 13)),
            offlineTopDB: nil),
    ]

    func file(_ name: String) throws -> [Float] {
        try Reference.float32(Repo.path("Tests/EarshotFeaturesTests/Goldens/\(folder)/\(name)"))
    }

    func shape(_ name: String) throws -> [Int] {
        let meta = try Reference.json(Repo.path("Tests/EarshotFeaturesTests/Goldens/\(folder)/meta.json"))
        let files = meta["files"] as? [String: Any]
        let entry = files?[name] as? [String: Any]
        return (entry?["shape"] as? [Int]) ?? []
    }

    /// The stages of the configuration, each on its own: spectrum only, mel (with log), mfcc.
    var spectrumOnly: FeatureConfig {
        var c = config
        c.mel = nil; c.log = nil; c.mfcc = nil
        c.stft.spectrum = .magnitude
        return c
    }

    var logMelOnly: FeatureConfig {
        var c = config
        c.mfcc = nil
        return c
    }
}

/// Largest |a - b| relative to the largest |b| (the scale the float32 rounding is relative to).
func relativeToPeak(_ a: [Float], _ b: [Float]) -> Float {
    maxAbsDifference(a, b) / (b.map(abs).max() ?? 1)
}

@Suite("Features against librosa")
struct GoldenTests {
    // Tolerances. The references are librosa in float64; Earshot runs float32 end to end, so
    // each bound is float32 rounding through the stage, with the measured worst case noted.
    // - STFT magnitude: a float32 FFT of size n rounds with error ~ eps * log2(n) relative to the
    //   frame's energy; held at 2e-6 of the excerpt's largest magnitude (eps 6e-8 * log2(2048) 11
    //   * margin 3). Measured: 1.0e-7 ... 1.2e-7.
    // - Mel filterbank: weights computed in Double and stored as Float: held at 1e-6 of the
    //   largest weight (a few ulps). Measured: 0 (bit-equal to librosa's float32 matrix).
    // - Log-mel: 10 log10 turns a relative error r into 4.34 r dB; quiet bins carry the FFT's
    //   absolute rounding as larger relative errors. Held at 1e-3 (dB, or log10 units) overall and
    //   2e-4 within 60 dB of the peak. Measured: 3.5e-4 overall (quiet bins of the 22 kHz config),
    //   8.4e-5 within 60 dB of the peak.
    // - MFCC: a DCT sums up to 128 log-mel values with weights <= 0.125 and errors of both signs:
    //   held at 2e-3. Measured: at most 1.1e-4.

    @Test("STFT magnitude", arguments: GoldenCase.all)
    func stftMagnitude(_ golden: GoldenCase) throws {
        let input = try golden.file("input.f32")
        let expected = try golden.file("stft_magnitude.f32")
        let got = try FeatureExtractor.features(of: input, config: golden.spectrumOnly)
        #expect(try [got.frameCount, got.featureCount] == golden.shape("stft_magnitude.f32"))
        let error = relativeToPeak(got.values, expected)
        #expect(error <= 2e-6, "max |diff| / peak = \(error)")
    }

    @Test("Mel filterbank matrix", arguments: GoldenCase.all)
    func melFilterbank(_ golden: GoldenCase) throws {
        let expected = try golden.file("mel_filterbank.f32")
        let mel = try #require(golden.config.mel)
        let bank = try MelFilterbank(config: mel, sampleRate: golden.config.sampleRate, nFFT: golden.config.stft.nFFT)
        let got = bank.matrix.flatMap { $0 }
        #expect(try [mel.melCount, golden.config.stft.binCount] == golden.shape("mel_filterbank.f32"))
        let error = relativeToPeak(got, expected)
        #expect(error <= 1e-6, "max |diff| / peak = \(error)")
    }

    @Test("Log-mel", arguments: GoldenCase.all)
    func logMel(_ golden: GoldenCase) throws {
        let input = try golden.file("input.f32")
        let expected = try golden.file("log_mel.f32")
        var got = try FeatureExtractor.features(of: input, config: golden.logMelOnly).values
        if let topDB = golden.offlineTopDB { LogScale.clip(&got, topDB: topDB) }
        #expect(got.count == expected.count)
        let peak = expected.max() ?? 0
        var worst: Float = 0, worstLoud: Float = 0
        for (g, e) in zip(got, expected) {
            worst = max(worst, abs(g - e))
            // "Loud": within 60 dB of the peak (1.5 in log10 units of a magnitude spectrum).
            let loud = golden.config.log?.kind == .decibels ? e > peak - 60 : e > peak - 3
            if loud { worstLoud = max(worstLoud, abs(g - e)) }
        }
        #expect(worst <= 1e-3, "max |diff| = \(worst)")
        #expect(worstLoud <= 2e-4, "max |diff| within 60 dB of the peak = \(worstLoud)")
    }

    @Test("MFCC", arguments: GoldenCase.all)
    func mfcc(_ golden: GoldenCase) throws {
        let input = try golden.file("input.f32")
        let expected = try golden.file("mfcc.f32")
        var got: [Float]
        if let topDB = golden.offlineTopDB {
            // Whole-signal top_db comes before the DCT: clip the log-mel, then transform.
            var logMel = try FeatureExtractor.features(of: input, config: golden.logMelOnly).values
            LogScale.clip(&logMel, topDB: topDB)
            let mel = golden.logMelOnly.featureCount
            let dct = try DCT(inputCount: mel, outputCount: golden.config.featureCount)
            got = [Float](repeating: 0, count: logMel.count / mel * dct.outputCount)
            for t in 0..<(logMel.count / mel) {
                logMel[(t * mel)..<((t + 1) * mel)].withUnsafeBufferPointer { src in
                    got.withUnsafeMutableBufferPointer { dst in
                        dct.apply(src, into: UnsafeMutableBufferPointer(rebasing: dst[(t * dct.outputCount)..<((t + 1) * dct.outputCount)]))
                    }
                }
            }
        } else {
            got = try FeatureExtractor.features(of: input, config: golden.config).values
        }
        #expect(got.count == expected.count)
        let error = maxAbsDifference(got, expected)
        #expect(error <= 2e-3, "max |diff| = \(error)")
    }

    @Test("Streaming topDB then whole-signal clip equals librosa's whole-signal top_db")
    func streamingTopDB() throws {
        let golden = GoldenCase.all[1]
        let input = try golden.file("input.f32")
        var streamed = try FeatureExtractor.features(of: input, config: golden.logMelOnly).values
        var plainConfig = golden.logMelOnly
        plainConfig.log?.topDB = nil
        var plain = try FeatureExtractor.features(of: input, config: plainConfig).values
        LogScale.clip(&streamed, topDB: 80)
        LogScale.clip(&plain, topDB: 80)
        #expect(streamed == plain)
    }
}
