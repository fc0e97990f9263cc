import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing

import Earshot

@Suite("Output formats: scores as CSV, RTTM ids, Audacity labels, feature dumps, the JSON lines' schema")
struct OutputFormatTests {
    @Test("--scores -f csv is the table of step scores, the same numbers as jsonl; formats that cannot carry scores refuse them")
    func scoresAsCSV() throws {
        let csv = try runEarshot(["label", "--scores", "-f", "csv", "-m", "silero-vad-8k", "AudioSamples/speech-8k.wav"])
        let jsonl = try runEarshot(["label", "--scores", "-f", "jsonl", "-m", "silero-vad-8k", "AudioSamples/speech-8k.wav"])
        #expect(csv.status == 0 && jsonl.status == 0)
        let rows = csv.out.split(separator: "\n")
        #expect(rows.first == "file,channel,start,end,speech")
        let steps = jsonl.out.split(separator: "\n").compactMap { line -> Double? in
            guard let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], let s = o["scores"] as? [String: Double] else { return nil }
            return s["speech"]
        }
        let fromCSV = rows.dropFirst().compactMap { Double($0.split(separator: ",").last ?? "") }
        #expect(fromCSV.count == steps.count && steps.count > 300)
        #expect(zip(fromCSV, steps).allSatisfy { abs($0 - $1) < 1e-9 })
        for format in ["audacity", "rttm"] {
            let refused = try runEarshot(["label", "--scores", "-f", format, "AudioSamples/speech-8k.wav"])
            #expect(refused.status == 64 && refused.err.contains("cannot carry scores"), "\(format)")
        }
    }

    @Test("RTTM file ids are unique in a run (x.wav and x.flac); Audacity labels name file and channel when there are several")
    func rttmAndAudacity() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-formats-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for ext in ["wav", "flac"] {
            try FileManager.default.copyItem(at: Repo.root.appendingPathComponent("AudioSamples/speech-noise-16k.\(ext)"),
                                             to: folder.appendingPathComponent("x.\(ext)"))
        }
        let both = try runEarshot(["label", "-f", "rttm", folder.appendingPathComponent("x.wav").path, folder.appendingPathComponent("x.flac").path])
        let ids = Set(both.out.split(separator: "\n").map { String($0.split(separator: " ")[1]) })
        #expect(both.status == 0 && ids == ["x_wav", "x_flac"])
        let one = try runEarshot(["label", "-f", "rttm", folder.appendingPathComponent("x.wav").path])
        #expect(Set(one.out.split(separator: "\n").map { String($0.split(separator: " ")[1]) }) == ["x"])
        // A name with dots keeps all but its extension.
        try FileManager.default.copyItem(at: folder.appendingPathComponent("x.wav"), to: folder.appendingPathComponent("take 1.v2.wav"))
        let dotted = try runEarshot(["label", "-f", "rttm", folder.appendingPathComponent("take 1.v2.wav").path])
        #expect(Set(dotted.out.split(separator: "\n").map { String($0.split(separator: " ")[1]) }) == ["take_1.v2"])
        let stereo = try runEarshot(["label", "-f", "audacity", "--channels", "each", "AudioSamples/stereo-16k.wav"])
        let labels = stereo.out.split(separator: "\n").map { String($0.split(separator: "\t")[2]) }
        #expect(Set(labels) == ["AudioSamples/stereo-16k.wav:0 speech", "AudioSamples/stereo-16k.wav:1 speech"])
        let single = try runEarshot(["label", "-f", "audacity", "AudioSamples/speech-8k.wav"])
        #expect(single.out.split(separator: "\n").allSatisfy { $0.hasSuffix("\tspeech") })
    }

    @Test("features --dump writes every frame: a .npy of [frames][mels] whose means are the summary's, bit for bit what the library computes in another process, and the same numbers as CSV")
    func featureDump() throws {
        let npyPath = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-dump-\(getpid()).npy").path
        defer { try? FileManager.default.removeItem(atPath: npyPath) }
        let summary = try runEarshot(["features", "AudioSamples/speech-8k.wav", "--json", "--dump", npyPath])
        #expect(summary.status == 0)
        let info = try #require(try JSONSerialization.jsonObject(with: Data(summary.out.utf8)) as? [String: Any])
        let frames = try #require(info["frames"] as? Int), means = try #require(info["mean"] as? [Double])
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: npyPath)))
        #expect(Array(bytes.prefix(8)) == [0x93] + Array("NUMPY".utf8) + [1, 0])
        let headerLength = Int(bytes[8]) | Int(bytes[9]) << 8
        let header = String(decoding: bytes[10..<(10 + headerLength)], as: UTF8.self)
        #expect(header.contains("'descr': '<f4'") && header.contains("'shape': (\(frames), 64)") && (10 + headerLength) % 64 == 0)
        let body = Array(bytes[(10 + headerLength)...])
        #expect(body.count == frames * 64 * 4)
        let values = body.withUnsafeBytes { raw in (0..<(frames * 64)).map { Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 4, as: UInt32.self))) } }
        for m in [0, 10, 63] {
            let mean = (0..<frames).map { Double(values[$0 * 64 + m]) }.reduce(0, +) / Double(frames)
            #expect(abs(mean - means[m]) < 1e-3, "mel \(m)")
        }
        // The same bits as this process computes: FFT plans are made by estimate, the same in
        // every process.
        var here: [Float] = []
        _ = try FileFeatures(config: .logMel(sampleRate: 16000, nFFT: 512, hopLength: 160, melCount: 64))
            .run(path: Repo.path("AudioSamples/speech-8k.wav")) { m in for t in 0..<m.frameCount { here += m[frame: t] } }
        #expect(here == values)
        let csv = try runEarshot(["features", "AudioSamples/speech-8k.wav", "--dump", "-"])
        let rows = csv.out.split(separator: "\n")
        #expect(rows.count == frames + 1 && rows[0].hasPrefix("f0,f1,"))
        let row5 = rows[6].split(separator: ",").compactMap { Float($0) }
        #expect(row5.count == 64 && zip(row5, values[(5 * 64)..<(6 * 64)]).allSatisfy { abs($0 - $1) <= 1e-4 * max(1, abs($1)) })
        #expect(try runEarshot(["features", "AudioSamples/speech-8k.wav", "--dump", "x.bin"]).status == 64)
    }

    @Test("Every JSON line of label (segments, detections, sound events, step scores, a window's best labels) has the keys and types docs/events.schema.json gives")
    func jsonLinesMatchTheSchema() throws {
        let schema = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: Repo.root.appendingPathComponent("docs/events.schema.json"))) as? [String: Any])
        let kinds = try #require(schema["oneOf"] as? [[String: Any]])
        func kind(of object: [String: Any]) -> String? {
            for k in kinds {
                let required = Set(k["required"] as? [String] ?? []), properties = k["properties"] as? [String: [String: Any]] ?? [:]
                // Every required key, and no key the kind does not name (an event's names are optional).
                guard required.isSubset(of: object.keys), Set(object.keys).isSubset(of: properties.keys) else { continue }
                let typesMatch = object.allSatisfy { key, value in
                    switch properties[key]?["type"] as? String {
                    case "string": return value is String
                    case "integer": return (value as? NSNumber).map { $0.doubleValue.rounded() == $0.doubleValue } ?? false
                    case "number": return value is NSNumber
                    case "object": return value is [String: Any]
                    case "array":
                        // An array of objects with exactly the item's keys, each of its type.
                        let item = properties[key]?["items"] as? [String: Any] ?? [:]
                        let keys = Set(item["required"] as? [String] ?? [])
                        return (value as? [[String: Any]]).map { $0.allSatisfy { Set($0.keys) == keys && $0["label"] is String && $0["score"] is NSNumber } } ?? false
                    default: return false
                    }
                }
                if typesMatch { return k["title"] as? String }
            }
            return nil
        }
        var seen: Set<String> = []
        for words in [["label", "-f", "jsonl", "AudioSamples/speech-8k.wav"],
                      ["label", "-f", "jsonl", "-m", "okay-nabu", "Tests/EarshotTests/Goldens/microwakeword/wake-words.wav"],
                      ["label", "-f", "jsonl", "--scores", "-m", "silero-vad-8k", "AudioSamples/speech-8k.wav"],
                      ["label", "-f", "jsonl", "--scores", "-m", "Tests/Fixtures/tone-events", ToneEvents.audio]] {
            let run = try runEarshot(words)
            for line in run.out.split(separator: "\n") {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                let k = kind(of: object)
                #expect(k != nil, "\(line)")
                if let k { seen.insert(k) }
            }
        }
        #expect(seen == ["segment", "detection", "scores", "event", "top scores"])
    }
}
