import EarshotModel
import Foundation

/// Hard-negative mining for `MicroWakeWordTrainer`: the training clips without the phrase said
/// one after another as streams (as a device hears words one after another, with the windows
/// across two of them that no single clip gives), scored by the network after each epoch; the
/// windows it fires on (a score at or above `cutoff`) are trained again as the background in the
/// next epochs, at most `limit` of them, the highest scores first.
/// ref: openWakeWord's and microWakeWord's false-positive negatives (their long negative audio
/// scored by the model, its false accepts added to training)
struct HardNegatives: Sendable {
    /// A window of a stream: its stream and its last step.
    struct Position: Hashable, Sendable {
        let stream: Int
        let step: Int
    }

    /// The streams' features: [streams][steps][channels].
    let streams: Frames
    /// Steps of a training window (a mined window's length).
    let window: Int
    /// Steps at each stream's start never mined: the front end is settling there.
    let lead: Int
    /// Scores at or above it make a window a hard negative.
    let cutoff: Float
    /// The most windows kept.
    let limit: Int
    /// Steps apart two windows of one stream must be to both be kept (the higher one stays).
    let separation: Int
    /// The windows kept, the latest pass's highest scores first.
    private(set) var mined: [Position] = []

    /// Audio seconds the streams hold at most (their features are kept in memory: 29 MB).
    static let maximumSeconds = 1800.0
    /// Streams the clips are dealt to (scored in parallel, each from its own start).
    static let streamCount = 16

    init(streams: Frames, window: Int, lead: Int, cutoff: Float, limit: Int, separation: Int) {
        self.streams = streams
        self.window = window
        self.lead = lead
        self.cutoff = cutoff
        self.limit = limit
        self.separation = separation
    }

    /// The clips (in an order drawn from `seed`, until `maximumSeconds`) dealt to `streamCount`
    /// streams, each clip followed by 0.25-1 s of faint noise (-60 dBFS), each stream's features
    /// computed by `features` from its start (two streams at a time, so that only their audio is
    /// held); streams padded with the noise to the longest.
    static func makeStreams(of clips: [[Float]], rate: Int, stepSamples: Int, seed: UInt64,
                        features: ([[Float]]) throws(TrainingError) -> Frames) throws(TrainingError) -> Frames {
        var random = SplitMix64(seed: seed &+ 0x4A2D, 0, 0)
        let order = Array(clips.indices).shuffled(using: &random)
        var dealt = [[Int]](repeating: [], count: streamCount), gaps = [[Int]](repeating: [], count: streamCount)
        var lengths = [Int](repeating: 0, count: streamCount), total = 0
        for (k, i) in order.enumerated() where !clips[i].isEmpty {
            let gap = Int(Double.random(in: 0.25...1.0, using: &random) * Double(rate))
            if Double(total + clips[i].count + gap) > maximumSeconds * Double(rate) { break }
            dealt[k % streamCount].append(i)
            gaps[k % streamCount].append(gap)
            lengths[k % streamCount] += clips[i].count + gap
            total += clips[i].count + gap
        }
        let length = ((lengths.max() ?? 0) + stepSamples - 1) / stepSamples * stepSamples
        func audio(_ s: Int) -> [Float] {
            var noise = SplitMix64(seed: seed &+ 0x4A2D, 1, s)
            var out: [Float] = []
            out.reserveCapacity(length)
            for (i, gap) in zip(dealt[s], gaps[s]) {
                out += clips[i]
                out += noise.uniform(count: gap, bound: 0.001)
            }
            return out + noise.uniform(count: length - out.count, bound: 0.001)
        }
        var parts: [Frames] = []
        for s in Swift.stride(from: 0, to: streamCount, by: 2) {
            parts.append(try features((s..<min(s + 2, streamCount)).map(audio)))
        }
        return Frames.joined(parts)
    }

    /// The network's score at every step of every stream ([streams][steps]), `score` run on
    /// pieces of a stream of `piece` steps with the `context` steps before them, in parallel.
    func scores(piece: Int = 1024, context: Int, _ score: @Sendable (Frames) -> [Float]) -> [Float] {
        let steps = streams.time, c = streams.channels
        let pieces = streams.batch * ((steps + piece - 1) / piece)
        let perStream = (steps + piece - 1) / piece
        let streams = self.streams
        let results = parallelMap(pieces) { k in
            let s = k / perStream, start = (k % perStream) * piece, from = max(0, start - context), end = min(steps, start + piece)
            let x = Frames(batch: 1, time: end - from, channels: c, values: Array(streams.values[((s * steps + from) * c)..<((s * steps + end) * c)]))
            return Array(score(x).dropFirst(start - from))
        }
        return results.flatMap { $0 }
    }

    /// Keeps the windows `scores` ([streams][steps]) fires on: each step at or above the cutoff
    /// that is the highest within `separation` steps of it (the earliest of equals), whose window
    /// lies after the lead, highest first; then the windows kept before that are not within
    /// `separation` of one of those; at most `limit` in all. Returns how many windows fired.
    @discardableResult
    mutating func mine(scores: [Float]) -> Int {
        let steps = streams.time
        var found: [(Position, Float)] = []
        for s in 0..<streams.batch {
            let row = s * steps
            for t in Swift.stride(from: max(0, lead + window - 1), to: steps, by: 1) where scores[row + t] >= cutoff {
                let low = max(0, t - separation), high = min(steps - 1, t + separation)
                let peak = (low...high).allSatisfy { u in scores[row + u] < scores[row + t] || (scores[row + u] == scores[row + t] && u >= t) }
                if peak { found.append((Position(stream: s, step: t), scores[row + t])) }
            }
        }
        found.sort { $0.1 != $1.1 ? $0.1 > $1.1 : ($0.0.stream, $0.0.step) < ($1.0.stream, $1.0.step) }
        var kept = found.map(\.0)
        for old in mined where !kept.contains(where: { $0.stream == old.stream && abs($0.step - old.step) <= separation }) {
            kept.append(old)
        }
        mined = Array(kept.prefix(limit))
        return found.count
    }

    /// The features of the mined windows `members` (indices into `mined`): [members][window][channels].
    func windows(_ members: [Int]) -> Frames {
        let c = streams.channels, steps = streams.time
        var values: [Float] = []
        values.reserveCapacity(members.count * window * c)
        for m in members {
            let p = mined[m], first = p.step - window + 1
            values += streams.values[((p.stream * steps + first) * c)..<((p.stream * steps + p.step + 1) * c)]
        }
        return Frames(batch: members.count, time: window, channels: c, values: values)
    }
}
