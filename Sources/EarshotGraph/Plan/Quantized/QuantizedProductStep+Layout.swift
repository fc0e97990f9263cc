import CEarshotKernels

extension QuantizedProductStep {
    /// Weights [O][k] as `earshot_qconv` reads them in quads of taps (then 15 rows of zeros, so that
    /// an AMX tile of 16 quads from any quad reads nothing outside them), and the bias with the
    /// input offset's products folded in (bias + (inputOffset - 128) × the sum of each output's
    /// weights, wrapping as the kernel's sums do); nil unless every weight is int8, there are
    /// enough outputs a group and the padding's byte (128 - inputOffset) is a byte.
    static func quadLayout(_ weights: [Int16], groups: Int, perGroup: Int, k: Int, bias: [Int32],
                           inputOffset: Int32) -> (quads: [Int8], base: [Int32])? {
        guard perGroup >= Int(EARSHOT_QCONV_FEW), (0...255).contains(128 - Int(inputOffset)),
              weights.allSatisfy({ (-128...127).contains($0) }), bias.count == groups * perGroup else { return nil }
        let quads = (k + 3) / 4, stride = (perGroup + 15) / 16 * 16
        var laid = [Int8](repeating: 0, count: (groups * quads + 15) * stride * 4)
        var base = bias
        for g in 0..<groups {
            for j in 0..<perGroup {
                let o = g * perGroup + j
                var sum: Int32 = 0
                for i in 0..<k {
                    let v = weights[o * k + i]
                    laid[((g * quads + i / 4) * stride + j) * 4 + i % 4] = Int8(v)
                    sum &+= Int32(v)
                }
                base[o] = bias[o] &+ (inputOffset &- 128) &* sum
            }
        }
        return (laid, base)
    }

    /// A depthwise convolution's weights [k][channels] in the layout `earshot_qdepthwise`'s VNNI
    /// path reads (pair j of taps, block b of 32 channels at (j × blocks + b) × 64: the (w[2j][c],
    /// w[2j + 1][c]) of channels 0-3, 8-11, 16-19, 24-27 of the block, then of 4-7, 12-15, 20-23,
    /// 28-31, a missing second tap or channel 0), and the bias plus the input offset times the sum
    /// of each channel's weights (wrapping, as the kernel's sums do; 32 a block, 0 past the
    /// channels). Nil unless the input is codes and every tap lies inside it (each tap's channels
    /// below `count`: padding would add the offset's products too).
    static func depthwisePairs(_ weights: [Int16], taps: [Int32], count: Int, coded: Bool, k: Int, channels: Int, bias: [Int32],
                               inputOffset: Int32) -> (pairs: [Int16], base: [Int32])? {
        guard coded, channels > 0, weights.count == k * channels, bias.count == channels,
              taps.allSatisfy({ $0 >= 0 && Int($0) + channels <= count }) else { return nil }
        let pairs = (k + 1) / 2, blocks = (channels + 31) / 32
        let low = [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27], order = low + low.map { $0 + 4 }
        var laid = [Int16](repeating: 0, count: pairs * blocks * 64)
        for j in 0..<pairs {
            for b in 0..<blocks {
                for (q, c) in order.enumerated() where 32 * b + c < channels {
                    let at = (j * blocks + b) * 64 + 2 * q, channel = 32 * b + c
                    laid[at] = weights[2 * j * channels + channel]
                    if 2 * j + 1 < k { laid[at + 1] = weights[(2 * j + 1) * channels + channel] }
                }
            }
        }
        let base = (0..<(blocks * 32)).map { c in
            c < channels ? bias[c] &+ inputOffset &* (0..<k).reduce(Int32(0)) { $0 &+ Int32(weights[$1 * channels + c]) } : 0
        }
        return (laid, base)
    }

    /// Weights [O][k] (O = groups × perGroup) in the layout `earshot_qconv` reads: pairs of taps,
    /// each pair's outputs in rows of perGroup rounded up to 16, zeros filling the rest; with few
    /// outputs a group, the rows as they are.
    static func pairLayout(_ weights: [Int16], groups: Int, perGroup: Int, k: Int) -> [Int16] {
        guard perGroup >= Int(EARSHOT_QCONV_FEW) else { return weights }
        let pairs = (k + 1) / 2, stride = (perGroup + 15) / 16 * 16
        var laid = [Int16](repeating: 0, count: groups * pairs * stride * 2)
        for g in 0..<groups {
            for j in 0..<perGroup {
                for i in 0..<k {
                    laid[((g * pairs + i / 2) * stride + j) * 2 + i % 2] = weights[(g * perGroup + j) * k + i]
                }
            }
        }
        return laid
    }
}
