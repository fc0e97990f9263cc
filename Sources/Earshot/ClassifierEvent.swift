/// A labelled stretch of one channel's audio: a segment of a one-label rule (voice activity),
/// or an event of a many-label window classifier (sound events: `best` and `windows` set).
public struct Segment: Sendable, Equatable, Codable {
    /// The channel (0 for a single stream).
    public var channel: Int
    /// The label, as the model names it.
    public var label: String
    /// Bounds in samples of the source's clock (its own sample rate), end exclusive.
    public var start: Int
    /// The end in samples of the source's clock (exclusive).
    public var end: Int
    /// The source's sample rate (Hz), for the times in seconds.
    public var sampleRate: Int
    /// Mean score of the label over the segment's steps (before padding); an event's mean over
    /// its windows.
    public var confidence: Float
    /// An event's best window's score (nil for a segment).
    public var best: Float?
    /// The windows an event joins (nil for a segment).
    public var windows: Int?

    /// A segment of `channel` from `start` to `end` (samples at `sampleRate`); an event with its
    /// best window's score and its window count.
    public init(channel: Int, label: String, start: Int, end: Int, sampleRate: Int, confidence: Float, best: Float? = nil, windows: Int? = nil) {
        self.channel = channel
        self.label = label
        self.start = start
        self.end = end
        self.sampleRate = sampleRate
        self.confidence = confidence
        self.best = best
        self.windows = windows
    }

    /// Whether this is an event of a many-label window classifier.
    public var isEvent: Bool { windows != nil }

    /// The start in seconds.
    public var startSeconds: Double { Double(start) / Double(sampleRate) }
    /// The end in seconds.
    public var endSeconds: Double { Double(end) / Double(sampleRate) }
}

/// An event without extent on one channel: a wake word heard, at the end of the step that
/// decided it.
public struct Detection: Sendable, Equatable, Codable {
    /// The channel (0 for a single stream).
    public var channel: Int
    /// The label, as the model names it.
    public var label: String
    /// Where it was decided, in samples of the source's clock.
    public var sample: Int
    /// The source's sample rate (Hz).
    public var sampleRate: Int
    /// The score that decided it (the mean over the detection window).
    public var score: Float

    /// A detection of `label` on `channel` at `sample` (at `sampleRate`).
    public init(channel: Int, label: String, sample: Int, sampleRate: Int, score: Float) {
        self.channel = channel
        self.label = label
        self.sample = sample
        self.sampleRate = sampleRate
        self.score = score
    }

    /// Where it was decided, in seconds.
    public var seconds: Double { Double(sample) / Double(sampleRate) }
}

/// One model step's scores on one channel.
public struct StepScores: Sendable, Equatable {
    /// The channel (0 for a single stream).
    public var channel: Int
    /// The step's first sample, in the source's clock.
    public var start: Int
    /// The end in samples of the source's clock (exclusive).
    public var end: Int
    /// The source's sample rate (Hz).
    public var sampleRate: Int
    /// One score per label, in the model's label order.
    public var scores: [Float]
}

/// What a stream or session reports over time.
public enum ClassifierEvent: Sendable, Equatable {
    /// Every step's scores, when asked for (`LabelOptions.includeScores`).
    case scores(StepScores)
    /// A segment (or a many-label model's event) has begun and is long enough to be kept; its
    /// end comes in `.ended`.
    case started(Segment)
    /// A segment (or event) is complete: its bounds are final.
    case ended(Segment)
    /// A label detected (models whose decision has a detection window: wake words).
    case detected(Detection)
    /// A live source outran the model: `samples` of the oldest audio of `channel` were dropped
    /// (`total` so far).
    case dropped(channel: Int, samples: Int, total: Int)
    /// The channel stopped on an error; the session's other channels go on.
    case failed(channel: Int, error: StreamError)

    /// The channel (0 for a single stream).
    public var channel: Int {
        switch self {
        case let .scores(s): return s.channel
        case let .started(s), let .ended(s): return s.channel
        case let .detected(d): return d.channel
        case let .dropped(channel, _, _), let .failed(channel, _): return channel
        }
    }

    /// The same event on another channel number (a stream that moved between sessions).
    public func renumbered(to k: Int) -> ClassifierEvent {
        switch self {
        case var .scores(s): s.channel = k; return .scores(s)
        case var .started(s): s.channel = k; return .started(s)
        case var .ended(s): s.channel = k; return .ended(s)
        case var .detected(d): d.channel = k; return .detected(d)
        case let .dropped(_, samples, total): return .dropped(channel: k, samples: samples, total: total)
        case let .failed(_, error): return .failed(channel: k, error: error)
        }
    }
}
