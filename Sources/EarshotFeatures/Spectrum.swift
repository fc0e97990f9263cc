import CEarshotKernels
import CFFTW

/// Windowed FFT of single frames: frame in, magnitude or power spectrum out.
/// Holds its FFT arrays, so one instance serves one caller at a time.
package final class SpectrumAnalyzer {
    package let config: STFTConfig
    /// [nFFT] window centred in the frame.
    private let window: [Float]
    private let fft: RealFFT

    package init(config: STFTConfig) throws(FeatureError) {
        try config.validate()
        self.config = config
        let shape = Window.make(config.window, length: config.winLength, periodic: config.periodic)
        self.window = Window.padded(shape, toLength: config.nFFT)
        self.fft = try RealFFT(size: config.nFFT)
    }

    /// The window the analyzer multiplies each frame by ([nFFT], the shape centred).
    package var paddedWindow: [Float] { window }

    /// An analyzer with a window computed before (`paddedWindow` of one with this configuration),
    /// so that making one costs only its FFT arrays.
    package init(config: STFTConfig, paddedWindow: [Float], planning: FFTPlanning = .estimate) throws(FeatureError) {
        try config.validate()
        guard paddedWindow.count == config.nFFT else {
            throw .invalidParameter(name: "window", value: "\(paddedWindow.count) values", expected: "\(config.nFFT) (nFFT)")
        }
        self.config = config
        self.window = paddedWindow
        self.fft = try RealFFT(size: config.nFFT, planning: planning)
    }

    /// A new analyzer with the same configuration and its own FFT arrays.
    package func copy() -> SpectrumAnalyzer {
        SpectrumAnalyzer(config: config, window: window, fft: RealFFT(sameAs: fft))
    }

    private init(config: STFTConfig, window: [Float], fft: RealFFT) {
        self.config = config
        self.window = window
        self.fft = fft
    }

    /// Spectrum of one frame. `frame` holds nFFT samples, `spectrum` receives binCount values.
    package func analyze(frame: UnsafeBufferPointer<Float>, into spectrum: UnsafeMutableBufferPointer<Float>) {
        window.withUnsafeBufferPointer { w in
            earshot_multiply(frame.baseAddress!, w.baseAddress!, fft.input, config.nFFT)
        }
        fft.execute()
        let bins = UnsafeRawPointer(fft.output).assumingMemoryBound(to: Float.self)
        earshot_spectrum(bins, fft.binCount, config.spectrum == .magnitude ? 1 : 0, spectrum.baseAddress!, 1)
    }
}
