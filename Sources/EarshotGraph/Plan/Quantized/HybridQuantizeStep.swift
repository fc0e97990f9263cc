import CEarshotKernels

/// `TFLiteHybridQuantize`: a hybrid op's float input quantized block by block, on AVX-512 where the
/// CPU has it (`earshot_hybrid_quantize`: the values `HybridQuantize.quantize` gives, bit for bit).
struct HybridQuantizeStep: Step {
    var x: GraphPlan.Ref
    /// The integers minus each block's zero point, as floats; X's count.
    var q: GraphPlan.Ref
    /// One scale a block.
    var scales: GraphPlan.Ref
    let block: Int
    let asymmetric: Bool

    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [q, scales] }
    var summary: String { "hybrid quantize \(scales.count)x\(block)" }

    func relocated(_ move: (GraphPlan.Ref) -> GraphPlan.Ref) -> (any Step)? {
        var moved = self
        (moved.x, moved.q, moved.scales) = (move(x), move(q), move(scales))
        return moved
    }

    func run(_ c: Context) {
        for b in 0..<c.streams {
            let xs = c.read(x, b), qs = c.write(q, b), ss = c.write(scales, b)
            for k in 0..<scales.count {
                ss[k] = earshot_hybrid_quantize(xs + k * block, block, asymmetric ? 1 : 0, -1, qs + k * block)
            }
        }
    }
}

extension Builder {
    /// `TFLiteHybridQuantize` compiled; nil (its reference kernel) when its input is not a float tensor of the arena.
    mutating func hybridQuantize(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        guard inputs.count == 1, let x = inputs[0], x.dtype == .float32, outputs.count == 2, g.outputs.count == 2,
              !fixed.contains(g.inputs[0]), let xRef = ref(g.inputs[0]) else { return nil }
        let scaleCount = outputs[1].count
        guard scaleCount > 0, x.count % scaleCount == 0 else { return nil }
        let n = node(g, inputs)
        let q = allocate(outputs[0].count), scales = allocate(scaleCount)
        refs[g.outputs[0]] = q
        refs[g.outputs[1]] = scales
        steps.append(HybridQuantizeStep(x: xRef, q: q, scales: scales, block: x.count / scaleCount, asymmetric: try n.int("asymmetric", default: 0) != 0))
        return "hybrid quantize"
    }
}

extension Builder {
    /// The outputs of the Convs and Gemms that read a `TFLiteHybridQuantize`'s integers (through
    /// ops that only move values): their products run direct in fp32 (never Winograd's tiles, an
    /// FFT or bf16), so that the sums of whole numbers are TFLite's integer sums exactly.
    static func integerProducts(_ nodes: [GraphNode]) -> Set<String> {
        let moving: Set<GraphOp> = [.identity, .reshape, .squeeze, .unsqueeze, .transpose, .flatten]
        var integers = Set<String>(), found = Set<String>()
        for node in nodes {
            if node.op == .tfliteHybridQuantize, let q = node.outputs.first {
                integers.insert(q)
            } else if moving.contains(node.op), let x = node.inputs.first, integers.contains(x) {
                integers.formUnion(node.outputs)
            } else if [.conv, .gemm, .matMul].contains(node.op), let x = node.inputs.first, integers.contains(x) {
                found.formUnion(node.outputs)
            }
        }
        return found
    }
}
