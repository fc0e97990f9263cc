import EarshotModel

/// Many channels, one shared model: each channel has its own state, and every round runs one
/// batched model step for all channels that have a block ready. Live channels step before
/// file channels, and the rounds repeat until no channel has a block. A channel that fails
/// (its audio holds NaN, its source throws) ends with a `.failed` event; the others go on.
public actor Session {
    public enum Kind: Sendable { case file, live }

    public let model: Model
    public let channelCount: Int
    private var pipelines: [ChannelPipeline]
    private let kinds: [Kind]
    private var finished: [Bool]
    private var dropped: [Int]

    /// `sourceSampleRate`: the rate of every channel's audio; `kinds`: per channel (default all files).
    public init(model: Model, channelCount: Int, sourceSampleRate: Int? = nil, options: LabelOptions? = nil,
                kinds: [Kind]? = nil) throws(StreamError) {
        guard channelCount >= 1 else { throw .invalidOption(name: "channelCount", value: "\(channelCount)", expected: ">= 1") }
        let options = options ?? LabelOptions(model: model)
        var pipelines: [ChannelPipeline] = []
        for k in 0..<channelCount {
            pipelines.append(try ChannelPipeline(channel: k, model: model, sourceRate: sourceSampleRate ?? model.sampleRate, options: options))
        }
        self.model = model
        self.channelCount = channelCount
        self.pipelines = pipelines
        self.kinds = kinds ?? Array(repeating: .file, count: channelCount)
        finished = Array(repeating: false, count: channelCount)
        dropped = Array(repeating: 0, count: channelCount)
    }

    /// Adds one chunk per channel (an empty chunk where a channel has nothing new); returns the
    /// events of the steps that became possible.
    public func process(_ chunks: [[Float]]) -> [ClassifierEvent] {
        var events: [ClassifierEvent] = []
        for (k, chunk) in chunks.enumerated() where k < channelCount && !chunk.isEmpty {
            events += push(chunk, channel: k)
        }
        return events + drain()
    }

    /// Adds audio to one channel.
    public func process(_ chunk: [Float], channel: Int) throws(StreamError) -> [ClassifierEvent] {
        guard (0..<channelCount).contains(channel) else { throw .noSuchChannel(channel: channel, channelCount: channelCount) }
        return push(chunk, channel: channel) + drain()
    }

    /// Reports audio a live source dropped before it reached the session.
    public func reportDropped(_ samples: Int, channel: Int) throws(StreamError) -> ClassifierEvent {
        guard (0..<channelCount).contains(channel) else { throw .noSuchChannel(channel: channel, channelCount: channelCount) }
        dropped[channel] += samples
        return .dropped(channel: channel, samples: samples, total: dropped[channel])
    }

    /// Marks a channel failed (e.g. its source threw); the others go on.
    public func fail(channel: Int, error: StreamError) throws(StreamError) -> ClassifierEvent {
        guard (0..<channelCount).contains(channel) else { throw .noSuchChannel(channel: channel, channelCount: channelCount) }
        finished[channel] = true
        pipelines[channel].markFailed()
        return .failed(channel: channel, error: error)
    }

    /// Ends one channel's input: its tail is stepped and its open segments closed.
    public func finish(channel: Int) -> [ClassifierEvent] {
        guard (0..<channelCount).contains(channel), !finished[channel], !pipelines[channel].failed else { return [] }
        var events: [ClassifierEvent] = []
        do { try pipelines[channel].endInput() } catch {
            finished[channel] = true
            return [.failed(channel: channel, error: error)]
        }
        events += drain()
        finished[channel] = true
        return events + pipelines[channel].finishSegments()
    }

    /// Ends every channel.
    public func finish() -> [ClassifierEvent] {
        (0..<channelCount).flatMap { finish(channel: $0) }
    }

    private func push(_ chunk: [Float], channel k: Int) -> [ClassifierEvent] {
        guard !finished[k], !pipelines[k].failed else { return [] }
        do {
            try pipelines[k].push(chunk)
            return []
        } catch {
            finished[k] = true
            return [.failed(channel: k, error: error)]
        }
    }

    /// Runs batched steps, live channels first, until no channel has a block.
    private func drain() -> [ClassifierEvent] {
        var events: [ClassifierEvent] = []
        while true {
            let ready = pipelines.indices.filter { pipelines[$0].hasBlock }
            guard !ready.isEmpty else { return events }
            let live = ready.filter { kinds[$0] == .live }
            if ready.count == 1, live.isEmpty, pipelines[ready[0]].readyBlocks > 1 {
                // One file channel with a run of blocks: its steps go through the model together.
                let k = ready[0]
                do {
                    events += try pipelines[k].stepConsecutive(min(pipelines[k].readyBlocks, 1024))
                } catch {
                    finished[k] = true
                    events.append(.failed(channel: k, error: error))
                }
                continue
            }
            events += step(live.isEmpty ? ready : live)
        }
    }

    /// One batched model step for `channels`.
    private func step(_ channels: [Int]) -> [ClassifierEvent] {
        let blocks = channels.map { pipelines[$0].takeBlock() }
        var states = channels.map { pipelines[$0].state }
        do {
            let scores = try model.predictions(from: blocks, using: &states)
            var events: [ClassifierEvent] = []
            for (i, k) in channels.enumerated() {
                pipelines[k].setState(states[i])
                events += pipelines[k].consume(scores[i])
            }
            return events
        } catch {
            // The batch refused a block: run each alone so that only the bad channel stops.
            var events: [ClassifierEvent] = []
            for (i, k) in channels.enumerated() {
                var state = pipelines[k].state
                do {
                    let s = try model.prediction(from: blocks[i], using: &state)
                    pipelines[k].setState(state)
                    events += pipelines[k].consume(s)
                } catch {
                    finished[k] = true
                    pipelines[k].markFailed()
                    events.append(.failed(channel: k, error: .model(error)))
                }
            }
            return events
        }
    }
}
