/// Several models over the same files: each labels the audio with its own state and options,
/// and their events come out merged in time order. A gate model (a voice activity detector,
/// say) decides which detections of the others count: a detection counts only when a segment of
/// the gate overlaps the `gateSeconds` before it, as openWakeWord's VAD threshold keeps a wake
/// word only when speech was heard over it. The gate's own events are written only when it is
/// also one of the models asked for.
public struct MultiLabeler: Sendable {
    public var labelers: [FileLabeler]
    /// Index into `labelers` of the gate, if any.
    public var gate: Int?
    /// Whether the gate's own events are part of the output.
    public var showGate: Bool
    public var gateSeconds: Double

    public init(labelers: [FileLabeler], gate: Int? = nil, showGate: Bool = true, gateSeconds: Double = 1) {
        self.labelers = labelers
        self.gate = gate
        self.showGate = showGate
        self.gateSeconds = gateSeconds
    }

    /// Labels one file with every model; the events of all, in time order (a segment at its
    /// start, a detection at its time; failures and drops last).
    public func label(path: String) async throws -> FileLabeler.Result {
        var results: [FileLabeler.Result] = []
        for labeler in labelers { results.append(try await labeler.label(path: path)) }
        guard var merged = results.first else { throw StreamError.file(path: path, error: .finished) }
        var gateSegments: [Int: [Segment]] = [:]
        if let gate {
            for case let .ended(s) in results[gate].events { gateSegments[s.channel, default: []].append(s) }
        }
        var timed: [(time: Double, order: Int, event: ClassifierEvent)] = []
        for (k, result) in results.enumerated() where k != gate || showGate {
            for event in result.events {
                switch event {
                case let .started(s), let .ended(s):
                    timed.append((s.startSeconds, timed.count, event))
                case let .detected(d):
                    if gate != nil && k != gate {
                        let from = d.seconds - gateSeconds
                        guard (gateSegments[d.channel] ?? []).contains(where: { $0.startSeconds <= d.seconds && $0.endSeconds >= from }) else { continue }
                    }
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
