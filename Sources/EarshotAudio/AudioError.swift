/// Errors of the audio module. Each case names the file (or the setting) and the reason,
/// with libsndfile's or libsoxr's own message where it gave one.
public enum AudioError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No file at this path.
    case fileNotFound(path: String)
    /// The file exists but could not be opened (permissions, a folder, an I/O error).
    case cannotOpen(path: String, reason: String)
    /// The file is not in any audio format libsndfile recognises.
    case notAudio(path: String, reason: String)
    /// The format is recognised but the file is damaged (bad header or stream).
    case malformed(path: String, reason: String)
    /// The container is known but its encoding is one libsndfile cannot decode.
    case unsupportedEncoding(path: String, reason: String)
    /// The file holds no audio frames.
    case empty(path: String)
    /// A stream longer than the most this reader holds of it (`limitBytes`), and why it is held.
    case tooLarge(path: String, limitBytes: Int, reason: String)
    /// The file ends before the audio its header announces.
    case truncated(path: String, expectedFrames: Int, availableFrames: Int)
    /// Decoding failed part way through.
    case readFailed(path: String, reason: String)
    /// A channel index outside the file's channels.
    case channelOutOfRange(path: String, channel: Int, channelCount: Int)
    /// The resampler does not take this rate (Hz).
    case unsupportedSampleRate(Double)
    /// libsoxr refused or failed, with its message.
    case resampler(reason: String)
    /// A capture device could not be opened or set up: ALSA's reason and what to try.
    case deviceUnavailable(device: String, reason: String, hint: String)
    /// A capture device failed while running (e.g. it was unplugged).
    case deviceFailed(device: String, reason: String)

    public var description: String {
        switch self {
        case let .fileNotFound(path): return "\(path): no such file"
        case let .cannotOpen(path, reason): return "\(path): cannot open: \(reason)"
        case let .notAudio(path, reason): return "\(path): not an audio file libsndfile can read (\(reason))"
        case let .malformed(path, reason): return "\(path): damaged audio file (\(reason))"
        case let .unsupportedEncoding(path, reason): return "\(path): unsupported audio encoding (\(reason))"
        case let .empty(path): return "\(path): the file holds no audio"
        case let .tooLarge(path, limit, reason): return "\(path): more than \(limit >> 20) MiB: \(reason), of at most that size"
        case let .truncated(path, expected, available):
            return "\(path): truncated: the header announces \(expected) frames, the file holds \(available)"
        case let .readFailed(path, reason): return "\(path): decoding failed: \(reason)"
        case let .channelOutOfRange(path, channel, count):
            return "\(path): no channel \(channel): the file has \(count) channel\(count == 1 ? "" : "s") (0...\(count - 1))"
        case let .unsupportedSampleRate(rate): return "unsupported sample rate \(rate) Hz: expected 1000...384000 Hz"
        case let .resampler(reason): return "resampler failed: \(reason)"
        case let .deviceUnavailable(device, reason, hint): return "capture device '\(device)': \(reason); \(hint)"
        case let .deviceFailed(device, reason): return "capture device '\(device)' stopped: \(reason)"
        }
    }
}
