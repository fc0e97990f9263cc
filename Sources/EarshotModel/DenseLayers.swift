import CEarshotKernels
import EarshotGraph
import Foundation

/// y[t] = W x[t] + b at each step.
/// ref: torch.nn.Linear
struct Linear: Sendable {
    let name: String
    let inFeatures, outFeatures: Int
    /// [outFeatures][inFeatures]
    let weight: [Float]
    /// [outFeatures]
    let bias: [Float]
    let packed: PackedMatrix

    init(name: String, inFeatures: Int, outFeatures: Int, weight: [Float], bias: [Float]) {
        self.name = name
        self.inFeatures = inFeatures
        self.outFeatures = outFeatures
        self.weight = weight
        self.bias = bias
        packed = PackedMatrix(weight, rows: outFeatures, k: inFeatures)
    }

    func run(_ x: Activations, into y: inout Activations) {
        y.reshape(channels: outFeatures, time: x.time, batch: x.batch)
        x.values.withUnsafeBufferPointer { xv in
            y.values.withUnsafeMutableBufferPointer { yv in
                packed.product(xv.baseAddress!, columns: x.columns, bias: bias, into: yv.baseAddress!)
            }
        }
    }
}


/// y = x * scale + shift per channel (an eval-mode batch norm that stands alone).
struct ChannelAffine: Sendable {
    let name: String
    let scale: [Float]
    let shift: [Float]

    func run(_ x: Activations, into y: inout Activations) {
        y.reshape(channels: x.channels, time: x.time, batch: x.batch)
        let C = scale.count
        for j in 0..<x.columns {
            for c in 0..<C { y.values[j * C + c] = x.values[j * C + c] * scale[c] + shift[c] }
        }
    }
}

/// Normalises the channels of each column: (x - mean) / sqrt(var + eps) * weight + bias,
/// biased variance.
/// ref: torch.nn.LayerNorm(channels) over the channel axis
struct LayerNorm: Sendable {
    let name: String
    let channels: Int
    let eps: Float
    let weight: [Float]
    let bias: [Float]

    func run(_ x: Activations, into y: inout Activations) {
        y.reshape(channels: x.channels, time: x.time, batch: x.batch)
        let C = channels
        for j in 0..<x.columns {
            var mean: Float = 0
            for c in 0..<C { mean += x.values[j * C + c] }
            mean /= Float(C)
            var variance: Float = 0
            for c in 0..<C {
                let d = x.values[j * C + c] - mean
                variance += d * d
            }
            variance /= Float(C)
            let inv = 1 / (variance + eps).squareRoot()
            for c in 0..<C { y.values[j * C + c] = (x.values[j * C + c] - mean) * inv * weight[c] + bias[c] }
        }
    }
}
