import EarshotCommandTestSupport
import EarshotJSON
import EarshotTelemetry
import EarshotTestSupport
import EarshotWyoming
import Foundation
import Testing

@testable import Earshot
@testable import EarshotServe

#if canImport(Glibc)
import Glibc
#endif

@Suite("A service's metrics, health and JSON log", .serialized)
struct ServeMetricsTests {
    /// Scrapes until `done` holds (the loop publishes every 250 ms), at most 5 s.
    static func scrape(_ port: Int, until done: (PrometheusScrape) -> Bool) throws -> PrometheusScrape {
        let deadline = Date().addingTimeInterval(5)
        while true {
            let answer = try httpRequest(port: port, "/metrics")
            #expect(answer.status == 200)
            #expect(answer.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
            let scrape = try PrometheusScrape(answer.body)
            if done(scrape) || Date() > deadline { return scrape }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }

    /// A histogram as the format wants it: buckets in increasing order, cumulative, the last
    /// +Inf equal to the count.
    static func checkHistogram(_ h: (buckets: [(le: Double, count: Double)], sum: Double, count: Double)) {
        #expect(h.buckets.count == MetricsText.bucketPowers.count + 1)
        #expect(zip(h.buckets, h.buckets.dropFirst()).allSatisfy { $0.le < $1.le && $0.count <= $1.count })
        #expect(h.buckets.last?.le == .infinity && h.buckets.last?.count == h.count)
    }

    @Test("/metrics: clients, streams per model, steps, ticks as a histogram, drops and errors by kind equal what was sent; /health, 404, 405")
    func servedMetrics() throws {
        let models = [Fixtures.model, Serving.okayNabu]
        let (server, port) = try Serving.start(models)
        let endpoint = try MetricsServer(uri: "tcp://127.0.0.1:0", metrics: { server.metrics.text }, health: { server.metrics.isHealthy })
        endpoint.start()
        defer { endpoint.stop() }
        let format: [String: JSONValue] = ["rate": 16000, "width": 2, "channels": 1]
        let samples = Array(Serving.wakeWords[0..<24037])
        var clients: [WyomingTestClient] = []
        for _ in 0..<3 {
            let client = try WyomingTestClient(port: port)
            client.send("audio-start", format)
            client.send("audio-chunk", format, payload: pcm16(samples))
            clients.append(client)
        }
        // One chunk at another rate: refused (dropped), an audio-format error.
        clients[0].send("audio-chunk", ["rate": 8000, "width": 2, "channels": 1], payload: pcm16(Array(samples[0..<800])))
        for c in clients {
            c.send("ping")
            _ = try c.events(until: ["pong"])
        }
        // Whole blocks only, while the streams are open: 3 streams × each model's blocks.
        let expectedSteps = models.reduce(0) { $0 + 3 * (samples.count / $1.manifest.audio.chunkSamples) }
        let scrape = try Self.scrape(endpoint.port) { $0.value("earshot_steps_total") == Double(expectedSteps) }
        #expect(scrape.types["earshot_steps_total"] == "counter" && scrape.types["earshot_tick_seconds"] == "histogram")
        #expect(scrape.value("earshot_clients") == 3)
        for m in models { #expect(scrape.value("earshot_streams", ["model": m.name]) == 3) }
        #expect(scrape.value("earshot_steps_total") == Double(expectedSteps))
        #expect(scrape.value("earshot_streams_started_total") == 3)
        #expect(scrape.value("earshot_dropped_chunks_total") == 1)
        #expect(scrape.value("earshot_dropped_samples_total") == 800)
        #expect(scrape.value("earshot_errors_total", ["kind": "audio-format"]) == 1)
        #expect(scrape.value("earshot_connections_accepted_total") == 3)
        #expect((scrape.value("process_resident_memory_bytes") ?? 0) > 10e6)
        let started = scrape.value("process_start_time_seconds") ?? 0
        #expect(started <= Date().timeIntervalSince1970 && started > Date().timeIntervalSince1970 - 86400)
        let ticks = try #require(scrape.histogram("earshot_tick_seconds"))
        Self.checkHistogram(ticks)
        #expect(ticks.count >= 1 && ticks.sum > 0)

        let health = try httpRequest(port: endpoint.port, "/health")
        #expect(health.status == 200 && health.body == "ok\n")
        #expect(try httpRequest(port: endpoint.port, "/other").status == 404)
        let post = try httpRequest(port: endpoint.port, "/metrics", method: "POST")
        #expect(post.status == 405 && post.headers["allow"] == "GET, HEAD")
        #expect(try httpRequest(port: endpoint.port, "/metrics", raw: "GET /metrics\r\n\r\n").status == 400)
        let huge = "GET /metrics HTTP/1.1\r\nX: " + String(repeating: "a", count: 9000) + "\r\n\r\n"
        #expect(try httpRequest(port: endpoint.port, "/metrics", raw: huge).status == 431)

        clients.removeAll()
        server.stop()
        let summary = server.wait()
        // Every tick the loop counted is in the histogram; the stop adds none (no audio came).
        #expect(summary.ticks == Int(ticks.count))
        let stopped = try httpRequest(port: endpoint.port, "/health")
        #expect(stopped.status == 503)
        let last = try PrometheusScrape(try httpRequest(port: endpoint.port, "/metrics").body)
        #expect(last.value("earshot_clients") == 0)
        for m in models { #expect(last.value("earshot_streams", ["model": m.name]) == 0) }
        #expect(last.value("earshot_steps_total") == Double(summary.steps))
    }

    @Test("A client that sends half a request and waits is closed after 2 s; the endpoint answers the next")
    func slowClient() throws {
        let endpoint = try MetricsServer(uri: "tcp://127.0.0.1:0", metrics: { "# HELP a b\n# TYPE a gauge\na 1\n" }, health: { true })
        endpoint.start()
        defer { endpoint.stop() }
        let slow = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(slow) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(endpoint.port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(slow, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        _ = "GET /metr".withCString { send(slow, $0, 9, 0) }
        let start = Date()
        let answer = try httpRequest(port: endpoint.port, "/metrics")
        let waited = Date().timeIntervalSince(start)
        #expect(answer.status == 200 && answer.body == "# HELP a b\n# TYPE a gauge\na 1\n")
        #expect(waited >= 1.5 && waited < 4, "waited \(waited) s")
    }

    @Test("--metrics tcp://HOST:PORT that is not one: exit 64 naming it")
    func badMetricsAddress() throws {
        let result = try runEarshot(["serve", "--uri", "tcp://127.0.0.1:0", "--metrics", "http://127.0.0.1:9100"])
        #expect(result.status == 64)
        #expect(result.err.contains("--metrics http://127.0.0.1:9100: not a tcp:// address"))
    }

    @Test("serve --verbose --log-format json: every stderr line is one JSON object with time, level, message and command; a client's lines name it; /metrics answers")
    func jsonLog() throws {
        let process = Process()
        process.executableURL = earshotBinary
        process.arguments = ["serve", "--uri", "tcp://127.0.0.1:0", "--model", "silero-vad", "--metrics", "tcp://127.0.0.1:0",
                             "--verbose", "--log-format", "json"]
        process.currentDirectoryURL = Repo.root
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        // Its first lines say where it serves and where its metrics are.
        var text = ""
        let deadline = Date().addingTimeInterval(60)
        while !(text.contains("\"metrics\"") && text.contains("serving")), Date() < deadline {
            let chunk = err.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            text += String(decoding: chunk, as: UTF8.self)
        }
        func field(_ line: Substring, _ name: String) -> String? {
            let text = jsonText((try? JSONValue.parse(String(line)))?[name])
            return text.isEmpty ? nil : text
        }
        let lines = text.split(separator: "\n")
        let servePort = try #require(lines.compactMap { field($0, "message") }.first { $0.hasPrefix("serving") }
            .flatMap { $0.split(separator: ":").last.flatMap { Int($0) } })
        let metricsPort = try #require(lines.compactMap { field($0, "metrics") }.first.flatMap { $0.split(separator: ":").last.flatMap { Int($0) } })
        let client = try WyomingTestClient(port: servePort)
        client.send("ping")
        _ = try client.events(until: ["pong"])
        let scrape = try Self.scrape(metricsPort) { $0.value("earshot_clients") == 1 }
        #expect(scrape.value("earshot_clients") == 1)
        #expect(try httpRequest(port: metricsPort, "/health").status == 200)
        kill(process.processIdentifier, SIGTERM)
        text += String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let all = text.split(separator: "\n")
        #expect(all.count >= 5)
        for line in all {
            let object = try JSONValue.parse(String(line)).object ?? [:]
            #expect(object["command"] == "serve", "\(line)")
            #expect(["info", "warning", "error"].contains(jsonText(object["level"])), "\(line)")
            #expect(!jsonText(object["message"]).isEmpty, "\(line)")
            let time = jsonText(object["time"])
            #expect(time.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression) != nil, "\(line)")
        }
        let connected = all.compactMap { try? JSONValue.parse(String($0)) }.first { jsonText($0["message"]).hasPrefix("connected") }
        let peer = jsonText(connected?["client"])
        #expect(peer.hasPrefix("127.0.0.1:"), "\(peer)")
    }
}
