extension Builder {
    /// LSTM forward, layout 0, default activations, no clip or peepholes, full sequences.
    mutating func lstm(_ g: GraphNode, _ inputs: [GraphTensor?], _ outputs: [GraphTensor]) throws(GraphError) -> String? {
        guard inputs.count >= 3, let x = inputs[0], let w = inputs[1], let r = inputs[2], let xRef = ref(g.inputs[0]),
              fixed.contains(g.inputs[1]), fixed.contains(g.inputs[2]), x.rank == 3, r.rank == 3 else { return nil }
        let n = node(g, inputs)
        guard try n.string("direction", default: "forward") == "forward", try n.int("layout", default: 0) == 0,
              try n.float("clip") == nil, try n.int("input_forget", default: 0) == 0 else { return nil }
        if let names = try n.strings("activations"), names.map({ $0.lowercased() }) != ["sigmoid", "tanh", "tanh"] { return nil }
        func given(_ i: Int) -> Bool { i < inputs.count && inputs[i] != nil }
        guard !given(4), !given(7) else { return nil }
        if given(3), !fixed.contains(g.inputs[3]) { return nil }
        let (steps, batch, inputSize, hidden) = (x.shape[0], x.shape[1], x.shape[2], r.shape[2])
        guard w.shape == [1, 4 * hidden, inputSize], r.shape == [1, 4 * hidden, hidden], hidden > 0 else { return nil }
        let b = given(3) ? inputs[3]!.floats : [Float](repeating: 0, count: 8 * hidden)
        // Rows in the cell kernel's order i, f, g, o; ONNX's is i, o, f, c.
        let onnxGate = [0, 2, 3, 1]
        var input = [Float](repeating: 0, count: 4 * hidden * inputSize)
        var recurrent = [Float](repeating: 0, count: 4 * hidden * hidden)
        var bias = [Float](repeating: 0, count: 4 * hidden)
        for q in 0..<4 {
            for j in 0..<hidden {
                let row = onnxGate[q] * hidden + j, dst = q * hidden + j
                for i in 0..<inputSize { input[dst * inputSize + i] = w.floats[row * inputSize + i] }
                for i in 0..<hidden { recurrent[dst * hidden + i] = r.floats[row * hidden + i] }
                bias[dst] = b[row] + b[4 * hidden + row]
            }
        }
        var h0: Ref?, c0: Ref?
        if given(5) { guard let ref = ref(g.inputs[5]) else { return nil }; h0 = ref }
        if given(6) { guard let ref = ref(g.inputs[6]) else { return nil }; c0 = ref }
        let precision = self.precision(of: g)
        // The input products of every step and batch row, [steps][batch][4 * hidden].
        let products = allocate(steps * batch * 4 * hidden)
        self.steps.append(DenseStep(x: xRef, y: products, rows: steps * batch, packed: PackedMatrix(input, rows: 4 * hidden, k: inputSize, precision: precision),
                                    bias: bias))
        var outs: [Ref?] = []
        for (j, name) in g.outputs.enumerated() {
            guard !name.isEmpty else { outs.append(nil); continue }
            let ref = allocate(outputs[j].count)
            refs[name] = ref
            outs.append(ref)
        }
        while outs.count < 3 { outs.append(nil) }
        let step = LSTMStep(inputProducts: products, h0: h0, c0: c0, y: outs[0], yh: outs[1], yc: outs[2], steps: steps, batch: batch,
                            hidden: hidden, recurrent: PackedMatrix(recurrent, rows: 4 * hidden, k: hidden, precision: precision))
        scratchSize = max(scratchSize, batch * (4 * hidden + 2 * hidden))
        self.steps.append(step)
        return described("LSTM cell", precision)
    }
}
