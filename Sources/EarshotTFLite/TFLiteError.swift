/// Errors of the TFLite reader. Each names the file (its path, or the name given with the
/// bytes) and where in the model the problem is, such as `subgraph 0 > tensor 12 > quantization`.
public enum TFLiteError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No file at this path.
    case fileNotFound(path: String)
    /// The file exists but could not be read (permissions, a folder, an I/O error).
    case cannotRead(path: String, reason: String)
    /// The bytes are not a TFLite FlatBuffer, or one of its tables, vectors or strings lies
    /// (in part) outside them. `offset` is where the bad reference was read.
    case malformed(path: String, context: String, offset: Int, reason: String)
    /// The model goes past one of the reader's limits.
    case limit(path: String, what: String, limit: Int)

    public var description: String {
        switch self {
        case let .fileNotFound(path): return "\(path): no such file"
        case let .cannotRead(path, reason): return "\(path): cannot read: \(reason)"
        case let .malformed(path, context, offset, reason):
            return "\(path): not a valid TFLite model: \(context): \(reason) (at byte \(offset))"
        case let .limit(path, what, limit): return "\(path): \(what) goes past the reader's limit of \(limit)"
        }
    }
}
