import Foundation

/// An ONNX model file read into values: the model's header, its main graph, and every graph
/// nested in it (If, Loop and Scan bodies), with the initializers' values decoded.
///
/// Only what a runtime needs is kept: names, op types, domains, attributes, initializers, and
/// the element types and shapes of the graph's values. Documentation strings, training
/// information, model-local functions and other fields are skipped.
public struct OnnxModel: Sendable, Equatable {
    /// The IR version the file was written for (ModelProto.ir_version).
    public let irVersion: Int64
    /// The operator sets the graph uses, in file order.
    public let opsetImports: [OnnxOpset]
    /// The tool that wrote the file.
    public let producerName: String
    /// Its version.
    public let producerVersion: String
    /// The main graph.
    public let graph: OnnxGraph
    /// The model's metadata_props (when a key appears twice, the last value wins).
    public let metadata: [String: String]

    /// Reads the ONNX model at `path` (the file is memory-mapped while it is decoded); a model of
    /// more than `maxNodes` nodes (those of nested graphs counted) is refused before any is decoded.
    public static func read(path: String, maxNodes: Int = .max) throws(OnnxError) -> OnnxModel {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { throw .fileNotFound(path: path) }
        guard !isFolder.boolValue else { throw .cannotRead(path: path, reason: "it is a folder") }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
        } catch {
            throw .cannotRead(path: path, reason: error.localizedDescription)
        }
        return try OnnxModel(bytes: data, name: path, maxNodes: maxNodes)
    }

    /// Decodes a model from its serialized bytes; `name` stands for the file in errors.
    public init(bytes: [UInt8], name: String, maxNodes: Int = .max) throws(OnnxError) {
        let result = bytes.withUnsafeBytes { raw in Self.decode(raw, name: name, maxNodes: maxNodes) }
        self = try result.get()
    }

    /// Decodes a model from its serialized bytes; `name` stands for the file in errors.
    public init(bytes: Data, name: String, maxNodes: Int = .max) throws(OnnxError) {
        let result = bytes.withUnsafeBytes { raw in Self.decode(raw, name: name, maxNodes: maxNodes) }
        self = try result.get()
    }

    init(irVersion: Int64, opsetImports: [OnnxOpset], producerName: String, producerVersion: String,
         graph: OnnxGraph, metadata: [String: String]) {
        self.irVersion = irVersion
        self.opsetImports = opsetImports
        self.producerName = producerName
        self.producerVersion = producerVersion
        self.graph = graph
        self.metadata = metadata
    }

    private static func decode(_ raw: UnsafeRawBufferPointer, name: String, maxNodes: Int) -> Result<OnnxModel, OnnxError> {
        guard raw.count > 0 else { return .failure(.empty(path: name)) }
        do throws(DecodeFailure) {
            return .success(try ModelDecoder(bytes: raw, maxNodes: maxNodes).model())
        } catch {
            return .failure(error.onnxError(path: name))
        }
    }
}

/// An operator set the model imports: a domain ("" is the default ONNX domain) and its version.
public struct OnnxOpset: Sendable, Equatable {
    /// An opset's domain ("" for ONNX).
    public let domain: String
    /// Its version.
    public let version: Int64

    /// An opset import.
    public init(domain: String, version: Int64) {
        self.domain = domain
        self.version = version
    }
}

/// A graph: nodes in file order (ONNX writes them topologically sorted), the constant tensors
/// it holds, and its declared inputs, outputs and intermediate values.
public struct OnnxGraph: Sendable, Equatable {
    /// Its name.
    public let name: String
    /// Its nodes, in order.
    public let nodes: [OnnxNode]
    /// Its constant tensors.
    public let initializers: [OnnxTensor]
    /// Its inputs.
    public let inputs: [OnnxValueInfo]
    /// Its outputs.
    public let outputs: [OnnxValueInfo]
    /// Types and shapes of intermediate values, where the file records them.
    public let valueInfo: [OnnxValueInfo]
}

/// One operator application.
public struct OnnxNode: Sendable, Equatable {
    /// Its name.
    public let name: String
    /// The op.
    public let opType: String
    /// The operator's domain; "" (or "ai.onnx") is the default ONNX domain.
    public let domain: String
    /// Value names in order; an empty string is an optional input left out, kept so that the
    /// later inputs keep their positions.
    public let inputs: [String]
    /// Value names in order; an empty string is an optional output not wanted.
    public let outputs: [String]
    /// Its attributes.
    public let attributes: [String: OnnxAttribute]
}

/// A node attribute's value. Floats compare by their bits, as in `OnnxTensor`.
public indirect enum OnnxAttribute: Sendable, Equatable {
    case float(Float)
    case int(Int64)
    /// The attribute's bytes read as UTF-8; invalid sequences become U+FFFD.
    case string(String)
    case tensor(OnnxTensor)
    case graph(OnnxGraph)
    case floats([Float])
    case ints([Int64])
    case strings([String])
    case tensors([OnnxTensor])
    case graphs([OnnxGraph])

    public static func == (a: OnnxAttribute, b: OnnxAttribute) -> Bool {
        switch (a, b) {
        case let (.float(x), .float(y)): return x.bitPattern == y.bitPattern
        case let (.int(x), .int(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.tensor(x), .tensor(y)): return x == y
        case let (.graph(x), .graph(y)): return x == y
        case let (.floats(x), .floats(y)): return x.map(\.bitPattern) == y.map(\.bitPattern)
        case let (.ints(x), .ints(y)): return x == y
        case let (.strings(x), .strings(y)): return x == y
        case let (.tensors(x), .tensors(y)): return x == y
        case let (.graphs(x), .graphs(y)): return x == y
        default: return false
        }
    }
}

/// A tensor's name, element type, dimensions and values. Floating-point types (FLOAT, DOUBLE,
/// FLOAT16, BFLOAT16) are read into `floats` (DOUBLE rounded to the nearest Float, the others
/// exactly); integer types and BOOL into `integers` (BOOL as 0 or 1). Exactly one of the two is
/// set, holding `count` values in row-major order.
///
/// Two tensors are equal when they hold the same bits: a NaN equals the same NaN (so a tensor
/// always equals itself), and 0 and -0 differ.
public struct OnnxTensor: Sendable, Equatable {
    /// Its name.
    public let name: String
    /// Its element type.
    public let dataType: OnnxDataType
    /// Its shape.
    public let dims: [Int]
    /// Float values (float tensors).
    public let floats: [Float]?
    /// Integer values (integer and boolean tensors).
    public let integers: [Int64]?
    /// The element count: the product of `dims` (1 for a scalar, whose dims are empty).
    public let count: Int

    public static func == (a: OnnxTensor, b: OnnxTensor) -> Bool {
        guard a.name == b.name, a.dataType == b.dataType, a.dims == b.dims, a.count == b.count, a.integers == b.integers else {
            return false
        }
        switch (a.floats, b.floats) {
        case (nil, nil): return true
        case let (x?, y?): return x.count == y.count && zip(x, y).allSatisfy { $0.bitPattern == $1.bitPattern }
        default: return false
        }
    }
}

/// ONNX's element types (TensorProto.DataType), with ONNX's numbers.
public enum OnnxDataType: Int, Sendable, CaseIterable {
    case float = 1, uint8 = 2, int8 = 3, uint16 = 4, int16 = 5, int32 = 6, int64 = 7, string = 8, bool = 9
    case float16 = 10, double = 11, uint32 = 12, uint64 = 13, complex64 = 14, complex128 = 15, bfloat16 = 16
    case float8e4m3fn = 17, float8e4m3fnuz = 18, float8e5m2 = 19, float8e5m2fnuz = 20
    case uint4 = 21, int4 = 22, float4e2m1 = 23, float8e8m0 = 24, uint2 = 25, int2 = 26
    case float6e2m3 = 27, float6e3m2 = 28

    /// ONNX's spelling (TensorProto.DataType), e.g. "FLOAT16".
    public var onnxName: String { String(describing: self).uppercased() }

    /// Whether tensors of this type can be read into values (`floats` or `integers`).
    public var isReadable: Bool { ElementStorage(self) != nil }

    /// Whether it is a floating-point type, read into `floats` (FLOAT, DOUBLE, FLOAT16, BFLOAT16).
    public var isFloatingPoint: Bool { ElementStorage(self)?.isFloat == true }

    /// ONNX's spelling of a type number, or "unknown" for numbers ONNX does not define.
    static func describe(_ number: Int) -> String {
        if number == 0 { return "UNDEFINED" }
        return OnnxDataType(rawValue: number)?.onnxName ?? "unknown"
    }
}

/// A graph input's, output's or intermediate value's declared type.
public struct OnnxValueInfo: Sendable, Equatable {
    /// Its name.
    public let name: String
    /// The element type of a tensor value; nil when the file gives none, or the value is not a
    /// tensor (a sequence, map or optional).
    public let elementType: OnnxDataType?
    /// The tensor's dimensions; nil when the type has no shape (rank unknown). A scalar has an
    /// empty shape.
    public let shape: [OnnxDimension]?
}

/// One dimension of a declared shape.
public enum OnnxDimension: Sendable, Equatable {
    /// A fixed size.
    case value(Int)
    /// A named size, such as "batch", the same wherever the name appears.
    case param(String)
    /// A size not given (neither value nor name; an empty name or a negative value, which some
    /// writers use for "unknown", read as this too).
    case unknown
}
