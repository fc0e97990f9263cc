/// A node the plan runs on its reference kernel: its inputs as tensors, its outputs copied back.
struct ReferenceStep: Step {
    enum Source: Sendable {
        case constant(GraphTensor)
        case stream(GraphPlan.Ref, [Int])
    }

    let node: GraphNode
    var inputs: [Source?]
    var outputs: [GraphPlan.Ref?]
    let opset: Int

    func run(_ c: Context) throws(GraphError) {
        for b in 0..<c.streams {
            let values: [GraphTensor?] = inputs.map { source in
                switch source {
                case nil: return nil
                case let .constant(t)?: return t
                case let .stream(ref, shape)?:
                    return GraphTensor(shape: shape, floats: Array(UnsafeBufferPointer(start: c.read(ref, b), count: ref.count)))
                }
            }
            let outs = try GraphOps.run(node.op, node: node.name, inputs: values, attributes: node.attributes, opset: opset,
                                        outputCount: node.outputs.count)
            for (ref, value) in zip(outputs, outs) {
                guard let ref, ref.count > 0 else { continue }
                guard value.floats.count == ref.count else {
                    throw .op(node: node.name, op: node.op.rawValue, reason: "gave \(value.floats.count) values where the plan holds \(ref.count)")
                }
                value.floats.withUnsafeBufferPointer { c.write(ref, b).update(from: $0.baseAddress!, count: ref.count) }
            }
        }
    }
}

extension ReferenceStep {
    var writes: [GraphPlan.Ref] { outputs.compactMap { $0 } }
    var reads: [GraphPlan.Ref] {
        inputs.compactMap { source in
            if case let .stream(ref, _)? = source { return ref }
            return nil
        }
    }
}

extension ReferenceStep {
    func relocated(_ move: (GraphPlan.Ref) -> GraphPlan.Ref) -> (any Step)? {
        var moved = self
        moved.inputs = inputs.map { source in
            if case let .stream(ref, shape)? = source { return .stream(move(ref), shape) }
            return source
        }
        moved.outputs = outputs.map { $0.map(move) }
        return moved
    }
}
