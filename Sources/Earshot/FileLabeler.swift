import EarshotAudio
import EarshotModel

/// Labels audio files: read in chunks (back-pressured: the next chunk is read only when the
/// last is processed), mixed to mono or every channel on its own (a session), resampled to the
/// model's rate, and turned into segments.
public struct FileLabeler: Sendable {
    public enum Channels: String, Sendable { case mix, each }

    public let model: Model
    public var options: LabelOptions
    public var channels: Channels
    /// Frames read per chunk.
    public var chunkFrames: Int

    public init(model: Model, options: LabelOptions? = nil, channels: Channels = .mix, chunkFrames: Int = 262_144) {
        self.model = model
        self.options = options ?? LabelOptions(model: model)
        self.channels = channels
        self.chunkFrames = chunkFrames
    }

    public struct Result: Sendable {
        public var path: String
        public var sampleRate: Int
        public var channelCount: Int
        public var frames: Int
        /// Every event in order (segments, scores when asked for, failures).
        public var events: [ClassifierEvent]
        public var segments: [Segment] {
            events.compactMap { if case let .ended(s) = $0 { return s } else { return nil } }
        }
    }

    /// Labels one file. `progress` gets the fraction of the file read so far.
    public func label(path: String, progress: (Double) -> Void = { _ in }) async throws -> Result {
        let file = try AudioFile(path: path)
        let count = channels == .each ? file.channelCount : 1
        let session = try Session(model: model, channelCount: count, sourceSampleRate: file.sampleRate, options: options)
        var events: [ClassifierEvent] = []
        while true {
            let chunk: [[Float]] = channels == .each
                ? try file.readChannels(maxFrames: chunkFrames) : [try file.readMono(maxFrames: chunkFrames)]
            if chunk[0].isEmpty { break }
            events += await session.process(chunk)
            progress(Double(file.position) / Double(max(file.frameCount, 1)))
        }
        events += await session.finish()
        return Result(path: path, sampleRate: file.sampleRate, channelCount: file.channelCount, frames: file.position, events: events)
    }
}
