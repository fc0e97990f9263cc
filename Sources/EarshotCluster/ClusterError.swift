import Earshot
import EarshotRedis

/// Errors of publishers, workers and event readers.
public enum ClusterError: Error, Sendable, Equatable, CustomStringConvertible {
    case redis(RedisError)
    case badSource(source: String, reason: String)
    /// An audio entry that cannot be used; the source fails alone.
    case malformedEntry(source: String, entry: String, reason: String)
    /// An audio entry whose audio is over the limit (`WorkerOptions.maxEntryBytes`); the source
    /// fails alone, and the bytes are never held.
    case entryTooLarge(source: String, entry: String, bytes: Int, limit: Int)
    case stream(StreamError)

    public var description: String {
        switch self {
        case let .redis(e): return e.description
        case let .badSource(source, reason): return "source \(source): \(reason)"
        case let .malformedEntry(source, entry, reason): return "source \(source), entry \(entry): \(reason)"
        case let .entryTooLarge(source, entry, bytes, limit):
            return "source \(source), entry \(entry): \(bytes) bytes of audio, over the limit of \(limit) bytes an entry (--max-entry-bytes)"
        case let .stream(e): return e.description
        }
    }
}
