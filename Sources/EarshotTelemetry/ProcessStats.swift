#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The process's own figures, from /proc (Linux): what Prometheus's standard `process_*`
/// metrics hold.
public struct ProcessStats: Sendable {
    /// Resident memory (bytes).
    public var residentBytes: Double?
    /// CPU time, user and system (seconds).
    public var cpuSeconds: Double?
    /// When the process started (seconds since the Unix epoch).
    public var startTime: Double?

    /// The figures now (nil where /proc does not say).
    public static func current() -> ProcessStats {
        var stats = ProcessStats()
        let page = Double(sysconf(Int32(_SC_PAGESIZE)))
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        if let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
           let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Double($0) }) {
            stats.residentBytes = pages * page
        }
        // /proc/self/stat: the fields after the command's closing parenthesis, from the 3rd.
        if let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
           let close = stat.lastIndex(of: ")"), ticks > 0 {
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            func field(_ n: Int) -> Double? { fields.indices.contains(n - 3) ? Double(fields[n - 3]) : nil }
            if let user = field(14), let system = field(15) { stats.cpuSeconds = (user + system) / ticks }
            if let started = field(22), let boot = bootTime { stats.startTime = boot + started / ticks }
        }
        return stats
    }

    /// When the system booted (seconds since the Unix epoch), from /proc/stat's btime.
    private static var bootTime: Double? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }) else { return nil }
        return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
    }

    /// The standard process metrics (`process_resident_memory_bytes`, `process_cpu_seconds_total`,
    /// `process_start_time_seconds`), named as every Prometheus client library names them so that
    /// the usual dashboards find them.
    public func write(to text: inout MetricsText) {
        if let residentBytes { text.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", residentBytes) }
        if let cpuSeconds { text.counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", cpuSeconds) }
        if let startTime { text.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", startTime) }
    }
}
