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
}
