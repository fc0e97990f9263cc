import EarshotGraph

/// Quantization-aware training's arithmetic, as microWakeWord's TFLite converter quantizes its
/// models (okay_nabu's parameters: activations int8 per tensor and asymmetric, convolution
/// filters int8 per output channel and symmetric, biases int32 at input scale × filter scale).
/// The forward pass rounds a value to its code and back (`fake`); the backward pass lets the
/// gradient through where the value lies inside the range and stops it outside (the straight-
/// through estimator, `passes`). An int8 model made of the same scales then computes what the
/// fake-quantized float forward computes, within one step of its output's scale.
/// ref: tensorflow/lite/tools/optimize/quantization_utils.cc (GetAsymmetricQuantizationParams,
/// SymmetricPerChannelQuantization); tf.quantization.fake_quant_with_min_max_vars.
public enum FakeQuant {
    /// value = scale × (code − zero), codes in -128...127.
    public struct Affine: Sendable, Equatable {
        public var scale: Float
        public var zero: Int
    }

    /// An activation's quantization from the range it was seen in (widened to hold 0, which
    /// must be exact): TFLite's GetAsymmetricQuantizationParams for int8.
    public static func activation(min low: Float, max high: Float) -> Affine {
        let low = min(low, 0), high = max(high, 0)
        guard high > low else { return Affine(scale: 1, zero: 0) }
        let scale = (high - low) / 255
        let zeroFromMin = -128 - Double(low) / Double(scale)
        let zero = Int(Swift.max(-128, Swift.min(127, zeroFromMin.rounded(.toNearestOrAwayFromZero))))
        return Affine(scale: scale, zero: zero)
    }

    /// Per output channel, a symmetric int8 filter's scale (largest magnitude over 127), as
    /// SymmetricPerChannelQuantization; `weights` is [channels][perChannel] flattened.
    public static func filterScales(_ weights: [Float], channels: Int) -> [Float] {
        guard channels > 0, weights.count % channels == 0 else { return [] }
        let n = weights.count / channels
        return (0..<channels).map { c in
            let largest = weights[(c * n)..<((c + 1) * n)].reduce(0) { Swift.max($0, abs($1)) }
            return largest > 0 ? largest / 127 : 1
        }
    }

    /// The code of `x`: round(x / scale) + zero (halves away from zero), clamped to -128...127.
    public static func code(_ x: Float, _ q: Affine) -> Int {
        let v = (Double(x) / Double(q.scale)).rounded(.toNearestOrAwayFromZero) + Double(q.zero)
        return Int(Swift.max(-128, Swift.min(127, v)))
    }

    /// x rounded to its code and back: the forward pass of a fake-quantized value.
    public static func fake(_ x: Float, _ q: Affine) -> Float { q.scale * Float(code(x, q) - q.zero) }

    /// Whether the gradient reaches x (inside the codes' range), the straight-through estimator.
    public static func passes(_ x: Float, _ q: Affine) -> Bool {
        let low = q.scale * Float(-128 - q.zero), high = q.scale * Float(127 - q.zero)
        return x >= low && x <= high
    }

    /// A filter's codes, per output channel: round(w / scale), symmetric in -127...127.
    public static func filterCodes(_ weights: [Float], scales: [Float]) -> [Int] {
        guard !scales.isEmpty, weights.count % scales.count == 0 else { return [] }
        let n = weights.count / scales.count
        return weights.enumerated().map { i, w in
            Int(Swift.max(-127, Swift.min(127, (Double(w) / Double(scales[i / n])).rounded(.toNearestOrAwayFromZero))))
        }
    }

    /// A bias's int32 codes at input scale × filter scale, per output channel.
    public static func biasCodes(_ bias: [Float], input: Float, filter: [Float]) -> [Int64] {
        bias.enumerated().map { c, b in
            let scale = Double(input) * Double(filter[filter.count == 1 ? 0 : c])
            return Int64(Swift.max(Double(Int32.min), Swift.min(Double(Int32.max), (Double(b) / scale).rounded(.toNearestOrAwayFromZero))))
        }
    }
}
