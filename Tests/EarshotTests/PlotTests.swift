import EarshotCommandTestSupport
import EarshotTestSupport
import Foundation
import Testing
#if canImport(FoundationXML)
import FoundationXML
#endif

@testable import earshot

/// The elements of an SVG, as an XML parser reads them: (name, attributes) in document order,
/// and each `<text>` with what it says.
final class SVGElements: NSObject, XMLParserDelegate {
    var elements: [(name: String, attributes: [String: String])] = []
    var texts: [(attributes: [String: String], text: String)] = []
    private var inText = false
    var error: Error?

    static func parse(_ text: String) -> SVGElements {
        let collector = SVGElements()
        let parser = XMLParser(data: Data(text.utf8))
        parser.delegate = collector
        if !parser.parse() { collector.error = parser.parserError ?? FixtureError(message: "not XML") }
        return collector
    }

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
        elements.append((name, attributes))
        if name == "text" {
            texts.append((attributes, ""))
            inText = true
        }
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        if name == "text" { inText = false }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if inText { texts[texts.count - 1].text += string }
    }

    /// The spans of each lane (by its caption), in order.
    func spansByLane() -> [String: [[String: String]]] {
        var lanes: [String: [[String: String]]] = [:], lane = ""
        for e in elements {
            if let c = e.attributes["class"], c.hasPrefix("lane ") { lane = e.attributes["data-label"] ?? c }
            if e.attributes["class"] == "span" { lanes[lane, default: []].append(e.attributes) }
        }
        return lanes
    }

    /// What the texts say.
    var strings: [String] { texts.map(\.text) }

    /// The texts that reach out of the canvas: each text's box from its x, y, anchor, size and
    /// rotation, its width as the picture measures it (wide) and its height from 0.8 em above
    /// the baseline to 0.25 em below.
    func textsOutsideCanvas() -> [String] {
        let root = elements.first?.attributes ?? [:]
        let width = Double(root["width"] ?? "") ?? 0, height = Double(root["height"] ?? "") ?? 0
        let defaultSize = Double(root["font-size"] ?? "") ?? 12
        var outside: [String] = []
        for (a, text) in texts {
            let size = Double(a["font-size"] ?? "") ?? defaultSize
            let x = Double(a["x"] ?? "") ?? 0, y = Double(a["y"] ?? "") ?? 0
            let w = Plot.textWidth(text, size: size)
            let x0 = a["text-anchor"] == "end" ? x - w : a["text-anchor"] == "middle" ? x - w / 2 : x
            var corners = [(x0, y - 0.8 * size), (x0 + w, y - 0.8 * size), (x0, y + 0.25 * size), (x0 + w, y + 0.25 * size)]
            if let t = a["transform"], t.hasPrefix("rotate(") {
                let parts = t.dropFirst(7).dropLast().split(whereSeparator: { $0 == " " || $0 == "," }).compactMap { Double($0) }
                let angle = (parts.first ?? 0) * Double.pi / 180, cx = parts.count > 2 ? parts[1] : 0, cy = parts.count > 2 ? parts[2] : 0
                corners = corners.map { px, py in
                    (cx + (px - cx) * cos(angle) - (py - cy) * sin(angle), cy + (px - cx) * sin(angle) + (py - cy) * cos(angle))
                }
            }
            if corners.contains(where: { $0.0 < 0 || $0.0 > width || $0.1 < 0 || $0.1 > height }) { outside.append(text) }
        }
        return outside
    }

    func withClass(_ c: String) -> [[String: String]] {
        elements.filter { ($0.attributes["class"] ?? "").split(separator: " ").contains(Substring(c)) }.map(\.attributes)
    }
}

/// The plot area of a picture: where its lanes begin and how many pixel columns they have (the
/// waveform's background).
func plotArea(_ svg: SVGElements) -> (left: Double, columns: Int) {
    let i = svg.elements.firstIndex { $0.attributes["class"] == "lane waveform" } ?? 0
    let rect = svg.elements[min(i + 1, svg.elements.count - 1)].attributes
    return (Double(rect["x"] ?? "") ?? -1, Int(rect["width"] ?? "") ?? -1)
}

/// The waveform's strokes: per column, its x and the greatest and least sample it draws.
func waveformColumns(_ svg: SVGElements) -> [(x: Double, high: Double, low: Double)] {
    let i = svg.elements.firstIndex { $0.attributes["class"] == "lane waveform" } ?? 0
    let rect = svg.elements[i + 1].attributes, d = svg.elements[i + 2].attributes["d"] ?? ""
    let top = Double(rect["y"] ?? "") ?? 0, h = Double(rect["height"] ?? "") ?? 1, mid = top + h / 2
    return d.split(separator: "M").map { stroke in
        let parts = stroke.split(whereSeparator: { $0 == " " || $0 == "V" }).compactMap { Double($0) }
        return (parts[0], (mid - parts[1]) * 2 / h, (mid - (parts[2] - 0.1)) * 2 / h)
    }
}

@Suite("earshot plot: a self-contained SVG of audio, scores and segments")
struct PlotTests {
    @Test("The SVG parses as XML; its lanes hold the waveform, a decodable log-mel PNG, each score, the segments earshot label finds and the truth")
    func lanes() throws {
        let run = try runEarshot(["plot", "AudioSamples/speech-noise-16k.wav", "-o", "-", "--truth", "AudioSamples/speech-noise-16k.truth.csv"])
        #expect(run.status == 0, "\(run.err)")
        let svg = SVGElements.parse(run.out)
        #expect(svg.error == nil)
        #expect(svg.elements.first?.name == "svg" && svg.elements.first?.attributes["width"] == "1200")
        #expect(svg.withClass("waveform").count == 1 && svg.withClass("spectrogram").count == 1)
        let (left, columns) = plotArea(svg)
        #expect(columns > 900 && columns < 1100 && left > 100)
        // The spectrogram: a PNG of a column per pixel × 64 mels whose chunks and zlib stream check out.
        let image = try #require(svg.elements.first { $0.name == "image" }?.attributes["href"])
        #expect(image.hasPrefix("data:image/png;base64,"))
        let png = try #require(Data(base64Encoded: String(image.dropFirst("data:image/png;base64,".count))).map { [UInt8]($0) })
        #expect(Array(png.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        func u32(_ at: Int) -> Int { Int(png[at]) << 24 | Int(png[at + 1]) << 16 | Int(png[at + 2]) << 8 | Int(png[at + 3]) }
        let (samples, _) = try Fixtures.audio("speech-noise-16k.wav")
        #expect(u32(16) == columns && u32(20) == 64)  // 3650 frames (hop 160) over fewer columns: every column has some
        var at = 8, chunks: [String] = []
        while at + 12 <= png.count {
            let length = u32(at), type = String(decoding: png[(at + 4)..<(at + 8)], as: UTF8.self)
            #expect(PNG.crc32(Array(png[(at + 4)..<(at + 8 + length)])) == UInt32(u32(at + 8 + length)), "\(type) CRC")
            chunks.append(type)
            at += 12 + length
        }
        #expect(chunks == ["IHDR", "IDAT", "IEND"])
        // One score line (speech), a point per column (1141 steps over fewer columns), and the threshold at 0.5.
        let scores = svg.withClass("score")
        #expect(scores.count == 1 && scores[0]["data-label"] == "speech")
        #expect(scores[0]["points"]?.split(separator: " ").count == columns)
        #expect(svg.withClass("threshold").count == 1)
        // The segments lane: as many spans as earshot label finds, the first where it starts.
        let label = try runEarshot(["label", "-f", "csv", "AudioSamples/speech-noise-16k.wav"])
        let segments = label.out.split(separator: "\n").dropFirst().map { $0.split(separator: ",") }
        let spans = svg.spansByLane()["speech"] ?? []
        #expect(spans.count == segments.count && segments.count >= 5)
        let seconds = Double(samples.count) / 16000
        let firstX = left + (Double(Int((Double(segments[0][3]) ?? 0) / seconds * Double(columns))))
        #expect(abs((Double(spans.first?["x"] ?? "") ?? 0) - firstX) < 0.06)
        // Truth lanes: one per label of the truth file.
        #expect(svg.withClass("truth").map { $0["data-label"] ?? "" }.sorted() == ["truth noise", "truth silence", "truth speech", "truth tone"])
        #expect(svg.withClass("tick").count >= 7)
    }

    @Test("A sound-events model: a lane for each label it heard (those with events, the earliest first, then those among a window's best), each with its events")
    func soundEvents() throws {
        let run = try runEarshot(["plot", "-m", "Tests/Fixtures/tone-events", ToneEvents.audio, "-o", "-"])
        #expect(run.status == 0, "\(run.err)")
        let svg = SVGElements.parse(run.out)
        #expect(svg.error == nil)
        let lanes = svg.elements.filter { $0.attributes["class"] == "lane segments" }.compactMap { $0.attributes["data-label"] }
        let labelled = try runEarshot(["label", "-m", "Tests/Fixtures/tone-events", "-f", "csv", ToneEvents.audio])
        let events = labelled.out.split(separator: "\n").dropFirst().map { $0.split(separator: ",").map(String.init) }
        var withEvents: [String] = []
        for e in events.sorted(by: { (Double($0[3]) ?? 0, ToneEvents.model.labels.firstIndex(of: $0[2]) ?? 0) < (Double($1[3]) ?? 0, ToneEvents.model.labels.firstIndex(of: $1[2]) ?? 0) })
        where !withEvents.contains(e[2]) { withEvents.append(e[2]) }
        #expect(withEvents.count == 9 && Array(lanes.prefix(9)) == withEvents, "\(lanes)")
        // The rest were among a window's 3 best without an event: here every other label.
        #expect(Set(lanes.dropFirst(9)) == Set(ToneEvents.model.labels).subtracting(withEvents) && lanes.count == 12)
        let spans = svg.spansByLane()
        for label in withEvents {
            #expect(spans[label]?.count == events.filter { $0[2] == label }.count, "\(label)")
        }
        #expect(lanes.dropFirst(9).allSatisfy { spans[$0] == nil })
        // The scores lane draws those labels' scores, not the model's every label.
        #expect(svg.withClass("score").map { $0["data-label"] ?? "" } == lanes)
    }

    @Test("Wake words: detections as marks; --channels each stacks the channels; PNG through rsvg-convert; bad output refused")
    func detectionsChannelsAndPNG() throws {
        let wake = try runEarshot(["plot", "-m", "okay-nabu", "Tests/EarshotTests/Goldens/microwakeword/wake-words.wav", "-o", "-"])
        #expect(wake.status == 0)
        let marks = SVGElements.parse(wake.out).withClass("mark")
        let detections = try runEarshot(["label", "-m", "okay-nabu", "-f", "csv", "Tests/EarshotTests/Goldens/microwakeword/wake-words.wav"])
        #expect(marks.count == detections.out.split(separator: "\n").count - 1 && marks.count == 2)
        #expect(marks.allSatisfy { $0["data-outcome"] == "detected" })  // no truth to judge them by
        let stereo = SVGElements.parse(try runEarshot(["plot", "--channels", "each", "AudioSamples/stereo-16k.wav", "-o", "-"]).out)
        #expect(stereo.withClass("waveform").count == 2 && stereo.withClass("score").count == 2)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-plot-test-\(getpid()).png").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let png = try runEarshot(["plot", "AudioSamples/speech-8k.wav", "-m", "silero-vad-8k", "-o", path])
        #expect(png.status == 0, "\(png.err)")
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(Array(bytes.prefix(4)) == [0x89, 0x50, 0x4E, 0x47] && bytes.count > 10_000)
        #expect(try runEarshot(["plot", "AudioSamples/speech-8k.wav", "-o", "x.jpg"]).status == 64)
        // A pipe cannot be read twice: refused, not drawn from what is left of it. (The tool
        // exits without reading the pipe: its writer gets EPIPE, not a SIGPIPE that would end
        // the tests.)
        signal(SIGPIPE, SIG_IGN)
        let piped = try runEarshot(["plot", "/dev/stdin", "-o", "-"], stdinPipe: Data(contentsOf: Repo.root.appendingPathComponent("AudioSamples/speech-8k.wav")))
        #expect(piped.status == 64 && piped.out.isEmpty)
        #expect(piped.err.contains("/dev/stdin: not a regular file of known length (a pipe?); plot reads its file more than once"), "\(piped.err)")
    }

    @Test("A column keeps the least and the greatest value of its positions, whatever the chunks (random lengths and widths)")
    func columnExtremes() {
        var random = SeededRandom.fromEnvironment()
        for _ in 0..<40 {
            let length = Int.random(in: 1...5000, using: &random), count = Int.random(in: 1...700, using: &random)
            let samples = (0..<length).map { _ in Float.random(in: -1...1, using: &random) }
            var columns = ColumnExtremes(count: count, length: length)
            var at = 0
            for size in random.chunkSizes(total: length, maxChunk: 900) {
                columns.add(samples: samples[at..<(at + size)], from: at)
                at += size
            }
            // Per value, one position at a time, in reverse: the same columns.
            var scores = ColumnExtremes(count: count, length: length, width: 2)
            for p in (0..<length).reversed() { scores.add([samples[p], -samples[p]], at: p) }
            for c in 0..<count {
                let range = (c * length + count - 1) / count..<((c + 1) * length + count - 1) / count
                let expected = range.isEmpty ? (Float.infinity, -Float.infinity) : (samples[range].min() ?? 0, samples[range].max() ?? 0)
                #expect(columns.range(c) == expected, "seed \(random.seed): length \(length), \(count) columns, column \(c)")
                #expect(scores.range(c, value: 0) == expected && scores.range(c, value: 1) == (-expected.1, -expected.0), "seed \(random.seed)")
                #expect(columns.isEmpty(c) == range.isEmpty)
            }
        }
    }

    @Test("A file and the same file three times over: pictures of the same size, a stroke and a score point per column, each stroke the samples' least and greatest")
    func longInputSameSize() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (samples, _) = try Fixtures.audio("speech-noise-16k.wav")
        let long = samples + samples + samples
        let path = folder.appendingPathComponent("three-times.wav").path
        try writeAudio(path, samples: long, channels: 1, sampleRate: 16000)
        let short = SVGElements.parse(try runEarshot(["plot", "AudioSamples/speech-noise-16k.wav", "-o", "-"]).out)
        let run = try runEarshot(["plot", path, "-o", "-"])
        #expect(run.status == 0, "\(run.err)")
        let again = SVGElements.parse(run.out)
        let (left, columns) = plotArea(again)
        #expect(plotArea(short).columns == columns)
        // A stroke per column in both, at the same x; a score point per column in both.
        let strokes = waveformColumns(again)
        #expect(strokes.count == columns && waveformColumns(short).count == columns)
        #expect(strokes.map(\.x) == (0..<columns).map { left + Double($0) + 0.5 })
        #expect(again.withClass("score").first?["points"]?.split(separator: " ").count == columns)
        #expect(short.withClass("score").first?["points"]?.split(separator: " ").count == columns)
        // Each stroke spans its column's samples: positions ceil(c·n/columns) up to the next column's.
        for (c, stroke) in strokes.enumerated() {
            let range = (c * long.count + columns - 1) / columns..<((c + 1) * long.count + columns - 1) / columns
            let (lo, hi) = (Double(long[range].min() ?? 0), Double(long[range].max() ?? 0))
            // Drawn to 0.1 px over 45 px a unit.
            #expect(abs(stroke.high - hi) < 0.0025 && abs(stroke.low - lo) < 0.0025, "column \(c): \(stroke) against \(lo)...\(hi)")
        }
        // The spectrogram images are as wide, and the documents about as long (the axis and
        // the segments differ).
        let widths = [short, again].map { svg in svg.elements.first { $0.name == "image" }?.attributes["width"] }
        #expect(widths[0] == widths[1] && widths[0] == String(columns))
        let shortBytes = try runEarshot(["plot", "AudioSamples/speech-noise-16k.wav", "-o", "-"]).out.utf8.count
        #expect(abs(Double(run.out.utf8.count) / Double(shortBytes) - 1) < 0.1, "\(run.out.utf8.count) bytes against \(shortBytes)")
    }

    @Test("Readable at a glance: score ticks and the threshold's value, a frequency axis, hits, misses and false alarms told apart with a legend, no text out of the canvas")
    func readable() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // The true speech but one span (26.768-31.086), and a span of noise called speech.
        let truth = folder.appendingPathComponent("truth.csv").path
        let spans = [(1.000, 4.691), (8.391, 12.395), (14.995, 18.877), (22.477, 25.168), (32.486, 35.499), (5.5, 7.5)]
        try ("start,end,label\n" + spans.map { "\($0.0),\($0.1),speech\n" }.joined()).write(toFile: truth, atomically: true, encoding: .utf8)
        // A long folder name: the title is shortened to fit.
        let deep = folder.appendingPathComponent(String(repeating: "a-rather-long-folder-name-", count: 8))
        try FileManager.default.createDirectory(at: deep, withIntermediateDirectories: true)
        let audio = deep.appendingPathComponent("speech.wav").path
        try FileManager.default.copyItem(atPath: Repo.path("AudioSamples/speech-noise-16k.wav"), toPath: audio)
        for width in ["1200", "400"] {
            let run = try runEarshot(["plot", audio, "-o", "-", "--truth", truth, "--width", width])
            #expect(run.status == 0, "\(run.err)")
            let svg = SVGElements.parse(run.out)
            #expect(svg.error == nil)
            #expect(svg.textsOutsideCanvas().isEmpty, "width \(width): \(svg.textsOutsideCanvas())")
            let ticks = svg.texts.filter { $0.attributes["class"] == "y-tick" }.map(\.text)
            #expect(["1", "0.5", "0"].allSatisfy(ticks.contains), "\(ticks)")  // the score pane
            #expect(["500 Hz", "1 kHz", "2 kHz", "4 kHz", "8 kHz"].allSatisfy(ticks.contains), "\(ticks)")  // the spectrogram
            #expect(svg.strings.contains("threshold 0.50"))
            #expect(svg.texts.first { $0.attributes["class"] == "title" }?.text.contains("…") == true)
            let legend = svg.withClass("legend-entry").map { $0["data-outcome"] ?? "" }
            #expect(legend == ["hit", "miss", "false-alarm"], "\(legend)")
            #expect(["hit", "miss", "false alarm"].allSatisfy(svg.strings.contains))
            // Each outcome its own fill: solid green, hatched orange, cross-hatched red, grey.
            let fills = Dictionary(grouping: svg.withClass("span"), by: { $0["data-outcome"] ?? "" }).mapValues { Set($0.map { $0["fill"] ?? "" }) }
            #expect(fills["hit"] == ["#4e9a06"] && fills["miss"] == ["url(#hatch-miss)"] && fills["false-alarm"] == ["url(#hatch-false-alarm)"])
        }
        // The outcomes, against the segments earshot label finds: the truth lane's spans hit
        // when a segment overlaps them, the segments hit when they overlap a true span.
        let svg = SVGElements.parse(try runEarshot(["plot", audio, "-o", "-", "--truth", truth]).out)
        let rows = try runEarshot(["label", "-f", "csv", audio]).out.split(separator: "\n").dropFirst().map { $0.split(separator: ",") }
        let segments: [(Double, Double)] = rows.map { row in (Double(row[3]) ?? 0, Double(row[4]) ?? 0) }
        func overlaps(_ a: (Double, Double), _ b: [(Double, Double)]) -> Bool { b.contains { $0.0 <= a.1 && a.0 <= $0.1 } }
        let lanes = svg.spansByLane().mapValues { $0.map { $0["data-outcome"] ?? "" } }
        let sorted = spans.sorted { $0.0 < $1.0 }
        #expect(lanes["truth speech"] == sorted.map { overlaps($0, segments) ? "hit" : "miss" })
        #expect(lanes["speech"] == segments.map { overlaps($0, spans) ? "hit" : "false-alarm" })
        #expect(lanes["truth speech"]?.filter { $0 == "miss" }.count == 1 && lanes["speech"]?.filter { $0 == "false-alarm" }.count == 1)
    }
}
