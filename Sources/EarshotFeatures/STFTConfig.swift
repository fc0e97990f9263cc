/// How a signal is cut into frames and turned into spectra.
/// ref: librosa.stft (n_fft, hop_length, win_length, window, center, pad_mode)
public struct STFTConfig: Codable, Sendable, Equatable, Hashable {
    /// How the signal's ends are padded.
    public enum PadMode: String, Codable, Sendable {
        /// Mirror without repeating the edge sample (numpy's `reflect`).
        case reflect
        /// Zeros (numpy's `constant`, librosa's default since 0.10).
        case constant
    }

    /// Magnitude or power.
    public enum Spectrum: String, Codable, Sendable {
        /// |X|
        case magnitude
        /// |X|^2
        case power
    }

    /// FFT size in samples.
    public var nFFT: Int
    /// Samples between the starts of consecutive frames.
    public var hopLength: Int
    /// Window length in samples (<= nFFT; the window is centred in the FFT frame).
    public var winLength: Int
    /// The window.
    public var window: WindowKind
    /// Periodic (DFT-even) window rather than symmetric.
    public var periodic: Bool
    /// Pad nFFT/2 samples on both ends so that frame t is centred on sample t * hopLength.
    public var center: Bool
    /// How the ends are padded.
    public var padMode: PadMode
    /// What each bin holds.
    public var spectrum: Spectrum

    /// An STFT.
    public init(
        nFFT: Int, hopLength: Int, winLength: Int? = nil, window: WindowKind = .hann,
        periodic: Bool = true, center: Bool = true, padMode: PadMode = .reflect,
        spectrum: Spectrum = .power
    ) {
        self.nFFT = nFFT
        self.hopLength = hopLength
        self.winLength = winLength ?? nFFT
        self.window = window
        self.periodic = periodic
        self.center = center
        self.padMode = padMode
        self.spectrum = spectrum
    }

    /// Number of frequency bins: nFFT / 2 + 1.
    public var binCount: Int { nFFT / 2 + 1 }

    /// Samples padded before the first sample (and after the last) when centring.
    public var centerPadding: Int { center ? nFFT / 2 : 0 }

    /// Frames produced for a signal of `sampleCount` samples.
    /// ref: librosa.stft: 1 + len // hop centred, 1 + (len - n_fft) // hop otherwise
    public func frameCount(forSamples sampleCount: Int) -> Int {
        if center { return sampleCount > 0 ? 1 + sampleCount / hopLength : 0 }
        return sampleCount >= nFFT ? 1 + (sampleCount - nFFT) / hopLength : 0
    }

    /// Checks every setting.
    /// - Throws: `FeatureError.invalidParameter` naming it.
    public func validate() throws(FeatureError) {
        guard (2...(1 << 24)).contains(nFFT) else {
            throw .invalidParameter(name: "nFFT", value: "\(nFFT)", expected: "2...\(1 << 24)")
        }
        guard hopLength >= 1 else {
            throw .invalidParameter(name: "hopLength", value: "\(hopLength)", expected: ">= 1")
        }
        guard (1...nFFT).contains(winLength) else {
            throw .invalidParameter(name: "winLength", value: "\(winLength)", expected: "1...\(nFFT) (nFFT)")
        }
    }
}
