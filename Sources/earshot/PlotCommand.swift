import Earshot
import Foundation

/// `earshot plot`: a self-contained SVG of a file's audio and what the models make of it:
/// waveform, log-mel spectrogram, each label's score over time with its threshold, the segments
/// and detections as lanes, an optional truth lane, and a time axis in seconds.
enum PlotCommand {
    static func run(_ words: [String]) async throws -> Int32 {
        let args = try Arguments(words, spec: Specs.plot)
        guard args.positionals.count == 1, let path = args.positionals.first else {
            throw UsageError("plot takes one audio file", hint: "earshot plot AudioSamples/speech-noise-16k.wav -o speech.svg")
        }
        let output = args.string("output") ?? URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent + ".svg"
        let png = output.lowercased().hasSuffix(".png")
        guard png || output.lowercased().hasSuffix(".svg") || output == "-" else {
            throw UsageError("--output \(output): expected a .svg or .png file, or - for standard output")
        }
        let each = (args.string("channels") ?? "mix") == "each"
        let chosen = try LabelCommand.models(args)
        var labelers: [FileLabeler] = []
        for (name, m) in zip(chosen.names, chosen.models) {
            var options = try LabelCommand.options(args, model: m, name: name)
            options.includeScores = true
            labelers.append(FileLabeler(model: m, options: options, channels: each ? .each : .mix))
        }
        let file = try AudioFile(path: path)
        let rate = file.sampleRate
        let channels = each ? try file.readChannels(maxFrames: file.frameCount ?? 0) : [try file.readMono(maxFrames: file.frameCount ?? 0)]
        let truth = try args.string("truth").map(readTruth) ?? []
        var results: [FileLabeler.Result] = []
        for labeler in labelers { results.append(try await labeler.label(path: path)) }
        var plot = Plot(width: args.int("width"), seconds: Double(channels.first?.count ?? 0) / Double(max(rate, 1)), title: path)
        for (k, samples) in channels.enumerated() {
            let prefix = channels.count > 1 ? "ch \(k) " : ""
            plot.waveform(samples, label: prefix + "waveform")
            let features = FileFeatures(config: .logMel(sampleRate: 16000, nFFT: 512, hopLength: 160, melCount: 64, log: .decibels(topDB: 80)),
                                        channels: channels.count > 1 || file.channelCount == 1 ? .channel(k) : .mix)
            var frames: [[Float]] = []
            _ = try features.run(path: path) { m in for t in 0..<m.frameCount { frames.append(Array(m[frame: t])) } }
            plot.spectrogram(frames, label: prefix + "log-mel")
            for (labeler, result) in zip(labelers, results) {
                let model = labeler.model
                let mine = result.events.filter { $0.channel == k }
                let steps = mine.compactMap { e -> StepScores? in if case let .scores(s) = e { return s } else { return nil } }
                let labels = model.labels.filter { $0 != labeler.options.backgroundLabel }
                plot.scores(steps, labels: model.labels, shown: labels, threshold: labeler.options.threshold, label: prefix + model.name)
                for l in labels {
                    var spans: [(Double, Double)] = [], marks: [Double] = []
                    for e in mine {
                        switch e {
                        case let .ended(s) where s.label == l: spans.append((s.startSeconds, s.endSeconds))
                        case let .detected(d) where d.label == l: marks.append(d.seconds)
                        default: break
                        }
                    }
                    plot.lane(spans: spans, marks: marks, label: prefix + l, kind: "segments")
                }
            }
            if !truth.isEmpty {
                for l in Array(Set(truth.map(\.label))).sorted() {
                    plot.lane(spans: truth.filter { $0.label == l }.map { ($0.start, $0.end) }, marks: [], label: prefix + "truth " + l, kind: "truth")
                }
            }
        }
        let svg = plot.finish()
        if output == "-" {
            try out(svg, terminator: "")
            return 0
        }
        let svgPath = png ? FileManager.default.temporaryDirectory.appendingPathComponent("earshot-plot-\(getpid()).svg").path : output
        let file2 = try OutputFile.open(svgPath)
        try file2.write(svg)
        try file2.commit()
        if png {
            defer { try? FileManager.default.removeItem(atPath: svgPath) }
            let tool = ["/usr/bin/rsvg-convert", "/usr/local/bin/rsvg-convert"].first { FileManager.default.isExecutableFile(atPath: $0) }
            guard let tool else {
                throw UsageError("--output \(output): a PNG needs rsvg-convert (Debian: apt-get install librsvg2-bin)", hint: "write an .svg instead")
            }
            let convert = Process()
            convert.executableURL = URL(fileURLWithPath: tool)
            convert.arguments = ["-o", output, svgPath]
            try convert.run()
            convert.waitUntilExit()
            guard convert.terminationStatus == 0 else { throw OutputError(path: output, reason: "rsvg-convert failed (exit \(convert.terminationStatus))", cannotCreate: true) }
        }
        if !args.flag("quiet") { printError("earshot plot: \(output)") }
        return 0
    }

    struct TruthSpan { var start: Double; var end: Double; var label: String }

    /// start,end,label in seconds, one per line; a header line that names the columns (start,
    /// end, label, and channel, as AudioSamples' truth files have) picks them out.
    static func readTruth(_ path: String) throws -> [TruthSpan] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw UsageError("--truth \(path): cannot read the file") }
        var lines = text.split(whereSeparator: \.isNewline).map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        var columns = (start: 0, end: 1, label: 2)
        if let header = lines.first, Double(header.first ?? "") == nil {
            guard let s = header.firstIndex(of: "start"), let e = header.firstIndex(of: "end"), let l = header.firstIndex(of: "label") else {
                throw UsageError("--truth \(path): the header names no start, end and label columns")
            }
            columns = (s, e, l)
            lines.removeFirst()
        }
        var spans: [TruthSpan] = []
        for (n, parts) in lines.enumerated() {
            guard parts.count > max(columns.start, columns.end, columns.label), let s = Double(parts[columns.start]),
                  let e = Double(parts[columns.end]), e >= s else {
                throw UsageError("--truth \(path): line \(n + 2) is not start,end,label in seconds")
            }
            spans.append(TruthSpan(start: s, end: e, label: parts[columns.label]))
        }
        return spans
    }
}

/// An SVG drawn lane by lane, top to bottom, over one time axis.
struct Plot {
    let width: Int
    let seconds: Double
    let left = 120.0, right = 20.0
    var y = 40.0
    var body: [String] = []
    let title: String

    init(width: Int, seconds: Double, title: String) {
        self.width = width
        self.seconds = max(seconds, 1e-3)
        self.title = title
    }

    var plotWidth: Double { Double(width) - left - right }
    func x(_ t: Double) -> Double { left + plotWidth * min(max(t / seconds, 0), 1) }
    static func f(_ v: Double) -> String { String(format: "%.1f", v) }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "\"", with: "&quot;")
    }

    mutating func caption(_ label: String, height: Double) {
        body.append("<text class=\"lane-label\" x=\"\(Self.f(left - 8))\" y=\"\(Self.f(y + height / 2 + 4))\" text-anchor=\"end\">\(Self.escape(label))</text>")
    }

    mutating func waveform(_ samples: [Float], label: String) {
        let h = 90.0, columns = Int(plotWidth)
        caption(label, height: h)
        var d = ""
        let mid = y + h / 2
        for c in 0..<columns where !samples.isEmpty {
            let a = c * samples.count / columns, b = max(a + 1, (c + 1) * samples.count / columns)
            var lo: Float = 0, hi: Float = 0
            for v in samples[a..<min(b, samples.count)] { lo = min(lo, v); hi = max(hi, v) }
            let xc = left + Double(c) + 0.5
            d += "M\(Self.f(xc)) \(Self.f(mid - Double(hi) * h / 2))V\(Self.f(mid - Double(lo) * h / 2 + 0.1))"
        }
        body.append("<g class=\"lane waveform\"><rect x=\"\(Self.f(left))\" y=\"\(Self.f(y))\" width=\"\(Self.f(plotWidth))\" height=\"\(Self.f(h))\" fill=\"#fafafa\"/>"
                    + "<path d=\"\(d)\" stroke=\"#3465a4\" stroke-width=\"1\" fill=\"none\"/></g>")
        y += h + 10
    }

    /// Frames × features as an image (low features at the bottom), colour from quiet to loud.
    mutating func spectrogram(_ frames: [[Float]], label: String) {
        let h = 128.0
        caption(label, height: h)
        guard let bins = frames.first?.count, bins > 0 else { y += h + 10; return }
        let all = frames.joined()
        let lo = all.min() ?? 0, hi = all.max() ?? 1
        var pixels = [UInt8](repeating: 0, count: frames.count * bins * 3)
        for (t, frame) in frames.enumerated() {
            for (m, v) in frame.enumerated() {
                let (r, g, b) = Self.colour(Double((v - lo) / max(hi - lo, 1e-9)))
                let at = ((bins - 1 - m) * frames.count + t) * 3
                pixels[at] = r; pixels[at + 1] = g; pixels[at + 2] = b
            }
        }
        let png = PNG.rgb(width: frames.count, height: bins, pixels: pixels)
        body.append("<g class=\"lane spectrogram\"><image x=\"\(Self.f(left))\" y=\"\(Self.f(y))\" width=\"\(Self.f(plotWidth))\" height=\"\(Self.f(h))\" "
                    + "preserveAspectRatio=\"none\" style=\"image-rendering:pixelated\" href=\"data:image/png;base64,\(Data(png).base64EncodedString())\"/></g>")
        y += h + 10
    }

    /// A dark-blue → green → yellow ramp (after viridis).
    static func colour(_ v: Double) -> (UInt8, UInt8, UInt8) {
        let stops: [(Double, Double, Double)] = [(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)]
        let p = min(max(v, 0), 1) * Double(stops.count - 1)
        let i = min(Int(p), stops.count - 2), f = p - Double(i)
        let a = stops[i], b = stops[i + 1]
        return (UInt8(a.0 + (b.0 - a.0) * f), UInt8(a.1 + (b.1 - a.1) * f), UInt8(a.2 + (b.2 - a.2) * f))
    }

    static let palette = ["#cc0000", "#3465a4", "#4e9a06", "#f57900", "#75507b", "#c4a000", "#06989a", "#555753"]

    mutating func scores(_ steps: [StepScores], labels: [String], shown: [String], threshold: Double, label: String) {
        let h = 90.0
        caption(label + " scores", height: h)
        var g = "<g class=\"lane scores\"><rect x=\"\(Self.f(left))\" y=\"\(Self.f(y))\" width=\"\(Self.f(plotWidth))\" height=\"\(Self.f(h))\" fill=\"#fafafa\"/>"
        let ty = y + h * (1 - threshold)
        g += "<line class=\"threshold\" x1=\"\(Self.f(left))\" x2=\"\(Self.f(left + plotWidth))\" y1=\"\(Self.f(ty))\" y2=\"\(Self.f(ty))\" stroke=\"#888\" stroke-dasharray=\"4 3\"/>"
        for (n, l) in shown.enumerated() {
            guard let i = labels.firstIndex(of: l) else { continue }
            let points = steps.map { s in "\(Self.f(x(Double(s.end) / Double(s.sampleRate)))),\(Self.f(y + h * (1 - Double(min(max(s.scores[i], 0), 1)))))" }
            g += "<polyline class=\"score\" data-label=\"\(Self.escape(l))\" points=\"\(points.joined(separator: " "))\" fill=\"none\" "
                + "stroke=\"\(Self.palette[n % Self.palette.count])\" stroke-width=\"1.2\"/>"
        }
        body.append(g + "</g>")
        y += h + 10
    }

    mutating func lane(spans: [(Double, Double)], marks: [Double], label: String, kind: String) {
        let h = 18.0
        caption(label, height: h)
        var g = "<g class=\"lane \(kind)\" data-label=\"\(Self.escape(label))\"><rect x=\"\(Self.f(left))\" y=\"\(Self.f(y))\" width=\"\(Self.f(plotWidth))\" height=\"\(Self.f(h))\" fill=\"#f0f0f0\"/>"
        let colour = kind == "truth" ? "#4e9a06" : "#cc0000"
        for (s, e) in spans {
            g += "<rect class=\"span\" x=\"\(Self.f(x(s)))\" y=\"\(Self.f(y + 2))\" width=\"\(Self.f(max(1, x(e) - x(s))))\" height=\"\(Self.f(h - 4))\" fill=\"\(colour)\"><title>\(String(format: "%.3f–%.3f s", s, e))</title></rect>"
        }
        for t in marks {
            g += "<path class=\"mark\" d=\"M\(Self.f(x(t))) \(Self.f(y + 1))l5 8l-5 8l-5 -8z\" fill=\"\(colour)\"><title>\(String(format: "%.3f s", t))</title></path>"
        }
        body.append(g + "</g>")
        y += h + 6
    }

    /// The time axis, then the whole document.
    mutating func finish() -> String {
        let steps = [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600]
        let step = steps.first { seconds / $0 <= 12 } ?? 7200
        var axis = "<g class=\"axis\"><line x1=\"\(Self.f(left))\" x2=\"\(Self.f(left + plotWidth))\" y1=\"\(Self.f(y))\" y2=\"\(Self.f(y))\" stroke=\"#333\"/>"
        var t = 0.0
        while t <= seconds + 1e-9 {
            axis += "<line class=\"tick\" x1=\"\(Self.f(x(t)))\" x2=\"\(Self.f(x(t)))\" y1=\"\(Self.f(y))\" y2=\"\(Self.f(y + 5))\" stroke=\"#333\"/>"
                + "<text x=\"\(Self.f(x(t)))\" y=\"\(Self.f(y + 18))\" text-anchor=\"middle\">\(step < 1 ? String(format: "%.1f", t) : String(Int(t)))</text>"
            t += step
        }
        axis += "<text x=\"\(Self.f(left + plotWidth))\" y=\"\(Self.f(y + 32))\" text-anchor=\"end\">seconds</text></g>"
        let height = y + 42
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" width="\(width)" height="\(Int(height))" viewBox="0 0 \(width) \(Int(height))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text class="title" x="\(Self.f(left))" y="24" font-size="15">\(Self.escape(title))</text>
            \(body.joined(separator: "\n"))
            \(axis)
            </svg>

            """
    }
}

/// A PNG of 8-bit RGB pixels, its image data in stored (uncompressed) deflate blocks: no
/// compression library needed, and any PNG reader takes it.
enum PNG {
    static func rgb(width: Int, height: Int, pixels: [UInt8]) -> [UInt8] {
        var raw: [UInt8] = []
        raw.reserveCapacity((width * 3 + 1) * height)
        for row in 0..<height {
            raw.append(0)  // filter: none
            raw += pixels[(row * width * 3)..<((row + 1) * width * 3)]
        }
        var z: [UInt8] = [0x78, 0x01]
        var at = 0
        repeat {
            let n = min(65535, raw.count - at)
            let last: UInt8 = at + n >= raw.count ? 1 : 0
            z += [last, UInt8(n & 0xFF), UInt8(n >> 8), UInt8(~n & 0xFF), UInt8((~n >> 8) & 0xFF)]
            z += raw[at..<(at + n)]
            at += n
        } while at < raw.count
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in raw { a = (a + UInt32(byte)) % 65521; b = (b + a) % 65521 }
        z += bigEndian(b << 16 | a)
        var out: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        out += chunk("IHDR", bigEndian(UInt32(width)) + bigEndian(UInt32(height)) + [8, 2, 0, 0, 0])
        out += chunk("IDAT", z)
        out += chunk("IEND", [])
        return out
    }

    static func bigEndian(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }

    static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        return bigEndian(UInt32(data.count)) + body + bigEndian(crc32(body))
    }

    static let table: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = table[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}
