import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotAudio

/// Least-squares fit of a*sin + b*cos at `frequency` over `samples`: amplitude and the RMS of
/// what the fit leaves (near zero when the signal is a sine of that frequency).
func fitSine(_ samples: ArraySlice<Float>, frequency: Double, sampleRate: Double) -> (amplitude: Double, residualRMS: Double) {
    var ss = 0.0, cc = 0.0, sc = 0.0, ys = 0.0, yc = 0.0
    for (i, y) in zip(samples.indices, samples) {
        let phase = 2 * Double.pi * frequency * Double(i) / sampleRate
        let s = sin(phase), c = cos(phase)
        ss += s * s; cc += c * c; sc += s * c; ys += Double(y) * s; yc += Double(y) * c
    }
    let det = ss * cc - sc * sc
    let a = (ys * cc - yc * sc) / det, b = (yc * ss - ys * sc) / det
    var residual = 0.0
    for (i, y) in zip(samples.indices, samples) {
        let phase = 2 * Double.pi * frequency * Double(i) / sampleRate
        let r = Double(y) - a * sin(phase) - b * cos(phase)
        residual += r * r
    }
    return ((a * a + b * b).squareRoot(), (residual / Double(samples.count)).squareRoot())
}

func resampleWhole(_ input: [Float], from: Double, to: Double, channels: Int = 1) throws -> [Float] {
    let r = try Resampler(inputRate: from, outputRate: to, channelCount: channels)
    return try r.process(input) + r.finish()
}

@Suite("Resampler")
struct ResamplerTests {
    static let rates: [Double] = [8000, 11025, 16000, 22050, 44100, 48000, 96000]
    static let pairs: [(Double, Double)] = rates.flatMap { a in rates.map { b in (a, b) } }

    @Test("A sine keeps its frequency and amplitude, and the length is input * ratio", arguments: 0..<pairs.count)
    func sineSurvives(_ index: Int) throws {
        let (from, to) = Self.pairs[index]
        let seconds = 1.0
        let input = sine(frequency: 440, sampleRate: from, count: Int(from * seconds), amplitude: 0.5)
        let output = try resampleWhole(input, from: from, to: to)
        let expectedLength = Double(input.count) * to / from
        #expect(abs(Double(output.count) - expectedLength) <= 1, "\(from) -> \(to): \(output.count) samples")
        // Away from the edges (the filter's start-up and tail), the output is the same sine.
        let edge = Int(to * 0.05)
        let fit = fitSine(output[edge..<(output.count - edge)], frequency: 440, sampleRate: to)
        #expect(abs(fit.amplitude - 0.5) < 1e-3, "\(from) -> \(to): amplitude \(fit.amplitude)")
        #expect(fit.residualRMS < 1e-3, "\(from) -> \(to): residual RMS \(fit.residualRMS)")
    }

    @Test("A 1 kHz tone at 48 kHz resampled to 16 kHz has its energy at 1 kHz")
    func toneEnergy() throws {
        let input = sine(frequency: 1000, sampleRate: 48000, count: 48000, amplitude: 0.5)
        let output = try resampleWhole(input, from: 48000, to: 16000)
        // DFT power over the steady part (1 s at 16 kHz: bins 1 Hz apart).
        let steady = Array(output[1000..<15000])
        let n = steady.count
        func power(_ hz: Double) -> Double {
            var re = 0.0, im = 0.0
            for (i, x) in steady.enumerated() {
                let phase = 2 * Double.pi * hz * Double(i) / 16000
                re += Double(x) * cos(phase); im -= Double(x) * sin(phase)
            }
            return (re * re + im * im) / Double(n)
        }
        // Parseval: the power of all n bins adds up to the total; a real signal has half of it at
        // negative frequencies, so the bins from 990 to 1010 Hz count twice. 1 kHz is bin 875 of
        // 14000 exactly, so a pure tone leaks nowhere.
        let total = steady.reduce(0.0) { $0 + Double($1 * $1) }
        let binHz = 16000.0 / Double(n)
        let atTone = 2 * (Int((990 / binHz).rounded(.up))...Int(1010 / binHz)).reduce(0.0) { $0 + power(Double($1) * binHz) }
        #expect(atTone / total > 0.99, "fraction of energy within 10 Hz of 1 kHz: \(atTone / total)")
        let elsewhere = [500.0, 2000, 3000, 7000].map(power).max() ?? 0
        #expect(elsewhere / power(1000) < 1e-6)
    }

    @Test("Resampling in random chunks equals resampling whole", arguments: [(44100.0, 16000.0), (8000, 16000), (48000, 16000), (22050, 44100)])
    func chunkInvariance(_ rates: (Double, Double)) throws {
        var random = SeededRandom.fromEnvironment()
        let input = random.gaussian(count: 30_000, deviation: 0.2)
        let whole = try resampleWhole(input, from: rates.0, to: rates.1)
        for _ in 0..<3 {
            let r = try Resampler(inputRate: rates.0, outputRate: rates.1)
            var out: [Float] = []
            var offset = 0
            for size in random.chunkSizes(total: input.count, maxChunk: Int.random(in: 1...5000, using: &random)) {
                out += try r.process(Array(input[offset..<(offset + size)]))
                offset += size
            }
            out += try r.finish()
            // soxr's output does not depend on how its input is cut: equal to float rounding
            // (held at 1e-6; measured 0).
            #expect(out.count == whole.count, "seed \(random.seed)")
            #expect(maxAbsDifference(out, whole) <= 1e-6, "seed \(random.seed)")
        }
    }

    @Test("Stereo is resampled per channel, interleaved")
    func stereo() throws {
        let left = sine(frequency: 300, sampleRate: 44100, count: 44100)
        let right = sine(frequency: 700, sampleRate: 44100, count: 44100, amplitude: 0.25)
        let interleaved = zip(left, right).flatMap { [$0, $1] }
        let out = try resampleWhole(interleaved, from: 44100, to: 16000, channels: 2)
        let outLeft = try resampleWhole(left, from: 44100, to: 16000)
        let outRight = try resampleWhole(right, from: 44100, to: 16000)
        #expect(out.count == 2 * outLeft.count)
        #expect(maxAbsDifference(stride(from: 0, to: out.count, by: 2).map { out[$0] }, outLeft) <= 1e-6)
        #expect(maxAbsDifference(stride(from: 1, to: out.count, by: 2).map { out[$0] }, outRight) <= 1e-6)
    }

    @Test("Equal rates pass samples through; finish readies a new stream")
    func passThroughAndReuse() throws {
        let input: [Float] = [0.1, -0.2, 0.3]
        let same = try Resampler(inputRate: 16000, outputRate: 16000)
        #expect(try same.process(input) == input)
        #expect(try same.finish().isEmpty)

        var random = SeededRandom(seed: 3)
        let signal = random.gaussian(count: 5000, deviation: 0.2)
        let r = try Resampler(inputRate: 8000, outputRate: 16000)
        let first = try r.process(signal) + r.finish()
        let second = try r.process(signal) + r.finish()
        #expect(first == second)
    }

    @Test("Rates outside 1 kHz ... 384 kHz are refused with the rate")
    func badRates() {
        #expect(throws: AudioError.unsupportedSampleRate(0)) { try Resampler(inputRate: 0, outputRate: 16000) }
        #expect(throws: AudioError.unsupportedSampleRate(1e6)) { try Resampler(inputRate: 16000, outputRate: 1e6) }
    }
}
