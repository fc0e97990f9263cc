import CEarshotKernels

/// Ops that only move values (`Builder.move`): each output filled by its copy runs from the
/// sources, as floats or as codes.
struct MoveStep: Step {
    var sources: [GraphPlan.Ref]
    /// The outputs, and each one's runs: runs[bounds[i]..<bounds[i + 1]] fill outputs[i].
    var outputs: [GraphPlan.Ref]
    let bounds: [Int]
    let runs: [Run]
    /// Per output, when its runs are short (a transpose, a strided slice) and all read one source
    /// or fill in zeros: that source and each value's index in it (-1 for a zero), for the
    /// vectorized gather instead of the runs.
    let gathers: [(source: Int, index: [Int32])?]

    init(sources: [GraphPlan.Ref], outputs: [(GraphPlan.Ref, [Run])]) {
        self.sources = sources
        self.outputs = outputs.map(\.0)
        bounds = outputs.reduce(into: [0]) { $0.append($0[$0.count - 1] + $1.1.count) }
        runs = outputs.flatMap(\.1)
        gathers = outputs.map { Self.gather($0.0, $0.1) }
    }

    /// The output's runs as one gather's indices, when they average under 4 values and read one
    /// source (or fill zeros) over the whole output; else nil.
    static func gather(_ ref: GraphPlan.Ref, _ runs: [Run]) -> (source: Int, index: [Int32])? {
        guard !ref.coded, ref.count > 0, runs.count * 4 > ref.count, ref.count < Int(Int32.max),
              let first = runs.first(where: { $0.source >= 0 }) else { return nil }
        var index = [Int32](repeating: -1, count: ref.count)
        var covered = 0
        for r in runs {
            guard r.source == first.source || (r.source < 0 && r.fill.bitPattern == 0), r.dst >= 0, r.dst + r.count <= ref.count else { return nil }
            if r.source >= 0 { for i in 0..<r.count { index[r.dst + i] = Int32(r.src + i) } }
            covered += r.count
        }
        guard covered == ref.count else { return nil }
        return (first.source, index)
    }

    var reads: [GraphPlan.Ref] { sources }

    func run(_ c: Context) {
        sources.withUnsafeBufferPointer { sources in
            runs.withUnsafeBufferPointer { runs in
                for (i, ref) in outputs.enumerated() {
                    let own = UnsafeBufferPointer(rebasing: runs[bounds[i]..<bounds[i + 1]])
                    if ref.coded {
                        // Codes from codes (the builder makes a move of codes only so).
                        for b in 0..<c.streams { Run.applyCodes(own, to: c.bytes(ref, b)) { UnsafeRawPointer(c.bytes(sources[$0], b)) } }
                    } else if let gather = gathers[i] {
                        gather.index.withUnsafeBufferPointer { index in
                            for b in 0..<c.streams { earshot_gather(index.baseAddress!, c.read(sources[gather.source], b), c.write(ref, b), ref.count) }
                        }
                    } else {
                        for b in 0..<c.streams { Run.apply(own, to: c.write(ref, b)) { c.read(sources[$0], b) } }
                    }
                }
            }
        }
    }
}

extension MoveStep { var writes: [GraphPlan.Ref] { outputs } }

extension MoveStep {
    func relocated(_ move: (GraphPlan.Ref) -> GraphPlan.Ref) -> (any Step)? {
        var moved = self
        (moved.sources, moved.outputs) = (sources.map(move), outputs.map(move))
        return moved
    }
}
