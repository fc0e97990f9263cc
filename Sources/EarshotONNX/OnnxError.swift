/// Errors of the ONNX reader. Each names the file (its path, or the name given with the bytes)
/// and, where it applies, where in the model the problem is: a location such as
/// `graph 'main' > node 'If_0' (If) > attribute 'then_branch' > graph 'then' > initializer 'w'`
/// ("model" for the model's own fields).
public enum OnnxError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No file at this path.
    case fileNotFound(path: String)
    /// The file exists but could not be read (permissions, a folder, an I/O error).
    case cannotRead(path: String, reason: String)
    /// The file or byte string is empty.
    case empty(path: String)
    /// A field runs past the end of the file or of the message holding it. `offset` is where
    /// the field's bytes begin; `reading` names the field and its location.
    case truncated(path: String, offset: Int, reading: String)
    /// The bytes are not a valid ONNX model at `context`, for `reason`.
    case malformed(path: String, context: String, reason: String)
    /// The tensor at `tensor` has an element type this reader does not decode (`type` is ONNX's
    /// number; strings, complex numbers and 8-, 6-, 4- and 2-bit types are not decoded).
    case unsupportedDataType(path: String, tensor: String, type: Int)
    /// The tensor at `tensor` keeps its values in a file beside the model (external data).
    case externalData(path: String, tensor: String)
    /// A part of ONNX this reader does not take (sparse tensors, type attributes, segments).
    case unsupported(path: String, context: String, feature: String)
    /// The model goes past one of the reader's limits (graphs nested more than `limit` deep).
    case limit(path: String, what: String, limit: Int)
    /// The model has more nodes (those of nested graphs counted) than the caller takes.
    case tooManyNodes(path: String, count: Int, limit: Int)

    public var description: String {
        switch self {
        case let .fileNotFound(path):
            return "\(path): no such file"
        case let .cannotRead(path, reason):
            return "\(path): cannot read: \(reason)"
        case let .empty(path):
            return "\(path): empty: an ONNX model holds at least a graph"
        case let .truncated(path, offset, reading):
            return "\(path): truncated ONNX model: \(reading) runs past the end of its data (at byte \(offset))"
        case let .malformed(path, context, reason):
            return "\(path): not a valid ONNX model: \(context): \(reason)"
        case let .unsupportedDataType(path, tensor, type):
            let readable = OnnxDataType.allCases.filter(\.isReadable).map(\.onnxName).joined(separator: ", ")
            return "\(path): \(tensor): element type \(type) (\(OnnxDataType.describe(type))) is not supported; the reader decodes \(readable)"
        case let .externalData(path, tensor):
            return "\(path): \(tensor): the values are stored in an external data file, which the reader does not load; "
                + "save the model with its tensors inside (onnx.save_model(model, path, save_as_external_data=False))"
        case let .unsupported(path, context, feature):
            return "\(path): \(context): \(feature) is not supported"
        case let .limit(path, what, limit):
            return "\(path): \(what) goes past the reader's limit of \(limit)"
        case let .tooManyNodes(path, count, limit):
            return "\(path): \(count) nodes (those of If, Loop and Scan bodies counted), more than the limit of \(limit)"
        }
    }
}
