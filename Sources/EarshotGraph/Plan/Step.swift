/// One compiled node of a `GraphPlan`. Steps are kept as existentials, so that running one
/// opens it in place: no copy of its arrays, no reference counting in the loop.
protocol Step: Sendable {
    func run(_ c: Context) throws(GraphError)
    /// The places the step reads.
    var reads: [GraphPlan.Ref] { get }
    /// The places the step writes.
    var writes: [GraphPlan.Ref] { get }
    /// The multiply-adds the step's product kernels run for one stream.
    var products: Int { get }
    /// Those of them that run in bf16.
    var bf16Products: Int { get }
    /// What the step runs, for a profile (`GraphPlan.profile`).
    var summary: String { get }
    /// The step reading and writing the places `move` gives for its own (`GraphPlan.Layout`: the
    /// arena laid out by liveness); nil for a step that cannot be moved, which keeps the plan's
    /// arena as the builder laid it out.
    func relocated(_ move: (GraphPlan.Ref) -> GraphPlan.Ref) -> (any Step)?
}

extension Step {
    func runner() -> StepRunner { Runner(step: self) }
    /// The multiply-adds of the outputs the step's product kernels compute for one stream, rows
    /// padded to whole panels not counted; 0 for a step that runs no product (moves, element-wise
    /// ops, FFTs, the reference kernels).
    var products: Int { 0 }
    var bf16Products: Int { 0 }
    func relocated(_ move: (GraphPlan.Ref) -> GraphPlan.Ref) -> (any Step)? { nil }
}

/// A step whose only places in the arena are one input `x` and one output `y`.
protocol InputOutputStep: Step {
    var x: GraphPlan.Ref { get set }
    var y: GraphPlan.Ref { get set }
}

extension InputOutputStep {
    func relocated(_ move: (GraphPlan.Ref) -> GraphPlan.Ref) -> (any Step)? {
        var moved = self
        moved.x = move(x)
        moved.y = move(y)
        return moved
    }
}

/// A step in a class: a call through a class reference borrows it, where a call on a struct
/// existential held in an array copies it out first (retaining every array it holds). The plan
/// calls it through `Unmanaged` (the plan holds the strong references), so that a run counts
/// no references at all. `@unchecked Sendable`: the class has no state; its only subclass holds
/// one immutable `Sendable` step.
class StepRunner: @unchecked Sendable {
    /// Runs the step; a reference kernel's failure is returned.
    func run(_ c: Context) -> GraphError? { nil }
}

private final class Runner<S: Step>: StepRunner, @unchecked Sendable {
    let step: S
    init(step: S) { self.step = step }
    override func run(_ c: Context) -> GraphError? {
        do throws(GraphError) {
            try step.run(c)
            return nil
        } catch {
            return error
        }
    }
}
