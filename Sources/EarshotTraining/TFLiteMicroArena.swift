/// The tensor arena TFLite Micro needs for a model: its planned tensors laid out as
/// `GreedyMemoryPlanner` lays them out (or, when larger, the scratch the planning itself takes
/// from the same space), plus what it keeps for the model's life: a record per tensor and per
/// operator, each operator's data with its per-channel multipliers and shifts, and each
/// resource variable's buffer. ref: tflite-micro tensorflow/lite/micro/memory_planner/
/// greedy_memory_planner.cc, micro_allocation_info.cc (lifetimes), micro_allocator.cc
/// (kBufferAlignment 16).
///
/// The sizes are tflite-micro's on x86-64 as its `RecordingMicroAllocator` reports them
/// (TfLiteEvalTensor 24 bytes, NodeAndRegistration 64, an AllocationInfo 32 and the planner's
/// 40 a planned buffer while planning, 8 a tensor in the subgraph's tables), with 72 bytes of op
/// data an operator (the largest of microWakeWord's ops): 64-bit pointers, so a 32-bit device
/// (ESP32) needs less. tools/microwakeword_export_reference.py measures the smallest arena
/// tflite-micro runs the exported models in; the figure here is 5 to 8% above it.
enum TFLiteMicroArena {
    /// Every allocation is rounded up to this.
    static let alignment = 16
    static let perTensor = 24 + 8, perOperator = 64 + 72, perChannel = 8, fixed = 800
    /// While planning: per tensor (AllocationInfo) and per planned buffer (the planner's lists).
    static let planningPerTensor = 32, planningPerBuffer = 40

    /// The arena's bytes for `subgraphs` (the first is the model's, the rest its init graphs).
    static func bytes(_ subgraphs: [TFLiteFile.Subgraph]) -> Int {
        var planned: [(size: Int, first: Int, last: Int)] = []
        var time = 0, tensors = 0
        var persistent = fixed
        for (k, g) in subgraphs.enumerated() {
            var first: [Int: Int] = [:], last: [Int: Int] = [:]
            for i in g.inputs { first[i] = time }
            for op in g.operators {
                for i in op.inputs where i >= 0 { last[i] = time }
                for o in op.outputs where first[o] == nil { first[o] = time }
                time += 1
                persistent += perOperator
                // A product's per-channel multipliers and shifts (its filter's scales).
                if [3, 4, 9].contains(op.code), op.inputs.count > 1, op.inputs[1] >= 0, op.inputs[1] < g.tensors.count {
                    persistent += round(perChannel * max(g.tensors[op.inputs[1]].scales.count, 1))
                }
                // A variable's buffer, allocated once: the size of the value the init graph assigns.
                if op.code == 144, k > 0, op.inputs.count == 2, op.inputs[1] < g.tensors.count {
                    let t = g.tensors[op.inputs[1]]
                    persistent += round(t.shape.reduce(1, *) * t.size)
                }
            }
            for o in g.outputs { last[o] = time }
            tensors += g.tensors.count
            for (i, t) in g.tensors.enumerated() {
                guard t.data == nil, t.type != .resource, let start = first[i] else { continue }
                planned.append((round(t.shape.reduce(1, *) * t.size), start, last[i] ?? start))
            }
        }
        persistent += perTensor * tensors
        let planning = planningPerTensor * tensors + planningPerBuffer * planned.count
        return round(persistent + max(greedy(planned), planning))
    }

    private static func round(_ n: Int) -> Int { (n + alignment - 1) / alignment * alignment }

    /// GreedyMemoryPlanner: the largest buffers first, each at the lowest offset where it
    /// overlaps no placed buffer that lives at the same time; the extent of the plan.
    static func greedy(_ buffers: [(size: Int, first: Int, last: Int)]) -> Int {
        let order = buffers.indices.sorted { buffers[$0].size != buffers[$1].size ? buffers[$0].size > buffers[$1].size : $0 < $1 }
        var placed: [(offset: Int, size: Int, first: Int, last: Int)] = []
        var extent = 0
        for i in order {
            let b = buffers[i]
            let live = placed.filter { $0.first <= b.last && b.first <= $0.last }.sorted { $0.offset < $1.offset }
            var offset = 0
            for p in live {
                if offset + b.size <= p.offset { break }
                offset = max(offset, p.offset + p.size)
            }
            placed.append((offset, b.size, b.first, b.last))
            extent = max(extent, offset + b.size)
        }
        return extent
    }
}

extension TFLiteFile.Tensor {
    /// Bytes per element.
    var size: Int {
        switch type {
        case .int8, .uint8: return 1
        case .int32: return 4
        case .resource: return 0
        }
    }
}
