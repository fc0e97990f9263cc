/// Several models over the same files: each labels the audio with its own state and options,
/// and their events come out merged in time order. A gate model (a voice activity detector,
/// say) decides which detections of the others count: a detection counts only when a segment of
/// the gate overlaps the `gateSeconds` before it, as openWakeWord's VAD threshold keeps a wake
/// word only when speech was heard over it. The gate's own events are written only when it is
/// also one of the models asked for.
public struct MultiLabeler: Sendable {
    /// One labeller per model.
    public var labelers: [FileLabeler]
    /// Index into `labelers` of the gate, if any.
    public var gate: Int?
    /// Whether the gate's own events are part of the output.
    public var showGate: Bool
    /// How long after the gate's speech a detection still counts (seconds).
    public var gateSeconds: Double

    /// Several models over the same files; `gate` indexes `labelers`.
    public init(labelers: [FileLabeler], gate: Int? = nil, showGate: Bool = true, gateSeconds: Double = 1) {
        self.labelers = labelers
        self.gate = gate
        self.showGate = showGate
        self.gateSeconds = gateSeconds
    }

    /// Labels one file with every model; the events of all, in time order (a segment at its
    /// start, a detection at its time; failures and drops last).
    public func label(path: String) async throws -> FileLabeler.Result {
        try await label(file: try AudioFile(path: path))
    }

    /// Labels an opened file with every model, reading it once (so standard input serves them
    /// all): each chunk goes to every model's session in turn.
    public func label(file: AudioFile) async throws -> FileLabeler.Result {
        let path = file.path
        guard let first = labelers.first else { throw StreamError.file(path: path, error: .finished) }
        var sessions: [Session] = []
        for labeler in labelers {
            do {
                sessions.append(try Session(model: labeler.model, channelCount: labeler.channels == .each ? file.channelCount : 1,
                                            sourceSampleRate: file.sampleRate, options: labeler.options, threads: labeler.threads))
            } catch {
                throw StreamError.file(path: path, error: error)
            }
        }
        var results = labelers.map { _ in
            FileLabeler.Result(path: path, sampleRate: file.sampleRate, channelCount: file.channelCount, frames: 0, events: [])
        }
        let each = labelers.contains { $0.channels == .each }
        let frames = max(1, first.chunkSamples / file.channelCount)
        while true {
            // Every channel when a model labels each (the mix made from them as readMono makes it), else the mix.
            let channels = each ? try file.readChannels(maxFrames: frames) : [try file.readMono(maxFrames: frames)]
            if channels[0].isEmpty { break }
            let mix = each ? [AudioFile.mix(channels)] : channels
            for (k, labeler) in labelers.enumerated() {
                results[k].events += await sessions[k].process(labeler.channels == .each ? channels : mix)
            }
        }
        for k in sessions.indices {
            results[k].events += await sessions[k].finish()
            results[k].frames = file.position
        }
        var merged = results[0]
        // The gate's segments as it would have reported them by each detection's time (a segment
        // at its start and at its end), then each detection judged as a live gate judges it.
        var admitted: Set<Int> = []  // (model, event index) of the detections the gate lets through, as k << 32 | i
        if let gate {
            var moments: [(time: Double, order: Int, gate: ClassifierEvent?, detection: (Detection, Int)?)] = []
            for case let .ended(s) in results[gate].events {
                moments.append((s.startSeconds, moments.count, .started(s), nil))
                moments.append((s.endSeconds, moments.count, .ended(s), nil))
            }
            for (k, result) in results.enumerated() where k != gate {
                for (i, event) in result.events.enumerated() {
                    if case let .detected(d) = event { moments.append((d.seconds, moments.count, nil, (d, k << 32 | i))) }
                }
            }
            moments.sort { ($0.time, $0.gate == nil ? 1 : 0, $0.order) < ($1.time, $1.gate == nil ? 1 : 0, $1.order) }
            var judge = DetectionGate(seconds: gateSeconds)
            for m in moments {
                if let e = m.gate { judge.observe(e) }
                if let (d, key) = m.detection, judge.admits(d) { admitted.insert(key) }
            }
        }
        var timed: [(time: Double, order: Int, event: ClassifierEvent)] = []
        for (k, result) in results.enumerated() where k != gate || showGate {
            for (i, event) in result.events.enumerated() {
                switch event {
                case let .started(s), let .ended(s):
                    timed.append((s.startSeconds, timed.count, event))
                case let .detected(d):
                    if gate != nil && k != gate && !admitted.contains(k << 32 | i) { continue }
                    timed.append((d.seconds, timed.count, event))
                case let .scores(s):
                    timed.append((Double(s.start) / Double(s.sampleRate), timed.count, event))
                case .dropped, .failed:
                    timed.append((.infinity, timed.count, event))
                }
            }
        }
        timed.sort { ($0.time, $0.order) < ($1.time, $1.order) }
        merged.events = timed.map(\.event)
        return merged
    }
}

/// What a gate model heard, event by event, and whether a detection counts: it does when a
/// segment of the gate is open at its time or ended within `seconds` before it.
struct DetectionGate: Sendable {
    let seconds: Double
    private var openSince: [Int: Double] = [:]
    private var lastEnd: [Int: Double] = [:]

    init(seconds: Double) { self.seconds = seconds }

    mutating func observe(_ event: ClassifierEvent) {
        switch event {
        case let .started(s): openSince[s.channel] = s.startSeconds
        case let .ended(s):
            openSince[s.channel] = nil
            lastEnd[s.channel] = max(lastEnd[s.channel] ?? -.infinity, s.endSeconds)
        default: break
        }
    }

    func admits(_ d: Detection) -> Bool {
        (openSince[d.channel].map { $0 <= d.seconds } ?? false) || (lastEnd[d.channel] ?? -.infinity) >= d.seconds - seconds
    }
}
