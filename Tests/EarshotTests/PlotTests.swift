import EarshotTestSupport
import Foundation
import Testing
#if canImport(FoundationXML)
import FoundationXML
#endif

@testable import earshot

/// The elements of an SVG, as an XML parser reads them: (name, attributes) in document order.
final class SVGElements: NSObject, XMLParserDelegate {
    var elements: [(name: String, attributes: [String: String])] = []
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
    }

    func withClass(_ c: String) -> [[String: String]] {
        elements.filter { ($0.attributes["class"] ?? "").split(separator: " ").contains(Substring(c)) }.map(\.attributes)
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
        // The spectrogram: a PNG of frames × 64 mels whose chunks and zlib stream check out.
        let image = try #require(svg.elements.first { $0.name == "image" }?.attributes["href"])
        #expect(image.hasPrefix("data:image/png;base64,"))
        let png = try #require(Data(base64Encoded: String(image.dropFirst("data:image/png;base64,".count))).map { [UInt8]($0) })
        #expect(Array(png.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        func u32(_ at: Int) -> Int { Int(png[at]) << 24 | Int(png[at + 1]) << 16 | Int(png[at + 2]) << 8 | Int(png[at + 3]) }
        let (samples, _) = try Fixtures.audio("speech-noise-16k.wav")
        #expect(u32(16) == samples.count / 160 + 1 && u32(20) == 64)  // centred frames, hop 160
        var at = 8, chunks: [String] = []
        while at + 12 <= png.count {
            let length = u32(at), type = String(decoding: png[(at + 4)..<(at + 8)], as: UTF8.self)
            #expect(PNG.crc32(Array(png[(at + 4)..<(at + 8 + length)])) == UInt32(u32(at + 8 + length)), "\(type) CRC")
            chunks.append(type)
            at += 12 + length
        }
        #expect(chunks == ["IHDR", "IDAT", "IEND"])
        // One score line (speech) over every step, and the threshold at 0.5.
        let scores = svg.withClass("score")
        #expect(scores.count == 1 && scores[0]["data-label"] == "speech")
        let steps = (samples.count + 511) / 512
        #expect(scores[0]["points"]?.split(separator: " ").count == steps)
        #expect(svg.withClass("threshold").count == 1)
        // The segments lane: as many spans as earshot label finds, the first where it starts.
        let label = try runEarshot(["label", "-f", "csv", "AudioSamples/speech-noise-16k.wav"])
        let segments = label.out.split(separator: "\n").dropFirst().map { $0.split(separator: ",") }
        let spans = svg.elements.filter { $0.attributes["class"] == "span" && $0.attributes["fill"] == "#cc0000" }
        #expect(spans.count == segments.count && segments.count >= 5)
        let seconds = Double(samples.count) / 16000
        let firstX = 120 + (1200 - 140) * (Double(segments[0][3]) ?? 0) / seconds
        #expect(abs((Double(spans[0].attributes["x"] ?? "") ?? 0) - firstX) < 0.2)
        // Truth lanes: one per label of the truth file.
        #expect(svg.withClass("truth").map { $0["data-label"] ?? "" }.sorted() == ["truth noise", "truth silence", "truth speech", "truth tone"])
        #expect(svg.withClass("tick").count >= 7)
    }

    @Test("Wake words: detections as marks; --channels each stacks the channels; PNG through rsvg-convert; bad output refused")
    func detectionsChannelsAndPNG() throws {
        let wake = try runEarshot(["plot", "-m", "okay-nabu", "Tests/EarshotTests/Goldens/microwakeword/wake-words.wav", "-o", "-"])
        #expect(wake.status == 0)
        let marks = SVGElements.parse(wake.out).withClass("mark")
        let detections = try runEarshot(["label", "-m", "okay-nabu", "-f", "csv", "Tests/EarshotTests/Goldens/microwakeword/wake-words.wav"])
        #expect(marks.count == detections.out.split(separator: "\n").count - 1 && marks.count == 2)
        let stereo = SVGElements.parse(try runEarshot(["plot", "--channels", "each", "AudioSamples/stereo-16k.wav", "-o", "-"]).out)
        #expect(stereo.withClass("waveform").count == 2 && stereo.withClass("score").count == 2)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-plot-test-\(getpid()).png").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let png = try runEarshot(["plot", "AudioSamples/speech-8k.wav", "-m", "silero-vad-8k", "-o", path])
        #expect(png.status == 0, "\(png.err)")
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(Array(bytes.prefix(4)) == [0x89, 0x50, 0x4E, 0x47] && bytes.count > 10_000)
        #expect(try runEarshot(["plot", "AudioSamples/speech-8k.wav", "-o", "x.jpg"]).status == 64)
    }
}
