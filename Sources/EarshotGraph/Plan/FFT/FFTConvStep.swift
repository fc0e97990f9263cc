import CEarshotKernels
import EarshotFeatures

/// A Conv whose filters are a windowed DFT basis (one input channel): [cos rows; sign * sin
/// rows], or the cos rows or the sin rows alone. Each receptive field times the window, one
/// real FFT, then the real parts and the imaginary parts (signed as the filters are) to their
/// channels.
struct FFTConvStep: InputOutputStep {
    /// What the step writes: the filters' outputs (real parts, then imaginary), or per bin the
    /// power re² + im² or the magnitude √(re² + im²), as the element-wise ops after it would.
    enum Output: Sendable { case filters, power, magnitude }
    /// Which parts of the spectrum the filters are: cosines and sines, or one of them.
    enum Part: Sendable { case both, real, imaginary }
    /// The filters as a DFT: the window, the sign of the sines, the parts.
    struct Basis: Sendable {
        let window: [Float]
        let sign: Float
        let part: Part
    }

    var x: GraphPlan.Ref
    var y: GraphPlan.Ref
    var output = Output.filters
    /// A power or magnitude spectrum written [positions][bins], for the Conv after, its only reader.
    var channelsLast = false
    let items, plane, positions: Int
    let basis: Basis
    /// As ConvStep's.
    let fields: [Int32]
    /// Where each position's frame starts in the input plane, when every frame is one
    /// contiguous run of it (no padding): then the frames are read in place.
    let starts: [Int]?
    let bias: [Float]?
    let fft: AlignedRealFFT<Float>

    func run(_ c: Context) {
        let size = fft.size, bins = size / 2 + 1
        let rows = c.scratch, frame = aligned(rows + positions * size), spectrum = aligned(frame + size)
        // Power or magnitude: per position a row of bins, then all rows transposed at once.
        let powers = spectrum + size + 2
        // FFTW's imaginary parts are -sum x sin; the filters give sign * sum x sin.
        let imaginary = -basis.sign
        let part = basis.part, channels = part == .both ? 2 * bins : bins
        basis.window.withUnsafeBufferPointer { w in
            for b in 0..<c.streams {
                let input = c.read(x, b), out = c.write(y, b)
                for item in 0..<items {
                    let itemInput = input + item * plane, spectra = out + item * channels * positions
                    if starts == nil { gather(fields, from: itemInput, to: rows) }
                    for p in 0..<positions {
                        let row = starts.map { itemInput + $0[p] } ?? UnsafePointer(rows + p * size)
                        earshot_binary(Int32(EARSHOT_MUL), row, 1, w.baseAddress!, 1, frame, size)
                        fft.execute(frame, spectrum)
                        switch output {
                        case .filters:
                            if part != .imaginary {
                                for k in 0..<bins { spectra[k * positions + p] = spectrum[2 * k] }
                            }
                            if part != .real {
                                let sines = spectra + (part == .both ? bins * positions : 0)
                                for k in 0..<bins { sines[k * positions + p] = imaginary * spectrum[2 * k + 1] }
                            }
                        case .power, .magnitude:
                            earshot_spectrum(spectrum, bins, output == .magnitude ? 1 : 0, (channelsLast ? spectra : powers) + p * bins, 1)
                        }
                    }
                    if output != .filters && !channelsLast { earshot_transpose(powers, positions, bins, spectra) }
                    if let bias {
                        for ch in 0..<channels { for p in 0..<positions { spectra[ch * positions + p] += bias[ch] } }
                    }
                }
            }
        }
    }
}

extension FFTConvStep {
    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }
}

/// The first place at or after `p` that starts on a 64-byte boundary.
@inline(__always)
func aligned(_ p: UnsafeMutablePointer<Float>) -> UnsafeMutablePointer<Float> {
    let bytes = fftAlignment * MemoryLayout<Float>.size
    return p + (bytes - Int(bitPattern: p) % bytes) % bytes / MemoryLayout<Float>.size
}
