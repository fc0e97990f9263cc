/// `TFLiteLookup`: each value (a whole number) replaced by its table entry.
struct LookupStep: InputOutputStep {
    var x: GraphPlan.Ref
    var y: GraphPlan.Ref
    let table: [Float]
    let low: Int

    var reads: [GraphPlan.Ref] { [x] }
    var writes: [GraphPlan.Ref] { [y] }

    func run(_ c: Context) {
        let n = y.count, lo = Float(low)
        table.withUnsafeBufferPointer { t in
            for b in 0..<c.streams {
                let out = c.write(y, b)
                if x.coded {
                    let input = UnsafeRawPointer(c.bytes(x, b))
                    for i in 0..<n {
                        let v = Int(input.load(fromByteOffset: i, as: Int8.self)) - low
                        out[i] = t[v >= 0 && v <= 255 ? v : (v > 255 ? 255 : 0)]
                    }
                    continue
                }
                let input = c.read(x, b)
                for i in 0..<n {
                    let v = input[i] - lo
                    out[i] = t[v >= 0 && v <= 255 ? Int(v) : (v > 255 ? 255 : 0)]
                }
            }
        }
    }
}
