extension Builder {
    /// A Conv of three taps along one axis (`alongRows`: the output's rows, else its columns) as
    /// Winograd F(4, 3), when that takes at most three quarters of the direct products: its tiles
    /// of four outputs along the axis, each tile's six inputs read from the receptive fields of
    /// channel 0 (`fields`, three a position) and checked to slide one position a tap; the
    /// filters [outChannels][channels][3] transformed (in double) to G g, then packed in `precision`.
    static func winograd(fields: [Int32], taps: Int, alongRows: Bool, oh: Int, ow: Int, channels: Int, outChannels: Int,
                         weights: [Float], bias: [Float]?, precision: Precision = .fp32) -> ConvStep.Winograd? {
        let depth = channels * 3
        guard taps == 3, channels >= 4, outChannels >= 4, weights.count == outChannels * depth else { return nil }
        let (lines, length) = alongRows ? (ow, oh) : (oh, ow)
        let perLine = (length + 3) / 4
        // Six products a tile against three a direct output.
        guard 6 * perLine * 4 <= 9 * length else { return nil }
        func position(line: Int, at k: Int) -> Int { alongRows ? k * ow + line : line * ow + k }
        func field(_ p: Int, _ tap: Int) -> Int32 { fields[p * depth + tap] }
        var inputRows: [Int32] = [], outputRows: [Int32] = []
        for line in 0..<lines {
            for t in 0..<perLine {
                let first = 4 * t, valid = min(4, length - first)
                var d = [Int32](repeating: -1, count: 6)
                for j in 0..<6 {
                    // Input j is tap 0 of output j, or taps 1 and 2 of the last valid output.
                    if j < valid { d[j] = field(position(line: line, at: first + j), 0) }
                    else if j <= valid + 1 { d[j] = field(position(line: line, at: first + valid - 1), j - valid + 1) }
                }
                for o in 0..<valid {
                    for tap in 0..<3 where field(position(line: line, at: first + o), tap) != d[o + tap] { return nil }
                }
                inputRows += d
                outputRows += (0..<4).map { $0 < valid ? Int32(position(line: line, at: first + $0)) : -1 }
            }
        }
        // G g per point: g0 / 4, -(g0 + g1 + g2) / 6, -(g0 - g1 + g2) / 6, g0 / 24 + g1 / 12 + g2 / 6,
        // g0 / 24 - g1 / 12 + g2 / 6, g2.
        // The rows are rounded up to 8: a last panel of 8 rows takes 8-lane tiles (fp32, and bf16
        // with AVX-512 BF16), not a whole panel's work.
        let rows = (outChannels + 7) / 8 * 8
        var transformed = [[Float]](repeating: [Float](repeating: 0, count: rows * channels), count: 6)
        for o in 0..<outChannels {
            for c in 0..<channels {
                let g = (0..<3).map { Double(weights[(o * channels + c) * 3 + $0]) }
                let u = [g[0] / 4, -(g[0] + g[1] + g[2]) / 6, -(g[0] - g[1] + g[2]) / 6, g[0] / 24 + g[1] / 12 + g[2] / 6,
                         g[0] / 24 - g[1] / 12 + g[2] / 6, g[2]]
                for i in 0..<6 { transformed[i][o * channels + c] = Float(u[i]) }
            }
        }
        return .init(tiles: lines * perLine, inputRows: inputRows, outputRows: outputRows,
                     filters: transformed.map { PackedMatrix($0, rows: rows, k: channels, precision: precision) },
                     bias: bias.map { $0 + [Float](repeating: 0, count: rows - outChannels) },
                     zeros: [Float](repeating: 0, count: channels))
    }
}
