import CEarshotKernels

/// `Quantize`: features to the model's input integers.
struct QuantizeStep: InputOutputStep {
    var x: GraphPlan.Ref
    var y: GraphPlan.Ref
    let scale, zero: Double
    let low, high: Float

    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }

    func run(_ c: Context) {
        for b in 0..<c.streams { earshot_quantize(c.read(x, b), y.count, scale, zero, low, high, c.bytes(y, b), y.coded ? 1 : 0) }
    }
}
