/// Why a service cannot start or serve: each names the address or client and the reason.
public enum ServeError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidURI(String, reason: String)
    /// A socket call failed: what was being done, on which address, and the system's reason.
    case socket(operation: String, address: String, reason: String)
    case invalidOption(name: String, value: String, expected: String)
    case noModels

    public var description: String {
        switch self {
        case let .invalidURI(text, reason): return "--uri \(text): \(reason)"
        case let .socket(operation, address, reason): return "\(address): \(operation) failed: \(reason)"
        case let .invalidOption(name, value, expected): return "invalid \(name) \(value): expected \(expected)"
        case .noModels: return "a service needs at least one model"
        }
    }
}
