import CEarshotKernels
import EarshotGraph
import Foundation

/// 1-D convolution within a block: zero padding on both ends, stride, dilation, groups; or
/// causal, with its left context carried in the state.
/// ref: torch.nn.Conv1d
struct Conv1d: Sendable {
    let name: String
    let inChannels, outChannels, kernelSize, stride, padding, dilation, groups: Int
    /// Causal: no padding; the last `contextFrames` input frames of the previous step come first.
    let causal: Bool
    /// [outChannels][inChannels / groups][kernelSize]
    let weight: [Float]
    /// [outChannels]
    let bias: [Float]
    /// Each group's weights tap by tap ([outChannels / groups][kernelSize][inChannels / groups],
    /// so that a receptive field is K runs of contiguous input channels), packed for the product.
    let packed: [PackedMatrix]

    init(name: String, inChannels: Int, outChannels: Int, kernelSize: Int, stride: Int, padding: Int, dilation: Int,
         groups: Int, causal: Bool, weight: [Float], bias: [Float]) {
        self.name = name
        self.inChannels = inChannels
        self.outChannels = outChannels
        self.kernelSize = kernelSize
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.groups = groups
        self.causal = causal
        self.weight = weight
        self.bias = bias
        let perGroup = inChannels / groups, K = kernelSize
        var byTap = [Float](repeating: 0, count: weight.count)
        for o in 0..<outChannels {
            for c in 0..<perGroup {
                for k in 0..<K { byTap[(o * K + k) * perGroup + c] = weight[(o * perGroup + c) * K + k] }
            }
        }
        let outPerGroup = outChannels / groups, field = perGroup * K
        packed = (0..<groups).map { g in
            PackedMatrix(Array(byTap[(g * outPerGroup * field)..<((g + 1) * outPerGroup * field)]), rows: outPerGroup, k: field)
        }
    }

    /// Input frames carried from step to step (causal only); state layout [inChannels][contextFrames].
    var contextFrames: Int { causal ? (kernelSize - 1) * dilation : 0 }

    func outputLength(_ input: Int) -> Int {
        (input + contextFrames + 2 * padding - dilation * (kernelSize - 1) - 1) / stride + 1
    }

    /// Runs the convolution; a causal one first puts each stream's carried frames before its
    /// input and keeps the last of them for the next step.
    func run(_ x: Activations, into y: inout Activations, states: StateRows, scratch: inout LayerScratch) {
        let context = contextFrames
        guard context > 0 else { return run(x, time: x.time, into: &y, scratch: &scratch) }
        let T = x.time, total = context + T, B = x.batch, C = inChannels
        var extended = Activations.empty
        swap(&extended, &scratch.extended)
        extended.reshape(channels: C, time: total, batch: B)
        for b in 0..<B {
            let state = states[b]
            let row = b * total * C
            for t in 0..<context { for c in 0..<C { extended.values[row + t * C + c] = state[c * context + t] } }
            for i in 0..<(T * C) { extended.values[row + context * C + i] = x.values[b * T * C + i] }
            for t in 0..<context { for c in 0..<C { state[c * context + t] = extended.values[row + (T + t) * C + c] } }
        }
        run(extended, time: total, into: &y, scratch: &scratch)
        swap(&extended, &scratch.extended)
    }

    /// Gathers each output column's receptive field (tap k: the input column
    /// t * stride - padding + k * dilation, its channels of the group contiguous; zeros outside),
    /// then one product for all columns.
    private func run(_ x: Activations, time T: Int, into y: inout Activations, scratch: inout LayerScratch) {
        let outT = (T + 2 * padding - dilation * (kernelSize - 1) - 1) / stride + 1
        let B = x.batch
        y.reshape(channels: outChannels, time: max(outT, 0), batch: B)
        guard outT > 0 else { return }
        let inPerGroup = inChannels / groups, outPerGroup = outChannels / groups
        let K = kernelSize, field = inPerGroup * K, n = B * outT
        scratch.fields.setCount(n * field)
        x.values.withUnsafeBufferPointer { xv in
            y.values.withUnsafeMutableBufferPointer { yv in
                scratch.fields.withUnsafeMutableBufferPointer { col in
                    for g in 0..<groups {
                        for b in 0..<B {
                            for t in 0..<outT {
                                let row = col.baseAddress! + (b * outT + t) * field
                                for k in 0..<K {
                                    let pos = t * stride - padding + k * dilation
                                    let dst = row + k * inPerGroup
                                    if pos >= 0 && pos < T {
                                        dst.update(from: xv.baseAddress! + (b * T + pos) * inChannels + g * inPerGroup, count: inPerGroup)
                                    } else {
                                        dst.update(repeating: 0, count: inPerGroup)
                                    }
                                }
                            }
                        }
                        // Group g's outputs: channels g * outPerGroup ..< (g + 1) * outPerGroup of each column.
                        let first = g * outPerGroup
                        bias.withUnsafeBufferPointer { bv in
                            packed[g].values.withUnsafeBufferPointer { w in
                                earshot_gemm_packed(w.baseAddress!, outPerGroup, field, col.baseAddress!, field, n, bv.baseAddress! + first,
                                                    yv.baseAddress! + first, outChannels)
                            }
                        }
                    }
                }
            }
        }
    }
}
