/// Errors of the model runtime. Each names the model (its folder or file), and where it
/// applies the layer and the tensor, with what was expected and what was found.
public enum ModelError: Error, Equatable, Sendable, CustomStringConvertible {
    case cannotRead(path: String, reason: String)
    /// No package here: the folder does not exist (`file` nil), or it lacks a file every package
    /// holds (model.json, weights.safetensors).
    case notFound(folder: String, file: String?)
    case cannotWrite(path: String, reason: String)
    /// model.json is not valid JSON or lacks a field.
    case manifest(path: String, reason: String)
    case unsupportedFormat(path: String, found: String, expected: String)
    /// The safetensors file's header is damaged: bad length, bad JSON, offsets outside the data.
    case safetensors(path: String, reason: String)
    case missingTensor(path: String, layer: String, tensor: String)
    case tensorShape(path: String, layer: String, name: String, expected: [Int], found: [Int])
    case tensorDType(path: String, name: String, found: String, expected: String)
    case unusedTensors(path: String, names: [String])
    case unknownLayer(path: String, index: Int, type: String)
    /// A layer's settings are invalid or do not chain with the previous layer's output.
    case layer(path: String, layer: String, reason: String)
    /// A prediction's input is not one block of the model's size.
    case inputSize(model: String, expected: Int, found: Int)
    /// The audio holds NaN or infinity.
    case nonFiniteInput(model: String, sampleIndex: Int)
    /// A serialized state is damaged, of another format version, or of another model.
    case stateFormat(reason: String)
    case stateModelMismatch(expected: String, found: String)
    /// predictions(from:using:) got different numbers of blocks and states.
    case batchSize(blocks: Int, states: Int)

    public var description: String {
        switch self {
        case let .cannotRead(path, reason): return "\(path): cannot read: \(reason)"
        case let .notFound(folder, nil): return "\(folder): no such model folder"
        case let .notFound(folder, file?):
            return "no \(file) in \(folder): not a model package (a package holds model.json and weights.safetensors; "
                + "earshot import and earshot train write one)"
        case let .cannotWrite(path, reason): return "\(path): cannot write: \(reason)"
        case let .manifest(path, reason): return "\(path): invalid manifest: \(reason)"
        case let .unsupportedFormat(path, found, expected):
            return "\(path): unsupported model format \(found) (this earshot reads \(expected))"
        case let .safetensors(path, reason): return "\(path): damaged weights file: \(reason)"
        case let .missingTensor(path, layer, tensor): return "\(path): layer \(layer) needs tensor '\(tensor)', which the weights lack"
        case let .tensorShape(path, layer, name, expected, found):
            return "\(path): layer \(layer): tensor '\(name)' has shape \(found), expected \(expected)"
        case let .tensorDType(path, name, found, expected):
            return "\(path): tensor '\(name)' has dtype \(found), expected one of \(expected)"
        case let .unusedTensors(path, names): return "\(path): tensors no layer uses: \(names.joined(separator: ", "))"
        case let .unknownLayer(path, index, type): return "\(path): layer \(index) has unknown type '\(type)'"
        case let .layer(path, layer, reason): return "\(path): layer \(layer): \(reason)"
        case let .inputSize(model, expected, found): return "\(model): a block is \(expected) samples, got \(found)"
        case let .nonFiniteInput(model, index): return "\(model): audio sample \(index) of the block is NaN or infinite"
        case let .stateFormat(reason): return "invalid model state: \(reason)"
        case let .stateModelMismatch(expected, found):
            return "the state belongs to model \(found), not to this model (\(expected))"
        case let .batchSize(blocks, states): return "\(blocks) blocks for \(states) states: expected one block per state"
        }
    }
}
