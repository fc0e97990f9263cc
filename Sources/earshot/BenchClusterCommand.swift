import Earshot
import EarshotCluster
import EarshotRedis
import Foundation

/// `earshot bench cluster`: a redis-server of its own, W `earshot worker` processes and N
/// sources published by this process at real-time pace (one 100 ms entry per source every
/// 100 ms, sent together). Per (N, W): entries published and processed per second, the latency
/// from an entry's publishing to its processing (its events appended), the workers' and
/// Redis's CPU, and whether the workers kept up.
enum BenchClusterCommand {
    static func run(_ words: [String]) throws {
        let args = try Arguments(words, spec: Specs.benchCluster)
        func counts(_ name: String, _ fallback: String) throws(UsageError) -> [Int] {
            let text = args.string(name) ?? fallback
            return try text.split(separator: ",").map { (w) throws(UsageError) -> Int in
                guard let n = Int(w), (1...100_000).contains(n) else { throw UsageError("--\(name) \(text): '\(w)' is not a count in 1...100000") }
                return n
            }
        }
        let sourceCounts = try counts("sources", "100,300,600")
        let workerCounts = try counts("workers", "1,2,4")
        let seconds = args.double("seconds")
        let modelName = args.string("model") ?? "silero-vad"
        // The workers are given the package's folder, found here on this command's search path.
        let modelFolder = try ModelLocator(args).find(modelName)
        let modelPath = modelFolder.path
        // Checked here (a bad value is a usage error before anything starts), given to each worker.
        let precision = try PrecisionOption.precision(args, name: modelName, folder: modelFolder)
        // What the workers run: the precision given, else the package's.
        let runs = try Model(contentsOf: modelFolder, precision: precision).precision
        let server = args.string("redis-server") ?? "/usr/bin/redis-server"
        guard FileManager.default.isExecutableFile(atPath: server) else {
            throw UsageError("--redis-server \(server): not found", hint: "apt-get install redis-server (scripts/install-packages.sh)")
        }
        let (audio, rate) = try AudioFile.readMono(path: args.string("audio") ?? bundledPath("AudioSamples/speech-noise-16k.wav"))
        let json = args.flag("json")
        if !json {
            try out("earshot worker (\(modelName), \(runs.rawValue)) on Redis Streams: N sources at real-time pace in 100 ms entries, \(Int(seconds)) s measured per row "
                    + "(\(ProcessInfo.processInfo.activeProcessorCount) cores shared by Redis, the workers and the publisher)")
            try out("sources  workers  entries/s in  entries/s done  latency p50    p99    max  workers CPU  Redis CPU  kept up")
        }
        var rows: [[String: Any]] = []
        for n in sourceCounts {
            for w in workerCounts {
                let row = try measure(sources: n, workers: w, seconds: seconds, model: modelPath, precision: precision, server: server,
                                      audio: audio, rate: rate)
                rows.append(row)
                if !json {
                    try out(String(format: "%7d  %7d  %12.0f  %14.0f  %8.1f ms %6.1f %6.1f  %9.0f %%  %7.0f %%  %@",
                                   n, w, row["publishedPerSecond"] as! Double, row["processedPerSecond"] as! Double,
                                   row["latencyP50Ms"] as! Double, row["latencyP99Ms"] as! Double, row["latencyMaxMs"] as! Double,
                                   row["workersCpuPercent"] as! Double, row["redisCpuPercent"] as! Double,
                                   (row["keptUp"] as! Bool) ? "yes" : "no"))
                }
            }
        }
        if json {
            try out(jsonLine(["runtime": "earshot", "benchmark": "cluster", "model": modelName,
                              "precision": runs.rawValue, "seconds": seconds, "entryMs": 100,
                              "cores": ProcessInfo.processInfo.activeProcessorCount, "results": rows]))
        }
    }

    static func measure(sources n: Int, workers w: Int, seconds: Double, model: String, precision: Precision?, server: String,
                        audio: [Float], rate: Int) throws -> [String: Any] {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-bench-cluster-\(getpid())-\(n)-\(w)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let redis: RedisServerProcess
        do { redis = try RedisServerProcess(binary: server, folder: folder) } catch { throw UsageError("\(error)") }
        defer { redis.stop() }
        let port = redis.port
        let c = try RedisConnection(redis.endpoint)
        let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var workers: [Process] = []
        for i in 0..<w {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: me)
            p.arguments = ["worker", "--redis", "redis://127.0.0.1:\(port)", "--name", "bench-\(i)", "--model", model, "-q"]
                + (precision.map { ["--precision", $0.rawValue] } ?? [])
            p.standardOutput = FileHandle.nullDevice
            try p.run()
            workers.append(p)
        }
        defer {
            for p in workers where p.isRunning { kill(p.processIdentifier, SIGKILL) }
            for p in workers { p.waitUntilExit() }
        }
        let publishers = try (0..<n).map { try SourcePublisher(connection: c, source: "bench-\($0)", sampleRate: rate) }
        let chunk = rate / 10
        let warmup = 3.0
        let start = BenchServeCommand.nowNs()
        var tick = 0
        var cpu0: (redis: Double, workers: Double)?
        var statsFrom = "0"
        var t0 = 0.0
        var read0 = 0, tick0 = 0
        while true {
            let elapsed = Double(BenchServeCommand.nowNs() - start) / 1e9
            if cpu0 == nil && elapsed >= warmup {
                cpu0 = (BenchServeCommand.serverCPU(redis.processIdentifier ?? 0), workers.map { BenchServeCommand.serverCPU($0.processIdentifier) }.reduce(0, +))
                statsFrom = "\(WallClock.millis())-0"
                read0 = try delivered(c, publishers).read
                tick0 = tick
                t0 = elapsed
            }
            if elapsed >= warmup + seconds { break }
            let due = Double(tick) * 0.1
            if due > elapsed { usleep(UInt32((due - elapsed) * 1e6)); continue }
            let items = publishers.enumerated().map { (i, p) -> (publisher: SourcePublisher, samples: [Float]) in
                let at = (i * 7919 + tick * chunk) % max(1, audio.count - chunk)
                return (p, Array(audio[at..<(at + chunk)]))
            }
            try SourcePublisher.appendAll(items, on: c)
            tick += 1
        }
        let wall = Double(BenchServeCommand.nowNs() - start) / 1e9 - t0
        let redisCPU = BenchServeCommand.serverCPU(redis.processIdentifier ?? 0) - (cpu0?.redis ?? 0)
        let workersCPU = workers.map { BenchServeCommand.serverCPU($0.processIdentifier) }.reduce(0, +) - (cpu0?.workers ?? 0)
        let (read1, lag) = try delivered(c, publishers)
        usleep(1_200_000)  // the workers' last figures
        let stats = StreamReplies.entriesOf(try c.expect(["XRANGE", RedisArgument(ClusterKeys().stats), RedisArgument(statsFrom), "+"]))
        var p50s: [Double] = [], p99s: [Double] = [], maxes: [Double] = []
        for fields in stats {
            if let v = Double(fields["p50"] ?? "") { p50s.append(v / 1000) }
            if let v = Double(fields["p99"] ?? "") { p99s.append(v / 1000) }
            if let v = Double(fields["max"] ?? "") { maxes.append(v / 1000) }
        }
        // What went out (the publisher shares the cores: it may fall behind the pace).
        let published = Double((tick - tick0) * n) / wall
        let done = Double(read1 - read0) / wall
        p50s.sort()
        let p99 = p99s.max() ?? .nan
        for p in publishers { try? p.end() }
        return ["sources": n, "workers": w, "publishedPerSecond": published, "processedPerSecond": done,
                "latencyP50Ms": p50s.isEmpty ? Double.nan : p50s[p50s.count / 2], "latencyP99Ms": p99, "latencyMaxMs": maxes.max() ?? .nan,
                "workersCpuPercent": workersCPU / wall * 100, "redisCpuPercent": redisCPU / wall * 100,
                "backlogEntries": lag, "keptUp": lag <= 2 * n && p99 < 1000 && published >= 9.5 * Double(n), "offeredPerSecond": 10 * n, "seconds": wall]
    }

    /// Entries the workers have read from all sources' audio, and those not yet read (XINFO GROUPS).
    static func delivered(_ c: RedisConnection, _ publishers: [SourcePublisher]) throws -> (read: Int, lag: Int) {
        let replies = try c.pipeline(publishers.map { ["XINFO", "GROUPS", RedisArgument($0.keys.audio($0.source))] })
        var read = 0, lag = 0
        for r in replies {
            for g in r.elements ?? [] {
                let f = g.elements ?? []
                var i = 0
                while i + 1 < f.count {
                    if f[i].text == "entries-read" { read += f[i + 1].integer ?? 0 }
                    if f[i].text == "lag" { lag += f[i + 1].integer ?? 0 }
                    i += 2
                }
            }
        }
        return (read, lag)
    }
}
