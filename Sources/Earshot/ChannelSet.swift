import Dispatch
import EarshotModel

/// The channels of one model that step together: each with its own pipeline (resampler, state,
/// label logic), joining and leaving at any time. A round runs one batched model step for every
/// channel with a block ready, live channels first; a channel's results are the same whether it
/// steps alone or in a batch, whoever else joins or leaves. A channel that fails ends with a
/// `.failed` event; the others go on. A `Session` owns one; a server owns one per model and core.
package struct ChannelSet {
    let model: Model
    let defaultOptions: LabelOptions
    /// By channel number; nil where a channel left (its number is given to the next that joins).
    private var pipelines: [ChannelPipeline?] = []
    private var kinds: [Session.Kind] = []
    private var finished: [Bool] = []
    private var dropped: [Int] = []
    package private(set) var openCount = 0
    /// Blocks stepped so far, all channels.
    package private(set) var stepsRun = 0
    /// Batched steps so far that were split between threads, and parts of them whose batch
    /// refused a block (their channels then stepped one by one, so that only the bad one stops).
    package private(set) var splitSteps = 0
    package private(set) var splitPartsRefused = 0
    /// Threads a batched step of at least `parallelSteps` channels is split between (its
    /// channels cut into that many runs, each its own batch); and threads a lone file channel's
    /// run of blocks may take when the model's steps are windows (`Model.stepsAreWindows`).
    /// 1: everything on this thread.
    package var threads = 1
    /// Each thread's blocks, states and scores, kept from step to step.
    private var parts: [StepPart] = []

    package init(model: Model, options: LabelOptions) {
        self.model = model
        defaultOptions = options
    }

    /// The open channels' numbers, in order.
    package var channels: [Int] { pipelines.indices.filter { pipelines[$0] != nil } }

    /// The rate of a channel's source audio.
    package func sourceRate(_ k: Int) -> Int? { pipelines[safe: k]??.sourceRate }

    package func isOpen(_ k: Int) -> Bool { pipelines.indices.contains(k) && pipelines[k] != nil }

    /// A new channel with a fresh state; its number is the lowest not in use.
    package mutating func add(sourceRate: Int, options: LabelOptions? = nil, kind: Session.Kind) throws(StreamError) -> Int {
        let k = pipelines.firstIndex(where: { $0 == nil }) ?? pipelines.count
        let pipeline = try ChannelPipeline(channel: k, model: model, sourceRate: sourceRate, options: options ?? defaultOptions)
        place(pipeline, at: k, kind: kind)
        return k
    }

    /// A channel that goes on from a stream snapshot; its number is the lowest not in use.
    package mutating func add(restoring snapshot: StreamSnapshot, kind: Session.Kind) throws(StreamError) -> Int {
        let k = pipelines.firstIndex(where: { $0 == nil }) ?? pipelines.count
        let pipeline = try ChannelPipeline(channel: k, model: model, restoring: snapshot)
        place(pipeline, at: k, kind: kind)
        finished[k] = pipeline.inputEnded || pipeline.failed
        return k
    }

    private mutating func place(_ pipeline: ChannelPipeline, at k: Int, kind: Session.Kind) {
        if k == pipelines.count {
            pipelines.append(pipeline)
            kinds.append(kind)
            finished.append(false)
            dropped.append(0)
        } else {
            pipelines[k] = pipeline
            kinds[k] = kind
            finished[k] = false
            dropped[k] = 0
        }
        openCount += 1
    }

    /// A channel's whole stream state.
    package func snapshot(_ k: Int) throws(StreamError) -> StreamSnapshot {
        guard let p = pipelines[safe: k] ?? nil else { throw .noSuchChannel(channel: k, open: channels) }
        return p.snapshot()
    }

    /// The channel leaves: its state and everything it had not stepped are discarded.
    package mutating func remove(_ k: Int) {
        guard isOpen(k) else { return }
        pipelines[k] = nil
        openCount -= 1
        while let last = pipelines.last, last == nil {
            pipelines.removeLast(); kinds.removeLast(); finished.removeLast(); dropped.removeLast()
        }
    }

    package func check(_ k: Int) throws(StreamError) {
        guard isOpen(k) else { throw .noSuchChannel(channel: k, open: channels) }
    }

    /// Adds audio to one channel (its steps run at the next `drain`).
    package mutating func push(_ chunk: [Float], channel k: Int) -> [ClassifierEvent] {
        guard isOpen(k), !finished[k], pipelines[k]?.failed == false else { return [] }
        do {
            try pipelines[k]?.push(chunk)
            return []
        } catch {
            finished[k] = true
            return [.failed(channel: k, error: error)]
        }
    }

    package mutating func reportDropped(_ samples: Int, channel k: Int) throws(StreamError) -> ClassifierEvent {
        try check(k)
        dropped[k] += samples
        return .dropped(channel: k, samples: samples, total: dropped[k])
    }

    package mutating func fail(channel k: Int, error: StreamError) throws(StreamError) -> ClassifierEvent {
        try check(k)
        finished[k] = true
        pipelines[k]?.markFailed()
        return .failed(channel: k, error: error)
    }

    /// Ends one channel's input: its tail is stepped (with every other channel's ready blocks)
    /// and its open segments closed. The channel stays open (for its counters) until removed.
    package mutating func finish(channel k: Int) -> [ClassifierEvent] {
        guard isOpen(k), !finished[k], pipelines[k]?.failed == false else { return [] }
        do { try pipelines[k]?.endInput() } catch {
            finished[k] = true
            return [.failed(channel: k, error: error)]
        }
        let events = drain()
        finished[k] = true
        return events + (pipelines[k]?.finishSegments() ?? [])
    }

    /// Runs batched steps, live channels first, until no channel has a block.
    package mutating func drain() -> [ClassifierEvent] {
        var events: [ClassifierEvent] = []
        var ready: [Int] = [], live: [Int] = []
        while true {
            ready.removeAll(keepingCapacity: true)
            live.removeAll(keepingCapacity: true)
            for k in pipelines.indices where pipelines[k]?.hasBlock == true {
                ready.append(k)
                if kinds[k] == .live { live.append(k) }
            }
            guard !ready.isEmpty else { return events }
            if ready.count == 1, live.isEmpty, let blocks = pipelines[ready[0]]?.readyBlocks, blocks > 1 {
                // One file channel with a run of blocks: its steps go through the model together.
                let k = ready[0]
                do {
                    stepsRun += min(blocks, 1024)
                    events += try pipelines[k]?.stepConsecutive(min(blocks, 1024), threads: threads) ?? []
                } catch {
                    finished[k] = true
                    events.append(.failed(channel: k, error: error))
                }
                continue
            }
            events += step(live.isEmpty ? ready : live)
        }
    }

    /// One batched model step for `channels` (all open, each with a block). With `threads` > 1 and
    /// at least `parallelSteps` channels, the channels are cut into `threads` runs, each stepped
    /// as its own batch on its own thread; a batch equals each stream alone bit for bit, so the
    /// scores, states and events are those of one batch on one thread, in channel order.
    private mutating func step(_ channels: [Int]) -> [ClassifierEvent] {
        stepsRun += channels.count
        let partCount = channels.count >= Self.parallelSteps ? max(1, min(threads, channels.count)) : 1
        // A copy of this set shares the parts with it: each set makes its own before using them.
        for p in parts.indices where !isKnownUniquelyReferenced(&parts[p]) { parts[p] = StepPart() }
        while parts.count < partCount { parts.append(StepPart()) }
        // Each stream's state is swapped out of its pipeline into its part for the step and back
        // after it (placeholders stand in meanwhile), so that a step copies no state.
        for p in 0..<partCount {
            let part = parts[p], range = partRange(p, of: partCount, count: channels.count)
            part.resize(range.count, model: model)
            for (i, k) in channels[range].enumerated() {
                pipelines[k]?.takeBlock(into: &part.blocks[i])
                swap(&part.states[i], &pipelines[k]!.state)
            }
        }
        let model = self.model
        if partCount == 1 {
            parts[0].run(model)
        } else {
            splitSteps += 1
            let running = parts
            DispatchQueue.concurrentPerform(iterations: partCount) { p in running[p].run(model) }
        }
        var events: [ClassifierEvent] = []
        let n = model.labels.count
        for p in 0..<partCount {
            let part = parts[p], range = partRange(p, of: partCount, count: channels.count)
            for (i, k) in channels[range].enumerated() { swap(&part.states[i], &pipelines[k]!.state) }
            guard part.failed else {
                for (i, k) in channels[range].enumerated() { events += pipelines[k]?.consume(Array(part.scores[(i * n)..<((i + 1) * n)])) ?? [] }
                continue
            }
            // The part's batch refused a block (and left the states as they were): each alone,
            // so that only the bad channel stops.
            if partCount > 1 { splitPartsRefused += 1 }
            for (i, k) in channels[range].enumerated() {
                do {
                    let s = try model.prediction(from: part.blocks[i], using: &pipelines[k]!.state)
                    events += pipelines[k]?.consume(s) ?? []
                } catch {
                    finished[k] = true
                    pipelines[k]?.markFailed()
                    events.append(.failed(channel: k, error: .model(error)))
                }
            }
        }
        return events
    }

    /// The fewest channels of a batched step that are split between threads: a smaller batch
    /// steps faster on one thread than it would be handed out.
    static let parallelSteps = 32
}

/// One thread's share of a batched step: its channels' blocks, states (moved in from their
/// pipelines for the step) and scores, kept from step to step so that a step allocates nothing.
/// `@unchecked Sendable`: during a step, concurrentPerform's iteration p alone touches part p;
/// before and after it, only the thread stepping the set does (a set makes its own parts when
/// a copy shares them).
private final class StepPart: @unchecked Sendable {
    var blocks: [[Float]] = []
    var states: [ModelState] = []
    var scores: [Float] = []
    /// Placeholders not in use this step, kept for the next larger one.
    var spare: [ModelState] = []
    var failed = false

    /// `count` blocks and states; the state slots hold placeholders of the model.
    func resize(_ count: Int, model: Model) {
        if blocks.count > count { blocks.removeLast(blocks.count - count) }
        while blocks.count < count { blocks.append([]) }
        while states.count > count, let last = states.popLast() { spare.append(last) }
        while states.count < count { states.append(spare.popLast() ?? model.makeState()) }
    }

    /// The batch through the model; on failure the states are as they were.
    func run(_ model: Model) {
        do {
            try model.predictions(from: blocks, using: &states, into: &scores)
            failed = false
        } catch {
            failed = true
        }
    }
}
