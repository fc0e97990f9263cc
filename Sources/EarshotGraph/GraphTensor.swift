/// The element types a graph's tensors hold.
public enum GraphDType: String, Sendable, Codable {
    case float32
    case int64
    case bool
}

/// An N-D tensor, row-major (the last axis varies fastest). A float32 tensor keeps its values
/// in `floats`; an int64 or bool tensor keeps them in `integers` (a bool as 0 or 1). A scalar
/// has the shape [] and one value.
///
/// A tensor is a plain value: the initializers do not check it. `GraphOps.run` checks every
/// input it gets (dimensions not negative, as many values as the shape holds, bools 0 or 1)
/// and answers a `GraphError` naming the input when one is malformed.
public struct GraphTensor: Sendable, Equatable {
    /// Its element type.
    public var dtype: GraphDType
    /// Its shape.
    public var shape: [Int]
    /// The values of a float32 tensor (empty for the other types).
    public var floats: [Float]
    /// The values of an int64 tensor, or of a bool tensor as 0 and 1 (empty for float32).
    public var integers: [Int64]

    /// A float32 tensor.
    public init(shape: [Int], floats: [Float]) {
        self.init(dtype: .float32, shape: shape, floats: floats, integers: [])
    }

    /// An int64 tensor, or a bool tensor (`dtype: .bool`, values 0 and 1). A `dtype` of
    /// `.float32` is taken as `.int64`: integers are never float values.
    public init(shape: [Int], integers: [Int64], dtype: GraphDType = .int64) {
        self.init(dtype: dtype == .float32 ? .int64 : dtype, shape: shape, floats: [], integers: integers)
    }

    /// A bool tensor.
    public init(shape: [Int], bools: [Bool]) {
        self.init(dtype: .bool, shape: shape, floats: [], integers: bools.map { $0 ? 1 : 0 })
    }

    /// A float32 scalar.
    public init(scalar: Float) { self.init(shape: [], floats: [scalar]) }

    /// An int64 scalar.
    public init(scalar: Int64) { self.init(shape: [], integers: [scalar]) }

    /// A bool scalar.
    public init(scalar: Bool) { self.init(shape: [], bools: [scalar]) }

    init(dtype: GraphDType, shape: [Int], floats: [Float], integers: [Int64]) {
        self.dtype = dtype
        self.shape = shape
        self.floats = floats
        self.integers = integers
    }

    /// The number of values the tensor stores.
    public var count: Int { dtype == .float32 ? floats.count : integers.count }

    /// Dimensions.
    public var rank: Int { shape.count }

    /// The values of a bool tensor (or of an int64 tensor, as value != 0).
    public var bools: [Bool] { integers.map { $0 != 0 } }

    /// The only value of a one-value float32 tensor (of any rank), else nil.
    public var scalarFloat: Float? { dtype == .float32 && floats.count == 1 ? floats[0] : nil }

    /// The only value of a one-value int64 or bool tensor (of any rank), else nil.
    public var scalarInteger: Int64? { dtype != .float32 && integers.count == 1 ? integers[0] : nil }
}

extension GraphTensor: CustomStringConvertible {
    public var description: String {
        let values: String
        let shown = 8
        switch dtype {
        case .float32:
            values = floats.prefix(shown).map { "\($0)" }.joined(separator: ", ")
        case .int64:
            values = integers.prefix(shown).map { "\($0)" }.joined(separator: ", ")
        case .bool:
            values = integers.prefix(shown).map { $0 != 0 ? "true" : "false" }.joined(separator: ", ")
        }
        return "\(dtype.rawValue)\(shape) [\(values)\(count > shown ? ", ..." : "")]"
    }
}

/// A node attribute, as ONNX stores them.
public enum GraphAttribute: Sendable, Equatable {
    case int(Int64)
    case float(Float)
    case string(String)
    case ints([Int64])
    case floats([Float])
    case strings([String])
    case tensor(GraphTensor)

    /// The ONNX name of the attribute's kind, for messages.
    var kind: String {
        switch self {
        case .int: return "int"
        case .float: return "float"
        case .string: return "string"
        case .ints: return "ints"
        case .floats: return "floats"
        case .strings: return "strings"
        case .tensor: return "tensor"
        }
    }
}

/// Errors of the graph kernels. Each names the node and its op.
public enum GraphError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The node's inputs or attributes break the op's rules: a missing or extra input, a
    /// wrong type, shapes that do not fit, an axis out of range, an index out of range.
    case op(node: String, op: String, reason: String)
    /// Valid ONNX that these kernels do not run: an op they lack, an opset outside
    /// `GraphOps.supportedOpsets`, or an attribute value they do not implement.
    case unsupported(node: String, op: String, reason: String)

    /// The node that failed.
    public var node: String {
        switch self {
        case let .op(node, _, _), let .unsupported(node, _, _): return node
        }
    }

    /// Its op.
    public var op: String {
        switch self {
        case let .op(_, op, _), let .unsupported(_, op, _): return op
        }
    }

    /// Why.
    public var reason: String {
        switch self {
        case let .op(_, _, reason), let .unsupported(_, _, reason): return reason
        }
    }

    public var description: String {
        switch self {
        case let .op(node, op, reason): return "node '\(node)' (\(op)): \(reason)"
        case let .unsupported(node, op, reason): return "node '\(node)' (\(op)): not supported: \(reason)"
        }
    }
}
