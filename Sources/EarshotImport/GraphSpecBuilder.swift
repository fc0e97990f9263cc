import EarshotGraph
import EarshotModel

/// A graph being written: its nodes in order, its float constants (the package's weight
/// tensors) and its integer constants (kept in the manifest), each by name. Every importer and
/// the trainer's head export write their graphs through it: nodes, weights, reshapes and
/// slices, another graph joined in under a prefix, and the nodes an output needs.
public struct GraphSpecBuilder: Sendable {
    /// The nodes, in the order they were added.
    public var nodes: [GraphSpec.NodeSpec] = []
    /// Float constants by name (weights.safetensors).
    public var tensors: [String: Tensor] = [:]
    /// Integer constants by name (model.json).
    public var constants: [String: GraphSpec.IntegerConstant] = [:]
    /// Every name `unique` has given.
    private var usedNames = Set<String>()

    /// An empty graph.
    public init() {}

    /// `base`, or `base #2`, `base #3`, ...: a name `unique` has not given before ("tensor" for
    /// an empty base).
    public mutating func unique(_ base: String) -> String {
        var name = base.isEmpty ? "tensor" : base
        var k = 1
        while !usedNames.insert(name).inserted {
            k += 1
            name = "\(base) #\(k)"
        }
        return name
    }

    /// Adds a node.
    public mutating func node(_ op: String, _ name: String, _ inputs: [String], _ outputs: [String],
                              _ attributes: [String: GraphSpec.AttributeValue]? = nil) {
        nodes.append(.init(op: op, name: name, inputs: inputs, outputs: outputs, attributes: attributes))
    }

    /// A float constant named `name`; its name.
    @discardableResult
    public mutating func weight(_ name: String, shape: [Int], values: [Float]) -> String {
        tensors[name] = Tensor(shape: shape, values: values)
        return name
    }

    /// A float tensor's values as a constant named `name`; its name.
    @discardableResult
    public mutating func weight(_ name: String, _ t: GraphTensor) -> String { weight(name, shape: t.shape, values: t.floats) }

    /// A float tensor's values as a constant under a name `unique` makes of `base`; its name.
    public mutating func weight(unique base: String, _ t: GraphTensor) -> String { weight(unique(base), t) }

    /// An integer constant named `name` ("int64" or "bool"); its name.
    @discardableResult
    public mutating func integers(_ name: String, _ values: [Int64], shape: [Int], dtype: String = "int64") -> String {
        constants[name] = .init(shape: shape, values: values, dtype: dtype)
        return name
    }

    /// An integer constant under a name `unique` makes of `base`; its name.
    public mutating func integers(unique base: String, _ values: [Int64], shape: [Int]) -> String { integers(unique(base), values, shape: shape) }

    /// `x` reshaped to `shape`; the name of the result: `into` (its shape constant "`into` shape"),
    /// or "`x` `shape`" when nil.
    public mutating func reshape(_ x: String, _ shape: [Int], into y: String? = nil) -> String {
        let (out, name, s) = y.map { ($0, $0, "\($0) shape") } ?? ("\(x) \(shape)", "\(x) as \(shape)", "\(x) shape \(shape)")
        integers(s, shape.map(Int64.init), shape: [shape.count])
        node("Reshape", name, [x, s], [out])
        return out
    }

    /// Indices [from, to) of `x` along `axis`, as `y` (its constants "`y` starts", "ends", "axes").
    public mutating func slice(_ x: String, axis: Int, from: Int, to: Int, into y: String) {
        let s = integers("\(y) starts", [Int64(from)], shape: [1])
        let e = integers("\(y) ends", [Int64(to)], shape: [1])
        let a = integers("\(y) axes", [Int64(axis)], shape: [1])
        node("Slice", y, [x, s, e, a], [y])
    }

    /// Adds graph `g` with its tensors and constants, every name prefixed by `prefix`, its audio
    /// input read from `input` (reshaped to the audio input's shape: the caller's tensor may have
    /// another shape of the same size); the name of its score output.
    public mutating func append(_ g: GraphSpec, tensors t: [String: Tensor], prefix: String, input: String) -> String {
        let shaped = "\(input) for \(prefix)"
        func rename(_ name: String) -> String { name.isEmpty ? "" : (name == g.audioInput ? shaped : prefix + name) }
        for (k, v) in t { tensors[prefix + k] = v }
        for (k, v) in g.constants { constants[prefix + k] = v }
        integers("\(shaped) shape", g.audioShape.map(Int64.init), shape: [g.audioShape.count])
        node("Reshape", shaped, [input, "\(shaped) shape"], [shaped])
        for n in g.nodes {
            nodes.append(.init(op: n.op, name: prefix + n.name, inputs: n.inputs.map(rename), outputs: n.outputs.map(rename),
                               attributes: n.attributes))
        }
        return rename(g.scoreOutput)
    }

    /// Keeps only the nodes that `outputs` need, directly or through other nodes, in order.
    public mutating func prune(keeping outputs: [String]) {
        var needed = Set(outputs)
        var kept: [GraphSpec.NodeSpec] = []
        for node in nodes.reversed() where node.outputs.contains(where: { needed.contains($0) }) {
            kept.append(node)
            needed.formUnion(node.inputs.filter { !$0.isEmpty })
        }
        nodes = kept.reversed()
    }

    /// The graph: its nodes and integer constants, reading `audioInput` and giving `scoreOutput`.
    public func spec(opset: Int, audioInput: String, audioShape: [Int], scoreOutput: String, states: [GraphSpec.StateSpec]) -> GraphSpec {
        GraphSpec(opset: opset, audioInput: audioInput, audioShape: audioShape, scoreOutput: scoreOutput, states: states,
                  constants: constants, nodes: nodes)
    }
}
