import EarshotAudio
import EarshotModel

/// Errors of streams and sessions.
public indirect enum StreamError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidOption(name: String, value: String, expected: String)
    /// A channel number that is not open in the session; `open` are those that are.
    case noSuchChannel(channel: Int, open: [Int])
    /// The stream was finished; make a new one or reset it.
    case finished
    case audio(AudioError)
    case model(ModelError)
    /// A channel's source failed with this message.
    case source(channel: Int, reason: String)
    /// A file other than audio (a truth CSV) cannot be read or is not what it should be.
    case data(path: String, reason: String)
    /// A stream snapshot that cannot be restored: damaged, of another format, or inconsistent.
    case snapshot(reason: String)
    /// An error of one input file, with its path.
    case file(path: String, error: StreamError)

    public var description: String {
        switch self {
        case let .invalidOption(name, value, expected): return "invalid option \(name) = \(value): expected \(expected)"
        case let .noSuchChannel(channel, open):
            return "no channel \(channel) in the session: " + (open.isEmpty ? "it has no channels open" : "its open channels are \(open.map(String.init).joined(separator: ", "))")
        case .finished: return "the stream has finished: reset it to start again"
        case let .audio(e): return e.description
        case let .model(e): return e.description
        case let .source(channel, reason): return "channel \(channel): \(reason)"
        case let .data(path, reason): return "\(path): \(reason)"
        case let .snapshot(reason): return "stream snapshot: \(reason)"
        case let .file(path, error): return "\(path): \(error)"
        }
    }
}
