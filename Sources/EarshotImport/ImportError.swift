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
    /// A node whose op the runtime has no kernel for: its op (as the file names it), the node,
    /// and the format ("ONNX", "TFLite"); the message points to docs/models.md.
    case unsupportedOp(path: String, node: String, op: String, format: String, reason: String)
    /// A file of labels (`--labels-file`) that cannot be read or gives no labels.
    case labelsFile(path: String, reason: String, hint: String)
    /// A file of labels' codes (`--label-codes`) that cannot be read or names no label.
    case labelCodes(path: String, reason: String)
    /// An input or output (`role`: "audio input", "state input", ...) of an element type the
    /// runtime does not compute with (strings, booleans, complex numbers).
    case elementType(path: String, role: String, name: String, type: String)

    public var description: String {
        switch self {
        case let .onnx(e): return e.description
        case let .tflite(e): return e.description
        case let .node(path, node, op, reason, hint): return "\(path): node '\(node)' (\(op)): \(reason); \(hint)"
        case let .interface(path, reason, hint): return "\(path): \(reason); \(hint)"
        case let .unsupportedOp(path, node, op, format, reason):
            return "\(path): node '\(node)': the \(format) op \(op) is not supported (\(reason)); "
                + "\(Self.modelsPage) (in Earshot's source) lists the models and ops earshot import takes"
        case let .labelsFile(path, reason, hint): return "--labels-file \(path): \(reason); \(hint)"
        case let .labelCodes(path, reason):
            return "--label-codes \(path): \(reason); give a JSON object of label: code (as BirdNET-Analyzer's eBird_taxonomy_codes_2024E.json)"
        case let .elementType(path, role, name, type):
            return "\(path): the \(role) '\(name)' is of type \(type), which the runtime cannot take there; export it as FLOAT "
                + "(audio, features, states and scores are float tensors; fixed inputs may also be integers)"
        }
    }

    /// Where users read which models and ops the importers take.
    public static let modelsPage = "docs/models.md"

    /// Whether the model file itself is missing or unreadable (not damaged or unsupported).
    public var isMissingInput: Bool {
        switch self {
        case .onnx(.fileNotFound), .onnx(.cannotRead), .tflite(.fileNotFound), .tflite(.cannotRead): return true
        case let .labelsFile(_, reason, _), let .labelCodes(_, reason): return reason == "no such file" || reason == "cannot read the file"
        default: return false
        }
    }
}
