/// Ops that only move values (`Builder.move`): each output filled by its copy runs from the
/// sources, as floats or as codes.
struct MoveStep: Step {
    let sources: [GraphPlan.Ref]
    /// The outputs, and each one's runs: runs[bounds[i]..<bounds[i + 1]] fill outputs[i].
    let outputs: [GraphPlan.Ref]
    let bounds: [Int]
    let runs: [Run]

    init(sources: [GraphPlan.Ref], outputs: [(GraphPlan.Ref, [Run])]) {
        self.sources = sources
        self.outputs = outputs.map(\.0)
        bounds = outputs.reduce(into: [0]) { $0.append($0[$0.count - 1] + $1.1.count) }
        runs = outputs.flatMap(\.1)
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
                    } else {
                        for b in 0..<c.streams { Run.apply(own, to: c.write(ref, b)) { c.read(sources[$0], b) } }
                    }
                }
            }
        }
    }
}

extension MoveStep { var writes: [GraphPlan.Ref] { outputs } }
