/// The steps of one branch of an If: the steps whose values only a Where reads as its X (or its
/// Y), run only when a stream's condition chooses that side. A condition is one value a stream;
/// in a batch the branch runs when any stream takes it (the Where still chooses per stream, so
/// each stream gets what it gets alone).
struct BranchStep: Step {
    let condition: SelectStep.Condition
    /// The side whose values the steps compute: true for X (the condition holds), false for Y.
    let when: Bool
    let steps: [any Step]
    /// The steps as they are run, and unretained (as `GraphPlan.runners`).
    let runners: [StepRunner]
    let unretained: [Unmanaged<StepRunner>]

    init(condition: SelectStep.Condition, when: Bool, steps: [any Step]) {
        self.condition = condition
        self.when = when
        self.steps = steps
        runners = steps.map { $0.runner() }
        unretained = runners.map { Unmanaged.passUnretained($0) }
    }

    func run(_ c: Context) throws(GraphError) {
        var taken = false
        for s in 0..<c.streams where condition.kind.holds(c.read(condition.a, s)[0], c.read(condition.b, s)[0]) == when {
            taken = true
            break
        }
        guard taken else { return }
        try unretained.withUnsafeBufferPointer { runners throws(GraphError) in
            for runner in runners {
                if let error = runner._withUnsafeGuaranteedRef({ $0.run(c) }) { throw error }
            }
        }
    }

    /// The steps it holds, those of branches within it included.
    var stepCount: Int { steps.reduce(0) { $0 + (($1 as? BranchStep)?.stepCount ?? 1) } }

    /// Whether a step of the branch runs a reference kernel (the only steps that can throw).
    var canFail: Bool { steps.contains { $0 is ReferenceStep || ($0 as? BranchStep)?.canFail == true } }
}

extension BranchStep {
    var reads: [GraphPlan.Ref] { [condition.a, condition.b] + steps.flatMap(\.reads) }
    var writes: [GraphPlan.Ref] { steps.flatMap(\.writes) }
    var products: Int { steps.reduce(0) { $0 + $1.products } }
}

extension GraphPlan {
    /// The steps with each If's branches gathered (`BranchStep`): for a Where whose condition is
    /// one value a stream, the steps before it whose every value is read only by the branch's
    /// steps or by the Where as its X (resp. Y), and is no output, are moved to just before the
    /// Where (when no step between writes what they read or write, or reads what they write) and
    /// run only when a stream takes that side.
    static func gatherBranches(_ steps: [any Step], outputs: [Ref]) -> [any Step] {
        var steps = steps
        var k = 0
        while k < steps.count {
            guard let select = steps[k] as? SelectStep, select.condition.a.count == 1, select.condition.b.count == 1 else {
                k += 1
                continue
            }
            for side in [true, false] {
                let branch = Self.branch(of: select, at: k, side: side, in: steps, outputs: outputs)
                guard !branch.isEmpty else { continue }
                let gathered = BranchStep(condition: select.condition, when: side, steps: branch.map { steps[$0] })
                let kept = steps.indices.filter { !branch.contains($0) && $0 != k }
                let before = kept.filter { $0 < k }, after = kept.filter { $0 > k }
                steps = before.map { steps[$0] } + [gathered, select] + after.map { steps[$0] }
                k = before.count + 1
            }
            k += 1
        }
        return steps
    }

    /// The indices, in order, of the steps before step k (a Where) that only its X (`side`) or
    /// its Y reads, directly or through each other, when they can be moved to just before it; else
    /// none.
    private static func branch(of select: SelectStep, at k: Int, side: Bool, in steps: [any Step], outputs: [Ref]) -> [Int] {
        let target = side ? select.x : select.y
        let others = [side ? select.y : select.x, select.condition.a, select.condition.b]
        guard !target.shared else { return [] }
        var branch = Set<Int>()
        for j in stride(from: k - 1, through: 0, by: -1) {
            let writes = steps[j].writes
            guard !writes.isEmpty else { continue }
            var feeds = false, only = true
            for ref in writes {
                if outputs.contains(where: { $0.overlaps(ref) }) || others.contains(where: { $0.overlaps(ref) }) {
                    only = false
                    break
                }
                if ref.overlaps(target) { feeds = true }
                for m in (j + 1)..<steps.count where m != k && steps[m].reads.contains(where: { $0.overlaps(ref) }) {
                    guard branch.contains(m) else {
                        only = false
                        break
                    }
                    feeds = true
                }
                // A step before it that reads the same place (an alias, a state read before it is written).
                if (0..<j).contains(where: { steps[$0].reads.contains { $0.overlaps(ref) } }) { only = false }
                if !only { break }
            }
            if only && feeds { branch.insert(j) }
        }
        // Moving them later: no step left between a branch step and the Where may write what it
        // reads or writes, or read what it writes.
        for j in branch {
            let reads = steps[j].reads, writes = steps[j].writes
            for m in (j + 1)..<k where !branch.contains(m) {
                let conflict = steps[m].writes.contains { w in reads.contains { w.overlaps($0) } || writes.contains { w.overlaps($0) } }
                    || steps[m].reads.contains { r in writes.contains { r.overlaps($0) } }
                if conflict { return [] }
            }
        }
        return branch.sorted()
    }
}

extension BranchStep {
    func relocated(_ move: (GraphPlan.Ref) -> GraphPlan.Ref) -> (any Step)? {
        var steps: [any Step] = []
        for step in self.steps {
            guard let moved = step.relocated(move) else { return nil }
            steps.append(moved)
        }
        return BranchStep(condition: condition.relocated(move), when: when, steps: steps)
    }
}
