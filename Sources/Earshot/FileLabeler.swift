import EarshotAudio
import EarshotFeatures
import EarshotModel
import Foundation

/// A file's next chunk, read by one thread at a time.
/// `@unchecked Sendable`: `FileLabeler` reads through it either on its own thread or, while that
/// thread steps the chunk before, on one other; it takes that read's result before the next read
/// and before it returns, so the file is never read from two threads at once.
private struct ChunkReader: @unchecked Sendable {
    let file: AudioFile
    let each: Bool
    let frames: Int

    func read() throws -> [[Float]] {
        each ? try file.readChannels(maxFrames: frames) : [try file.readMono(maxFrames: frames)]
    }
}

/// Labels audio files: read in chunks (back-pressured: the next chunk is read only when the
/// last is processed, or while it is when one file's windows are split between threads), mixed
/// to mono or every channel on its own (a session), resampled to the model's rate, and turned
/// into segments.
public struct FileLabeler: Sendable {
    /// Mix a file's channels to one stream, or label each as its own stream.
    public enum Channels: String, Sendable { case mix, each }

    /// The model every file is labelled with.
    public let model: Model
    /// The label rules.
    public var options: LabelOptions
    /// Mixed or each channel.
    public var channels: Channels
    /// Samples read per chunk, over all channels (so a file of many channels takes no more
    /// memory than a mono one).
    public var chunkSamples: Int
    /// Threads one stream's steps may take when the model is a window classifier
    /// (`Model.stepsAreWindows`: BirdNET, a model imported with `--window/--hop`): runs of
    /// consecutive windows go through the model on each thread, their scores back in order
    /// before the label rules, so the events are the same whatever the number. 1: one after
    /// another, as for every other model (whose steps follow from the last one's state).
    public var threads: Int

    /// Windows read ahead per thread when a window classifier's steps are split between threads:
    /// enough that each thread has a run of them, few enough that memory stays a few windows.
    static let windowsPerThread = 4

    /// A labeller; `chunkSamples` is how much audio (over all channels) is read at a time.
    public init(model: Model, options: LabelOptions? = nil, channels: Channels = .mix, chunkSamples: Int = 262_144,
                threads: Int = FileLabeler.defaultThreads) {
        self.model = model
        self.options = options ?? LabelOptions(model: model)
        self.channels = channels
        self.chunkSamples = chunkSamples
        self.threads = threads
    }

    /// The cores of this machine.
    public static var defaultThreads: Int { max(1, ProcessInfo.processInfo.activeProcessorCount) }

    /// A labelled file: what it is and its events.
    public struct Result: Sendable {
        /// The file.
        public var path: String
        /// Its sample rate (Hz): the clock of its events.
        public var sampleRate: Int
        /// Its channels.
        public var channelCount: Int
        /// Frames read.
        public var frames: Int
        /// Every event in order (segments, scores when asked for, failures); empty when the
        /// events went to a handler as they happened.
        public var events: [ClassifierEvent]
        /// The finished segments among the events.
        public var segments: [Segment] {
            events.compactMap { if case let .ended(s) = $0 { return s } else { return nil } }
        }
    }

    /// Labels one file. `progress` gets the fraction of the file read so far (when its length
    /// is known). Errors that are not the audio file's own name the file (`StreamError.file`).
    public func label(path: String, progress: (Double) -> Void = { _ in }) async throws -> Result {
        try await label(file: try AudioFile(path: path), progress: progress)
    }

    /// Labels one file, handing its events to `handle` as each chunk completes them, so that
    /// memory stays bounded however long the file (every step's scores of a two-hour file are
    /// written out as they come, not held); it also gets the file's channel count. An error
    /// `handle` throws stops the run.
    public func label(path: String, progress: (Double) -> Void = { _ in },
                      handle: (_ events: [ClassifierEvent], _ channelCount: Int) async throws -> Void) async throws -> Result {
        try await label(file: try AudioFile(path: path), progress: progress, handle: handle)
    }

    /// Labels an opened file (standard input, say: `AudioFile(descriptor:)`) to its end.
    public func label(file: AudioFile, progress: (Double) -> Void = { _ in }) async throws -> Result {
        var events: [ClassifierEvent] = []
        var result = try await label(file: file, progress: progress) { new, _ in events += new }
        result.events = events
        return result
    }

    /// Labels an opened file to its end, handing its events to `handle` as they come.
    public func label(file: AudioFile, progress: (Double) -> Void = { _ in },
                      handle: (_ events: [ClassifierEvent], _ channelCount: Int) async throws -> Void) async throws -> Result {
        let path = file.path
        let count = channels == .each ? file.channelCount : 1
        let session: Session
        do {
            session = try Session(model: model, channelCount: count, sourceSampleRate: file.sampleRate, options: options,
                                  threads: threads)
        } catch {
            throw StreamError.file(path: path, error: error)
        }
        var frames = max(1, chunkSamples / file.channelCount)
        let split = count == 1 && threads > 1 && model.stepsAreWindows
        if split {
            // One stream whose steps split between threads: read a few windows for each at a time.
            let hop = (model.chunkSamples * file.sampleRate + model.sampleRate - 1) / model.sampleRate
            frames = max(frames, hop * threads * Self.windowsPerThread)
        }
        let reader = ChunkReader(file: file, each: channels == .each, frames: frames)
        // Split steps: the next chunk is read while this one steps, so that no thread waits for
        // the file. Whatever happens, no read is left running when the file is given back.
        var ahead: Background<Swift.Result<[[Float]], any Error>>? = nil
        defer { _ = ahead?.value() }
        while true {
            let chunk: [[Float]]
            if let pending = ahead {
                ahead = nil
                chunk = try pending.value().get()
            } else {
                chunk = try reader.read()
            }
            if chunk[0].isEmpty { break }
            let done = file.frameCount.map { Double(file.position) / Double(max($0, 1)) }
            if split { ahead = Background { Swift.Result { try reader.read() } } }
            try await handle(await session.process(chunk), file.channelCount)
            if let done { progress(done) }
        }
        try await handle(await session.finish(), file.channelCount)
        return Result(path: path, sampleRate: file.sampleRate, channelCount: file.channelCount, frames: file.position, events: [])
    }
}
