/// Feature frames of an audio file, streamed: read in chunks, mixed down (or one channel
/// taken), resampled to the front end's rate, and framed. Memory stays bounded whatever the
/// file's length.
public struct FileFeatures: Sendable {
    /// Which audio of a multi-channel file to use.
    public enum Channels: Sendable, Equatable {
        case mix
        case channel(Int)
    }

    /// The front end.
    public let config: FeatureConfig
    /// Mixed, or one channel.
    public var channels: Channels
    /// Frames read from the file per step.
    public var chunkFrames: Int

    /// A job; `chunkFrames` frames of the file are read at a time.
    public init(config: FeatureConfig, channels: Channels = .mix, chunkFrames: Int = 16384) {
        self.config = config
        self.channels = channels
        self.chunkFrames = chunkFrames
    }

    /// What a run read and computed.
    public struct Summary: Sendable {
        /// The file.
        public var path: String
        /// Its container (libsndfile's name).
        public var formatName: String
        /// Its encoding (libsndfile's name).
        public var encodingName: String
        /// Its sample rate (Hz).
        public var sourceRate: Int
        /// Its channels.
        public var channelCount: Int
        /// Source frames read.
        public var frameCount: Int
        /// Samples after resampling to the front end's rate.
        public var sampleCount: Int
        /// Feature frames computed.
        public var featureFrames: Int
        /// Per feature: mean, minimum and maximum over all frames.
        public var mean: [Float]
        /// Per feature: the least value.
        public var minimum: [Float]
        /// Per feature: the greatest value.
        public var maximum: [Float]
    }

    /// Streams the file through the front end and hands each batch of frames to `body`.
    @discardableResult
    public func run(path: String, body: (FeatureMatrix) throws -> Void = { _ in }) throws -> Summary {
        let file = try AudioFile(path: path)
        if case let .channel(k) = channels, !(0..<file.channelCount).contains(k) {
            throw AudioError.channelOutOfRange(path: path, channel: k, channelCount: file.channelCount)
        }
        let resampler = try Resampler(inputRate: Double(file.sampleRate), outputRate: Double(config.sampleRate))
        var extractor = try FeatureExtractor(config: config)
        let n = config.featureCount
        var summary = Summary(
            path: path, formatName: file.formatName, encodingName: file.encodingName, sourceRate: file.sampleRate,
            channelCount: file.channelCount, frameCount: 0, sampleCount: 0, featureFrames: 0,
            mean: [Float](repeating: 0, count: n), minimum: [Float](repeating: .infinity, count: n),
            maximum: [Float](repeating: -.infinity, count: n))
        var sums = [Double](repeating: 0, count: n)
        func take(_ frames: FeatureMatrix) throws {
            for t in 0..<frames.frameCount {
                for (i, v) in frames[frame: t].enumerated() {
                    sums[i] += Double(v)
                    summary.minimum[i] = min(summary.minimum[i], v)
                    summary.maximum[i] = max(summary.maximum[i], v)
                }
            }
            summary.featureFrames += frames.frameCount
            try body(frames)
        }
        while true {
            let chunk: [Float]
            switch channels {
            case .mix: chunk = try file.readMono(maxFrames: chunkFrames)
            case let .channel(k): chunk = try file.readChannel(k, maxFrames: chunkFrames)
            }
            if chunk.isEmpty { break }
            summary.frameCount += chunk.count
            let resampled = try resampler.process(chunk)
            summary.sampleCount += resampled.count
            try take(try extractor.process(resampled))
        }
        let tail = try resampler.finish()
        summary.sampleCount += tail.count
        try take(try extractor.process(tail))
        try take(extractor.finish())
        summary.mean = sums.map { Float($0 / Double(max(summary.featureFrames, 1))) }
        return summary
    }
}
