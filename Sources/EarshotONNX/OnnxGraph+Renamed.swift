/// A graph with its own values renamed: what an importer needs to read a loop's body once per
/// iteration, each iteration's values under names of their own.
extension OnnxGraph {
    /// The names this graph defines: its inputs, its initializers and its nodes' outputs
    /// (not those of graphs nested in its nodes).
    public var definedNames: Set<String> {
        Set(inputs.map(\.name) + initializers.map(\.name) + nodes.flatMap(\.outputs)).subtracting([""])
    }

    /// The graph with every name in `names` (its inputs, initializers, node inputs and outputs,
    /// and the references of graphs nested in its nodes) given as `rename` says, and its nodes'
    /// names too; other names (values of the graphs around it) kept.
    public func renamed(_ names: Set<String>, _ rename: (String) -> String) -> OnnxGraph {
        func r(_ name: String) -> String { names.contains(name) ? rename(name) : name }
        func info(_ v: OnnxValueInfo) -> OnnxValueInfo { OnnxValueInfo(name: r(v.name), elementType: v.elementType, shape: v.shape) }
        func attribute(_ a: OnnxAttribute) -> OnnxAttribute {
            switch a {
            case let .graph(g): return .graph(g.renamed(names, rename))
            case let .graphs(gs): return .graphs(gs.map { $0.renamed(names, rename) })
            default: return a
            }
        }
        let nodes = nodes.map { n in
            OnnxNode(name: n.name.isEmpty ? n.name : rename(n.name), opType: n.opType, domain: n.domain, inputs: n.inputs.map(r),
                     outputs: n.outputs.map(r), attributes: n.attributes.mapValues(attribute))
        }
        let initializers = initializers.map { t in
            OnnxTensor(name: r(t.name), dataType: t.dataType, dims: t.dims, floats: t.floats, integers: t.integers, count: t.count)
        }
        return OnnxGraph(name: name, nodes: nodes, initializers: initializers, inputs: inputs.map(info), outputs: outputs.map(info),
                         valueInfo: valueInfo.map(info))
    }
}
