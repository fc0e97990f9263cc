/// ONNX's messages (onnx.proto) read from the wire format. Each message is read in one pass
/// over its range of the file's bytes; unknown fields, and known fields with a wire type other
/// than their own, are skipped as protobuf does; when a singular field appears more than once
/// the last one wins. Locations for errors are made only when a failure unwinds.
struct ModelDecoder {
    let bytes: UnsafeRawBufferPointer
    /// The most nodes the model may have, in all its graphs: counted before any is decoded.
    var maxNodes = Int.max

    /// Graphs nest through node attributes (If, Loop and Scan bodies); the main graph is 1.
    static let maximumGraphDepth = 32

    // MARK: Model

    func model() throws(DecodeFailure) -> OnnxModel {
        var cursor = Cursor(bytes, 0..<bytes.count, .model)
        var irVersion: Int64 = 0
        var opsets: [OnnxOpset] = []
        var producerName = ""
        var producerVersion = ""
        var graphRange: Range<Int>?
        var metadata: [String: String] = [:]
        var entryIndex = 0
        while let (field, wire) = try cursor.next() {
            switch (field, wire) {
            case (1, 0): irVersion = Int64(bitPattern: try cursor.varint())
            case (2, 2): producerName = try cursor.string()
            case (3, 2): producerVersion = try cursor.string()
            case (7, 2): graphRange = try cursor.lengthDelimited()
            case (8, 2):
                let range = try cursor.lengthDelimited()
                let index = opsets.count
                opsets.append(try within({ "opset_import #\(index)" }) { () throws(DecodeFailure) in try opset(range) })
            case (14, 2):
                let range = try cursor.lengthDelimited()
                let index = entryIndex
                entryIndex += 1
                let (key, value) = try within({ "metadata_props #\(index)" }) { () throws(DecodeFailure) -> (String, String) in try entry(range) }
                metadata[key] = value
            default: try cursor.skip(wire)
            }
        }
        guard let graphRange else { throw .malformed("the model has no graph (ModelProto.graph, field 7)") }
        if maxNodes < Int.max {
            let count = nodeCount(graphRange, depth: 1)
            guard count <= maxNodes else { throw DecodeFailure(.tooManyNodes(count: count, limit: maxNodes)) }
        }
        let main = try within({ graphLabel(graphRange) }) { () throws(DecodeFailure) in try graph(graphRange, depth: 1) }
        return OnnxModel(irVersion: irVersion, opsetImports: opsets, producerName: producerName,
                         producerVersion: producerVersion, graph: main, metadata: metadata)
    }

    private func opset(_ range: Range<Int>) throws(DecodeFailure) -> OnnxOpset {
        var cursor = Cursor(bytes, range, .opset)
        var domain = ""
        var version: Int64 = 0
        while let (field, wire) = try cursor.next() {
            switch (field, wire) {
            case (1, 2): domain = try cursor.string()
            case (2, 0): version = Int64(bitPattern: try cursor.varint())
            default: try cursor.skip(wire)
            }
        }
        return OnnxOpset(domain: domain, version: version)
    }

    private func entry(_ range: Range<Int>) throws(DecodeFailure) -> (String, String) {
        var cursor = Cursor(bytes, range, .entry)
        var key = ""
        var value = ""
        while let (field, wire) = try cursor.next() {
            switch (field, wire) {
            case (1, 2): key = try cursor.string()
            case (2, 2): value = try cursor.string()
            default: try cursor.skip(wire)
            }
        }
        return (key, value)
    }

    // MARK: Graph

    func graph(_ range: Range<Int>, depth: Int) throws(DecodeFailure) -> OnnxGraph {
        guard depth <= Self.maximumGraphDepth else {
            throw DecodeFailure(.limit(what: "the nesting of graphs in node attributes (If, Loop and Scan bodies)",
                                       limit: Self.maximumGraphDepth))
        }
        var cursor = Cursor(bytes, range, .graph)
        var name = ""
        var nodes: [OnnxNode] = []
        var initializers: [OnnxTensor] = []
        var inputs: [OnnxValueInfo] = []
        var outputs: [OnnxValueInfo] = []
        var valueInfo: [OnnxValueInfo] = []
        while let (field, wire) = try cursor.next() {
            switch (field, wire) {
            case (1, 2):
                let range = try cursor.lengthDelimited()
                let index = nodes.count
                nodes.append(try within({ nodeLabel(range, index: index) }) { () throws(DecodeFailure) in
                    try node(range, depth: depth)
                })
            case (2, 2): name = try cursor.string()
            case (5, 2):
                let range = try cursor.lengthDelimited()
                let index = initializers.count
                initializers.append(try within({ namedLabel("initializer", range, .tensor, nameField: 8, index: index) }) {
                    () throws(DecodeFailure) in try tensor(range)
                })
            case (11, 2), (12, 2), (13, 2):
                let range = try cursor.lengthDelimited()
                let role = field == 11 ? "input" : field == 12 ? "output" : "value_info"
                let index = field == 11 ? inputs.count : field == 12 ? outputs.count : valueInfo.count
                let info = try within({ namedLabel(role, range, .valueInfo, nameField: 1, index: index) }) {
                    () throws(DecodeFailure) in try self.valueInfo(range)
                }
                if field == 11 { inputs.append(info) } else if field == 12 { outputs.append(info) } else { valueInfo.append(info) }
            case (15, 2):
                throw .init(.unsupported("a sparse initializer (GraphProto.sparse_initializer, field 15)"))
            default: try cursor.skip(wire)
            }
        }
        return OnnxGraph(name: name, nodes: nodes, initializers: initializers, inputs: inputs, outputs: outputs, valueInfo: valueInfo)
    }

    /// The nodes of the graph at `range` and of the graphs nested in their attributes, counted
    /// without decoding them (the count stops at damage, which decoding then reports).
    func nodeCount(_ range: Range<Int>, depth: Int) -> Int {
        guard depth <= Self.maximumGraphDepth else { return 0 }
        var count = 0
        var graph = Cursor(bytes, range, .graph)
        do throws(DecodeFailure) {
            while let (field, wire) = try graph.next() {
                guard field == 1, wire == 2 else { try graph.skip(wire); continue }
                count += 1
                var node = Cursor(bytes, try graph.lengthDelimited(), .node)
                while let (field, wire) = try node.next() {
                    guard field == 5, wire == 2 else { try node.skip(wire); continue }
                    var attribute = Cursor(bytes, try node.lengthDelimited(), .attribute)
                    while let (field, wire) = try attribute.next() {
                        if field == 6 || field == 11, wire == 2 {
                            count += nodeCount(try attribute.lengthDelimited(), depth: depth + 1)
                        } else {
                            try attribute.skip(wire)
                        }
                    }
                }
            }
        } catch {
            // Damage ends the count; the decoding that follows names it.
        }
        return count
    }

    // MARK: Node and attributes

    private func node(_ range: Range<Int>, depth: Int) throws(DecodeFailure) -> OnnxNode {
        var cursor = Cursor(bytes, range, .node)
        var name = ""
        var opType = ""
        var domain = ""
        var inputs: [String] = []
        var outputs: [String] = []
        var attributes: [String: OnnxAttribute] = [:]
        var attributeIndex = 0
        while let (field, wire) = try cursor.next() {
            switch (field, wire) {
            case (1, 2): inputs.append(try cursor.string())
            case (2, 2): outputs.append(try cursor.string())
            case (3, 2): name = try cursor.string()
            case (4, 2): opType = try cursor.string()
            case (7, 2): domain = try cursor.string()
            case (5, 2):
                let range = try cursor.lengthDelimited()
                let index = attributeIndex
                attributeIndex += 1
                let (attributeName, value) = try within({ namedLabel("attribute", range, .attribute, nameField: 1, index: index) }) {
                    () throws(DecodeFailure) -> (String, OnnxAttribute) in try attribute(range, depth: depth)
                }
                guard attributes.updateValue(value, forKey: attributeName) == nil else {
                    throw .malformed("attribute \(quoted(attributeName)) appears twice")
                }
            default: try cursor.skip(wire)
            }
        }
        return OnnxNode(name: name, opType: opType, domain: domain, inputs: inputs, outputs: outputs, attributes: attributes)
    }

    /// AttributeProto.type values.
    private enum AttributeType: Int32 {
        case undefined = 0, float, int, string, tensor, graph, floats, ints, strings, tensors, graphs
        case sparseTensor, sparseTensors, typeProto, typeProtos
    }

    private func attribute(_ range: Range<Int>, depth: Int) throws(DecodeFailure) -> (String, OnnxAttribute) {
        var cursor = Cursor(bytes, range, .attribute)
        var name = ""
        var declared: Int32 = 0
        var f: Float?
        var i: Int64?
        var s: Range<Int>?
        var t: Range<Int>?
        var g: Range<Int>?
        var floats: [Float] = []
        var ints: [Int64] = []
        var strings: [Range<Int>] = []
        var tensors: [Range<Int>] = []
        var graphs: [Range<Int>] = []
        var hasFloats = false, hasInts = false, hasSparse = false, hasTypes = false
        while let (field, wire) = try cursor.next() {
            switch (field, wire) {
            case (1, 2): name = try cursor.string()
            case (20, 0): declared = Int32(truncatingIfNeeded: try cursor.varint())
            case (2, 5): f = Float(bitPattern: try cursor.fixed32())
            case (3, 0): i = Int64(bitPattern: try cursor.varint())
            case (4, 2): s = try cursor.lengthDelimited()
            case (5, 2): t = try cursor.lengthDelimited()
            case (6, 2): g = try cursor.lengthDelimited()
            case (7, 5):
                hasFloats = true
                floats.append(Float(bitPattern: try cursor.fixed32()))
            case (7, 2):
                hasFloats = true
                let range = try cursor.lengthDelimited()
                guard range.count % 4 == 0 else { throw .malformed("packed floats (field 7) of \(range.count) bytes, not a multiple of 4") }
                floats.reserveCapacity(floats.count + range.count / 4)
                var packed = cursor.packed(range)
                while !packed.atEnd { floats.append(Float(bitPattern: try packed.fixed32())) }
            case (8, 0):
                hasInts = true
                ints.append(Int64(bitPattern: try cursor.varint()))
            case (8, 2):
                hasInts = true
                var packed = cursor.packed(try cursor.lengthDelimited())
                ints.reserveCapacity(ints.count + (try packed.countVarints()))
                while !packed.atEnd { ints.append(Int64(bitPattern: try packed.varint())) }
            case (9, 2): strings.append(try cursor.lengthDelimited())
            case (10, 2): tensors.append(try cursor.lengthDelimited())
            case (11, 2): graphs.append(try cursor.lengthDelimited())
            case (22, 2), (23, 2):
                hasSparse = true
                try cursor.skip(wire)
            case (14, 2), (15, 2):
                hasTypes = true
                try cursor.skip(wire)
            default: try cursor.skip(wire)
            }
        }

        var type = AttributeType(rawValue: declared)
        guard type != nil else { throw .malformed("unknown attribute type \(declared)") }
        if type == .undefined {
            // No declared type (older writers): the one value field that is set decides.
            let candidates: [(AttributeType, String, Bool)] = [
                (.float, "f", f != nil), (.int, "i", i != nil), (.string, "s", s != nil), (.tensor, "t", t != nil),
                (.graph, "g", g != nil), (.floats, "floats", hasFloats), (.ints, "ints", hasInts),
                (.strings, "strings", !strings.isEmpty), (.tensors, "tensors", !tensors.isEmpty),
                (.graphs, "graphs", !graphs.isEmpty), (.sparseTensor, "sparse_tensor", hasSparse), (.typeProto, "tp", hasTypes),
            ]
            let present = candidates.filter { $0.2 }
            guard present.count == 1 else {
                throw .malformed(present.isEmpty ? "the attribute has neither a type nor a value"
                                 : "the attribute has no type and sets several values: \(present.map(\.1).joined(separator: ", "))")
            }
            type = present[0].0
        }

        let value: OnnxAttribute
        switch type {
        case .float: value = .float(f ?? 0)
        case .int: value = .int(i ?? 0)
        case .string: value = .string(s.map { decodeString(bytes, $0) } ?? "")
        case .tensor:
            guard let t else { throw .malformed("type TENSOR without a tensor (field 5)") }
            value = .tensor(try within({ namedLabel("tensor", t, .tensor, nameField: 8, index: nil) }) {
                () throws(DecodeFailure) in try tensor(t)
            })
        case .graph:
            guard let g else { throw .malformed("type GRAPH without a graph (field 6)") }
            value = .graph(try within({ graphLabel(g) }) { () throws(DecodeFailure) in try graph(g, depth: depth + 1) })
        case .floats: value = .floats(floats)
        case .ints: value = .ints(ints)
        case .strings: value = .strings(strings.map { decodeString(bytes, $0) })
        case .tensors:
            var values: [OnnxTensor] = []
            values.reserveCapacity(tensors.count)
            for (index, range) in tensors.enumerated() {
                values.append(try within({ namedLabel("tensor", range, .tensor, nameField: 8, index: index) }) {
                    () throws(DecodeFailure) in try tensor(range)
                })
            }
            value = .tensors(values)
        case .graphs:
            var values: [OnnxGraph] = []
            values.reserveCapacity(graphs.count)
            for (index, range) in graphs.enumerated() {
                values.append(try within({ graphLabel(range, index: index) }) { () throws(DecodeFailure) in
                    try graph(range, depth: depth + 1)
                })
            }
            value = .graphs(values)
        case .sparseTensor, .sparseTensors: throw .init(.unsupported("a sparse tensor attribute"))
        case .typeProto, .typeProtos: throw .init(.unsupported("a type attribute (TYPE_PROTO)"))
        case .undefined, nil: throw .malformed("unknown attribute type \(declared)")
        }
        return (name, value)
    }

    // MARK: Value info

    private func valueInfo(_ range: Range<Int>) throws(DecodeFailure) -> OnnxValueInfo {
        var cursor = Cursor(bytes, range, .valueInfo)
        var name = ""
        var typeRange: Range<Int>?
        while let (field, wire) = try cursor.next() {
            switch (field, wire) {
            case (1, 2): name = try cursor.string()
            case (2, 2): typeRange = try cursor.lengthDelimited()
            default: try cursor.skip(wire)
            }
        }
        guard let typeRange else { return OnnxValueInfo(name: name, elementType: nil, shape: nil) }
        let (elementType, shape) = try within({ "type" }) {
            () throws(DecodeFailure) -> (OnnxDataType?, [OnnxDimension]?) in try type(typeRange)
        }
        return OnnxValueInfo(name: name, elementType: elementType, shape: shape)
    }

    /// A TypeProto: the element type and shape of a tensor type; nil for the other kinds
    /// (sequence, map, optional, sparse tensor, opaque), whose contents are skipped.
    private func type(_ range: Range<Int>) throws(DecodeFailure) -> (OnnxDataType?, [OnnxDimension]?) {
        var cursor = Cursor(bytes, range, .type)
        var tensorType: Range<Int>?
        while let (field, wire) = try cursor.next() {
            switch (field, wire) {
            case (1, 2): tensorType = try cursor.lengthDelimited()
            case (4, 2), (5, 2), (7, 2), (8, 2), (9, 2):  // value is a oneof: the last one set wins
                tensorType = nil
                try cursor.skip(wire)
            default: try cursor.skip(wire)
            }
        }
        guard let tensorType else { return (nil, nil) }
        var tensorCursor = Cursor(bytes, tensorType, .tensorType)
        var elementNumber: Int32 = 0
        var shapeRange: Range<Int>?
        while let (field, wire) = try tensorCursor.next() {
            switch (field, wire) {
            case (1, 0): elementNumber = Int32(truncatingIfNeeded: try tensorCursor.varint())
            case (2, 2): shapeRange = try tensorCursor.lengthDelimited()
            default: try tensorCursor.skip(wire)
            }
        }
        var elementType: OnnxDataType?
        if elementNumber != 0 {
            guard let known = OnnxDataType(rawValue: Int(elementNumber)) else {
                throw DecodeFailure(.unsupportedDataType(Int(elementNumber)))
            }
            elementType = known
        }
        guard let shapeRange else { return (elementType, nil) }
        var shapeCursor = Cursor(bytes, shapeRange, .shape)
        var shape: [OnnxDimension] = []
        while let (field, wire) = try shapeCursor.next() {
            if field == 1, wire == 2 {
                let range = try shapeCursor.lengthDelimited()
                let index = shape.count
                shape.append(try within({ "dim #\(index)" }) { () throws(DecodeFailure) in try dimension(range) })
            } else {
                try shapeCursor.skip(wire)
            }
        }
        return (elementType, shape)
    }

    private func dimension(_ range: Range<Int>) throws(DecodeFailure) -> OnnxDimension {
        var cursor = Cursor(bytes, range, .dimension)
        var dimension = OnnxDimension.unknown
        while let (field, wire) = try cursor.next() {
            switch (field, wire) {
            case (1, 0):  // value is a oneof: the last one set wins
                let value = Int64(bitPattern: try cursor.varint())
                dimension = value >= 0 ? Int(exactly: value).map(OnnxDimension.value) ?? .unknown : .unknown
            case (2, 2):
                let param = try cursor.string()
                dimension = param.isEmpty ? .unknown : .param(param)
            default: try cursor.skip(wire)
            }
        }
        return dimension
    }

    // MARK: Labels for errors (made only when a failure unwinds)

    /// The last value of a string field of the message at `range`, read past any damage after it.
    func peekString(_ range: Range<Int>, _ kind: MessageKind, field: Int) -> String? {
        var cursor = Cursor(bytes, range, kind)
        var found: String?
        do throws(DecodeFailure) {
            while let (number, wire) = try cursor.next() {
                if number == field, wire == 2 { found = try cursor.string() } else { try cursor.skip(wire) }
            }
        } catch {
            // The damage is reported by the failure being labelled; the name found before it serves.
        }
        return found
    }

    func graphLabel(_ range: Range<Int>, index: Int? = nil) -> String {
        let name = peekString(range, .graph, field: 2) ?? ""
        let base = index.map { "graph #\($0)" } ?? "graph"
        return name.isEmpty ? base : "\(base) \(quoted(name))"
    }

    func nodeLabel(_ range: Range<Int>, index: Int) -> String {
        let name = peekString(range, .node, field: 3) ?? ""
        let opType = peekString(range, .node, field: 4) ?? ""
        let base = name.isEmpty ? "node #\(index)" : "node \(quoted(name))"
        return opType.isEmpty ? base : "\(base) (\(opType.count > 80 ? String(opType.prefix(80)) + "…" : opType))"
    }

    func namedLabel(_ role: String, _ range: Range<Int>, _ kind: MessageKind, nameField: Int, index: Int?) -> String {
        let name = peekString(range, kind, field: nameField) ?? ""
        if !name.isEmpty { return "\(role) \(quoted(name))" }
        return index.map { "\(role) #\($0)" } ?? role
    }
}
