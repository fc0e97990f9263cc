import Earshot

/// Metrics in Prometheus's text exposition format 0.0.4, written by hand: each family a `# HELP`
/// and a `# TYPE` line, then its samples (`name{label="value"} value`), values in base units
/// (seconds, bytes), counters ending in `_total`, a histogram's buckets cumulative up to `+Inf`.
/// ref: https://prometheus.io/docs/instrumenting/exposition_formats/
///
///     var text = MetricsText()
///     text.counter("earshot_steps_total", "Model steps run, all models.", Double(steps))
///     text.histogram("earshot_tick_seconds", "How long each tick's steps took.", tickTimes)
///     text.output   // served at /metrics
public struct MetricsText: Sendable {
    /// What a scrape gets.
    public private(set) var output = ""
    /// The media type of `output`.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    public init() {}

    /// A counter (a total that only grows; `rate()` of it is per second), one sample per label set.
    public mutating func counter(_ name: String, _ help: String, _ samples: [(labels: [(String, String)], value: Double)]) {
        family(name, help, type: "counter", samples)
    }

    /// A counter of one sample.
    public mutating func counter(_ name: String, _ help: String, _ value: Double) { counter(name, help, [([], value)]) }

    /// A gauge (a value now), one sample per label set.
    public mutating func gauge(_ name: String, _ help: String, _ samples: [(labels: [(String, String)], value: Double)]) {
        family(name, help, type: "gauge", samples)
    }

    /// A gauge of one sample.
    public mutating func gauge(_ name: String, _ help: String, _ value: Double) { gauge(name, help, [([], value)]) }

    /// The buckets' upper bounds of `histogram`: the doublings of a microsecond from 16 µs to
    /// about 4 s, where `LatencyHistogram`'s bins have their edges (so each count is exact).
    public static let bucketPowers = Array(4...22)

    /// A histogram of durations in seconds: `_bucket{le=...}` cumulative (the last `+Inf`, equal
    /// to `_count`), `_sum`, `_count`.
    public mutating func histogram(_ name: String, _ help: String, _ latencies: LatencyHistogram) {
        header(name, help, type: "histogram")
        for k in Self.bucketPowers {
            let le = Double(1 << k) / 1e6
            sample(name + "_bucket", [("le", Self.number(le))], Double(latencies.count(belowPowerOfTwoMicroseconds: k)))
        }
        sample(name + "_bucket", [("le", "+Inf")], Double(latencies.count))
        let sum = latencies.sum.components
        sample(name + "_sum", [], Double(sum.seconds) + Double(sum.attoseconds) / 1e18)
        sample(name + "_count", [], Double(latencies.count))
    }

    private mutating func family(_ name: String, _ help: String, type: String, _ samples: [(labels: [(String, String)], value: Double)]) {
        header(name, help, type: type)
        for s in samples { sample(name, s.labels, s.value) }
    }

    private mutating func header(_ name: String, _ help: String, type: String) {
        let escaped = help.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
        output += "# HELP \(name) \(escaped)\n# TYPE \(name) \(type)\n"
    }

    private mutating func sample(_ name: String, _ labels: [(String, String)], _ value: Double) {
        output += name
        if !labels.isEmpty {
            output += "{" + labels.map { "\($0.0)=\"\(Self.escapeLabel($0.1))\"" }.joined(separator: ",") + "}"
        }
        output += " " + Self.number(value) + "\n"
    }

    /// A label value: backslash, double quote and line feed escaped.
    static func escapeLabel(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }

    /// A value as the format writes it: integers without a fraction, `+Inf`, `-Inf`, `NaN`.
    static func number(_ x: Double) -> String {
        if x.isNaN { return "NaN" }
        if x.isInfinite { return x > 0 ? "+Inf" : "-Inf" }
        if x == x.rounded(), abs(x) < 1e15 { return String(Int64(x)) }
        return "\(x)"
    }
}
