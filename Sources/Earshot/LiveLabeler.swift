import EarshotAudio
import EarshotModel
import Foundation

/// Live classification: an `ALSACapture` feeding a session of one channel per captured channel
/// (each with its own state), events handed on as they happen with how long after their audio
/// was captured they were delivered. Audio lost on the way (the device overran, or the queue
/// dropped the oldest chunks) is reported as `.dropped` and stands as silence in the stream, so
/// that segment times keep to the capture's clock.
///
/// Several models can listen to one capture (`init(models:gate:showGate:)`): each has a session
/// of its own, and their events come out together. A gate model (a voice activity detector)
/// keeps only the detections of the others that come while it hears speech or within
/// `gateSeconds` after, as openWakeWord's VAD threshold does.
public struct LiveLabeler: Sendable {
    /// The first model (the one of `init(model:options:)`).
    public let model: Model
    /// Its label rules.
    public var options: LabelOptions
    /// Every model listening, the first being `model`, each with its options.
    public let models: [(model: Model, options: LabelOptions)]
    /// Which of `models` gates the others' detections (a voice activity model), if any.
    public let gate: Int?
    /// Whether the gate's own events are delivered.
    public let showGate: Bool
    /// How long after speech a detection still counts (seconds).
    public var gateSeconds: Double = 1

    /// One model on the capture.
    public init(model: Model, options: LabelOptions? = nil) {
        let options = options ?? LabelOptions(model: model)
        self.models = [(model, options)]
        self.model = model
        self.options = options
        self.gate = nil
        self.showGate = true
    }

    /// Several models on one capture; `gate` indexes `models`.
    public init(models: [(model: Model, options: LabelOptions)], gate: Int? = nil, showGate: Bool = true) throws(StreamError) {
        guard !models.isEmpty else { throw .invalidOption(name: "models", value: "none", expected: "at least one model") }
        self.models = models
        self.model = models[0].model
        self.options = models[0].options
        self.gate = gate.flatMap { models.indices.contains($0) ? $0 : nil }
        self.showGate = showGate
    }

    /// The models whose events are delivered (indices into `models`): all but a gate that was
    /// not asked for with the others.
    public var shownModels: [Int] { models.indices.filter { $0 != gate || showGate } }

    /// The events of all sessions for one chunk, each with the index of its model: the gate's
    /// first (it decides the others' detections), then the others in order.
    private func merge(_ perModel: [[ClassifierEvent]], gates judge: inout DetectionGate) -> [(event: ClassifierEvent, model: Int)] {
        guard let gate else { return perModel.enumerated().flatMap { m, events in events.map { ($0, m) } } }
        for event in perModel[gate] { judge.observe(event) }
        var out = showGate ? perModel[gate].map { ($0, gate) } : []
        for (k, events) in perModel.enumerated() where k != gate {
            out += events.filter { event in
                guard case let .detected(d) = event else { return true }
                return judge.admits(d)
            }.map { ($0, k) }
        }
        return out
    }

    /// One delivery: the events completed by a captured chunk (or by the end of capture).
    public struct Delivery: Sendable {
        /// The events, in order.
        public var events: [ClassifierEvent]
        /// For each event, the index in `models` of the model that made it (the first model's
        /// for a report of dropped audio, which every model shares).
        public var models: [Int]
        /// From the capture of the chunk's last frame to now; nil for the events of the end.
        public var latency: Duration?
        /// Per channel: the chunk's RMS level in dBFS.
        public var levels: [Float]
    }

    /// What a run captured and lost.
    public struct Summary: Sendable {
        /// Frames captured.
        public var frames = 0
        /// Frames dropped before the model (reported as `.dropped` events).
        public var droppedFrames = 0
        /// Device overruns.
        public var overruns = 0
        /// Latencies of the deliveries that carried events: a histogram of fixed size, so that
        /// a run of days takes no more memory than a run of seconds.
        public var latencies = LatencyHistogram()

        /// The p-th percentile (0...1) of delivery latency; nil before any delivery.
        public func latencyPercentile(_ p: Double) -> Duration? { latencies.percentile(p) }
    }

    /// The most silence pushed at once where audio was lost: a long loss stands as silence in
    /// pieces of this many frames, never as one array of its whole length.
    public static let silencePieceFrames = 16384

    /// Runs until the capture ends (its duration) or the task is cancelled (then open segments
    /// are closed and delivered all the same).
    public func run(_ capture: ALSACapture, deliver: (Delivery) -> Void) async throws -> Summary {
        let channels = capture.settings.channels
        var sessions: [Session] = []
        for m in models {
            sessions.append(try Session(model: m.model, channelCount: channels, sourceSampleRate: capture.settings.sampleRate,
                                        options: m.options, kinds: Array(repeating: .live, count: channels)))
        }
        let session = sessions[0]
        var gates = DetectionGate(seconds: gateSeconds)
        var summary = Summary()
        var reportedDrops = 0
        var nextFrame = 0
        var failure: Error?
        do {
            for try await chunk in capture.chunks() {
                var events: [(event: ClassifierEvent, model: Int)] = []
                // Frames the queue dropped before this chunk: reported on every channel.
                let dropped = capture.droppedFrames
                if dropped > reportedDrops {
                    for k in 0..<channels { events.append((try await session.reportDropped(dropped - reportedDrops, channel: k), 0)) }
                    reportedDrops = dropped
                }
                // Audio lost before this chunk (dropped from the queue, or in a device overrun)
                // becomes silence of the same length, so that every later time stays on the
                // capture's clock; the loss itself was reported above.
                var gap = chunk.firstFrame - nextFrame
                if gap > 0 {
                    let silence = [Float](repeating: 0, count: min(gap, Self.silencePieceFrames))
                    while gap > 0 {
                        let piece = min(gap, silence.count)
                        let input = Array(repeating: piece == silence.count ? silence : Array(silence[..<piece]), count: channels)
                        var perModel: [[ClassifierEvent]] = []
                        for s in sessions { perModel.append(await s.process(input)) }
                        events += merge(perModel, gates: &gates)
                        gap -= piece
                    }
                }
                nextFrame = chunk.firstFrame + chunk.frames
                let perChannel = (0..<channels).map { chunk.channel($0) }
                var perModel: [[ClassifierEvent]] = []
                for s in sessions { perModel.append(await s.process(perChannel)) }
                events += merge(perModel, gates: &gates)
                summary.frames += chunk.frames
                let latency = ContinuousClock.now - chunk.capturedAt
                if !events.isEmpty { summary.latencies.add(latency) }
                deliver(Delivery(events: events.map(\.event), models: events.map(\.model), latency: latency, levels: perChannel.map(Self.level)))
            }
        } catch is CancellationError {
        } catch {
            failure = error
        }
        await capture.stop()  // the device is released before the last events go out
        var tail: [(event: ClassifierEvent, model: Int)] = []
        let dropped = capture.droppedFrames
        if dropped > reportedDrops {
            for k in 0..<channels { tail.append((try await session.reportDropped(dropped - reportedDrops, channel: k), 0)) }
        }
        var perModel: [[ClassifierEvent]] = []
        for s in sessions { perModel.append(await s.finish()) }
        tail += merge(perModel, gates: &gates)
        deliver(Delivery(events: tail.map(\.event), models: tail.map(\.model), latency: nil, levels: Array(repeating: -.infinity, count: channels)))
        summary.droppedFrames = dropped
        summary.overruns = capture.overruns
        if let failure { throw failure }
        return summary
    }

    /// RMS level in dBFS (-inf for digital silence).
    static func level(_ samples: [Float]) -> Float {
        guard !samples.isEmpty else { return -.infinity }
        let power = samples.reduce(0) { $0 + $1 * $1 } / Float(samples.count)
        return power > 0 ? 10 * log10f(power) : -.infinity
    }
}
