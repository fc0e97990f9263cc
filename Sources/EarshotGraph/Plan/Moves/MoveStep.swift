import CEarshotKernels

/// Ops that only move values (`Builder.move`): each output filled by its copy runs from the
/// sources, as floats or as codes.
struct MoveStep: Step {
    var sources: [GraphPlan.Ref]
    /// The outputs, and each one's runs: runs[bounds[i]..<bounds[i + 1]] fill outputs[i].
    var outputs: [GraphPlan.Ref]
    let bounds: [Int]
    let runs: [Run]
    /// Per output, when its runs are short (a transpose, a strided slice, a concatenation that
    /// interleaves its inputs) and fill in zeros or read up to 255 sources: the vectorized gather
    /// instead of the runs.
    let gathers: [Gather?]

    /// An output as one gather: each value's source (among `sources`, by number) and index in it.
    struct Gather: Sendable {
        /// The sources read (numbers in `MoveStep.sources`).
        let sources: [Int]
        /// Per value, its source in `sources`; nil when there is one.
        let which: [UInt8]?
        /// Per value, its index in its source (-1 for a zero).
        let index: [Int32]
        /// When the gather is a batch of transposes of one source (`transposes(_:)`): it runs as
        /// `earshot_transpose` of each.
        let transpose: Transposes?
    }

    /// Matrices [rows][columns] of a source from `first`, one after the other, each transposed into
    /// the output ([columns][rows]) one after the other.
    struct Transposes: Sendable {
        let first, rows, columns, count: Int
    }

    /// The batch of transposes that `index` (of one source, with no zeros) is, if it is one of
    /// matrices of 16 rows and 16 columns or more.
    static func transposes(_ index: [Int32]) -> Transposes? {
        guard index.count >= 512, let first = index.first, first >= 0, let columnStep = index.dropFirst().first,
              let rows = index.firstIndex(of: first + 1) else { return nil }
        let columns = Int(columnStep - first)
        let size = rows * columns
        guard rows >= 16, columns >= 16, index.count % size == 0 else { return nil }
        for (e, i) in index.enumerated() {
            let (n, k) = e.quotientAndRemainder(dividingBy: size)
            guard Int(i) == Int(first) + n * size + (k % rows) * columns + k / rows else { return nil }
        }
        return Transposes(first: Int(first), rows: rows, columns: columns, count: index.count / size)
    }

    init(sources: [GraphPlan.Ref], outputs: [(GraphPlan.Ref, [Run])]) {
        self.sources = sources
        self.outputs = outputs.map(\.0)
        bounds = outputs.reduce(into: [0]) { $0.append($0[$0.count - 1] + $1.1.count) }
        runs = outputs.flatMap(\.1)
        gathers = outputs.map { Self.gather($0.0, $0.1) }
    }

    /// The output's runs as one gather, when they average under 4 values, read floats and fill
    /// zeros over the whole output; else nil.
    static func gather(_ ref: GraphPlan.Ref, _ runs: [Run]) -> Gather? {
        guard !ref.coded, ref.count > 0, runs.count * 4 > ref.count, ref.count < Int(Int32.max) else { return nil }
        var index = [Int32](repeating: -1, count: ref.count), which = [UInt8](repeating: 0, count: ref.count)
        var read: [Int] = []
        var covered = 0
        for r in runs {
            guard r.source >= 0 || r.fill.bitPattern == 0, r.dst >= 0, r.dst + r.count <= ref.count else { return nil }
            covered += r.count
            guard r.source >= 0 else { continue }
            guard let s = read.firstIndex(of: r.source) ?? (read.count < 255 ? read.count : nil) else { return nil }
            if s == read.count { read.append(r.source) }
            for i in 0..<r.count {
                index[r.dst + i] = Int32(r.src + i)
                which[r.dst + i] = UInt8(s)
            }
        }
        guard covered == ref.count, !read.isEmpty else { return nil }
        return Gather(sources: read, which: read.count > 1 ? which : nil, index: index,
                      transpose: read.count == 1 ? transposes(index) : nil)
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
                            if let t = gather.transpose {
                                for b in 0..<c.streams {
                                    let from = c.read(sources[gather.sources[0]], b) + t.first, to = c.write(ref, b)
                                    for n in 0..<t.count {
                                        earshot_transpose(from + n * t.rows * t.columns, t.rows, t.columns, to + n * t.rows * t.columns)
                                    }
                                }
                            } else if let which = gather.which {
                                which.withUnsafeBufferPointer { which in
                                    withUnsafeTemporaryAllocation(of: UnsafePointer<Float>?.self, capacity: gather.sources.count) { from in
                                        for b in 0..<c.streams {
                                            for (k, s) in gather.sources.enumerated() { from[k] = c.read(sources[s], b) }
                                            earshot_gather_sources(index.baseAddress!, which.baseAddress!, from.baseAddress!, c.write(ref, b), ref.count)
                                        }
                                    }
                                }
                            } else {
                                for b in 0..<c.streams { earshot_gather(index.baseAddress!, c.read(sources[gather.sources[0]], b), c.write(ref, b), ref.count) }
                            }
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
