/// ReduceMean, ReduceSum, ReduceMax, ReduceMin: the reference kernel's loop on the arena.
struct ReduceStep: InputOutputStep {
    let op: GraphOp
    var x: GraphPlan.Ref
    var y: GraphPlan.Ref
    let layout: ReductionLayout

    func run(_ c: Context) {
        for b in 0..<c.streams { Reductions.reduceFloats(op, c.read(x, b), layout, into: c.write(y, b)) }
    }
}

extension ReduceStep {
    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }
}
