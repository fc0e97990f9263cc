import CEarshotKernels

/// A tensor held as codes, as floats for the steps that read floats.
struct DecodeStep: InputOutputStep {
    var x: GraphPlan.Ref
    var y: GraphPlan.Ref

    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }

    func run(_ c: Context) {
        for b in 0..<c.streams { earshot_codes_to_floats(c.bytes(x, b).assumingMemoryBound(to: Int8.self), x.count, c.write(y, b)) }
    }
}
