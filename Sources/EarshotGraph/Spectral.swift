import Foundation

/// TFLite's real FFT as a graph op.
enum Spectral {
    /// `RFFT`: the one-sided DFT of each row of X ([..., n]) of `length` samples (a row cropped or
    /// padded with zeros to it; `length` a power of two, as TFLite requires), as
    /// [..., length / 2 + 1, 2] (real, imaginary): TFLite's RFFT2D with an fft_length of
    /// [1, length]. Computed in double precision, as TFLite's kernel computes it (ref:
    /// tensorflow/lite/kernels/rfft2d.cc, Ooura's rdft2d on doubles), then rounded to float: a
    /// float FFT's rounding would show where the spectrum is later raised to a small power.
    static func rfft(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["X"], required: 1, attributes: ["length"])
        let x = try n.input(0, "X", [.float32])
        guard x.rank >= 1 else { throw n.error("X is a scalar; RFFT needs rank 1 or more") }
        guard let length = try n.int("length"), length >= 2, length <= 1 << 20, length & (length - 1) == 0 else {
            throw n.error("attribute 'length' must be a power of two in 2...\(1 << 20)")
        }
        let width = x.shape[x.rank - 1], rows = width == 0 ? 0 : x.count / width, bins = length / 2 + 1
        let shape = Array(x.shape.dropLast()) + [bins, 2]
        _ = try n.count(shape, "the output")
        let fft = DoubleFFT(size: length)
        var out = [Float](repeating: 0, count: rows * bins * 2)
        var re = [Double](repeating: 0, count: length), im = [Double](repeating: 0, count: length)
        for r in 0..<rows {
            let k = min(width, length)
            for i in 0..<length {
                re[i] = i < k ? Double(x.floats[r * width + i]) : 0
                im[i] = 0
            }
            fft.transform(&re, &im)
            for b in 0..<bins {
                out[(r * bins + b) * 2] = Float(re[b])
                out[(r * bins + b) * 2 + 1] = Float(im[b])
            }
        }
        return [GraphTensor(shape: shape, floats: out)]
    }
}

/// An in-place radix-2 complex FFT in double precision (e^{-2 pi i k n / N}), its twiddles computed once.
struct DoubleFFT: Sendable {
    let size: Int
    /// cos and -sin of 2 pi k / size, for k < size / 2.
    private let cosines: [Double], sines: [Double]
    /// Each index's bit-reversed partner.
    private let reversed: [Int]

    init(size: Int) {
        self.size = size
        cosines = (0..<(size / 2)).map { Foundation.cos(2 * Double.pi * Double($0) / Double(size)) }
        sines = (0..<(size / 2)).map { -Foundation.sin(2 * Double.pi * Double($0) / Double(size)) }
        var bits = 0
        while 1 << bits < size { bits += 1 }
        reversed = (0..<size).map { i in (0..<bits).reduce(0) { $0 | ((i >> $1) & 1) << (bits - 1 - $1) } }
    }

    func transform(_ re: inout [Double], _ im: inout [Double]) {
        for i in 0..<size where i < reversed[i] {
            re.swapAt(i, reversed[i])
            im.swapAt(i, reversed[i])
        }
        var len = 2
        while len <= size {
            let half = len / 2, step = size / len
            var start = 0
            while start < size {
                for j in 0..<half {
                    let c = cosines[j * step], s = sines[j * step]
                    let a = start + j, b = a + half
                    let tr = re[b] * c - im[b] * s, ti = re[b] * s + im[b] * c
                    re[b] = re[a] - tr
                    im[b] = im[a] - ti
                    re[a] += tr
                    im[a] += ti
                }
                start += len
            }
            len *= 2
        }
    }
}
