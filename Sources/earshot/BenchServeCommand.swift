import CEarshotSystem
import Earshot
import EarshotServe
import EarshotWyoming
import Foundation

/// `earshot bench serve`: an `earshot serve` process and N Wyoming clients over loopback, each
/// sending 20 ms chunks at real-time pace (the clients are this process: one thread, one epoll).
/// Per N: the latency from sending the chunk that let an answer be decided (the server names it
/// in `chunk_timestamp`) to reading the answer, the server's and the clients' CPU, the server's
/// memory, and the audio that could not be sent on time.
enum BenchServeCommand {
    static func run(_ words: [String]) throws {
        let args = try Arguments(words, spec: Specs.benchServe)
        let modelName = args.string("model") ?? "silero-vad"
        let seconds = args.double("seconds")
        let chunkMs = args.int("chunk-ms")
        let countsText = args.string("clients") ?? "100,500,1000,2000"
        let counts = try countsText.split(separator: ",").map { (w) throws(UsageError) -> Int in
            guard let n = Int(w), (1...20000).contains(n) else { throw UsageError("--clients \(countsText): '\(w)' is not a count in 1...20000") }
            return n
        }
        let path = args.string("audio") ?? bundledPath("AudioSamples/speech-noise-16k.wav")
        let transport = args.string("transport") ?? "tcp"
        guard ["tcp", "unix"].contains(transport) else {
            throw UsageError("--transport \(transport): expected tcp (loopback TCP, as Home Assistant connects) or unix (a unix socket)")
        }
        let model = try Model(contentsOf: try ModelLocator(args).find(modelName))
        let (source, rate) = try AudioFile.readMono(path: path)
        let resampler = try Resampler(inputRate: Double(rate), outputRate: Double(model.sampleRate))
        let samples = try resampler.process(source) + resampler.finish()
        let pcm = samples.flatMap { s -> [UInt8] in
            let v = Int16(max(-32768, min(32767, (s * 32768).rounded())))
            return [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8)]
        }
        var rows: [[String: Any]] = []
        if !args.flag("json") {
            try out("earshot serve, \(model.name), clients sending \(chunkMs) ms chunks at real-time pace for \(Int(seconds)) s over "
                    + (transport == "tcp" ? "loopback TCP " : "a unix socket ")
                    + "(\(ProcessInfo.processInfo.activeProcessorCount) cores shared by server and clients; the clients at nice \(clientsNice) "
                    + "where allowed, as other machines would be: the server has the CPU they leave)")
            try out("clients  answers  latency p50    p99  server CPU  clients CPU  server RSS  late chunks  errors")
        }
        for n in counts {
            let row = try measure(clients: n, seconds: seconds, chunkMs: chunkMs, rate: model.sampleRate, pcm: pcm, model: model.path,
                                  serveOptions: ["tick-ms", "read-batch-ms", "shards", "precision"].flatMap { name in args.string(name).map { ["--\(name)", $0] } ?? [] },
                                  unix: transport == "unix")
            rows.append(row)
            if !args.flag("json") {
                try out(String(format: "%7d  %7d  %8.1f ms %6.1f ms  %8.0f %%  %9.0f %%  %7.0f MB  %11d  %6d",
                             n, row["answers"] as! Int, row["latencyP50Ms"] as! Double, row["latencyP99Ms"] as! Double,
                             row["serverCpuPercent"] as! Double, row["clientsCpuPercent"] as! Double, row["serverRssMb"] as! Double,
                             row["lateChunks"] as! Int, row["errors"] as! Int))
            }
        }
        if args.flag("json") {
            try out(jsonLine(["runtime": "earshot", "benchmark": "serve", "model": modelName, "seconds": seconds, "chunkMs": chunkMs,
                              "transport": transport,
                              "cores": ProcessInfo.processInfo.activeProcessorCount, "results": rows]))
        }
    }

    struct Client {
        var fd: Int32
        var reader = WyomingReader()
        var next = 0  // index of the next chunk
        var offset: Int  // where its audio starts
        /// Send times (ns) of the latest chunks, by chunk index modulo `window`.
        var sentAt = [(index: Int, ns: UInt64)](repeating: (-1, 0), count: Client.window)
        static let window = 512
        var pendingOut: [UInt8] = []
    }

    static func nowNs() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// The clients' scheduling priority while they send (lower runs first).
    static let clientsNice: Int32 = -10

    /// - Parameter serveOptions: passed to `earshot serve` as they are.
    static func measure(clients n: Int, seconds: Double, chunkMs: Int, rate: Int, pcm: [UInt8], model: String, serveOptions: [String],
                        unix: Bool) throws -> [String: Any] {
        // The server: this binary, on a free port it tells on stderr (or a unix socket).
        let socketPath = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-bench-\(getpid()).sock").path
        let server = Process()
        server.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        server.arguments = ["serve", "--uri", unix ? "unix://\(socketPath)" : "tcp://127.0.0.1:0", "--model", model,
                            "--max-clients", "\(n + 16)", "--idle-timeout", "3600"] + serveOptions
        let err = Pipe()
        server.standardError = err
        try server.run()
        defer { if server.isRunning { server.terminate(); server.waitUntilExit() } }
        var line = Data()
        while !String(decoding: line, as: UTF8.self).contains("\n") {
            let chunk = err.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line += chunk
        }
        let text = String(decoding: line, as: UTF8.self)
        var port = 0
        if !unix {
            guard let range = text.range(of: "on tcp://127.0.0.1:"), let p = Int(text[range.upperBound...].prefix { $0.isNumber }) else {
                throw UsageError("earshot serve did not start: \(text)")
            }
            port = p
        } else if !text.contains("on unix://") {
            throw UsageError("earshot serve did not start: \(text)")
        }
        let epoll = earshot_epoll_create()
        defer { close(epoll) }
        var all: [Client] = []
        for k in 0..<n {
            let fd: Int32
            do { fd = try Sockets.connect(unix ? .unix(path: socketPath) : .tcp(host: "127.0.0.1", port: port)) } catch {
                throw UsageError("client \(k): \(error)")
            }
            let flags = fcntl(fd, F_GETFL)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
            _ = earshot_epoll_ctl(epoll, 0, fd, earshot_epollin, UInt64(k))
            all.append(Client(fd: fd, offset: (k * 7919 * 2 * 160) % max(2, pcm.count - 2)))
        }
        let formatJSON = "\"channels\":1,\"rate\":\(rate),\"width\":2"
        func send(_ k: Int, _ bytes: [UInt8]) -> Bool {
            let n = bytes.withUnsafeBytes { Glibc.send(all[k].fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n == bytes.count { return true }
            if n > 0 { all[k].pendingOut = Array(bytes[n...]) }
            return false
        }
        for k in 0..<n { _ = send(k, WyomingEvent(type: "audio-start", data: ["rate": .number(Double(rate)), "width": 2, "channels": 1]).encoded) }
        let chunkBytes = rate * chunkMs / 1000 * 2
        let chunkNs = UInt64(chunkMs) * 1_000_000
        var latencies = LatencyHistogram()
        var answers = 0, errors = 0, late = 0, unsent = 0
        var tokens = [UInt64](repeating: 0, count: 256), masks = [UInt32](repeating: 0, count: 256)
        var buffer = [UInt8](repeating: 0, count: 65536)

        func readAnswers(timeoutMs: Int32) {
            let count = Int(earshot_epoll_wait(epoll, &tokens, &masks, 256, timeoutMs))
            guard count > 0 else { return }
            for i in 0..<count {
                let k = Int(tokens[i])
                while true {
                    let got = buffer.withUnsafeMutableBytes { recv(all[k].fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    guard got > 0 else { break }
                    buffer.withUnsafeBytes { all[k].reader.append(UnsafeRawBufferPointer(rebasing: $0[0..<got])) }
                }
                while let e = try? all[k].reader.next() {
                    let t = nowNs()
                    if e.type == "error" { errors += 1; continue }
                    guard let stamp = e.data["chunk_timestamp"]?.integer, stamp >= 0 else { continue }
                    let index = stamp / chunkMs
                    let sent = all[k].sentAt[index % Client.window]
                    guard sent.index == index else { continue }
                    answers += 1
                    latencies.add(.nanoseconds(Int64(t - sent.ns)))
                }
            }
        }

        // The clients stand for other machines: they run at a higher priority (when allowed), so
        // that they send on time and the server has the CPU they leave.
        let raised = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, clientsNice) == 0
        // Clients start spread over one chunk's time, then each sends a chunk every chunkMs.
        let usageStart = processCPU(), serverStart = serverCPU(server.processIdentifier)
        let start = nowNs() + 100_000_000
        let end = start + UInt64(seconds * 1e9)
        var due = (0..<n).map { start + UInt64($0) * chunkNs / UInt64(n) }
        // Clients fall due in the order 0, 1, ..., n-1, 0, ... (their phases rise with k and share
        // one period), so a cursor finds the next without a scan.
        var cursor = 0
        let dataHead = Array("{\(formatJSON),\"timestamp\":".utf8)
        let headTail = Array(",\"payload_length\":\(chunkBytes),\"type\":\"audio-chunk\",\"version\":\"\(WyomingEvent.protocolVersion)\"}\n".utf8)
        let eventHead = Array("{\"data_length\":".utf8)
        var event: [UInt8] = []
        event.reserveCapacity(chunkBytes + 256)
        // Decimal digits appended without allocating (the clients' own cost is part of the run).
        func append(_ v: Int, to buffer: inout [UInt8]) {
            if v >= 10 { append(v / 10, to: &buffer) }
            buffer.append(UInt8(48 + v % 10))
        }
        func digits(_ v: Int) -> Int { v >= 10 ? 1 + digits(v / 10) : 1 }
        while true {
            let t = nowNs()
            if t >= end { break }
            while due[cursor] <= t {
                let k = cursor
                cursor = (cursor + 1) % n
                if t - due[k] > chunkNs { late += 1 }
                due[k] += chunkNs
                if !all[k].pendingOut.isEmpty {
                    // The last chunk is still going out (the server is not reading): this one is dropped.
                    let left = all[k].pendingOut
                    all[k].pendingOut = []
                    if !send(k, left) { unsent += 1; continue }
                }
                let index = all[k].next
                let at = (all[k].offset + index * chunkBytes) % (pcm.count - chunkBytes)
                let timestamp = index * chunkMs
                event.removeAll(keepingCapacity: true)
                event += eventHead
                append(dataHead.count + digits(timestamp) + 1, to: &event)
                event += headTail
                event += dataHead
                append(timestamp, to: &event)
                event.append(UInt8(ascii: "}"))
                event += pcm[at..<(at + chunkBytes)]
                all[k].sentAt[index % Client.window] = (index, nowNs())
                _ = send(k, event)
                all[k].next += 1
            }
            let now = nowNs()
            let wait = due[cursor] > now ? Int32(max(1, min(5, (due[cursor] - now) / 1_000_000))) : 0
            readAnswers(timeoutMs: wait)
        }
        let wall = Double(nowNs() - start) / 1e9
        let usageEnd = processCPU(), serverEnd = serverCPU(server.processIdentifier)
        let rss = serverMemory(server.processIdentifier)
        for k in 0..<n { close(all[k].fd) }
        return ["clients": n, "answers": answers, "latencyP50Ms": latencies.milliseconds(0.5) ?? .nan, "latencyP99Ms": latencies.milliseconds(0.99) ?? .nan,
                "serverCpuPercent": (serverEnd - serverStart) / wall * 100, "clientsCpuPercent": (usageEnd - usageStart) / wall * 100,
                "serverRssMb": rss, "lateChunks": late + unsent, "errors": errors, "seconds": wall,
                "clientsNice": raised ? Int(clientsNice) : 0]
    }

    /// CPU seconds of this process so far (user + system).
    static func processCPU() -> Double {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// CPU seconds of another process (its /proc stat: user and system clock ticks).
    static func serverCPU(_ pid: Int32) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return .nan }
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return .nan }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resident memory of another process in MB.
    static func serverMemory(_ pid: Int32) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kb = Double(line.split(separator: " ").dropFirst().first ?? "") else { return .nan }
        return kb / 1024
    }
}
