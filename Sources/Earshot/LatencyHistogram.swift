import Foundation

/// Durations counted in logarithmic bins (about 2% wide, from 1 µs to about 1000 s): percentiles
/// within a bin's width, in constant memory. The one way latencies are summed up: a live
/// capture's deliveries, a service's ticks, a worker's entries, the benchmarks' answers.
///
///     var latencies = LatencyHistogram()
///     latencies.add(.milliseconds(12))
///     latencies.milliseconds(0.99)   // ≈ 12 (within 2%)
public struct LatencyHistogram: Sendable, Equatable {
    static let binsPerDoubling = 32
    static let bins = 30 * binsPerDoubling
    private var counts = [Int](repeating: 0, count: LatencyHistogram.bins)
    public private(set) var count = 0
    /// The longest duration added, exactly; nil when nothing was added.
    public private(set) var maximum: Duration?
    /// Every duration added, summed exactly.
    public private(set) var sum = Duration.zero

    /// An empty histogram.
    public init() {}

    static func bin(microseconds us: Double) -> Int {
        guard us > 1 else { return 0 }
        return min(bins - 1, Int((log2(us) * Double(binsPerDoubling)).rounded(.down)))
    }

    public mutating func add(_ d: Duration) {
        let us = Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12
        counts[Self.bin(microseconds: us)] += 1
        count += 1
        sum += d
        maximum = Swift.max(maximum ?? d, d)
    }

    /// Empties it (its memory kept).
    public mutating func removeAll() {
        for b in counts.indices { counts[b] = 0 }
        count = 0
        sum = .zero
        maximum = nil
    }

    /// The p-th percentile (0...1) as the middle of its bin; nil when nothing was added.
    public func percentile(_ p: Double) -> Duration? {
        guard count > 0, p.isFinite else { return nil }
        let rank = Int((Double(count - 1) * min(Swift.max(p, 0), 1)).rounded())
        var seen = 0
        for (b, c) in counts.enumerated() {
            seen += c
            if seen > rank {
                let us = b == 0 ? 1 : exp2((Double(b) + 0.5) / Double(Self.binsPerDoubling))
                return .microseconds(us)
            }
        }
        return nil
    }

    /// How many durations added were shorter than 2^k µs (0...30): the bins' edges fall on the
    /// doublings, so the count is exact (a cumulative bucket of a Prometheus histogram).
    public func count(belowPowerOfTwoMicroseconds k: Int) -> Int {
        let end = Swift.min(Swift.max(k, 0) * Self.binsPerDoubling, Self.bins)
        return counts[0..<end].reduce(0, +)
    }

    /// The p-th percentile (0...1) in milliseconds; nil when nothing was added.
    public func milliseconds(_ p: Double) -> Double? { percentile(p).map(Self.milliseconds) }

    /// A duration in milliseconds.
    public static func milliseconds(_ d: Duration) -> Double {
        Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
    }
}
