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
        // --dump: every frame, as a NumPy array (.npy, float32 [frames][features]) or CSV.
        let dump = args.string("dump")
        if let dump, !dump.hasSuffix(".npy") && !dump.hasSuffix(".csv") && dump != "-" {
            throw UsageError("--dump \(dump): expected a .npy or .csv file, or - (CSV on standard output)")
        }
        var frames: [Float] = []
        var frameCount = 0
        let elapsed = try clock.measure {
            summary = try job.run(path: path) { m in
                guard dump != nil else { return }
                for t in 0..<m.frameCount { frames += m[frame: t] }
                frameCount += m.frameCount
            }
        }
        guard let summary else { return }
        if let dump {
            let n = config.featureCount
            if dump.hasSuffix(".npy") {
                let file = try OutputFile.open(dump)
                try file.write(bytes: NPY.float32(frames, shape: [frameCount, n]))
                try file.commit()
            } else {
                let file = try OutputFile.open(dump == "-" ? nil : dump)
                try file.write((0..<n).map { "f\($0)" }.joined(separator: ","))
                for t in 0..<frameCount {
                    try file.write(frames[(t * n)..<((t + 1) * n)].map { String(format: "%.6g", $0) }.joined(separator: ","))
                }
                try file.commit()
            }
            if dump == "-" { return }
        }
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

/// NumPy's .npy format (version 1.0): a little-endian float32 array of the given shape, C order.
enum NPY {
    static func float32(_ values: [Float], shape: [Int]) -> [UInt8] {
        var header = "{'descr': '<f4', 'fortran_order': False, 'shape': (\(shape.map(String.init).joined(separator: ", "))\(shape.count == 1 ? "," : "")), }"
        // Magic, version, header length, then the header padded with spaces to a multiple of 64, ending in a newline.
        let preamble = 10
        let total = (preamble + header.utf8.count + 1 + 63) / 64 * 64
        header += String(repeating: " ", count: total - preamble - header.utf8.count - 1) + "\n"
        var out: [UInt8] = [0x93] + Array("NUMPY".utf8) + [1, 0]
        let length = UInt16(header.utf8.count)
        out += [UInt8(length & 0xFF), UInt8(length >> 8)]
        out += Array(header.utf8)
        out.reserveCapacity(out.count + values.count * 4)
        for v in values { withUnsafeBytes(of: v.bitPattern.littleEndian) { out += $0 } }
        return out
    }
}
