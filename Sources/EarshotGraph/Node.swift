/// One call of an op: its name, inputs and attributes, with the checks every kernel makes.
/// Every error it makes names the node and the op.
struct Node {
    let name: String
    let op: GraphOp
    let opset: Int
    let inputs: [GraphTensor?]
    let attributes: [String: GraphAttribute]
    /// How many outputs the node has, when the caller said.
    let outputCount: Int?

    func error(_ reason: String) -> GraphError { .op(node: name, op: op.rawValue, reason: reason) }
    func unsupported(_ reason: String) -> GraphError { .unsupported(node: name, op: op.rawValue, reason: reason) }

    // MARK: Inputs and attributes the op takes

    /// Checks the inputs against the op's input list (`required` of them must be present; an
    /// omitted optional input is nil) and that every attribute is one the op knows.
    func expect(inputs names: [String], required: Int, attributes known: Set<String>) throws(GraphError) {
        if let extra = inputs.indices.last(where: { $0 >= names.count && inputs[$0] != nil }) {
            throw error("has \(extra + 1) inputs; \(op) takes at most \(names.count) (\(names.joined(separator: ", ")))")
        }
        for i in 0..<required where i >= inputs.count || inputs[i] == nil {
            throw error("input \(i) '\(names[i])' is missing; \(op) needs \(required) (\(names.prefix(required).joined(separator: ", ")))")
        }
        try expect(attributes: known)
    }

    /// Checks a variadic op's inputs: at least `minimum`, none omitted.
    func expectVariadic(minimum: Int, attributes known: Set<String>) throws(GraphError) {
        guard inputs.count >= minimum else {
            throw error("has \(inputs.count) inputs; \(op) needs at least \(minimum)")
        }
        if let missing = inputs.firstIndex(where: { $0 == nil }) {
            throw error("input \(missing) is missing; every input of \(op) is required")
        }
        try expect(attributes: known)
    }

    private func expect(attributes known: Set<String>) throws(GraphError) {
        if let unknown = attributes.keys.sorted().first(where: { !known.contains($0) }) {
            let list = known.isEmpty ? "none" : known.sorted().joined(separator: ", ")
            throw error("unknown attribute '\(unknown)' at opset \(opset) (\(op) takes: \(list))")
        }
    }

    /// A required input.
    func input(_ index: Int, _ name: String) throws(GraphError) -> GraphTensor {
        guard index < inputs.count, let tensor = inputs[index] else {
            throw error("input \(index) '\(name)' is missing")
        }
        return tensor
    }

    /// A required input of one of the given types.
    func input(_ index: Int, _ name: String, _ types: Set<GraphDType>) throws(GraphError) -> GraphTensor {
        let tensor = try input(index, name)
        try check(tensor, name, types)
        return tensor
    }

    /// An optional input (nil when omitted), of one of the given types.
    func optionalInput(_ index: Int, _ name: String, _ types: Set<GraphDType>) throws(GraphError) -> GraphTensor? {
        guard index < inputs.count, let tensor = inputs[index] else { return nil }
        try check(tensor, name, types)
        return tensor
    }

    func check(_ tensor: GraphTensor, _ name: String, _ types: Set<GraphDType>) throws(GraphError) {
        guard types.contains(tensor.dtype) else {
            let allowed = types.map(\.rawValue).sorted().joined(separator: " or ")
            throw error("input '\(name)' is \(tensor.dtype.rawValue); expected \(allowed)")
        }
    }

    /// The values of a 1-D int64 input (a list of axes, sizes, pads, ...); a scalar counts as one value.
    func integerList(_ tensor: GraphTensor, _ name: String) throws(GraphError) -> [Int] {
        try check(tensor, name, [.int64])
        guard tensor.rank <= 1 else { throw error("input '\(name)' must be 1-D; its shape is \(tensor.shape)") }
        return try tensor.integers.map { (value: Int64) throws(GraphError) -> Int in try integer(value, name) }
    }

    /// The one value of a scalar (or one-value) input.
    func scalarInput(_ tensor: GraphTensor, _ name: String) throws(GraphError) -> GraphTensor {
        guard tensor.count == 1, tensor.rank <= 1 else {
            throw error("input '\(name)' must be a scalar; its shape is \(tensor.shape)")
        }
        return tensor
    }

    func integer(_ value: Int64, _ what: String) throws(GraphError) -> Int {
        guard let int = Int(exactly: value) else { throw error("\(what): \(value) is out of range") }
        return int
    }

    func attribute(_ name: String) -> GraphAttribute? { attributes[name] }

    private func kindError(_ name: String, _ expected: String, _ found: GraphAttribute) -> GraphError {
        error("attribute '\(name)' is \(found.kind); expected \(expected)")
    }

    func int(_ name: String) throws(GraphError) -> Int? {
        guard let a = attributes[name] else { return nil }
        guard case let .int(value) = a else { throw kindError(name, "int", a) }
        return try integer(value, "attribute '\(name)'")
    }

    func int(_ name: String, default value: Int) throws(GraphError) -> Int { try int(name) ?? value }

    func float(_ name: String) throws(GraphError) -> Float? {
        guard let a = attributes[name] else { return nil }
        guard case let .float(value) = a else { throw kindError(name, "float", a) }
        return value
    }

    func float(_ name: String, default value: Float) throws(GraphError) -> Float { try float(name) ?? value }

    func string(_ name: String, default value: String) throws(GraphError) -> String {
        guard let a = attributes[name] else { return value }
        guard case let .string(text) = a else { throw kindError(name, "string", a) }
        return text
    }

    func ints(_ name: String) throws(GraphError) -> [Int]? {
        guard let a = attributes[name] else { return nil }
        guard case let .ints(values) = a else { throw kindError(name, "ints", a) }
        return try values.map { (value: Int64) throws(GraphError) -> Int in try integer(value, "attribute '\(name)'") }
    }

    func floats(_ name: String) throws(GraphError) -> [Float]? {
        guard let a = attributes[name] else { return nil }
        guard case let .floats(values) = a else { throw kindError(name, "floats", a) }
        return values
    }

    func strings(_ name: String) throws(GraphError) -> [String]? {
        guard let a = attributes[name] else { return nil }
        guard case let .strings(values) = a else { throw kindError(name, "strings", a) }
        return values
    }

    func tensor(_ name: String) throws(GraphError) -> GraphTensor? {
        guard let a = attributes[name] else { return nil }
        guard case let .tensor(value) = a else { throw kindError(name, "tensor", a) }
        return value
    }

    // MARK: Shapes and axes

    /// An axis in -rank..<rank, made non-negative.
    func axis(_ axis: Int, rank: Int, _ what: String) throws(GraphError) -> Int {
        guard axis >= -rank, axis < rank else {
            throw error("\(what) \(axis) is out of range for rank \(rank) (\(-rank)...\(rank - 1))")
        }
        return axis < 0 ? axis + rank : axis
    }

    /// Axes made non-negative, none twice.
    func axes(_ axes: [Int], rank: Int, _ what: String) throws(GraphError) -> [Int] {
        var seen = Set<Int>()
        var result: [Int] = []
        for a in axes {
            let normal = try axis(a, rank: rank, what)
            guard seen.insert(normal).inserted else { throw error("\(what) \(a) appears twice in \(axes)") }
            result.append(normal)
        }
        return result
    }

    /// The number of values of a shape this op makes, within the kernels' limit (see `boundedCount`).
    func count(_ shape: [Int], _ what: String) throws(GraphError) -> Int {
        guard !shape.contains(where: { $0 < 0 }) else { throw error("\(what) \(shape) has a negative dimension") }
        guard let count = boundedCount(shape) else {
            throw error("\(what) \(shape) is too large: the kernels take at most \(GraphOps.maxElementCount) values (an empty axis counted as one)")
        }
        return count
    }

    /// The shape two shapes broadcast to (numpy rules).
    func broadcast(_ a: [Int], _ b: [Int], _ what: String) throws(GraphError) -> [Int] {
        guard let shape = broadcastShape(a, b) else { throw error("\(what): shapes \(a) and \(b) do not broadcast") }
        return shape
    }

    /// Checks one input tensor: dimensions, value count, bool values.
    func validate(_ tensor: GraphTensor, index: Int) throws(GraphError) {
        guard let expected = boundedCount(tensor.shape) else {
            throw error("input \(index) has an invalid shape \(tensor.shape) (negative, or more than \(GraphOps.maxElementCount) values, an empty axis counted as one)")
        }
        guard tensor.count == expected else {
            throw error("input \(index) (\(tensor.dtype.rawValue)\(tensor.shape)) holds \(tensor.count) values; its shape needs \(expected)")
        }
        if tensor.dtype == .bool, let bad = tensor.integers.first(where: { $0 != 0 && $0 != 1 }) {
            throw error("input \(index) is bool but holds \(bad)")
        }
    }
}
