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
    /// The output written [positions][channels]: a power or magnitude spectrum for the Conv after,
    /// its only reader, or any output of a product of frames by a DFT's columns (a Gemm's rows).
    var channelsLast = false
    let items, plane, positions: Int
    let basis: Basis
    /// As ConvStep's.
    let fields: [Int32]
    /// Where each position's frame starts in the input plane, when every frame is one
    /// contiguous run of it (no padding): then the frames are read in place.
    let starts: [Int]?
    /// The bias laid out over the output ([channels][positions], bias[ch] at every position).
    let bias: [Float]?
    let fft: AlignedRealFFT<Float>
    /// When set, each frame's transform in double precision: the frame times the window in double,
    /// the bins rounded to float (`fftProduct`'s).
    var double: AlignedRealFFT<Double>? = nil
    /// The frames are the input's columns ([size][positions], `fftOfColumns`): they are transposed
    /// to rows, and the outputs written a row a position then transposed, instead of read and
    /// written value by value across the positions.
    var framesAreColumns = false
    /// The imaginary parts' own Conv over the same fields (an STFT exported as two Convs, the real
    /// part's and the imaginary part's), fused into this one (the real part's): where it writes,
    /// its bias laid out as `bias` is, and the sign of its sines. The frames take one FFT for both.
    var sines: (y: GraphPlan.Ref, bias: [Float]?, sign: Float)?

    init(x: GraphPlan.Ref, y: GraphPlan.Ref, items: Int, plane: Int, positions: Int, basis: Basis, fields: [Int32], starts: [Int]?,
         bias: [Float]?, fft: AlignedRealFFT<Float>) {
        self.x = x
        self.y = y
        self.items = items
        self.plane = plane
        self.positions = positions
        self.basis = basis
        self.fields = fields
        self.starts = starts
        self.bias = bias.map { Self.laidOut($0, positions: positions) }
        self.fft = fft
    }

    /// The kernel name `inspect` shows for an FFT step, in double precision or not; `fuseFFTPairs`
    /// finds the paired Convs' nodes by it.
    static func kernel(double: Bool) -> String { double ? "FFT (double)" : "FFT" }

    /// Per channel, its bias value at each of `positions`.
    static func laidOut(_ bias: [Float], positions: Int) -> [Float] { bias.flatMap { repeatElement($0, count: positions) } }

    /// The step's places in its scratch, in floats from its start, the one account of it that
    /// the builder's size and the run both read: the gathered frames (unless read in place), a
    /// frame, its spectrum, a power or magnitude row per position, the double-precision frame and
    /// spectrum, and the outputs a row a position when the frames are columns. A region FFTW reads
    /// or writes starts at the first 64-byte boundary at or after its place (`aligned`), within
    /// the `fftAlignment` floats set aside before the next.
    struct Regions {
        let rows, frame, spectrum, powers, doubleFrame, doubleSpectrum, staged, end: Int

        init(size: Int, positions: Int, gathered: Bool, double: Bool, columns: Bool) {
            let bins = size / 2 + 1
            rows = 0
            frame = rows + (gathered ? positions * size : 0)
            spectrum = frame + fftAlignment + size
            powers = spectrum + fftAlignment + 2 * bins
            // Doubles: a frame of `size`, a spectrum of 2 * bins.
            doubleFrame = powers + positions * bins
            doubleSpectrum = doubleFrame + fftAlignment + 2 * size
            staged = double ? doubleSpectrum + fftAlignment + 4 * bins : doubleFrame
            end = staged + (columns ? positions * 2 * bins : 0)
        }
    }

    /// The scratch the step needs, in floats.
    static func scratch(size: Int, positions: Int, gathered: Bool, double: Bool, columns: Bool = false) -> Int {
        Regions(size: size, positions: positions, gathered: gathered, double: double, columns: columns).end
    }

    func run(_ c: Context) {
        let size = fft.size, bins = size / 2 + 1
        let r = Regions(size: size, positions: positions, gathered: starts == nil, double: double != nil, columns: framesAreColumns)
        let rows = c.scratch + r.rows, frame = aligned(c.scratch + r.frame), spectrum = aligned(c.scratch + r.spectrum)
        // Power or magnitude: per position a row of bins, then all rows transposed at once.
        let powers = c.scratch + r.powers
        // In double precision, a frame and its spectrum.
        let doubles = double.map { _ in
            (frame: UnsafeMutableRawPointer(aligned(c.scratch + r.doubleFrame)).bindMemory(to: Double.self, capacity: size),
             spectrum: UnsafeMutableRawPointer(aligned(c.scratch + r.doubleSpectrum)).bindMemory(to: Double.self, capacity: 2 * bins))
        }
        // The outputs a row a position, [positions][channels], when the frames are columns.
        let staged = c.scratch + r.staged
        // FFTW's imaginary parts are -sum x sin; the filters give sign * sum x sin.
        let imaginary = -basis.sign
        let part = basis.part, channels = part == .both ? 2 * bins : bins
        basis.window.withUnsafeBufferPointer { w in
            for b in 0..<c.streams {
                let input = c.read(x, b), out = c.write(y, b), pairedOut = sines.map { c.write($0.y, b) }
                for item in 0..<items {
                    let itemInput = input + item * plane, spectra = out + item * channels * positions
                    let paired = pairedOut.map { $0 + item * bins * positions }
                    if framesAreColumns {
                        earshot_transpose(itemInput, size, positions, rows)
                    } else if starts == nil {
                        gather(fields, from: itemInput, to: rows)
                    }
                    for p in 0..<positions {
                        let row = starts.map { itemInput + $0[p] } ?? UnsafePointer(rows + p * size)
                        if let double, let doubles {
                            earshot_windowed_doubles(row, w.baseAddress!, size, 0, doubles.frame)
                            double.execute(doubles.frame, doubles.spectrum)
                            earshot_round_doubles(doubles.spectrum, 2 * bins, 1, spectrum)
                        } else {
                            earshot_binary(Int32(EARSHOT_MUL), row, 1, w.baseAddress!, 1, frame, size)
                            fft.execute(frame, spectrum)
                        }
                        switch output {
                        case .filters:
                            // Bin k of position p goes to start + k * step of `target`.
                            let byRows = channelsLast || framesAreColumns, target = framesAreColumns ? staged : spectra
                            let (start, step) = byRows ? (p * (paired == nil ? channels : bins), 1) : (p, positions)
                            let re = part != .imaginary ? target + start : nil
                            let im = part != .real || paired != nil
                                ? (paired ?? target + (part == .both ? (byRows ? bins : bins * positions) : 0)) + start : nil
                            earshot_split_complex(spectrum, bins, re, im, sines.map { -$0.sign } ?? imaginary, step)
                        case .power, .magnitude:
                            earshot_spectrum(spectrum, bins, output == .magnitude ? 1 : 0, (channelsLast ? spectra : powers) + p * bins, 1)
                        }
                    }
                    if output != .filters && !channelsLast { earshot_transpose(powers, positions, bins, spectra) }
                    if output == .filters && framesAreColumns { earshot_transpose(staged, positions, channels, spectra) }
                    if let bias { earshot_binary(Int32(EARSHOT_ADD), spectra, 1, bias, 1, spectra, channels * positions) }
                    if let paired, let bias = sines?.bias { earshot_binary(Int32(EARSHOT_ADD), paired, 1, bias, 1, paired, bins * positions) }
                }
            }
        }
    }
}

extension FFTConvStep {
    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] + (sines.map { [$0.y] } ?? []) }

    func relocated(_ move: (GraphPlan.Ref) -> GraphPlan.Ref) -> (any Step)? {
        var moved = self
        moved.x = move(x)
        moved.y = move(y)
        moved.sines = sines.map { (move($0.y), $0.bias, $0.sign) }
        return moved
    }

    /// Whether `other` transforms the same frames as this step with the same FFT (and precision,
    /// and writes the same layout), and its window
    /// is this one's to within float rounding wherever it is used (a window found from sines
    /// alone says nothing of the samples where every sine is zero: 0 and size / 2).
    func sameFrames(as other: FFTConvStep) -> Bool {
        let size = fft.size, scale = basis.window.map(abs).max() ?? 0
        return x == other.x && items == other.items && plane == other.plane && positions == other.positions && fields == other.fields
            && starts == other.starts && size == other.fft.size && (double == nil) == (other.double == nil)
            && channelsLast == other.channelsLast && framesAreColumns == other.framesAreColumns
            && other.basis.window.count == size && basis.window.count == size
            && (0..<size).allSatisfy { n in 2 * n % size == 0 || abs(basis.window[n] - other.basis.window[n]) <= 1e-5 * scale }
    }
}

extension Builder {
    /// An STFT exported as two Convs, the real part's and the imaginary part's, over the same
    /// frames (openWakeWord's melspectrogram): one step takes one FFT of each frame and writes
    /// both, and the imaginary part's step goes.
    mutating func fuseFFTPairs() {
        var removed = Set<Int>()
        for i in steps.indices where !removed.contains(i) {
            guard let first = steps[i] as? FFTConvStep, first.basis.part != .both, first.output == .filters, first.sines == nil else { continue }
            for j in steps.indices where j > i && !removed.contains(j) {
                guard let second = steps[j] as? FFTConvStep, second.basis.part != .both, second.basis.part != first.basis.part,
                      second.output == .filters, second.sines == nil, first.sameFrames(as: second),
                      // Nothing between them writes the frames or touches the second's output.
                      !steps[(i + 1)..<j].contains(where: { s in
                          s.writes.contains { $0.overlaps(first.x) } || (s.reads + s.writes).contains { $0.overlaps(second.y) }
                      }) else { continue }
                var (real, imaginary) = first.basis.part == .real ? (first, second) : (second, first)
                real.sines = (imaginary.y, imaginary.bias, imaginary.basis.sign)
                // The Conv nodes (an alias of an output is some other node's).
                let nodes = [first.y, second.y].map { y in refs.filter { $0.value == y }.compactMap { producers[$0.key] }.first { [FFTConvStep.kernel(double: false), FFTConvStep.kernel(double: true)].contains(kernels[$0]) } }
                if let kept = nodes[0], let gone = nodes[1] { kernels[gone] = "FFT, with '\(kept)'" }
                steps[i] = real
                removed.insert(j)
                break
            }
        }
        steps = steps.indices.filter { !removed.contains($0) }.map { steps[$0] }
    }
}

/// The first place at or after `p` that starts on a 64-byte boundary.
@inline(__always)
func aligned(_ p: UnsafeMutablePointer<Float>) -> UnsafeMutablePointer<Float> {
    let bytes = fftAlignment * MemoryLayout<Float>.size
    return p + (bytes - Int(bitPattern: p) % bytes) % bytes / MemoryLayout<Float>.size
}
