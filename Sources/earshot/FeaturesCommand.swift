import Earshot
import Foundation

enum FeaturesCommand {
    static func config(_ args: Arguments) throws(UsageError) -> FeatureConfig {
        let nFFT = args.int("n-fft")
        var config = FeatureConfig.logMel(
            sampleRate: args.int("rate"), nFFT: nFFT,
            hopLength: args.int("hop"),
            melCount: args.int("mels"))
        if let text = args.string("mfcc") {
            guard let n = Int(text), (1...config.featureCount).contains(n) else {
                throw UsageError("--mfcc \(text): expected 1...\(config.featureCount) (the mel count)")
            }
            config.mfcc = MFCCConfig(coefficientCount: n)
        }
        return config
    }

    static func run(_ words: [String]) throws {
        let args = try Arguments(words, spec: Specs.features)
        guard args.positionals.count == 1, let path = args.positionals.first else {
            throw UsageError("features takes one audio file", hint: "earshot features AudioSamples/speech-noise-16k.wav")
        }
        let config = try config(args)
        var job = FileFeatures(config: config)
        if args.string("channel") != nil {
            job.channels = .channel(args.int("channel"))
        }
        let clock = ContinuousClock()
        var summary: FileFeatures.Summary?
        let elapsed = try clock.measure { summary = try job.run(path: path) }
        guard let summary else { return }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        let audioSeconds = Double(summary.frameCount) / Double(summary.sourceRate)
        let kind = config.mfcc != nil ? "MFCC" : "log-mel (dB)"
        if args.flag("json") {
            try out(jsonLine([
                "file": path, "format": summary.formatName, "encoding": summary.encodingName,
                "sourceRate": summary.sourceRate, "channels": summary.channelCount, "seconds": audioSeconds,
                "featureRate": config.sampleRate, "features": kind, "featureCount": config.featureCount,
                "frames": summary.featureFrames, "mean": summary.mean, "min": summary.minimum, "max": summary.maximum,
                "wallSeconds": seconds,
            ]))
            return
        }
        try out("""
            \(path): \(summary.formatName), \(summary.encodingName), \(summary.channelCount) ch, \
            \(summary.sourceRate) Hz, \(String(format: "%.3f", audioSeconds)) s
            front end: \(config.sampleRate) Hz, n_fft \(config.stft.nFFT), hop \(config.stft.hopLength), \
            \(config.mel?.melCount ?? 0) mels, \(kind), \(config.featureCount) values per frame
            frames: \(summary.featureFrames) (\(summary.sampleCount) samples after resampling)
            range: \(String(format: "%.2f", summary.minimum.min() ?? 0)) ... \(String(format: "%.2f", summary.maximum.max() ?? 0)), \
            mean \(String(format: "%.2f", summary.mean.reduce(0, +) / Float(max(summary.mean.count, 1))))
            time: \(String(format: "%.3f", seconds)) s (\(String(format: "%.0f", audioSeconds / seconds))x real time, \
            decode + resample + features)
            """)
    }
}
