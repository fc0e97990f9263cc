import CEarshotKernels

/// TFLite's integer kernels compiled for a plan: a convolution, depthwise convolution or fully
/// connected layer as receptive fields (input indices, found once) and int16 weights, run by
/// `earshot_qconv` with the reference kernels' requantization; a lookup table and the feature
/// quantizer element by element. Every output is what the reference kernels give.
struct QuantizedProductStep: InputOutputStep {
    var x: GraphPlan.Ref
    var y: GraphPlan.Ref
    let fields: [Int32]
    let groups, positions, k, perGroup: Int
    let weights: [Int16]
    let bias, multipliers, shifts: [Int32]
    let inputOffset, outputOffset, low, high: Int32
    /// A depthwise convolution whose taps are the same for every channel: `fields` holds the
    /// taps of channel 0 and `weights` is [k][channels].
    let channelTaps: Bool
    /// One group whose position p reads x[p * k ..< (p + 1) * k] (with k even, or one position):
    /// the kernel reads the input in place instead of gathering each field.
    let contiguous: Bool
    /// Int8 weights in quads of taps and the bias with the input offset's products folded in, for
    /// the VNNI path on codes (empty when the weights or the offset do not allow it).
    let quads: [Int8]
    let base: [Int32]
    /// A depthwise convolution's weights in pairs of taps and its bias with the input offset's
    /// products folded in, for `earshot_qdepthwise`'s VNNI path (empty when it does not apply).
    let depthPairs: [Int16]
    let depthBase: [Int32]

    static func isContiguous(_ fields: [Int32], groups: Int, positions: Int, k: Int) -> Bool {
        groups == 1 && (positions == 1 || k % 2 == 0) && fields.count == positions * k && fields.indices.allSatisfy { fields[$0] == Int32($0) }
    }

    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }
    /// Int8 multiply-adds: every position's field against each output of its group.
    var products: Int { groups * positions * k * perGroup }

    /// Scratch (4-byte words) the kernels use: the input as int16 (and one zero for padding) then
    /// one receptive field in pairs; or the input as bytes (and four for padding) then one field
    /// in quads.
    var scratch: Int { max((x.count + 2) / 2 + (k + 1) / 2, (x.count + 7) / 4 + (k + 3) / 4) }

    func run(_ c: Context) {
        // In the plan's scratch (reserved by the builder, `scratch` words): nothing is allocated per step.
        let scratch = UnsafeMutableRawPointer(c.scratch)
        fields.withUnsafeBufferPointer { f in
            weights.withUnsafeBufferPointer { w in
                bias.withUnsafeBufferPointer { b in
                    multipliers.withUnsafeBufferPointer { m in
                        shifts.withUnsafeBufferPointer { s in
                            let (xCodes, yCodes): (Int32, Int32) = (x.coded ? 1 : 0, y.coded ? 1 : 0)
                            guard channelTaps else {
                                // Every stream at once: on VNNI a block of streams shares each load of the weights.
                                quads.withUnsafeBufferPointer { w4 in
                                    base.withUnsafeBufferPointer { base in
                                        earshot_qconv_streams(c.streams, c.bytes(x, 0), x.shared ? 0 : c.stride * 4, xCodes, x.count,
                                                              contiguous ? nil : f.baseAddress, groups, positions, k, w.baseAddress!, perGroup,
                                                              b.baseAddress!, m.baseAddress!, s.baseAddress!, inputOffset, outputOffset, low, high,
                                                              scratch.assumingMemoryBound(to: Int32.self), c.bytes(y, 0), c.stride * 4, yCodes,
                                                              w4.baseAddress, base.baseAddress)
                                    }
                                }
                                return
                            }
                            // Every stream at once: on VNNI a block of streams shares each load of the weights.
                            depthPairs.withUnsafeBufferPointer { w2 in
                                depthBase.withUnsafeBufferPointer { base in
                                    earshot_qdepthwise_streams(c.streams, c.bytes(x, 0), x.shared ? 0 : c.stride * 4, xCodes, x.count, f.baseAddress!,
                                                               positions, k, groups, w.baseAddress!, b.baseAddress!, m.baseAddress!, s.baseAddress!,
                                                               inputOffset, outputOffset, low, high, scratch.assumingMemoryBound(to: Int16.self),
                                                               c.bytes(y, 0), c.stride * 4, yCodes, w2.baseAddress, base.baseAddress)
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
