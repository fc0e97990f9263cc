import Dispatch
import EarshotModel

/// One model a service runs, with its decision rule: a wake-word model (its decision has a
/// detection window: it answers `detection`) or a voice activity model (segments: it answers
/// `voice-started` / `voice-stopped`).
public struct ServedModel: Sendable {
    /// The model.
    public var model: Model
    /// Its decision rule (a detection window makes it a wake word).
    public var options: LabelOptions

    /// A served model with its rule (default the manifest's).
    public init(model: Model, options: LabelOptions? = nil) {
        self.model = model
        self.options = options ?? LabelOptions(model: model)
    }

    /// Whether it answers `detection` (else `voice-started` / `voice-stopped`).
    public var isWakeWord: Bool { options.detectionWindow != nil }

    /// The labels it reports (all but the background).
    var eventLabels: [String] { model.labels.filter { $0 != options.backgroundLabel } }

    /// The name a wake word goes by in `info` and `detection`: the model's name, or
    /// MODEL:LABEL for a model of several labels.
    func wakeName(label: String) -> String { eventLabels.count == 1 ? model.name : "\(model.name):\(label)" }
}

/// The streams of a service, spread over one shard per core: a shard holds one channel set per
/// model, and a tick steps every shard at once (each on its own core), every stream of a model
/// in a shard in one batch. Streams join the least loaded shard.
final class ServeEngine {
    let models: [ServedModel]

    /// Touched by one worker of a tick's `concurrentPerform` at a time, and by the loop thread
    /// only between ticks (the join of `concurrentPerform` orders the two).
    final class Shard: @unchecked Sendable {
        var sets: [ChannelSet]
        /// Per model: channel number → the stream's token.
        var owners: [[Int: UInt64]]
        var streams = 0
        /// Whether audio was pushed since the last tick (its steps wait for the tick).
        var hasAudio = false
        var output: [(stream: UInt64, model: Int, event: ClassifierEvent)] = []

        init(models: [ServedModel]) {
            sets = models.map { ChannelSet(model: $0.model, options: $0.options) }
            owners = models.map { _ in [:] }
        }

        func route(_ events: [ClassifierEvent], model m: Int) {
            for e in events { if let s = owners[m][e.channel] { output.append((s, m, e)) } }
        }

        /// Steps every stream of the shard that has a block ready, one batch per model.
        func step() {
            hasAudio = false
            for m in sets.indices { route(sets[m].drain(), model: m) }
        }
    }

    private(set) var shards: [Shard]
    /// Blocks stepped, all models.
    var steps: Int { shards.reduce(0) { $0 + $1.sets.reduce(0) { $0 + $1.stepsRun } } }

    init(models: [ServedModel], shards count: Int) {
        self.models = models
        shards = (0..<max(1, count)).map { _ in Shard(models: models) }
    }

    /// A new stream at `rate` on the least loaded shard, run by the models in `wanted`.
    func join(stream: UInt64, rate: Int, wanted: [Bool]) throws(StreamError) -> (shard: Int, channels: [Int?]) {
        let s = shards.indices.min { shards[$0].streams < shards[$1].streams } ?? 0
        let shard = shards[s]
        var channels: [Int?] = []
        do {
            for m in models.indices {
                guard wanted[m] else { channels.append(nil); continue }
                let k = try shard.sets[m].add(sourceRate: rate, kind: .live)
                shard.owners[m][k] = stream
                channels.append(k)
            }
        } catch {
            release(shard: s, channels: channels)
            throw error
        }
        shard.streams += 1
        return (s, channels)
    }

    /// Adds a stream's audio (outside a tick): the next tick steps it; events of a failed
    /// channel go to the shard's output.
    func push(_ samples: [Float], shard s: Int, channels: [Int?]) {
        let shard = shards[s]
        shard.hasAudio = true
        for (m, channel) in channels.enumerated() {
            if let channel { shard.route(shard.sets[m].push(samples, channel: channel), model: m) }
        }
    }

    /// Ends a stream's input: its tail is stepped, its open segments closed (events to the output).
    func finish(shard s: Int, channels: [Int?]) {
        let shard = shards[s]
        for (m, channel) in channels.enumerated() {
            if let channel { shard.route(shard.sets[m].finish(channel: channel), model: m) }
        }
    }

    /// The stream leaves; its states are discarded.
    func leave(shard s: Int, channels: [Int?]) {
        release(shard: s, channels: channels)
        shards[s].streams -= 1
    }

    private func release(shard s: Int, channels: [Int?]) {
        let shard = shards[s]
        for (m, channel) in channels.enumerated() {
            if let channel {
                shard.sets[m].remove(channel)
                shard.owners[m][channel] = nil
            }
        }
    }

    /// One tick: every shard with new audio stepped at once, one core each.
    func tick() {
        let busy = shards.filter(\.hasAudio)
        if busy.count == 1 {
            busy[0].step()
        } else if busy.count > 1 {
            DispatchQueue.concurrentPerform(iterations: busy.count) { busy[$0].step() }
        }
    }

    /// Every shard's events since the last call.
    func takeOutput() -> [(stream: UInt64, model: Int, event: ClassifierEvent)] {
        var out: [(stream: UInt64, model: Int, event: ClassifierEvent)] = []
        for shard in shards where !shard.output.isEmpty {
            out += shard.output
            shard.output.removeAll(keepingCapacity: true)
        }
        return out
    }
}
