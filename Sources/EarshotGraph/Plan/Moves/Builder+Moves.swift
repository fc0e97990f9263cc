extension Builder {
    /// An op that only moves values, run once with each float input's values numbered (then
    /// numbered plus one half): an output value that moved along with the numbers is a copy of
    /// the numbered element; one that stayed is a constant the op put there.
    mutating func move(_ node: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        if node.op == .cast, outputs.first?.dtype != .float32 { return nil }
        var sources: [(input: Int, base: Int, count: Int)] = []
        var total = 0
        for (i, t) in inputs.enumerated() {
            guard let t, t.dtype == .float32 else { continue }
            sources.append((i, total, t.count))
            total += t.count
        }
        guard total < 1 << 21 else { return nil }
        func numbered(_ half: Float) -> [GraphTensor?] {
            var numbered = inputs
            for s in sources {
                let shape = inputs[s.input]!.shape
                numbered[s.input] = GraphTensor(shape: shape, floats: (0..<s.count).map { Float(s.base + $0 + 1) + half })
            }
            return numbered
        }
        let first = try GraphOps.run(node.op, node: node.name, inputs: numbered(0), attributes: node.attributes, opset: opset,
                                     outputCount: node.outputs.count)
        let second = try GraphOps.run(node.op, node: node.name, inputs: numbered(0.5), attributes: node.attributes, opset: opset,
                                      outputCount: node.outputs.count)
        // Codes move as codes when a source is held so, every other is held so or is a constant of
        // int8 values, and every value filled in is one.
        var refs: [Ref] = []
        let readsCodes = sources.contains { self.refs[node.inputs[$0.input]]?.coded == true }
        if readsCodes, case let all = sources.compactMap({ codes(node.inputs[$0.input]) }), all.count == sources.count {
            refs = all
        } else {
            for s in sources {
                guard let ref = ref(node.inputs[s.input]) else { return nil }
                refs.append(ref)
            }
        }
        var moved: [(output: String, count: Int, runs: [Run])] = []
        for (j, name) in node.outputs.enumerated() where !name.isEmpty {
            let (a, b) = (first[j].floats, second[j].floats)
            guard a.count == outputs[j].count, b.count == a.count else { return nil }
            // Element by element in output order, each joined to the run before it where it continues it.
            var runs: [Run] = []
            for e in a.indices {
                if b[e] - a[e] == 0.5 {
                    let id = Int(a[e]) - 1
                    guard let s = sources.firstIndex(where: { id >= $0.base && id < $0.base + $0.count }) else { return nil }
                    Run.append(Run(dst: e, source: s, src: id - sources[s].base, count: 1, fill: 0), to: &runs)
                } else if a[e] == b[e] || (a[e].isNaN && b[e].isNaN) {
                    Run.append(Run(dst: e, source: -1, src: 0, count: 1, fill: a[e]), to: &runs)
                } else {
                    return nil
                }
            }
            moved.append((name, a.count, runs))
        }
        var coded = !refs.isEmpty && refs.allSatisfy(\.coded)
        if coded, !moved.allSatisfy({ $0.runs.allSatisfy { $0.source >= 0 || IntegerRanges.isInt8($0.fill) } }) {
            // A value filled in that no code holds: the move is of floats.
            coded = false
            for (i, s) in sources.enumerated() {
                guard let ref = ref(node.inputs[s.input]) else { return nil }
                refs[i] = ref
            }
        }
        var outs: [(Ref, [Run])] = []
        var aliased = 0
        for m in moved {
            if m.runs.count == 1, let run = m.runs.first, run.source >= 0, run.count == m.count {
                // One contiguous block of one input: the output is that block, in place.
                let source = refs[run.source]
                self.refs[m.output] = Ref(shared: source.shared, offset: source.offset + run.src, count: m.count, coded: source.coded)
                aliased += 1
                continue
            }
            let ref = coded ? allocateCodes(m.count) : allocate(m.count)
            self.refs[m.output] = ref
            var runs = m.runs
            if moved.count == 1 {
                // An input of the plan that only this copy reads, landing whole in one place of
                // the output (a state before the new rows of a window): loaded there, not copied.
                for (i, source) in sources.enumerated() {
                    let name = node.inputs[source.input]
                    guard readers[name] == 1, let input = inputRefs.firstIndex(of: refs[i]),
                          inputRefs.filter({ $0 == refs[i] }).count == 1,
                          let r = runs.firstIndex(where: { $0.source == i }), runs[r].count == source.count, runs[r].src == 0,
                          !runs.contains(where: { $0.source == i && $0.dst != runs[r].dst }) else { continue }
                    let placed = Ref(shared: false, offset: ref.offset + runs[r].dst, count: source.count, coded: ref.coded)
                    inputRefs[input] = placed
                    self.refs[name] = placed
                    refs[i] = placed
                    runs.remove(at: r)
                }
            }
            outs.append((ref, runs))
        }
        if !outs.isEmpty { steps.append(MoveStep(sources: refs, outputs: outs)) }
        return outs.isEmpty ? "alias" : "copy"
    }
}

extension Builder {
    /// A move of floats whose one output only one later step reads, itself a move of floats: the
    /// two become one move from the first's sources, in the later one's place (an exported graph's
    /// transposes, one after the other, as onnx2tf's TFLite files have them; or with other steps
    /// between them, as BirdNET's transpose of one pooling's output, its other pooling, and the
    /// concatenation that reads both), and the value between them is not written. Only where no
    /// step between them writes what the first reads, so the later move reads the same values.
    mutating func fuseMoves() {
        var i = 0
        while i + 1 < steps.count {
            guard let first = steps[i] as? MoveStep, first.outputs.count == 1, let y = first.outputs.first, !y.coded,
                  !isOutput(y), !inputRefs.contains(where: { $0.overlaps(y) }), case let readers = steps(reading: y), readers.count == 1,
                  let j = readers.first, j > i, let second = steps[j] as? MoveStep,
                  !steps[(i + 1)..<j].contains(where: { step in step.writes.contains { w in first.sources.contains(where: w.overlaps) } }),
                  let joined = second.reading(through: first) else {
                i += 1
                continue
            }
            for (tensor, ref) in refs where ref.overlaps(y) {
                if let node = producers[tensor], kernels[node] == "copy" { kernels[node] = "copy, joined to the next" }
            }
            steps[j] = joined
            steps.remove(at: i)
        }
    }
}

extension MoveStep {
    /// This move with every value it reads from `first`'s one output read where `first` took it
    /// from: nil when either moves codes, or `first` leaves part of its output unwritten.
    func reading(through first: MoveStep) -> MoveStep? {
        guard first.outputs.count == 1, let y = first.outputs.first, !y.coded, !outputs.contains(where: \.coded),
              first.runs.reduce(0, { $0 + $1.count }) == y.count else { return nil }
        // The first's runs in output order (disjoint, as the builder makes them).
        let inner = first.runs.sorted { $0.dst < $1.dst }
        var sources = first.sources
        // Each source of this move: its number among `sources`, or (a part of y) where it starts in y.
        var through: [(number: Int?, start: Int)] = []
        for s in self.sources {
            if s.overlaps(y) {
                guard s.offset >= y.offset, s.offset + s.count <= y.offset + y.count else { return nil }
                through.append((nil, s.offset - y.offset))
            } else {
                if let k = sources.firstIndex(of: s) {
                    through.append((k, 0))
                } else {
                    through.append((sources.count, 0))
                    sources.append(s)
                }
            }
        }
        var outs: [(GraphPlan.Ref, [Run])] = []
        for (o, ref) in outputs.enumerated() {
            var runs: [Run] = []
            for r in self.runs[bounds[o]..<bounds[o + 1]] {
                guard r.source >= 0 else { Run.append(r, to: &runs); continue }
                let t = through[r.source]
                if let number = t.number {
                    Run.append(Run(dst: r.dst, source: number, src: r.src, count: r.count, fill: 0), to: &runs)
                    continue
                }
                // Values t.start + r.src ..< + r.count of y, piece by piece through the inner runs.
                let from = t.start + r.src, to = from + r.count
                var k = Self.firstRun(in: inner, ending: from)
                while k < inner.count, inner[k].dst < to {
                    let a = inner[k], lo = Swift.max(a.dst, from), hi = Swift.min(a.dst + a.count, to)
                    Run.append(Run(dst: r.dst + lo - from, source: a.source, src: a.source >= 0 ? a.src + lo - a.dst : 0,
                                   count: hi - lo, fill: a.fill), to: &runs)
                    k += 1
                }
            }
            outs.append((ref, runs))
        }
        return MoveStep(sources: sources, outputs: outs)
    }

    /// The first of `runs` (in output order, disjoint) that ends past `position`.
    private static func firstRun(in runs: [Run], ending position: Int) -> Int {
        var lo = 0, hi = runs.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if runs[mid].dst + runs[mid].count <= position { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }
}
