/// A whole feature front end: STFT, then optionally mel filters, a logarithm and a DCT.
/// Serialised as it stands in a model's manifest.
public struct FeatureConfig: Codable, Sendable, Equatable, Hashable {
    /// Sample rate of the audio the front end expects, in Hz.
    public var sampleRate: Int
    /// The STFT.
    public var stft: STFTConfig
    /// Mel bands over the spectrum (nil: the linear spectrum).
    public var mel: MelConfig?
    /// The log applied to each value (nil: none).
    public var log: LogScale?
    /// MFCCs of the log-mels (nil: none).
    public var mfcc: MFCCConfig?

    /// A front end at `sampleRate`.
    public init(sampleRate: Int, stft: STFTConfig, mel: MelConfig? = nil, log: LogScale? = nil, mfcc: MFCCConfig? = nil) {
        self.sampleRate = sampleRate
        self.stft = stft
        self.mel = mel
        self.log = log
        self.mfcc = mfcc
    }

    /// Log-mel spectrogram in decibels of power, librosa's `melspectrogram` + `power_to_db` defaults
    /// apart from the padding mode, which is given.
    public static func logMel(
        sampleRate: Int, nFFT: Int, hopLength: Int, melCount: Int, fmin: Double = 0, fmax: Double? = nil,
        center: Bool = true, padMode: STFTConfig.PadMode = .constant, log: LogScale = .decibels()
    ) -> FeatureConfig {
        FeatureConfig(
            sampleRate: sampleRate,
            stft: STFTConfig(nFFT: nFFT, hopLength: hopLength, center: center, padMode: padMode, spectrum: .power),
            mel: MelConfig(melCount: melCount, fmin: fmin, fmax: fmax),
            log: log)
    }

    /// Values per feature frame.
    public var featureCount: Int { mfcc?.coefficientCount ?? mel?.melCount ?? stft.binCount }

    /// Checks every setting.
    /// - Throws: `FeatureError.invalidParameter` naming it.
    public func validate() throws(FeatureError) {
        guard sampleRate > 0 else {
            throw .invalidParameter(name: "sampleRate", value: "\(sampleRate)", expected: "> 0 Hz")
        }
        try stft.validate()
        try log?.validate()
        if mfcc != nil, mel == nil || log == nil {
            throw .invalidParameter(name: "mfcc", value: "set", expected: "mel and log set as well (MFCC is a DCT of log-mel)")
        }
    }
}

/// Feature frames, row-major: frame t holds `values[t * featureCount ..< (t + 1) * featureCount]`.
public struct FeatureMatrix: Sendable, Equatable {
    /// Values per frame.
    public var featureCount: Int
    /// Frames one after another.
    public var values: [Float]

    /// Frames of `featureCount` values.
    public init(featureCount: Int, values: [Float] = []) {
        self.featureCount = featureCount
        self.values = values
    }

    /// Frames held.
    public var frameCount: Int { featureCount == 0 ? 0 : values.count / featureCount }

    /// Frame t.
    public subscript(frame t: Int) -> ArraySlice<Float> {
        values[(t * featureCount)..<((t + 1) * featureCount)]
    }

    public mutating func append(_ other: FeatureMatrix) {
        values.append(contentsOf: other.values)
    }
}
