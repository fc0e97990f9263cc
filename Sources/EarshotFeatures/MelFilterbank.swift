import CEarshotKernels
import Foundation

/// Mel scale and filterbank settings.
/// ref: librosa.filters.mel (sr, n_fft, n_mels, fmin, fmax, htk, norm)
public struct MelConfig: Codable, Sendable, Equatable, Hashable {
    /// Slaney's or HTK's mel scale.
    public enum Scale: String, Codable, Sendable {
        /// Slaney's Auditory Toolbox scale: linear below 1 kHz, logarithmic above (librosa's default).
        case slaney
        /// HTK: 2595 * log10(1 + f / 700).
        case htk
    }

    /// Slaney's area normalization, or none.
    public enum Normalization: String, Codable, Sendable {
        /// No normalisation: each triangle peaks at 1.
        case none
        /// Slaney's area normalisation: each triangle scaled by 2 / (its width in Hz).
        case slaney
    }

    /// Mel bands.
    public var melCount: Int
    /// Lowest frequency in Hz.
    public var fmin: Double
    /// Highest frequency in Hz; nil means half the sample rate.
    public var fmax: Double?
    /// The mel scale.
    public var scale: Scale
    /// How each band is normalized.
    public var normalization: Normalization

    /// Mel bands from fmin to fmax (default half the rate).
    public init(melCount: Int, fmin: Double = 0, fmax: Double? = nil, scale: Scale = .slaney,
                normalization: Normalization = .slaney) {
        self.melCount = melCount
        self.fmin = fmin
        self.fmax = fmax
        self.scale = scale
        self.normalization = normalization
    }

    /// Hz to mels.
    public static func hzToMel(_ hz: Double, scale: Scale) -> Double {
        switch scale {
        case .htk:
            return 2595 * log10(1 + hz / 700)
        case .slaney:
            let linearStep = 200.0 / 3, breakHz = 1000.0, breakMel = breakHz / linearStep
            let logStep = log(6.4) / 27
            return hz >= breakHz ? breakMel + log(hz / breakHz) / logStep : hz / linearStep
        }
    }

    /// Mels to Hz.
    public static func melToHz(_ mel: Double, scale: Scale) -> Double {
        switch scale {
        case .htk:
            return 700 * (pow(10, mel / 2595) - 1)
        case .slaney:
            let linearStep = 200.0 / 3, breakHz = 1000.0, breakMel = breakHz / linearStep
            let logStep = log(6.4) / 27
            return mel >= breakMel ? breakHz * exp(logStep * (mel - breakMel)) : linearStep * mel
        }
    }
}

/// Triangular mel filters over the bins of a real FFT, stored sparsely (each filter's
/// non-zero run of bins) so that applying them costs only the non-zero weights.
public struct MelFilterbank: Sendable, Equatable {
    /// Its bands.
    public let config: MelConfig
    /// Spectrum bins it takes.
    public let binCount: Int
    /// Per filter: its first non-zero bin, its count of non-zero weights, and where they start
    /// in `weights`.
    private let starts: [Int]
    private let lengths: [Int]
    /// Lengths rounded up to a multiple of eight (the weights are zero-padded to that).
    private let paddedLengths: [Int]
    private let offsets: [Int]
    /// Every filter's non-zero run of weights, each padded with zeros to a multiple of eight.
    private let weights: [Float]

    /// The filterbank for a spectrum of nFFT/2+1 bins at `sampleRate`.
    public init(config: MelConfig, sampleRate: Int, nFFT: Int) throws(FeatureError) {
        let nyquist = Double(sampleRate) / 2
        let fmax = config.fmax ?? nyquist
        guard config.melCount >= 1 else {
            throw .invalidParameter(name: "melCount", value: "\(config.melCount)", expected: ">= 1")
        }
        guard config.fmin >= 0, config.fmin < fmax else {
            throw .invalidParameter(name: "fmin", value: "\(config.fmin)", expected: "0 <= fmin < fmax (\(fmax) Hz)")
        }
        guard fmax <= nyquist else {
            throw .invalidParameter(name: "fmax", value: "\(fmax)", expected: "<= \(nyquist) Hz (half the sample rate)")
        }
        self.config = config
        self.binCount = nFFT / 2 + 1
        let dense = Self.denseWeights(config: config, sampleRate: sampleRate, nFFT: nFFT, fmax: fmax)
        var starts: [Int] = [], lengths: [Int] = [], offsets: [Int] = [], weights: [Float] = []
        for row in dense {
            let first = row.firstIndex(where: { $0 != 0 }) ?? 0
            let last = row.lastIndex(where: { $0 != 0 }) ?? -1
            starts.append(first)
            offsets.append(weights.count)
            lengths.append(max(0, last - first + 1))
            if last >= first { weights += row[first...last].map { Float($0) } }
            weights += [Float](repeating: 0, count: (8 - weights.count % 8) % 8)
        }
        self.starts = starts
        self.lengths = lengths
        self.paddedLengths = lengths.map { ($0 + 7) & ~7 }
        self.offsets = offsets
        self.weights = weights
    }

    /// [melCount][binCount] weights, computed in Double.
    /// ref: librosa.filters.mel
    static func denseWeights(config: MelConfig, sampleRate: Int, nFFT: Int, fmax: Double) -> [[Double]] {
        let bins = nFFT / 2 + 1
        let fftFreqs = (0..<bins).map { Double($0) * Double(sampleRate) / Double(nFFT) }
        let minMel = MelConfig.hzToMel(config.fmin, scale: config.scale)
        let maxMel = MelConfig.hzToMel(fmax, scale: config.scale)
        let points = config.melCount + 2
        let melF = (0..<points).map { i in
            MelConfig.melToHz(minMel + (maxMel - minMel) * Double(i) / Double(points - 1), scale: config.scale)
        }
        return (0..<config.melCount).map { m in
            let lowWidth = melF[m + 1] - melF[m], highWidth = melF[m + 2] - melF[m + 1]
            let norm = config.normalization == .slaney ? 2 / (melF[m + 2] - melF[m]) : 1
            return fftFreqs.map { f in
                let lower = (f - melF[m]) / lowWidth
                let upper = (melF[m + 2] - f) / highWidth
                return max(0, min(lower, upper)) * norm
            }
        }
    }

    /// The filterbank as a dense [melCount][binCount] matrix.
    public var matrix: [[Float]] {
        (0..<config.melCount).map { m in
            var row = [Float](repeating: 0, count: binCount)
            for i in 0..<lengths[m] { row[starts[m] + i] = weights[offsets[m] + i] }
            return row
        }
    }

    /// Spectrum values `apply` may read past the last bin when given them (zeros there keep
    /// every filter to whole eight-lane steps).
    static let spectrumPadding = 8

    /// mel[m] = sum_k weights[m][k] * spectrum[k]. A spectrum buffer with `spectrumPadding`
    /// zeros after its bins takes the all-vector path.
    public func apply(_ spectrum: UnsafeBufferPointer<Float>, into mel: UnsafeMutableBufferPointer<Float>) {
        guard let s = spectrum.baseAddress, let out = mel.baseAddress else { return }
        let counts = spectrum.count >= binCount + Self.spectrumPadding ? paddedLengths : lengths
        weights.withUnsafeBufferPointer { w in
            offsets.withUnsafeBufferPointer { off in
                starts.withUnsafeBufferPointer { st in
                    counts.withUnsafeBufferPointer { n in
                        earshot_sparse_rows(w.baseAddress!, off.baseAddress!, st.baseAddress!, n.baseAddress!, n.count, s, out)
                    }
                }
            }
        }
    }
}
