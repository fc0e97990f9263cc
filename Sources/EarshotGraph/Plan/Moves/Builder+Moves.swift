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
