import EarshotModel

/// Many channels, one shared model: each channel has its own state, and every round runs one
/// batched model step for all channels that have a block ready. Live channels step before
/// file channels, and the rounds repeat until no channel has a block. A channel that fails
/// (its audio holds NaN, its source throws) ends with a `.failed` event; the others go on.
///
/// Channels come and go: `addChannel` joins a new stream (fresh state) to the batch and
/// `removeChannel` lets one go, with no effect on the others' results: channel k in a batch,
/// with whoever joins and leaves around it, gives what it gives alone.
public actor Session {
    /// A file channel is stepped in runs of blocks; a live channel first and block by block.
    public enum Kind: Sendable { case file, live }

    /// The model every channel runs.
    public let model: Model
    /// The default rate of the channels' audio.
    public let sourceSampleRate: Int
    private var channelSet: ChannelSet

    /// `channelCount` channels 0..<channelCount to begin with (0: none yet, add them later).
    /// `sourceSampleRate`: the rate of every channel's audio; `kinds`: per channel (default all files).
    /// `threads`: how many threads a lone file channel's run of steps may take when the model is
    /// a window classifier (`Model.stepsAreWindows`), and a batched step of 32 or more channels
    /// is split between (the same events whatever the number).
    public init(model: Model, channelCount: Int, sourceSampleRate: Int? = nil, options: LabelOptions? = nil,
                kinds: [Kind]? = nil, threads: Int = 1) throws(StreamError) {
        guard channelCount >= 0 else { throw .invalidOption(name: "channelCount", value: "\(channelCount)", expected: ">= 0") }
        guard threads >= 1 else { throw .invalidOption(name: "threads", value: "\(threads)", expected: ">= 1") }
        let options = options ?? LabelOptions(model: model)
        try options.validate()
        self.model = model
        self.sourceSampleRate = sourceSampleRate ?? model.sampleRate
        var set = ChannelSet(model: model, options: options)
        for k in 0..<channelCount {
            _ = try set.add(sourceRate: self.sourceSampleRate, kind: kinds?[safe: k] ?? .file)
        }
        set.threads = threads
        self.channelSet = set
    }

    /// Channels open now.
    public var channelCount: Int { channelSet.openCount }

    /// The open channels' numbers.
    public var channels: [Int] { channelSet.channels }

    /// Joins a new channel with a fresh state: its audio at `sourceSampleRate` (default the
    /// session's), its own options (default the session's). Returns its number: the lowest
    /// not in use, so a number is given again once its channel has been removed.
    ///
    ///     let session = try Session(model: model, channelCount: 0)
    ///     let k = try await session.addChannel(sourceSampleRate: 44100)
    ///     let events = try await session.process(chunk, channel: k)
    ///     let last = await session.finish(channel: k)
    ///     try await session.removeChannel(k)
    ///
    /// - Throws: `StreamError.invalidOption` for options out of range, `.audio` when no
    ///   resampler takes the rate.
    public func addChannel(sourceSampleRate: Int? = nil, options: LabelOptions? = nil, kind: Kind = .live) throws(StreamError) -> Int {
        try channelSet.add(sourceRate: sourceSampleRate ?? self.sourceSampleRate, options: options, kind: kind)
    }

    /// Joins a channel that goes on from a stream snapshot (taken from a `StreamClassifier` or
    /// a session channel, here or in another process): its events go on exactly as the
    /// stream's would have. Returns its number.
    /// - Throws: `StreamError.model(.stateModelMismatch)` for another model's snapshot,
    ///   `.snapshot` for damaged or inconsistent contents.
    public func addChannel(restoring snapshot: StreamSnapshot, kind: Kind = .live) throws(StreamError) -> Int {
        try channelSet.add(restoring: snapshot, kind: kind)
    }

    /// Everything that decides a channel's future events (see `StreamSnapshot`).
    public func snapshot(channel: Int) throws(StreamError) -> StreamSnapshot {
        try channelSet.snapshot(channel)
    }

    /// The channel leaves: its state and any audio it had not stepped are discarded (finish it
    /// first for its last events).
    public func removeChannel(_ channel: Int) throws(StreamError) {
        try channelSet.check(channel)
        channelSet.remove(channel)
    }

    /// Adds one chunk per channel number (an empty chunk where a channel has nothing new);
    /// returns the events of the steps that became possible.
    public func process(_ chunks: [[Float]]) -> [ClassifierEvent] {
        var events: [ClassifierEvent] = []
        for (k, chunk) in chunks.enumerated() where !chunk.isEmpty && channelSet.isOpen(k) {
            events += channelSet.push(chunk, channel: k)
        }
        return events + channelSet.drain()
    }

    /// Adds audio to one channel.
    public func process(_ chunk: [Float], channel: Int) throws(StreamError) -> [ClassifierEvent] {
        try channelSet.check(channel)
        return channelSet.push(chunk, channel: channel) + channelSet.drain()
    }

    /// Reports audio a live source dropped before it reached the session.
    public func reportDropped(_ samples: Int, channel: Int) throws(StreamError) -> ClassifierEvent {
        try channelSet.reportDropped(samples, channel: channel)
    }

    /// Marks a channel failed (e.g. its source threw); the others go on.
    public func fail(channel: Int, error: StreamError) throws(StreamError) -> ClassifierEvent {
        try channelSet.fail(channel: channel, error: error)
    }

    /// Ends one channel's input: its tail is stepped and its open segments closed.
    public func finish(channel: Int) -> [ClassifierEvent] {
        channelSet.finish(channel: channel)
    }

    /// Ends every channel.
    public func finish() -> [ClassifierEvent] {
        channelSet.channels.flatMap { channelSet.finish(channel: $0) }
    }
}

extension Array {
    subscript(safe i: Int) -> Element? { indices.contains(i) ? self[i] : nil }
}
