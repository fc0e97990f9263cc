import EarshotONNX
import EarshotTFLite

/// Why a model cannot be imported, naming the file, node and what to do.
public enum ImportError: Error, Sendable, CustomStringConvertible {
    /// The .onnx file is missing, unreadable or damaged (the reader's error names it).
    case onnx(OnnxError)
    /// The .tflite file is missing, unreadable or damaged (the reader's error names it).
    case tflite(TFLiteError)
    /// A node the importer cannot turn into the runtime's graph: its name, op, why, and what to do.
    case node(path: String, node: String, op: String, reason: String, hint: String)
    /// The model's inputs and outputs do not say how it streams: why, and what to do.
    case interface(path: String, reason: String, hint: String)
    /// An input or output (`role`: "audio input", "state input", ...) of an element type the
    /// runtime does not compute with (strings, booleans, complex numbers).
    case elementType(path: String, role: String, name: String, type: String)

    public var description: String {
        switch self {
        case let .onnx(e): return e.description
        case let .tflite(e): return e.description
        case let .node(path, node, op, reason, hint): return "\(path): node '\(node)' (\(op)): \(reason); \(hint)"
        case let .interface(path, reason, hint): return "\(path): \(reason); \(hint)"
        case let .elementType(path, role, name, type):
            return "\(path): the \(role) '\(name)' is of type \(type), which the runtime cannot take there; export it as FLOAT "
                + "(audio, features, states and scores are float tensors; fixed inputs may also be integers)"
        }
    }

    /// Whether the model file itself is missing or unreadable (not damaged or unsupported).
    public var isMissingInput: Bool {
        switch self {
        case .onnx(.fileNotFound), .onnx(.cannotRead), .tflite(.fileNotFound), .tflite(.cannotRead): return true
        default: return false
        }
    }
}
