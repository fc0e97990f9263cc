import Earshot
import Foundation

enum BenchCommand {
    static func run(_ words: [String]) throws {
        guard let what = words.first else {
            throw UsageError("bench needs a subject", hint: "earshot bench features")
        }
        switch what {
        case "features": try features(Array(words.dropFirst()))
        case "model": try model(Array(words.dropFirst()))
        default: throw UsageError("unknown benchmark '\(what)'", hint: "earshot bench features | earshot bench model")
        }
    }

    /// The benchmark's audio: the given file (mono, 16 kHz) repeated to `seconds`. The same
    /// construction as tools/bench_features.py, so both measure the same samples.
    static func benchAudio(path: String, seconds: Double) throws -> [Float] {
        let (samples, rate) = try AudioFile.readMono(path: path)
        guard rate == 16000 else {
            throw UsageError("\(path) is \(rate) Hz: the features benchmark takes a 16 kHz file")
        }
        let total = Int(seconds * 16000)
        return (0..<total).map { samples[$0 % samples.count] }
    }

    /// Log-mel throughput: 16 kHz, n_fft 512, hop 160, 64 mels, dB; one thread; fed in 1 s chunks.
    static func features(_ words: [String]) throws {
        let args = try Arguments(words, valued: ["seconds", "repeat", "audio"], switches: ["json"], command: "bench features")
        let seconds = try args.double("seconds", default: 180, range: 1...36000)
        let repeats = try args.int("repeat", default: 5, range: 1...1000)
        let path = args.string("audio") ?? bundledPath("AudioSamples/speech-noise-16k.wav")
        let audio = try benchAudio(path: path, seconds: seconds)
        let config = FeatureConfig.logMel(sampleRate: 16000, nFFT: 512, hopLength: 160, melCount: 64,
                                          log: .decibels(topDB: 80))
        var times: [Double] = []
        var frames = 0
        let clock = ContinuousClock()
        for _ in 0..<(repeats + 1) {
            var extractor = try FeatureExtractor(config: config)
            var count = 0
            let elapsed = try clock.measure {
                try audio.withUnsafeBufferPointer { buf in
                    var offset = 0
                    while offset < buf.count {
                        let end = min(offset + 16000, buf.count)
                        count += try extractor.process(UnsafeBufferPointer(rebasing: buf[offset..<end])).frameCount
                        offset = end
                    }
                }
                count += extractor.finish().frameCount
            }
            frames = count
            times.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18)
        }
        times.removeFirst()  // the first run plans the FFT and warms caches
        let median = times.sorted()[times.count / 2]
        let realTime = seconds / median
        if args.flag("json") {
            print(jsonLine([
                "runtime": "earshot", "benchmark": "features", "config": "log-mel 16 kHz n_fft 512 hop 160 64 mels dB",
                "audio_seconds": seconds, "frames": frames, "repeats": repeats,
                "seconds_median": median, "x_realtime": realTime, "seconds_all": times,
            ]))
        } else {
            print(String(format: "earshot log-mel: %.1f s of audio, %d frames, median %.4f s over %d runs: %.0fx real time (one thread)",
                         seconds, frames, median, repeats, realTime))
        }
    }

    /// One stream, one thread: the file cut into blocks (the last zero-padded), each run through
    /// `prediction(from:using:)` in turn; the median over repeats of the mean time per block.
    static func model(_ words: [String]) throws {
        let args = try Arguments(words, valued: ["model", "audio", "repeat"], switches: ["json"], command: "bench model")
        let model = try Model(contentsOf: try ModelLocator.find(args.string("model") ?? ModelLocator.defaultModel))
        let repeats = try args.int("repeat", default: 5, range: 1...1000)
        let path = args.string("audio") ?? bundledPath("AudioSamples/speech-noise-16k.wav")
        let (source, rate) = try AudioFile.readMono(path: path)
        let resampler = try Resampler(inputRate: Double(rate), outputRate: Double(model.sampleRate))
        let samples = try resampler.process(source) + resampler.finish()
        let n = model.chunkSamples
        let blocks: [[Float]] = stride(from: 0, to: samples.count, by: n).map { start in
            Array(samples[start..<min(start + n, samples.count)]) + [Float](repeating: 0, count: max(0, start + n - samples.count))
        }
        var perBlock: [Double] = []
        let clock = ContinuousClock()
        for run in 0...repeats {
            var state = model.makeState()
            let elapsed = try clock.measure {
                for block in blocks { _ = try model.prediction(from: block, using: &state) }
            }
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
            if run > 0 { perBlock.append(seconds / Double(blocks.count)) }  // run 0 warms up
        }
        let median = perBlock.sorted()[perBlock.count / 2]
        let us = median * 1e6
        let realTime = Double(n) / Double(model.sampleRate) / median
        if args.flag("json") {
            print(jsonLine([
                "runtime": "earshot", "benchmark": "model", "model": model.name, "threads": 1,
                "us_per_chunk_median": us, "us_per_chunk_best": (perBlock.min() ?? 0) * 1e6,
                "x_realtime": realTime, "chunks": blocks.count, "repeats": repeats,
            ]))
        } else {
            print(String(format: "earshot %@, 1 thread: %.1f us per %d-sample chunk (median of %d), %.0fx real time, %d chunks",
                         model.name, us, n, repeats, realTime, blocks.count))
        }
    }
}
