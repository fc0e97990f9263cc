import EarshotAudio
import EarshotModel

/// Errors of streams and sessions.
public indirect enum StreamError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidOption(name: String, value: String, expected: String)
    /// A channel index outside the session.
    case noSuchChannel(channel: Int, channelCount: Int)
    /// The stream was finished; make a new one or reset it.
    case finished
    case audio(AudioError)
    case model(ModelError)
    /// A channel's source failed with this message.
    case source(channel: Int, reason: String)
    /// An error of one input file, with its path.
    case file(path: String, error: StreamError)

    public var description: String {
        switch self {
        case let .invalidOption(name, value, expected): return "invalid option \(name) = \(value): expected \(expected)"
        case let .noSuchChannel(channel, count): return "no channel \(channel): the session has \(count) (0...\(count - 1))"
        case .finished: return "the stream has finished: reset it to start again"
        case let .audio(e): return e.description
        case let .model(e): return e.description
        case let .source(channel, reason): return "channel \(channel): \(reason)"
        case let .file(path, error): return "\(path): \(error)"
        }
    }
}
