import Foundation

/// Mel scale and filterbank settings.
/// ref: librosa.filters.mel (sr, n_fft, n_mels, fmin, fmax, htk, norm)
public struct MelConfig: Codable, Sendable, Equatable, Hashable {
    public enum Scale: String, Codable, Sendable {
        /// Slaney's Auditory Toolbox scale: linear below 1 kHz, logarithmic above (librosa's default).
        case slaney
        /// HTK: 2595 * log10(1 + f / 700).
        case htk
    }

    public enum Normalization: String, Codable, Sendable {
        /// No normalisation: each triangle peaks at 1.
        case none
        /// Slaney's area normalisation: each triangle scaled by 2 / (its width in Hz).
        case slaney
    }

    public var melCount: Int
    /// Lowest frequency in Hz.
    public var fmin: Double
    /// Highest frequency in Hz; nil means half the sample rate.
    public var fmax: Double?
    public var scale: Scale
    public var normalization: Normalization

    public init(melCount: Int, fmin: Double = 0, fmax: Double? = nil, scale: Scale = .slaney,
                normalization: Normalization = .slaney) {
        self.melCount = melCount
        self.fmin = fmin
        self.fmax = fmax
        self.scale = scale
        self.normalization = normalization
    }

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
    public let config: MelConfig
    public let binCount: Int
    /// Per filter: first non-zero bin and its weights.
    public let filters: [(start: Int, weights: [Float])]

    public static func == (a: MelFilterbank, b: MelFilterbank) -> Bool {
        a.config == b.config && a.binCount == b.binCount
            && a.filters.elementsEqual(b.filters) { $0.start == $1.start && $0.weights == $1.weights }
    }

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
        self.filters = dense.map { row in
            guard let first = row.firstIndex(where: { $0 != 0 }), let last = row.lastIndex(where: { $0 != 0 }) else {
                return (start: 0, weights: [])
            }
            return (start: first, weights: row[first...last].map { Float($0) })
        }
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
        filters.map { filter in
            var row = [Float](repeating: 0, count: binCount)
            for (i, w) in filter.weights.enumerated() { row[filter.start + i] = w }
            return row
        }
    }

    /// mel[m] = sum_k weights[m][k] * spectrum[k].
    public func apply(_ spectrum: UnsafeBufferPointer<Float>, into mel: UnsafeMutableBufferPointer<Float>) {
        for (m, filter) in filters.enumerated() {
            mel[m] = filter.weights.withUnsafeBufferPointer { w in
                dot(w.baseAddress!, spectrum.baseAddress! + filter.start, w.count)
            }
        }
    }
}

/// Dot product of two float arrays, eight lanes at a time.
@inline(__always)
func dot(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, _ count: Int) -> Float {
    var acc = SIMD8<Float>()
    var i = 0
    while i + 8 <= count {
        let x = UnsafeRawPointer(a + i).loadUnaligned(as: SIMD8<Float>.self)
        let y = UnsafeRawPointer(b + i).loadUnaligned(as: SIMD8<Float>.self)
        acc += x * y
        i += 8
    }
    var sum = acc.sum()
    while i < count {
        sum += a[i] * b[i]
        i += 1
    }
    return sum
}
