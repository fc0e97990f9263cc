extension Builder {
    /// MaxPool (without its Indices output) and AveragePool: each output's window as a list of
    /// input positions, taken in the reference kernel's order.
    mutating func pool(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        guard g.outputs.count == 1 || g.outputs.dropFirst().allSatisfy(\.isEmpty), let x = inputs.first ?? nil,
              let xRef = ref(g.inputs[0]), x.rank == 3 || x.rank == 4, let kernel = try node(g, inputs).ints("kernel_shape") else { return nil }
        let n = node(g, inputs)
        let ceilMode = try n.int("ceil_mode", default: 0) != 0
        let window = try Window(n, input: Array(x.shape[2...]), kernel: kernel, pooling: true, ceilMode: ceilMode)
        let includePad = try n.int("count_include_pad", default: 0) != 0
        let field = ReceptiveField(spatial: Array(x.shape[2...]), kernel: kernel, window)
        let (height, width, kh, kw, oh, ow) = (field.height, field.width, field.kh, field.kw, field.oh, field.ow)
        let planes = x.shape[0] * x.shape[1]
        guard oh * ow > 0, planes * oh * ow == outputs[0].count, x.count < Int(Int32.max) else { return nil }
        // One plane's windows; every plane is the same at another offset.
        var starts: [Int32] = [0], members: [Int32] = [], divisors: [Float] = []
        for oy in 0..<oh {
            for ox in 0..<ow {
                var padded = 0
                for i in 0..<kh {
                    for j in 0..<kw where field.withinPadding(oy, ox, i, j) {
                        padded += 1
                        if let p = field.position(oy, ox, i, j) { members.append(Int32(p)) }
                    }
                }
                let valid = members.count - Int(starts[starts.count - 1])
                starts.append(Int32(members.count))
                divisors.append(Float(includePad ? padded : valid))
            }
        }
        let y = allocate(outputs[0].count)
        refs[g.outputs[0]] = y
        steps.append(PoolStep(max: g.op == .maxPool, x: xRef, y: y, planes: planes, plane: height * width, starts: starts,
                                    members: members, divisors: divisors))
        return "pooling"
    }
}
