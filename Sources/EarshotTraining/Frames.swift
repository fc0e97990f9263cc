import EarshotGraph
import EarshotModel

/// Activations of a batch of clips, as the runtime lays them out: [batch][time][channels]
/// (clip b's frame t is row b * time + t).
struct Frames: Sendable, Equatable {
    var batch: Int
    var time: Int
    var channels: Int
    var values: [Float]

    init(batch: Int, time: Int, channels: Int, values: [Float]) {
        precondition(values.count == batch * time * channels, "Frames: \(values.count) values for \(batch)x\(time)x\(channels)")
        self.batch = batch
        self.time = time
        self.channels = channels
        self.values = values
    }

    init(batch: Int, time: Int, channels: Int) {
        self.init(batch: batch, time: time, channels: channels, values: [Float](repeating: 0, count: batch * time * channels))
    }

    /// Rows (clip, frame) one after another.
    var rows: Int { batch * time }

    /// Clips one after another as one batch (all with the same time and channels).
    static func joined(_ parts: [Frames]) -> Frames {
        guard let first = parts.first else { return Frames(batch: 0, time: 0, channels: 0) }
        return Frames(batch: parts.reduce(0) { $0 + $1.batch }, time: first.time, channels: first.channels,
                      values: parts.flatMap(\.values))
    }
}

/// m [rows][cols] as [cols][rows].
func transposed(_ m: [Float], rows: Int, cols: Int) -> [Float] {
    var out = [Float](repeating: 0, count: m.count)
    m.withUnsafeBufferPointer { src in
        out.withUnsafeMutableBufferPointer { dst in
            for r in 0..<rows {
                for c in 0..<cols { dst[c * rows + r] = src[r * cols + c] }
            }
        }
    }
    return out
}

/// y [n][rows] = x [n][k] · wᵀ (+ bias), w [rows][k]: the runtime's product kernel, so that the
/// trainer's forward pass sums every output as the runtime does.
func product(_ w: PackedMatrix, _ x: [Float], n: Int, bias: [Float]? = nil) -> [Float] {
    var y = [Float](repeating: 0, count: n * w.rows)
    x.withUnsafeBufferPointer { xv in
        y.withUnsafeMutableBufferPointer { w.product(xv.baseAddress!, columns: n, bias: bias, into: $0.baseAddress!) }
    }
    return y
}

/// Σ_j dy[j] ⊗ x[j] over n rows: the weight gradient [outputs][inputs] of y = W x.
func outerSum(_ dy: [Float], _ x: [Float], n: Int, outputs: Int, inputs: Int) -> [Float] {
    let a = PackedMatrix(transposed(dy, rows: n, cols: outputs), rows: outputs, k: n)
    let byInput = product(a, transposed(x, rows: n, cols: inputs), n: inputs)  // [inputs][outputs]
    return transposed(byInput, rows: inputs, cols: outputs)
}

/// Σ_j v[j] over n rows of `width`.
func columnSums(_ v: [Float], n: Int, width: Int) -> [Float] {
    var out = [Float](repeating: 0, count: width)
    v.withUnsafeBufferPointer { p in
        for j in 0..<n {
            for c in 0..<width { out[c] += p[j * width + c] }
        }
    }
    return out
}
