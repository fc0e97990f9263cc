/// One node of a graph: an ONNX op over named tensors ("" for an omitted input or output).
public struct GraphNode: Sendable, Equatable {
    /// The op.
    public let op: String
    /// The node's name.
    public let name: String
    /// Its input tensors.
    public let inputs: [String]
    /// Its output tensors.
    public let outputs: [String]
    /// Its attributes.
    public let attributes: [String: GraphAttribute]

    /// A node.
    public init(op: String, name: String, inputs: [String], outputs: [String], attributes: [String: GraphAttribute] = [:]) {
        self.op = op
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.attributes = attributes
    }
}
