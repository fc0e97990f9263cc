import EarshotCommandTestSupport
import EarshotJSON
import EarshotRedis
import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot
@testable import EarshotCluster

#if canImport(Glibc)
import Glibc
#endif

@Suite("A worker's metrics, health and JSON log", .serialized)
struct WorkerMetricsTests {
    /// Every line of `text` as a JSON object (a line that is not one fails the test).
    static func objects(_ text: String) -> [[String: JSONValue]] {
        text.split(separator: "\n").map { line in
            let object = (try? JSONValue.parse(String(line)))?.object
            #expect(object != nil, "not a JSON object: \(line)")
            return object ?? [:]
        }
    }

    /// Scrapes until `done` holds, at most 20 s.
    static func scrape(_ port: Int, until done: (PrometheusScrape) -> Bool) throws -> PrometheusScrape {
        let deadline = Date().addingTimeInterval(20)
        while true {
            let scrape = try PrometheusScrape(try httpRequest(port: port, "/metrics").body)
            if done(scrape) || Date() > deadline { return scrape }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }

    @Test("worker --metrics --log-format json: entries, steps, sources and the step histogram equal what was published; /health 503 while Redis is down, 200 again after; every stderr line JSON")
    func workerMetrics() throws {
        let redis = try TestRedis()
        let worker = try WorkerProcess(name: "metrics", redis: redis, extra: ["--metrics", "tcp://127.0.0.1:0", "--log-format", "json"])
        var port: Int?
        let deadline = Date().addingTimeInterval(60)
        while port == nil, Date() < deadline {
            port = worker.stderr.split(separator: "\n").map { jsonText((try? JSONValue.parse(String($0)))?["metrics"]) }
                .first { !$0.isEmpty }.flatMap { $0.split(separator: ":").last.flatMap { Int($0) } }
            Thread.sleep(forTimeInterval: 0.1)
        }
        let metrics = try #require(port, "\(worker.stderr)")
        let sources = [(id: "m-1", file: "speech-8k.wav"), (id: "m-2", file: "speech-noise-16k.wav")]
        try ClusterTests.publish(redis, sources: sources, pause: 0)
        _ = try ClusterTests.waitForEnds(redis, sources.map(\.id), timeout: 60)
        // What the same audio takes offline: its entries (one per 100 ms, and the end) and steps.
        var entries = 0, steps = 0
        for s in sources {
            let (samples, rate) = try Fixtures.audio(s.file)
            entries += (samples.count + rate / 10 - 1) / (rate / 10) + 1
            var set = ChannelSet(model: Fixtures.model, options: LabelOptions(model: Fixtures.model))
            let k = try set.add(sourceRate: rate, kind: .live)
            _ = set.push(samples, channel: k)
            _ = set.drain()
            _ = set.finish(channel: k)
            steps += set.stepsRun
        }
        let scrape = try Self.scrape(metrics) { $0.value("earshot_entries_total") == Double(entries) && $0.value("earshot_sources_ended_total") == 2 }
        #expect(scrape.value("earshot_entries_total") == Double(entries))
        #expect(scrape.value("earshot_steps_total") == Double(steps))
        #expect(scrape.value("earshot_sources_ended_total") == 2)
        #expect(scrape.value("earshot_sources_taken_total") == 2)
        #expect(scrape.value("earshot_errors_total", ["kind": "source-failed"]) == 0)
        #expect(scrape.value("earshot_redis_connected") == 1)
        #expect(scrape.value("earshot_streams", ["model": "silero-vad"]) != nil)
        let rounds = try #require(scrape.histogram("earshot_tick_seconds"))
        #expect(zip(rounds.buckets, rounds.buckets.dropFirst()).allSatisfy { $0.le < $1.le && $0.count <= $1.count })
        #expect(rounds.buckets.last?.count == rounds.count && rounds.sum > 0)
        // Each round steps at least one source one block; blocks of several entries step together.
        #expect(rounds.count >= 1 && rounds.count <= Double(steps))
        let latency = try #require(scrape.histogram("earshot_entry_latency_seconds"))
        // Audio entries carry their publishing time (t); end entries do not.
        #expect(latency.count == Double(entries - sources.count))
        #expect((scrape.value("process_resident_memory_bytes") ?? 0) > 10e6)
        #expect(try httpRequest(port: metrics, "/health").status == 200)

        // Redis away: unhealthy (503) within a few seconds; back: healthy again.
        redis.stop()
        func health(_ status: Int) throws -> Bool {
            let until = Date().addingTimeInterval(15)
            while Date() < until {
                if try httpRequest(port: metrics, "/health").status == status { return true }
                Thread.sleep(forTimeInterval: 0.1)
            }
            return false
        }
        #expect(try health(503))
        #expect(try PrometheusScrape(try httpRequest(port: metrics, "/metrics").body).value("earshot_redis_connected") == 0)
        try redis.start()
        #expect(try health(200))
        #expect(worker.stop() == 0)
        let lines = Self.objects(worker.stderr)
        #expect(lines.count >= 4)
        for object in lines {
            #expect(object["command"] == "worker" && object["worker"] == "metrics", "\(object)")
            #expect(["info", "warning", "error"].contains(jsonText(object["level"])))
            #expect(!jsonText(object["message"]).isEmpty && jsonText(object["time"]).hasSuffix("Z"))
        }
        let took = lines.filter { jsonText($0["message"]).hasPrefix("took source") }
        #expect(Set(took.map { jsonText($0["source"]) }) == ["m-1", "m-2"])
        #expect(took.allSatisfy { $0["model"] == "silero-vad" })
        #expect(lines.contains { $0["level"] == "warning" && jsonText($0["message"]).contains("retrying") })
    }
}
