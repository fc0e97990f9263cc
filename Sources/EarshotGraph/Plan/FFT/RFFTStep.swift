import CEarshotKernels
import EarshotFeatures

/// `RFFT` (TFLite's RFFT2D of one row): each row of X [rows][width], cropped or padded with zeros
/// to the transform's size, one real FFT in double precision (FFTW), the size / 2 + 1 bins
/// rounded to float as (re, im) pairs [rows][bins][2], as the reference kernel computes them.
struct RFFTStep: InputOutputStep {
    var x: GraphPlan.Ref
    var y: GraphPlan.Ref
    /// Only the real parts, [rows][bins], for the slice that reads only them (TFLite's CAST of a
    /// complex value), its only reader (`fuseRealPart`).
    var realOnly = false
    /// Frames read where they lie (`fuseFraming`): row r is the `width` values of x from
    /// starts[r]; nil: row r of x.
    var starts: [Int]? = nil
    /// A window [width] each row is multiplied by, in float as the Mul computes it, before its FFT
    /// (`fuseFraming`).
    var window: [Float]? = nil
    let rows, width: Int
    let fft: AlignedRealFFT<Double>

    /// The scratch the step needs, in floats: the input and output rows in doubles, aligned.
    static func scratch(size: Int) -> Int { 2 * (size + 2 * (size / 2 + 1)) + 4 * fftAlignment }

    func run(_ c: Context) {
        let size = fft.size, bins = size / 2 + 1, taken = min(width, size)
        let base = UnsafeMutableRawPointer(aligned(c.scratch))
        let frame = base.bindMemory(to: Double.self, capacity: size)
        let spectrum = UnsafeMutableRawPointer(aligned(c.scratch + 2 * size + fftAlignment))
            .bindMemory(to: Double.self, capacity: 2 * bins)
        for i in taken..<size { frame[i] = 0 }
        for b in 0..<c.streams {
            let input = c.read(x, b), out = c.write(y, b)
            for r in 0..<rows {
                let row = input + (starts?[r] ?? r * width)
                window.withUnsafeBufferPointerOrNil { w in earshot_windowed_doubles(row, w?.baseAddress, taken, 1, frame) }
                fft.execute(frame, spectrum)
                if realOnly {
                    earshot_round_doubles(spectrum, bins, 2, out + r * bins)
                } else {
                    earshot_round_doubles(spectrum, 2 * bins, 1, out + r * 2 * bins)
                }
            }
        }
    }
}

extension RFFTStep {
    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }
}

extension Builder {
    /// RFFT as FFTW's double-precision real FFT (`RFFTStep`); nil when the size cannot be planned.
    mutating func rfft(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        guard let x = inputs.first ?? nil, x.dtype == .float32, x.rank >= 1, let length = try node(g, inputs).int("length"),
              let fft = AlignedRealFFT<Double>.make(size: length), let xRef = ref(g.inputs[0]) else { return nil }
        let width = x.shape[x.rank - 1], rows = width == 0 ? 0 : x.count / width
        guard outputs[0].count == rows * (length / 2 + 1) * 2 else { return nil }
        let y = allocate(outputs[0].count)
        refs[g.outputs[0]] = y
        steps.append(RFFTStep(x: xRef, y: y, rows: rows, width: width, fft: fft))
        scratchSize = max(scratchSize, RFFTStep.scratch(size: length))
        return FFTConvStep.kernel(double: true)
    }
}

extension Builder {
    /// An RFFT step whose only reader is a copy of its real parts (a complex value cast to float):
    /// the step writes them in the copy's place, and the copy goes.
    mutating func fuseRealPart() {
        var removed = Set<Int>()
        for i in steps.indices {
            guard var fft = steps[i] as? RFFTStep, !fft.realOnly, !isOutput(fft.y) else { continue }
            let readers = steps(reading: fft.y)
            guard readers.count == 1, let move = steps[readers[0]] as? MoveStep, move.sources == [fft.y], move.outputs.count == 1,
                  move.runs.count * 2 == fft.y.count,
                  move.runs.allSatisfy({ $0.source == 0 && $0.count == 1 && $0.src == 2 * $0.dst }) else { continue }
            fft.realOnly = true
            fft.y = move.outputs[0]
            for (tensor, ref) in refs where ref == move.outputs[0] {
                if let node = producers[tensor], kernels[node] == "copy" { kernels[node] = "with the FFT" }
            }
            steps[i] = fft
            removed.insert(readers[0])
        }
        steps = steps.indices.filter { !removed.contains($0) }.map { steps[$0] }
    }
}
