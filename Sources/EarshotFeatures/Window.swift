import Foundation

/// Analysis window shapes.
public enum WindowKind: String, Codable, Sendable, CaseIterable {
    case hann
    case hamming
    case rectangular
}

/// Analysis windows, as scipy and librosa compute them.
public enum Window {
    /// The window's `length` coefficients. `periodic` (the DFT-even form, scipy's `fftbins=True`,
    /// librosa's default) divides by `length`; symmetric divides by `length - 1`.
    /// ref: scipy.signal.get_window('hann' | 'hamming', length, fftbins=periodic)
    public static func make(_ kind: WindowKind, length: Int, periodic: Bool) -> [Float] {
        guard length > 1 else { return Array(repeating: 1, count: max(length, 0)) }
        let denominator = Double(periodic ? length : length - 1)
        return (0..<length).map { n in
            let phase = 2 * Double.pi * Double(n) / denominator
            switch kind {
            case .hann: return Float(0.5 - 0.5 * cos(phase))
            case .hamming: return Float(0.54 - 0.46 * cos(phase))
            case .rectangular: return 1
            }
        }
    }

    /// The window of `winLength` centred in `nFFT` samples with zeros either side.
    /// ref: librosa.filters.get_window + librosa.util.pad_center
    public static func padded(_ window: [Float], toLength nFFT: Int) -> [Float] {
        precondition(window.count <= nFFT, "window longer than the FFT")  // checked by STFTConfig.validate
        let left = (nFFT - window.count) / 2
        var out = [Float](repeating: 0, count: nFFT)
        out.replaceSubrange(left..<(left + window.count), with: window)
        return out
    }
}
