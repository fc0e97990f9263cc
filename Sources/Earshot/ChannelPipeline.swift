import CEarshotKernels
import EarshotAudio
import EarshotModel

/// One channel's whole path from source samples to events: resampler, block assembly, model
/// state, and the label logic: a segment tracker per label, a detection tracker per label, or
/// one event tracker for all labels (a many-label model). A stream owns one; a session owns one
/// per channel and runs their model steps together.
struct ChannelPipeline {
    let channel: Int
    let model: Model
    let options: LabelOptions
    let sourceRate: Int
    /// The model's block length and whether its scores are a softmax (read once, not per step).
    private let chunkSamples: Int
    private let softmax: Bool
    var state: ModelState
    private var resampler: StreamResampler?
    /// Samples at the model's rate not yet in a block.
    private var pending: [Float] = []
    private var pendingOffset = 0
    /// Samples at the model's rate received, and steps taken.
    private(set) var modelSamples = 0
    private(set) var steps = 0
    /// Source samples received.
    private(set) var sourceSamples = 0
    private var trackers: [(label: Int, tracker: SegmentTracker)]
    /// Per label, when the model detects events rather than segments (trackers is then empty).
    private var detectors: [(label: Int, tracker: DetectionTracker)]
    /// Every label at once, when the model's decision is many-label events (trackers and
    /// detectors are then empty).
    private var eventTracker: EventTracker?
    /// Per label: cumulative scores by step from step `sumBase` on (for segment confidence),
    /// trimmed to what open segments may still need; empty without segment trackers.
    private var sums: [[Double]]
    private var sumBase = 0
    private(set) var inputEnded = false
    private(set) var failed = false

    init(channel: Int, model: Model, sourceRate: Int, options: LabelOptions) throws(StreamError) {
        try options.validate()
        self.channel = channel
        self.model = model
        self.options = options
        self.sourceRate = sourceRate
        chunkSamples = model.chunkSamples
        softmax = model.manifest.outputs.activation == .softmax
        state = model.makeState()
        if sourceRate != model.sampleRate {
            do { resampler = try StreamResampler(inputRate: sourceRate, outputRate: model.sampleRate) } catch {
                throw .audio(error)
            }
        }
        let labels = model.labels
        let events = labels.indices.filter { labels[$0] != options.backgroundLabel }
        if let rule = options.events {
            trackers = []
            detectors = []
            eventTracker = try EventTracker(rule: rule, threshold: options.threshold, labels: labels, background: options.backgroundLabel,
                                            sampleRate: model.sampleRate, stepSamples: chunkSamples,
                                            blockSamples: model.manifest.audio.contextSamples + chunkSamples)
        } else if options.detectionWindow != nil {
            trackers = []
            detectors = events.map { ($0, DetectionTracker(options: options, sampleRate: model.sampleRate, stepSamples: model.chunkSamples)) }
        } else {
            trackers = events.map { ($0, SegmentTracker(options: options, sampleRate: model.sampleRate, stepSamples: model.chunkSamples)) }
            detectors = []
        }
        sums = trackers.isEmpty ? [] : labels.map { _ in [0] }
    }

    /// Adds source samples. NaN or infinite audio fails the channel.
    mutating func push(_ samples: [Float]) throws(StreamError) {
        guard !inputEnded else { throw .finished }
        guard !failed else { throw .source(channel: channel, reason: "the channel has failed: reset it to start again") }
        let bad = samples.withUnsafeBufferPointer { $0.isEmpty ? -1 : earshot_first_nonfinite($0.baseAddress!, $0.count) }
        if bad >= 0 {
            failed = true
            throw .source(channel: channel, reason: "audio sample \(sourceSamples + bad) is NaN or infinite")
        }
        sourceSamples += samples.count
        let resampled: [Float]
        if let resampler {
            do { resampled = try resampler.process(samples) } catch { throw .audio(error) }
        } else {
            resampled = samples
        }
        modelSamples += resampled.count
        pending += resampled
    }

    /// No more input: flushes the resampler and zero-pads a last partial block (after any whole
    /// blocks not yet stepped: a session may end a channel with several waiting).
    mutating func endInput() throws(StreamError) {
        guard !inputEnded else { return }
        if let resampler {
            do {
                let tail = try resampler.finish()
                modelSamples += tail.count
                pending += tail
            } catch { throw .audio(error) }
        }
        let partial = (pending.count - pendingOffset) % model.chunkSamples
        if partial > 0 {
            pending += [Float](repeating: 0, count: model.chunkSamples - partial)
        }
        // Windows that hold enough audio go on over zeros (BirdNET's last windows of a file).
        if let least = options.events?.minWindowAudioSeconds {
            let n = chunkSamples, window = options.events?.windowSamples ?? model.manifest.audio.contextSamples + n
            let leastSamples = Int((least * Double(model.sampleRate)).rounded(.up))
            var blocks = steps + readyBlocks
            while modelSamples - ((blocks + 1) * n - window) >= leastSamples {
                pending += [Float](repeating: 0, count: n)
                blocks += 1
            }
        }
        inputEnded = true
    }

    var hasBlock: Bool { !failed && pending.count - pendingOffset >= chunkSamples }

    mutating func takeBlock() -> [Float] {
        var block: [Float] = []
        takeBlock(into: &block)
        return block
    }

    /// The next block into `block` (which keeps its capacity: a batched step reuses its blocks).
    mutating func takeBlock(into block: inout [Float]) {
        let n = chunkSamples
        block.removeAll(keepingCapacity: true)
        block.append(contentsOf: pending[pendingOffset..<(pendingOffset + n)])
        pendingOffset += n
        // Drop what was used once it is at least half the buffer: each sample is moved at most
        // once on average, however much audio a push brings.
        if pendingOffset >= 4096 && pendingOffset * 2 >= pending.count {
            pending.removeFirst(pendingOffset)
            pendingOffset = 0
        }
    }

    /// Blocks ready now: how many `takeBlock` would give.
    var readyBlocks: Int { failed ? 0 : (pending.count - pendingOffset) / chunkSamples }

    /// Many consecutive steps of this channel at once (the model batches what comes before its
    /// recurrent layers); a window classifier's steps split between `threads` threads (their
    /// scores consumed in order, so the events are those of one thread).
    mutating func stepConsecutive(_ count: Int, threads: Int = 1) throws(StreamError) -> [ClassifierEvent] {
        let blocks = (0..<count).map { _ in takeBlock() }
        do {
            let scores = try model.predictions(forWindows: blocks, using: &state, threads: threads)
            return scores.flatMap { consume($0) }
        } catch {
            failed = true
            throw .model(error)
        }
    }

    /// Every ready block stepped (1024 at a time): a lone stream's steps.
    mutating func stepReady() throws(StreamError) -> [ClassifierEvent] {
        var events: [ClassifierEvent] = []
        while readyBlocks > 0 { events += try stepConsecutive(min(readyBlocks, 1024)) }
        return events
    }

    /// Stops the channel after a failure found elsewhere (its blocks are no longer stepped).
    mutating func markFailed() { failed = true }

    /// Replaces the model state after a step run elsewhere (a session's batched step).
    mutating func setState(_ newState: ModelState) { state = newState }

    /// Scores of the next step (its block taken with takeBlock) into events.
    mutating func consume(_ raw: [Float]) -> [ClassifierEvent] {
        var scores = raw
        options.events?.confidences(&scores)
        let step = steps
        steps += 1
        var events: [ClassifierEvent] = []
        let n = chunkSamples
        if options.includeScores {
            events.append(.scores(StepScores(channel: channel, start: source(step * n), end: source(min((step + 1) * n, modelSamples)),
                                             sampleRate: sourceRate, scores: scores)))
        }
        if !sums.isEmpty {
            for (i, score) in scores.enumerated() { sums[i].append((sums[i].last ?? 0) + Double(score)) }
        }
        let winner = scores.indices.max { scores[$0] < scores[$1] }
        // Softmax: a label scores its probability where it wins the step, else 0 (so the
        // threshold is the least confidence a winner needs); the duration rules apply alike.
        func score(_ label: Int) -> Double { softmax ? (label == winner ? Double(scores[label]) : 0.0) : Double(scores[label]) }
        for k in trackers.indices {
            let label = trackers[k].label
            events += trackers[k].tracker.add(score(label)).map { segmentEvent($0, label: label) }
        }
        for k in detectors.indices {
            let label = detectors[k].label
            if let mean = detectors[k].tracker.add(score(label)) {
                events.append(.detected(Detection(channel: channel, label: model.labels[label], sample: source(min((step + 1) * n, modelSamples)),
                                                  sampleRate: sourceRate, score: Float(mean))))
            }
        }
        if eventTracker != nil {
            events += eventTracker!.add(scores, end: min((step + 1) * n, modelSamples)).map(event)
        }
        trimSums()
        return events
    }

    /// Drops the cumulative scores of steps no open segment can reach any more.
    private mutating func trimSums() {
        guard !sums.isEmpty else { return }
        let drop = sumsNotNeeded
        guard drop >= 1024 else { return }  // now and then, not every step
        for i in sums.indices { sums[i].removeFirst(drop) }
        sumBase += drop
    }

    /// How many of the oldest cumulative scores no open segment can reach any more.
    private var sumsNotNeeded: Int {
        var oldestOpen: Int?
        for t in trackers {
            if let sample = t.tracker.oldestOpenSample { oldestOpen = min(oldestOpen ?? sample, sample) }
        }
        let keepFrom = max(0, (oldestOpen ?? steps * chunkSamples) / chunkSamples - 1)
        return max(0, min(keepFrom - sumBase, (sums.first?.count ?? 1) - 1))
    }

    /// Closes open segments at the end of the input.
    mutating func finishSegments() -> [ClassifierEvent] {
        var events: [ClassifierEvent] = []
        for k in trackers.indices {
            let label = trackers[k].label
            events += trackers[k].tracker.finish(audioLength: modelSamples).map { segmentEvent($0, label: label) }
        }
        if eventTracker != nil { events += eventTracker!.finish().map(event) }
        return events
    }

    /// Model-rate sample position in the source's clock.
    func source(_ modelPosition: Int) -> Int {
        sourceRate == model.sampleRate ? modelPosition
            : Int((Double(modelPosition) * Double(sourceRate) / Double(model.sampleRate)).rounded())
    }

    /// A many-label event as a segment with its best score and window count.
    private func event(_ output: EventTracker.Output) -> ClassifierEvent {
        func segment(_ o: EventTracker.Open) -> Segment {
            Segment(channel: channel, label: model.labels[o.label], start: source(o.start), end: source(o.end), sampleRate: sourceRate,
                    confidence: o.mean, best: o.best, windows: o.windows)
        }
        switch output {
        case let .started(o): return .started(segment(o))
        case let .ended(o): return .ended(segment(o))
        }
    }

    private func segmentEvent(_ output: SegmentTracker.Output, label: Int) -> ClassifierEvent {
        let n = chunkSamples
        switch output {
        case let .started(start):
            return .started(Segment(channel: channel, label: model.labels[label], start: source(start), end: source(start),
                                    sampleRate: sourceRate, confidence: Float(options.threshold)))
        case let .ended(start, end):
            // Mean score over the steps the segment covers.
            let count = sums[label].count
            let first = min(max(start / n - sumBase, 0), count - 1)
            let last = min(max((end + n - 1) / n - sumBase, first + 1), count - 1)
            let total = sums[label][last] - sums[label][first]
            let confidence = last > first ? Float(total / Double(last - first)) : 0
            return .ended(Segment(channel: channel, label: model.labels[label], start: source(start), end: source(end),
                                  sampleRate: sourceRate, confidence: confidence))
        }
    }
}

// MARK: Snapshots

extension ChannelPipeline {
    /// The pipeline as a snapshot, in the current format; or in format 1 (no events rule or
    /// tracker, every label's score sums) as an earshot before version 2 wrote it, which the
    /// tests of reading older snapshots take (a pipeline with an events rule has no format 1).
    func snapshot(formatVersion version: UInt32 = StreamSnapshot.formatVersion) -> StreamSnapshot {
        var w = SnapshotWriter()
        w.bytes8(state.serialized())
        w.bool(resampler != nil)
        if let s = resampler?.snapshot {
            w.int(s.inputCount); w.int(s.outputCount); w.int(s.epoch); w.floats(s.samples[...])
        }
        w.floats(pending[pendingOffset...])
        w.int(modelSamples)
        w.bool(inputEnded)
        w.bool(failed)
        w.int(trackers.count)
        for t in trackers { w.int(t.label); t.tracker.save(to: &w) }
        w.int(detectors.count)
        for d in detectors { w.int(d.label); d.tracker.save(to: &w) }
        if version >= 2 {
            w.bool(eventTracker != nil)
            eventTracker?.save(to: &w)
        }
        // Only the sums open segments still need (the values are cumulative: trimming them
        // changes no result).
        let drop = sums.isEmpty ? 0 : sumsNotNeeded
        w.int(sumBase + drop)
        if version == 1 && sums.isEmpty {
            w.int(model.labels.count)
            for _ in model.labels { w.doubles([Double](repeating: 0, count: steps - sumBase + 1)) }
        } else {
            w.int(sums.count)
            for s in sums { w.doubles(Array(s.dropFirst(drop))) }
        }
        return StreamSnapshot(modelHash: model.contentHash, sourceSampleRate: sourceRate, sourceSamples: sourceSamples,
                              steps: steps, options: options, body: w.bytes, formatVersion: version)
    }

    /// A pipeline that goes on from a snapshot of this model.
    init(channel: Int, model: Model, restoring s: StreamSnapshot) throws(StreamError) {
        guard s.modelHash == model.contentHash else {
            throw .model(.stateModelMismatch(expected: model.contentHash, found: s.modelHash))
        }
        try self.init(channel: channel, model: model, sourceRate: s.sourceSampleRate, options: s.options)
        var r = SnapshotReader(bytes: s.body)
        do { state = try model.restoreState(try r.bytes8()) } catch let e as ModelError { throw .model(e) } catch let e as StreamError { throw e } catch { throw .snapshot(reason: "\(error)") }
        guard state.steps == s.steps else { throw .snapshot(reason: "the model state took \(state.steps) steps, the stream \(s.steps)") }
        let resampled = try r.bool()
        guard resampled == (s.sourceSampleRate != model.sampleRate) else {
            throw .snapshot(reason: resampled ? "a resampler at the model's own rate" : "no resampler for \(s.sourceSampleRate) Hz")
        }
        if resampled {
            let snap = StreamResampler.Snapshot(inputRate: s.sourceSampleRate, outputRate: model.sampleRate,
                                                inputCount: try r.int(in: 0...StreamSnapshot.maxSamples, "resampler input"),
                                                outputCount: try r.int(in: 0...StreamSnapshot.maxSamples, "resampler output"),
                                                epoch: try r.int(in: 0...(1 << 40), "resampler epoch"), samples: try r.floats())
            guard snap.inputCount == s.sourceSamples else {
                throw .snapshot(reason: "the resampler had \(snap.inputCount) samples, the stream \(s.sourceSamples)")
            }
            do { resampler = try StreamResampler(restoring: snap) } catch { throw .audio(error) }
        }
        pending = try r.floats()
        pendingOffset = 0
        modelSamples = try r.int(in: 0...StreamSnapshot.maxSamples, "model samples")
        sourceSamples = s.sourceSamples
        // Steps whose samples pass 2^52 are no stream's (and their sample counts would overflow).
        guard s.steps <= StreamSnapshot.maxSteps(of: model.chunkSamples) else {
            throw .snapshot(reason: "\(s.steps) steps of \(model.chunkSamples) samples are more than 2^52 samples")
        }
        steps = s.steps
        inputEnded = try r.bool()
        failed = try r.bool()
        guard inputEnded || failed || modelSamples == steps * model.chunkSamples + pending.count else {
            throw .snapshot(reason: "\(modelSamples) samples at the model's rate do not match \(steps) steps and \(pending.count) waiting")
        }
        let trackerCount = try r.int(in: 0...4096, "segment trackers")
        guard trackerCount == trackers.count else { throw .snapshot(reason: "\(trackerCount) segment trackers; these options give \(trackers.count)") }
        for k in trackers.indices {
            guard try r.int(in: 0...4096, "label") == trackers[k].label else { throw .snapshot(reason: "segment trackers in another label order") }
            try trackers[k].tracker.load(from: &r)
        }
        let detectorCount = try r.int(in: 0...4096, "detection trackers")
        guard detectorCount == detectors.count else { throw .snapshot(reason: "\(detectorCount) detection trackers; these options give \(detectors.count)") }
        for k in detectors.indices {
            guard try r.int(in: 0...4096, "label") == detectors[k].label else { throw .snapshot(reason: "detection trackers in another label order") }
            try detectors[k].tracker.load(from: &r)
        }
        // Format 1 has no event tracker, and score sums for every model.
        let tracksEvents = s.formatVersion >= 2 ? try r.bool() : false
        guard tracksEvents == (eventTracker != nil) else {
            throw .snapshot(reason: tracksEvents ? "an event tracker; these options give none" : "no event tracker; these options give one")
        }
        try eventTracker?.load(from: &r)
        sumBase = try r.int(in: 0...steps, "score sum base")
        let sumCount = try r.int(in: 0...model.labels.count, "score sums")
        guard sumCount == sums.count || (sums.isEmpty && s.formatVersion == 1 && sumCount == model.labels.count) else {
            throw .snapshot(reason: "\(sumCount) score sums; these options keep \(sums.count)")
        }
        var restored: [[Double]] = []
        for _ in 0..<sumCount { restored.append(try r.doubles()) }
        guard restored.allSatisfy({ $0.count == steps - sumBase + 1 }) else { throw .snapshot(reason: "score sums do not cover the steps \(sumBase)...\(steps)") }
        if !sums.isEmpty { sums = restored }
        guard r.rest.isEmpty else { throw .snapshot(reason: "\(r.rest.count) bytes left over") }
    }
}

