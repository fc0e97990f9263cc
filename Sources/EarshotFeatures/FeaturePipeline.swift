/// Turns one frame of samples into one feature frame: spectrum, mel, log, DCT as configured.
/// Holds scratch arrays, so one instance serves one caller at a time.
final class FeaturePipeline {
    let config: FeatureConfig
    private let analyzer: SpectrumAnalyzer
    private let mel: MelFilterbank?
    private let dct: DCT?
    /// [binCount] spectrum scratch.
    private var spectrum: [Float]
    /// [melCount] mel scratch (when MFCC follows).
    private var melValues: [Float]

    init(config: FeatureConfig) throws(FeatureError) {
        try config.validate()
        self.config = config
        analyzer = try SpectrumAnalyzer(config: config.stft)
        mel = try config.mel.map { (m) throws(FeatureError) in
            try MelFilterbank(config: m, sampleRate: config.sampleRate, nFFT: config.stft.nFFT)
        }
        dct = try config.mfcc.map { (c) throws(FeatureError) in
            try DCT(inputCount: config.mel?.melCount ?? 0, outputCount: c.coefficientCount)
        }
        // Zeros past the last bin let the mel filters run in whole vector steps.
        spectrum = [Float](repeating: 0, count: config.stft.binCount + MelFilterbank.spectrumPadding)
        melValues = [Float](repeating: 0, count: config.mel?.melCount ?? 0)
    }

    private init(copying other: FeaturePipeline) {
        config = other.config
        analyzer = other.analyzer.copy()
        mel = other.mel
        dct = other.dct
        spectrum = other.spectrum
        melValues = other.melValues
    }

    func copy() -> FeaturePipeline { FeaturePipeline(copying: self) }

    /// Features of one nFFT-sample frame into `output` (featureCount values). `peak` is the
    /// running maximum of the log values for topDB clipping, updated here.
    func features(frame: UnsafeBufferPointer<Float>, into output: UnsafeMutableBufferPointer<Float>, peak: inout Float) {
        guard let mel else {
            analyzer.analyze(frame: frame, into: output)
            if let log = config.log { logAndClip(output, log: log, peak: &peak) }
            return
        }
        spectrum.withUnsafeMutableBufferPointer { spec in
            analyzer.analyze(frame: frame, into: UnsafeMutableBufferPointer(rebasing: spec[0..<config.stft.binCount]))
            if let dct {
                melValues.withUnsafeMutableBufferPointer { m in
                    mel.apply(UnsafeBufferPointer(spec), into: m)
                    if let log = config.log { logAndClip(m, log: log, peak: &peak) }
                    dct.apply(UnsafeBufferPointer(m), into: output)
                }
            } else {
                mel.apply(UnsafeBufferPointer(spec), into: output)
                if let log = config.log { logAndClip(output, log: log, peak: &peak) }
            }
        }
    }

    private func logAndClip(_ values: UnsafeMutableBufferPointer<Float>, log: LogScale, peak: inout Float) {
        let framePeak = log.apply(values)
        guard log.kind == .decibels, let topDB = log.topDB else { return }
        peak = max(peak, framePeak)
        let low = peak - topDB
        for i in values.indices where values[i] < low { values[i] = low }
    }
}
