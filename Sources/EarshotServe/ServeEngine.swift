import Dispatch
import Foundation
import Earshot

/// One model a service runs, with its decision rule: a wake-word model (its decision has a
/// detection window: it answers `detection`), a sound-events model (many labels at once: it
/// answers `sound-event`, an event of Earshot's own that `info` describes and Wyoming clients
/// ignore) or a voice activity model (segments: it answers `voice-started` / `voice-stopped`).
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

    /// Whether it answers `sound-event` (an events rule: many labels at once).
    public var isSoundEvents: Bool { options.events != nil }

    /// The labels it reports (all but the background).
    var eventLabels: [String] { model.labels.filter { $0 != options.backgroundLabel } }

    /// The name a wake word goes by in `info` and `detection`: the model's name, or
    /// MODEL:LABEL for a model of several labels.
    func wakeName(label: String) -> String { eventLabels.count == 1 ? model.name : "\(model.name):\(label)" }
}

/// The streams of a service, spread over shards (`ServeOptions.shards`, one per core): a shard
/// holds one channel set per model, and a tick steps every shard with audio, the cores taking
/// the next shard as they come free, every stream of a model in a shard in one batch. Streams
/// join the least loaded shard of those in use: one per core, and one more for each
/// `partStreams` streams.
///
/// The engine belongs to one thread (the server's loop). A tick runs on worker threads while
/// that thread goes on with its sockets (`startTick`); every other method first waits for a
/// tick in flight to end (`settle`), so the shards are only ever touched by the tick's workers
/// or by the owning thread, never both at once.
final class ServeEngine {
    let models: [ServedModel]

    /// Touched by one worker of a tick at a time, and by the owning thread only between ticks
    /// (`settle` waits on the semaphore the tick signals last: that orders the two).
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
    var steps: Int {
        settle()
        return stepsCounted
    }

    private static func stepCount(_ shards: [Shard]) -> Int { shards.reduce(0) { $0 + $1.sets.reduce(0) { $0 + $1.stepsRun } } }

    /// Shards in use at first (one per core); more are opened as the streams pass `partStreams`
    /// a shard.
    private let cores: Int
    /// Streams a shard takes before the next one is opened: batches of a few hundred streams
    /// keep the batched step's gain, and more shards than cores let a slowed core take fewer.
    static let partStreams = 256

    init(models: [ServedModel], shards count: Int, cores: Int = ProcessInfo.processInfo.activeProcessorCount) {
        self.models = models
        self.cores = max(1, cores)
        shards = (0..<max(1, count)).map { _ in Shard(models: models) }
    }

    /// A new stream at `rate` on the least loaded of the shards in use, run by the models in `wanted`.
    func join(stream: UInt64, rate: Int, wanted: [Bool]) throws(StreamError) -> (shard: Int, channels: [Int?]) {
        settle()
        let total = shards.reduce(0) { $0 + $1.streams }
        let open = min(shards.count, max(cores, total / Self.partStreams + 1))
        let s = (0..<open).min { shards[$0].streams < shards[$1].streams } ?? 0
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
        settle()
        let shard = shards[s]
        shard.hasAudio = true
        for (m, channel) in channels.enumerated() {
            if let channel { shard.route(shard.sets[m].push(samples, channel: channel), model: m) }
        }
    }

    /// Ends a stream's input: its tail is stepped, its open segments closed (events to the output).
    func finish(shard s: Int, channels: [Int?]) {
        settle()
        let shard = shards[s]
        for (m, channel) in channels.enumerated() {
            if let channel { shard.route(shard.sets[m].finish(channel: channel), model: m) }
        }
        stepsCounted = Self.stepCount(shards)
    }

    /// The stream leaves; its states are discarded.
    func leave(shard s: Int, channels: [Int?]) {
        settle()
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

    /// Steps every shard of a tick, the cores taking shards as they come free.
    private static func step(_ busy: [Shard]) {
        if busy.count == 1 {
            busy[0].step()
        } else if busy.count > 1 {
            DispatchQueue.concurrentPerform(iterations: busy.count) { busy[$0].step() }
        }
    }

    /// Whether a tick started by `startTick` may still be running.
    private var ticking = false
    private let tickDone = DispatchSemaphore(value: 0)
    /// How long the last tick's steps took (written by the tick before it signals).
    private let tickTime = TickTime()

    /// Written by a tick's thread before it signals `tickDone`, read by the owning thread after
    /// waiting on it: never both at once.
    private final class TickTime: @unchecked Sendable {
        var value = Duration.zero
        /// Blocks stepped, all models, when the tick ended.
        var steps = 0
    }

    /// Blocks stepped, all models, as of the last tick that ended or stream that finished (the
    /// only two that step), without waiting for a tick in flight: a periodic summary never
    /// stalls the loop.
    private(set) var stepsCounted = 0

    /// Starts a tick (every shard with new audio stepped, on all cores) on worker
    /// threads and returns at once; `done` is signalled when it has ended. False when no shard
    /// has audio (no tick).
    func startTick(done: WakeSignal) -> Bool {
        settle()
        let busy = shards.filter(\.hasAudio)
        guard !busy.isEmpty else { return false }
        ticking = true
        let (semaphore, time, all) = (tickDone, tickTime, shards)
        DispatchQueue.global().async {
            let start = ContinuousClock.now
            Self.step(busy)
            time.value = ContinuousClock.now - start
            time.steps = Self.stepCount(all)
            semaphore.signal()
            done.signal()
        }
        return true
    }

    /// Waits for a tick in flight to end (then the shards are the owning thread's again).
    func settle() {
        guard ticking else { return }
        tickDone.wait()
        ticking = false
        endedTickTime = tickTime.value
        stepsCounted = tickTime.steps
    }

    private var endedTickTime: Duration?

    /// How long the steps of the last tick that ended took, once (nil: none since the last call).
    func takeTickTime() -> Duration? {
        settle()
        defer { endedTickTime = nil }
        return endedTickTime
    }

    /// Every shard's events since the last call.
    func takeOutput() -> [(stream: UInt64, model: Int, event: ClassifierEvent)] {
        settle()
        var out: [(stream: UInt64, model: Int, event: ClassifierEvent)] = []
        for shard in shards where !shard.output.isEmpty {
            out += shard.output
            shard.output.removeAll(keepingCapacity: true)
        }
        return out
    }
}
