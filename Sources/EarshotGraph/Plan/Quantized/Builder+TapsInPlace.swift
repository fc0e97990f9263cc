extension Builder {
    /// A depthwise convolution's input of codes that the latest step writing it copied from
    /// another tensor of codes: that tensor and the taps (`fields`, of channel 0, the input's count
    /// for padding) that read the same values from it in place, each tap's `channels` values
    /// still side by side. Nil when any value was filled in, comes from elsewhere or lies apart,
    /// or when a later step writes that tensor.
    func tapsInPlace(_ x: GraphPlan.Ref, fields: [Int32], channels: Int) -> (GraphPlan.Ref, [Int32])? {
        guard x.coded, let k = steps.lastIndex(where: { $0.writes.contains { $0.overlaps(x) } }), let move = steps[k] as? MoveStep,
              let o = move.outputs.firstIndex(where: { $0.coded && $0.bytes.lowerBound <= x.bytes.lowerBound && x.bytes.upperBound <= $0.bytes.upperBound })
        else { return nil }
        let runs = move.runs[move.bounds[o]..<move.bounds[o + 1]]
        let start = x.bytes.lowerBound - move.outputs[o].bytes.lowerBound
        /// Source and index of element e of the copy's output (its runs are in output order).
        func origin(_ e: Int) -> (source: Int, index: Int)? {
            var (lo, hi) = (runs.startIndex, runs.endIndex)
            while lo < hi {
                let mid = (lo + hi) / 2
                if runs[mid].dst + runs[mid].count <= e { lo = mid + 1 } else { hi = mid }
            }
            guard lo < runs.endIndex, runs[lo].dst <= e, runs[lo].source >= 0 else { return nil }
            return (runs[lo].source, runs[lo].src + e - runs[lo].dst)
        }
        var source: Int?
        var taps: [Int32] = []
        taps.reserveCapacity(fields.count)
        var padding: [Int] = []
        for f in fields {
            if Int(f) >= x.count {
                padding.append(taps.count)
                taps.append(0)
                continue
            }
            guard let first = origin(start + Int(f)), source == nil || source == first.source, first.index <= Int(Int32.max) else { return nil }
            source = first.source
            for c in 1..<max(channels, 1) {
                guard let o = origin(start + Int(f) + c), o.source == first.source, o.index == first.index + c else { return nil }
            }
            taps.append(Int32(first.index))
        }
        guard let s = source, move.sources[s].coded, move.sources[s].count <= Int(Int32.max) else { return nil }
        let ref = move.sources[s]
        guard !steps[(k + 1)...].contains(where: { $0.writes.contains { $0.overlaps(ref) } }) else { return nil }
        for i in padding { taps[i] = Int32(ref.count) }
        return (ref, taps)
    }
}
