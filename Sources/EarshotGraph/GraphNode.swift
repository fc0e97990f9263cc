/// One node of a graph: an op over named tensors ("" for an omitted input or output).
public struct GraphNode: Sendable, Equatable {
    /// The op.
    public let op: GraphOp
    /// The node's name.
    public let name: String
    /// Its input tensors.
    public let inputs: [String]
    /// Its output tensors.
    public let outputs: [String]
    /// Its attributes.
    public let attributes: [String: GraphAttribute]

    /// A node.
    public init(op: GraphOp, name: String, inputs: [String], outputs: [String], attributes: [String: GraphAttribute] = [:]) {
        self.op = op
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.attributes = attributes
    }

    /// A node whose op is named as a package names it (`GraphOp(named:node:)`: a name no kernel
    /// knows is refused).
    public init(op name: String, name node: String, inputs: [String], outputs: [String],
                attributes: [String: GraphAttribute] = [:]) throws(GraphError) {
        self.init(op: try GraphOp(named: name, node: node), name: node, inputs: inputs, outputs: outputs, attributes: attributes)
    }

    /// What a pass over a graph's nodes that keeps the values it computes may let go after each
    /// node: the tensors node i was the last to read and its outputs nothing reads (never those
    /// in `keep`). Dropping them holds only the tensors still to be read, not one per node.
    public static func releases(inputs: [[String]], outputs: [[String]], keeping keep: Set<String>) -> [[String]] {
        var last: [String: Int] = [:]
        for (i, names) in inputs.enumerated() { for name in names where !name.isEmpty { last[name] = i } }
        var after = [[String]](repeating: [], count: inputs.count)
        for (i, names) in outputs.enumerated() {
            for name in names where !name.isEmpty && last[name] == nil && !keep.contains(name) { after[i].append(name) }
        }
        for (name, i) in last where !keep.contains(name) { after[i].append(name) }
        return after
    }

    /// `releases(inputs:outputs:keeping:)` of these nodes.
    public static func releases(_ nodes: [GraphNode], keeping keep: Set<String>) -> [[String]] {
        releases(inputs: nodes.map(\.inputs), outputs: nodes.map(\.outputs), keeping: keep)
    }
}
