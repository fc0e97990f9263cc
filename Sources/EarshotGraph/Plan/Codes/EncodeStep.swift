import CEarshotKernels

/// Floats (whole numbers in the int8 range) as codes, for an output the caller reads as codes.
struct EncodeStep: InputOutputStep {
    var x: GraphPlan.Ref
    var y: GraphPlan.Ref

    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }

    func run(_ c: Context) {
        for b in 0..<c.streams { earshot_floats_to_codes(c.read(x, b), x.count, c.bytes(y, b).assumingMemoryBound(to: Int8.self)) }
    }
}
