import CEarshotKernels

extension ConvStep {
    /// The Winograd path: every stream's tiles transformed, six products for all of them at once,
    /// then each stream's outputs (with the bias and the fused ops), channels-last or transposed
    /// to [outChannels][positions].
    func runWinograd(_ c: Context, _ w: Winograd) {
        // The products' rows are the output channels rounded up to 8 (zero filters), so that
        // every row the outputs read is written.
        let n = c.streams * w.tiles, ldm = w.filters[0].rows
        let v = c.scratch, m = v + 6 * n * channels, sink = m + 6 * n * ldm, staging = sink + outChannels
        w.inputRows.withUnsafeBufferPointer { rows in
            w.zeros.withUnsafeBufferPointer { zeros in
                for b in 0..<c.streams {
                    var input = c.read(x, b)
                    if !inputChannelsLast {
                        earshot_transpose(input, channels, plane, staging)
                        input = UnsafePointer(staging)
                    }
                    earshot_winograd_input(input, channels, rows.baseAddress!, w.tiles, zeros.baseAddress!, v + b * w.tiles * channels, n * channels)
                }
            }
        }
        for i in 0..<6 {
            w.filters[i].product(v + i * n * channels, ldx: channels, columns: n, bias: nil, into: m + i * n * ldm, ldy: ldm)
        }
        w.outputRows.withUnsafeBufferPointer { rows in
            // The fused ops in the output transform, on each vector before it is stored, as each
            // op alone computes them.
            withEpilogue(columnBias: nil) { epilogue in
                func write(_ bias: UnsafePointer<Float>?) {
                    for b in 0..<c.streams {
                        let out = c.write(y, b)
                        earshot_winograd_output(m + b * w.tiles * ldm, n * ldm, ldm, outChannels, rows.baseAddress!, w.tiles, bias,
                                                epilogue, outputChannelsLast ? out : staging, sink)
                        if !outputChannelsLast { earshot_transpose(staging, positions, outChannels, out) }
                    }
                }
                if let bias = w.bias { bias.withUnsafeBufferPointer { write($0.baseAddress) } } else { write(nil) }
            }
        }
    }
}
