import EarshotModel

/// One stream: audio chunks of any size at the source's rate in, events out. The actor owns
/// the stream's state (model state, resampler and label logic), so one step runs at a time.
///
///     let stream = try StreamClassifier(model: model, sourceSampleRate: 44100)
///     for try await event in stream.events(for: chunks) { ... }
public actor StreamClassifier {
    /// The model.
    public let model: Model
    /// The label rules.
    public private(set) var options: LabelOptions
    /// The rate of the audio given to `process(_:)`: the clock of the events.
    public private(set) var sourceSampleRate: Int
    private var pipeline: ChannelPipeline

    /// - Parameters:
    ///   - model: the model (shared between streams; it is immutable).
    ///   - sourceSampleRate: the rate of the audio given to `process(_:)` (default the model's);
    ///     other rates are resampled, and event times stay in this clock.
    ///   - options: the label rules (default the model's, from its manifest).
    /// - Throws: `StreamError.invalidOption` naming an option out of its range, `.audio` when no
    ///   resampler takes the rate.
    public init(model: Model, sourceSampleRate: Int? = nil, options: LabelOptions? = nil) throws(StreamError) {
        self.model = model
        self.options = options ?? LabelOptions(model: model)
        self.sourceSampleRate = sourceSampleRate ?? model.sampleRate
        pipeline = try ChannelPipeline(channel: 0, model: model, sourceRate: self.sourceSampleRate, options: self.options)
    }

    /// Resumes a stream from its snapshot (from this process or another): it goes on exactly
    /// as the stream it was taken from would have, with that stream's rate and label rules.
    /// - Throws: `StreamError.model(.stateModelMismatch)` for another model's snapshot,
    ///   `.snapshot` for damaged or inconsistent contents.
    public init(model: Model, restoring snapshot: StreamSnapshot) throws(StreamError) {
        self.model = model
        options = snapshot.options
        sourceSampleRate = snapshot.sourceSampleRate
        pipeline = try ChannelPipeline(channel: 0, model: model, restoring: snapshot)
    }

    /// Everything that decides this stream's future events (see `StreamSnapshot`); take it
    /// between chunks.
    public func snapshot() -> StreamSnapshot { pipeline.snapshot() }

    /// A snapshot in an older format (1: no many-label events), as an earshot of that format
    /// wrote it: for the tests that hold reading such snapshots.
    func snapshot(formatVersion: UInt32) -> StreamSnapshot { pipeline.snapshot(formatVersion: formatVersion) }

    /// Continues from a snapshot in place of this stream's whole state (rate and label rules
    /// included).
    public func restore(_ snapshot: StreamSnapshot) throws(StreamError) {
        pipeline = try ChannelPipeline(channel: 0, model: model, restoring: snapshot)
        options = snapshot.options
        sourceSampleRate = snapshot.sourceSampleRate
    }

    /// Adds a chunk; returns the events it completed (model steps run as soon as a block is there).
    ///
    /// - Parameter chunk: samples at `sourceSampleRate`, any count (any chunking gives the same
    ///   events as the whole).
    /// - Returns: the events whose steps this chunk completed, in time order.
    /// - Throws: `StreamError.source` for NaN or infinite audio (the stream has then failed:
    ///   `reset()` it), `.finished` after `finish()`.
    public func process(_ chunk: [Float]) throws(StreamError) -> [ClassifierEvent] {
        try pipeline.push(chunk)
        return try runReadySteps()
    }

    /// Ends the stream: flushes the tail (the last partial block zero-padded) and closes open
    /// segments. Reset to use the stream again.
    public func finish() throws(StreamError) -> [ClassifierEvent] {
        try pipeline.endInput()
        return try runReadySteps() + pipeline.finishSegments()
    }

    private func runReadySteps() throws(StreamError) -> [ClassifierEvent] { try pipeline.stepReady() }

    /// Discards the state: the stream starts afresh (a new `model.makeState()`).
    public func reset() throws(StreamError) {
        pipeline = try ChannelPipeline(channel: 0, model: model, sourceRate: sourceSampleRate, options: options)
    }

    /// A snapshot of the model state (for `ModelState.serialized()`).
    public var state: ModelState { pipeline.state }

    /// Continues from a model state serialized earlier (`state.serialized()`), of this model.
    /// Only the model state: the label logic goes on from where this stream is. To move a
    /// whole stream, use `snapshot()` and `init(model:restoring:)`.
    public func restoreState(_ bytes: [UInt8]) throws(StreamError) {
        do { pipeline.setState(try model.restoreState(bytes)) } catch { throw .model(error) }
    }

    /// Events for a sequence of chunks, ending with the finished stream's last events.
    public nonisolated func events<S: AsyncSequence & Sendable>(for chunks: S) -> AsyncThrowingStream<ClassifierEvent, Error>
    where S.Element == [Float] {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    for try await chunk in chunks {
                        for event in try await self.process(chunk) { continuation.yield(event) }
                    }
                    for event in try await self.finish() { continuation.yield(event) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
