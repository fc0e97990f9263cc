import EarshotFeatures

/// TFLite's real FFT as a graph op.
enum Spectral {
    /// `RFFT`: the one-sided DFT of each row of X ([..., n]) of `length` samples (a row cropped or
    /// padded with zeros to it), as [..., length / 2 + 1, 2] (real, imaginary): TFLite's RFFT2D
    /// with an fft_length of [1, length] (ref: tensorflow/lite/kernels/rfft2d.cc), by FFTW.
    static func rfft(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["X"], required: 1, attributes: ["length"])
        let x = try n.input(0, "X", [.float32])
        guard x.rank >= 1 else { throw n.error("X is a scalar; RFFT needs rank 1 or more") }
        guard let length = try n.int("length"), length >= 2, length <= 1 << 20 else { throw n.error("attribute 'length' must be 2...\(1 << 20)") }
        guard let fft = AlignedRealFFT.make(size: length) else { throw n.error("no FFT of \(length) points") }
        let width = x.shape[x.rank - 1], rows = width == 0 ? 0 : x.count / width, bins = length / 2 + 1
        let shape = Array(x.shape.dropLast()) + [bins, 2]
        _ = try n.count(shape, "the output")
        var out = [Float](repeating: 0, count: rows * bins * 2)
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: (length + 2 * bins + 32) * 4, alignment: 64)
        defer { buffer.deallocate() }
        let frame = buffer.bindMemory(to: Float.self, capacity: length + 2 * bins + 32)
        let spectrum = frame + ((length + 15) / 16) * 16
        x.floats.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { o in
                for r in 0..<rows {
                    let k = min(width, length)
                    for i in 0..<k { frame[i] = input[r * width + i] }
                    for i in k..<length { frame[i] = 0 }
                    fft.execute(frame, spectrum)
                    for i in 0..<(2 * bins) { o[r * 2 * bins + i] = spectrum[i] }
                }
            }
        }
        return [GraphTensor(shape: shape, floats: out)]
    }
}
