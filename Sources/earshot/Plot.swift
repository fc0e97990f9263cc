import Earshot
import Foundation

/// An SVG drawn lane by lane, top to bottom, over one time axis: a caption column, a column of
/// tick labels, then the lanes, each a pixel column per column of its summary
/// (`ColumnExtremes`, `SpanLane`), so the document's size follows the width, not the audio's
/// length. Every text is measured (`textWidth`, on the wide side) and fitted inside the canvas.
struct Plot {
    let width: Int
    let seconds: Double
    let title: String
    /// Where the lanes' captions end (right-aligned there), and how wide they may be.
    let captionRight: Double
    let captionWidth: Double
    /// Where the lanes begin; `columns` pixels wide.
    let left: Double
    let columns: Int
    var y = 40.0
    var body: [String] = []
    /// Outcomes drawn so far (the legend's entries).
    private(set) var outcomes: Set<SpanLane.Outcome> = []
    private(set) var markOutcomes: Set<SpanLane.Outcome> = []
    /// The time axis: tick spacing (seconds) and how a tick is written.
    private let step: Double
    private let clock: Bool

    static let fontSize = 12.0, tickSize = 10.0, titleSize = 15.0
    static let margin = 10.0, tickColumn = 44.0

    /// A picture `width` pixels wide of `seconds` of audio; `captions` are every lane's caption
    /// (the caption column is as wide as the widest, up to three tenths of the picture).
    init(width: Int, seconds: Double, title: String, captions: [String]) {
        self.width = width
        self.seconds = max(seconds, 1e-3)
        self.title = Self.fit(title, width: Double(width) - 2 * Self.margin, size: Self.titleSize)
        captionWidth = min(captions.map { Self.textWidth($0, size: Self.fontSize) }.max() ?? 0, 0.3 * Double(width))
        captionRight = Self.margin + captionWidth
        left = captionRight + 6 + Self.tickColumn
        // Time ticks far enough apart for their labels.
        clock = self.seconds >= 120
        let roughColumns = Double(width) - left - 30
        let steps = [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400]
        let label = clock ? Self.clockText(self.seconds) : String(Int(self.seconds))
        let room = Self.textWidth(label, size: Self.fontSize) + 10
        let seconds = self.seconds
        step = steps.first { seconds / $0 <= 12 && roughColumns * $0 / seconds >= room } ?? 86400 * 7
        // Room for half of "0:00:00" or the longest tick, so the lanes are as wide for a minute as for ten hours.
        let right = (max(Self.textWidth("00:00:00", size: Self.fontSize), Self.textWidth(label, size: Self.fontSize)) / 2).rounded(.up) + 6
        columns = max(1, Int(Double(width) - left - right))
    }

    /// Seconds → x.
    func x(_ t: Double) -> Double { left + Double(columns) * min(max(t / seconds, 0), 1) }
    /// Column c's middle.
    func x(column c: Int) -> Double { left + Double(c) + 0.5 }
    var right: Double { left + Double(columns) }

    static func f(_ v: Double) -> String { String(format: "%.1f", v) }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "\"", with: "&quot;")
    }

    /// A text's width in pixels at `size`, measured on the wide side of common sans-serif faces
    /// (DejaVu Sans, what rsvg-convert finds on Linux, is among the widest), so a text measured
    /// to fit does.
    static func textWidth(_ s: String, size: Double) -> Double {
        var em = 0.0
        for ch in s.unicodeScalars {
            switch ch {
            case "i", "l", "j", "I", ".", ",", ":", ";", "'", "|", "!", " ": em += 0.36
            case "f", "t", "r", "(", ")", "[", "]", "-", "/", "\\": em += 0.48
            case "m", "w", "M", "W", "@", "%", "…", "–", "—": em += 1.0
            case "A"..."Z": em += 0.78
            case "0"..."9", "a"..."z", "_", "#", "$", "+", "=", "<", ">", "?", "~", "*", "&": em += 0.66
            default: em += ch.isASCII ? 0.66 : 1.0
            }
        }
        return em * size
    }

    /// `s`, or its start and end about an ellipsis when it is wider than `width`.
    static func fit(_ s: String, width: Double, size: Double) -> String {
        guard textWidth(s, size: size) > width else { return s }
        let characters = Array(s)
        var keep = characters.count - 1
        while keep > 1 {
            let head = keep / 2, tail = keep - head
            let candidate = String(characters[..<head]) + "…" + String(characters[(characters.count - tail)...])
            if textWidth(candidate, size: size) <= width { return candidate }
            keep -= 1
        }
        return "…"
    }

    /// A `<text>` element; `size` other than the default is written out; a `halo` (the
    /// background's colour) keeps it legible over lines.
    static func text(_ s: String, x: Double, y: Double, anchor: String = "start", size: Double = fontSize, fill: String? = nil,
                     className: String? = nil, halo: String? = nil) -> String {
        var attributes = "x=\"\(f(x))\" y=\"\(f(y))\""
        if anchor != "start" { attributes += " text-anchor=\"\(anchor)\"" }
        if size != fontSize { attributes += " font-size=\"\(f(size))\"" }
        if let fill { attributes += " fill=\"\(fill)\"" }
        if let halo { attributes += " stroke=\"\(halo)\" stroke-width=\"3\" paint-order=\"stroke\"" }
        if let className { attributes = "class=\"\(className)\" " + attributes }
        return "<text \(attributes)>\(escape(s))</text>"
    }

    mutating func caption(_ label: String, height: Double) {
        body.append(Self.text(Self.fit(label, width: captionWidth, size: Self.fontSize), x: captionRight, y: y + height / 2 + 4,
                              anchor: "end", className: "lane-label"))
    }

    /// Tick labels left of a lane `height` high, each with a short tick: (text, y). A label is
    /// centred on its tick but kept within the lane's height, so the labels of neighbouring
    /// lanes never meet.
    mutating func yTicks(_ ticks: [(String, Double)], height: Double) {
        var g = "<g class=\"y-ticks\">"
        for (label, ty) in ticks {
            g += "<line x1=\"\(Self.f(left - 3))\" x2=\"\(Self.f(left))\" y1=\"\(Self.f(ty))\" y2=\"\(Self.f(ty))\" stroke=\"#555\"/>"
                + Self.text(label, x: left - 5, y: min(max(ty + 3.5, y + 7.5), y + height - 0.5), anchor: "end", size: Self.tickSize, fill: "#555",
                            className: "y-tick")
        }
        body.append(g + "</g>")
    }

    func background(_ height: Double, fill: String = "#fafafa") -> String {
        "<rect x=\"\(Self.f(left))\" y=\"\(Self.f(y))\" width=\"\(columns)\" height=\"\(Self.f(height))\" fill=\"\(fill)\"/>"
    }

    /// Each column's least and greatest sample as a vertical stroke, between -1 and 1.
    mutating func waveform(_ w: ColumnExtremes, label: String) {
        let h = 90.0, mid = y + h / 2
        caption(label, height: h)
        yTicks([("1", y), ("0", mid), ("-1", y + h)], height: h)
        var d = ""
        for c in w.filled where c < columns {
            let (lo, hi) = w.range(c)
            d += "M\(Self.f(x(column: c))) \(Self.f(mid - Double(min(max(hi, -1), 1)) * h / 2))V\(Self.f(mid - Double(min(max(lo, -1), 1)) * h / 2 + 0.1))"
        }
        body.append("<g class=\"lane waveform\">" + background(h) + "<path d=\"\(d)\" stroke=\"#3465a4\" stroke-width=\"1\" fill=\"none\"/></g>")
        y += h + 10
    }

    /// Each column's loudest frame per mel band as an image (low bands at the bottom), coloured
    /// from quiet to loud, with the bands' frequencies beside it. A column no frame fell in (a
    /// file shorter than the picture is wide) shows the one before (the first shows the first
    /// filled one).
    mutating func spectrogram(_ s: ColumnExtremes, mel: MelConfig, sampleRate: Int, label: String) {
        let h = 128.0, bins = s.width
        caption(label, height: h)
        let filled = s.filled.filter { $0 < columns }
        guard let first = filled.first, bins > 0 else { y += h + 10; return }
        var lo = Float.infinity, hi = -Float.infinity
        for c in filled {
            for m in 0..<bins {
                let v = s.range(c, value: m).high
                lo = min(lo, v)
                hi = max(hi, v)
            }
        }
        let shown = (filled.last ?? first) + 1
        var pixels = [UInt8](repeating: 0, count: shown * bins * 3)
        var source = first
        for c in 0..<shown {
            if !s.isEmpty(c) { source = c }
            for m in 0..<bins {
                let (r, g, b) = Self.colour(Double((s.range(source, value: m).high - lo) / max(hi - lo, 1e-9)))
                let at = ((bins - 1 - m) * shown + c) * 3
                pixels[at] = r; pixels[at + 1] = g; pixels[at + 2] = b
            }
        }
        // Mel band m's centre is the (m+1)th of bins+2 points even in mels from fmin to fmax
        // (ref: librosa.filters.mel): a frequency's row, counted from the bottom, in 0...bins.
        let fmax = mel.fmax ?? Double(sampleRate) / 2
        let melLow = MelConfig.hzToMel(mel.fmin, scale: mel.scale), melHigh = MelConfig.hzToMel(fmax, scale: mel.scale)
        let spacing = (melHigh - melLow) / Double(bins + 1)
        var ticks: [(String, Double)] = []
        for hz in [16000.0, 8000, 4000, 2000, 1000, 500, 250, 0] where hz >= mel.fmin && hz <= fmax {
            let row = min(max((MelConfig.hzToMel(hz, scale: mel.scale) - melLow) / spacing - 0.5, 0), Double(bins))
            let ty = y + h * (1 - row / Double(bins))
            guard ticks.allSatisfy({ abs($0.1 - ty) >= 11 }) else { continue }
            ticks.append((hz >= 1000 ? "\(Int(hz / 1000)) kHz" : "\(Int(hz)) Hz", ty))
        }
        yTicks(ticks, height: h)
        let png = PNG.rgb(width: shown, height: bins, pixels: pixels)
        body.append("<g class=\"lane spectrogram\"><image x=\"\(Self.f(left))\" y=\"\(Self.f(y))\" width=\"\(shown)\" height=\"\(Self.f(h))\" "
                    + "preserveAspectRatio=\"none\" style=\"image-rendering:pixelated\" href=\"data:image/png;base64,\(Data(png).base64EncodedString())\"/></g>")
        y += h + 10
    }

    /// A dark-blue → green → yellow ramp (after viridis).
    static func colour(_ v: Double) -> (UInt8, UInt8, UInt8) {
        let stops: [(Double, Double, Double)] = [(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)]
        let p = min(max(v.isNaN ? 0 : v, 0), 1) * Double(stops.count - 1)
        let i = min(Int(p), stops.count - 2), f = p - Double(i)
        let a = stops[i], b = stops[i + 1]
        return (UInt8(a.0 + (b.0 - a.0) * f), UInt8(a.1 + (b.1 - a.1) * f), UInt8(a.2 + (b.2 - a.2) * f))
    }

    /// The scores' colours: none of the outcomes' (green, orange, red).
    static let palette = ["#204a87", "#75507b", "#06989a", "#c4a000", "#8f5902", "#555753", "#ad7fa8", "#729fcf"]

    /// Each shown label's score, 0 to 1: per column the greatest as a line over a band down to
    /// the least; the threshold dashed with its value. The caption sits at the top of the pane
    /// and the labels' names below it in their colours, as many as the pane's height holds.
    mutating func scores(_ s: ColumnExtremes, labels: [String], shown: [String], threshold: Double, label: String) {
        let h = 90.0, top = y, lineHeight = 13.0
        func yOf(_ v: Float) -> Double { top + h * (1 - Double(min(max(v, 0), 1))) }
        body.append(Self.text(Self.fit(label, width: captionWidth, size: Self.fontSize), x: captionRight, y: top + 12, anchor: "end", className: "lane-label"))
        yTicks([("1", y), ("0.5", y + h / 2), ("0", y + h)], height: h)
        var g = "<g class=\"lane scores\">" + background(h)
        let ty = top + h * (1 - threshold)
        g += "<line class=\"threshold\" x1=\"\(Self.f(left))\" x2=\"\(Self.f(right))\" y1=\"\(Self.f(ty))\" y2=\"\(Self.f(ty))\" stroke=\"#555\" stroke-dasharray=\"4 3\"/>"
        // The threshold's value at the right, above its line (below when the line is near the top).
        g += Self.text(String(format: "threshold %.2f", threshold), x: right - 4, y: ty - 10 < top ? ty + 11 : ty - 3, anchor: "end",
                       size: Self.tickSize, fill: "#555", className: "threshold-value", halo: "#fafafa")
        let filled = s.filled.filter { $0 < columns }
        let keyLines = Int((h - 14) / lineHeight)
        for (n, l) in shown.enumerated() {
            guard let i = labels.firstIndex(of: l) else { continue }
            let colour = Self.palette[n % Self.palette.count]
            let highs = filled.map { "\(Self.f(x(column: $0))),\(Self.f(yOf(s.range($0, value: i).high)))" }
            let lows = filled.reversed().map { "\(Self.f(x(column: $0))),\(Self.f(yOf(s.range($0, value: i).low)))" }
            g += "<polygon class=\"score-range\" data-label=\"\(Self.escape(l))\" points=\"\((highs + lows).joined(separator: " "))\" fill=\"\(colour)\" fill-opacity=\"0.2\" stroke=\"none\"/>"
            g += "<polyline class=\"score\" data-label=\"\(Self.escape(l))\" points=\"\(highs.joined(separator: " "))\" fill=\"none\" "
                + "stroke=\"\(colour)\" stroke-width=\"1.2\"/>"
            // The key, under the caption: a name a line, the last line saying how many more.
            let keyY = top + 12 + lineHeight * Double(n + 1)
            if n < keyLines - 1 || n == keyLines - 1 && shown.count == keyLines {
                body.append(Self.text(Self.fit(l, width: captionWidth, size: Self.tickSize), x: captionRight, y: keyY, anchor: "end",
                                      size: Self.tickSize, fill: colour, className: "score-key"))
            } else if n == keyLines - 1 {
                body.append(Self.text("+\(shown.count - n) more", x: captionRight, y: keyY, anchor: "end", size: Self.tickSize, fill: "#555",
                                      className: "score-key"))
            }
        }
        body.append(g + "</g>")
        y += h + 10
    }

    /// How each outcome looks: a span's fill and stroke.
    static func style(_ o: SpanLane.Outcome) -> (fill: String, stroke: String) {
        switch o {
        case .hit: return ("#4e9a06", "#2e5e02")
        case .miss: return ("url(#hatch-miss)", "#ce5c00")
        case .falseAlarm: return ("url(#hatch-false-alarm)", "#a40000")
        case .truth: return ("#888a85", "#555753")
        case .detected: return ("#3465a4", "#204a87")
        }
    }

    /// A mark's shape at (x, y), 16 px tall: a circle for a hit, a cross for a false alarm, a
    /// diamond for a detection with no truth to judge it by.
    static func markShape(_ o: SpanLane.Outcome, x: Double, y: Double) -> String {
        switch o {
        case .hit: return "<circle cx=\"\(f(x))\" cy=\"\(f(y + 8))\" r=\"5.5\" fill=\"#4e9a06\" stroke=\"#2e5e02\"/>"
        case .falseAlarm:
            return "<path d=\"M\(f(x - 5)) \(f(y + 3))l10 10m0 -10l-10 10\" stroke=\"#cc0000\" stroke-width=\"3\" fill=\"none\"/>"
        default: return "<path d=\"M\(f(x)) \(f(y))l5 8l-5 8l-5 -8z\" fill=\"#3465a4\"/>"
        }
    }

    static func noun(_ o: SpanLane.Outcome, spans: Bool) -> String {
        switch o {
        case .hit: return "hits"
        case .miss: return "misses"
        case .falseAlarm: return "false alarms"
        case .truth: return "true spans"
        case .detected: return spans ? "segments" : "detections"
        }
    }

    /// A lane of spans and marks, each coloured and shaped by its outcome.
    mutating func lane(_ lane: SpanLane, label: String, kind: String) {
        let h = 18.0
        caption(label, height: h)
        var g = "<g class=\"lane \(kind)\" data-label=\"\(Self.escape(label))\">" + background(h, fill: "#f0f0f0")
        func title(_ item: SpanLane.Item, spans: Bool) -> String {
            let times = item.start == item.end ? String(format: "%.3f s", item.start) : String(format: "%.3f–%.3f s", item.start, item.end)
            return "<title>\(item.count > 1 ? "\(item.count) \(Self.noun(item.outcome, spans: spans)), " : "")\(times)</title>"
        }
        for item in lane.spans {
            let (fill, stroke) = Self.style(item.outcome)
            let x0 = left + Double(item.first), w = Double(item.last - item.first + 1)
            let dash = item.outcome == .miss ? " stroke-dasharray=\"3 2\"" : ""
            g += "<rect class=\"span\" data-outcome=\"\(item.outcome.rawValue)\" x=\"\(Self.f(x0))\" y=\"\(Self.f(y + 2))\" width=\"\(Self.f(w))\" "
                + "height=\"\(Self.f(h - 4))\" fill=\"\(fill)\" stroke=\"\(stroke)\" stroke-width=\"0.8\"\(dash)>\(title(item, spans: true))</rect>"
            outcomes.insert(item.outcome)
        }
        for item in lane.marks {
            g += "<g class=\"mark\" data-outcome=\"\(item.outcome.rawValue)\">\(Self.markShape(item.outcome, x: x(column: item.first), y: y + 1))\(title(item, spans: false))</g>"
            outcomes.insert(item.outcome)
            markOutcomes.insert(item.outcome)
        }
        body.append(g + "</g>")
        y += h + 6
    }

    static func clockText(_ t: Double) -> String {
        let s = Int(t.rounded())
        return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }

    /// What each outcome is called in the legend.
    static func legendText(_ o: SpanLane.Outcome) -> String {
        switch o {
        case .hit: return "hit"
        case .miss: return "miss"
        case .falseAlarm: return "false alarm"
        case .truth: return "truth"
        case .detected: return "segment / detection"
        }
    }

    /// The time axis, the legend, then the whole document.
    mutating func finish() -> String {
        var axis = "<g class=\"axis\"><line x1=\"\(Self.f(left))\" x2=\"\(Self.f(right))\" y1=\"\(Self.f(y))\" y2=\"\(Self.f(y))\" stroke=\"#333\"/>"
        var t = 0.0
        while t <= seconds + 1e-9 {
            let label = clock ? Self.clockText(t) : step < 1 ? String(format: "%.1f", t) : String(Int(t))
            axis += "<line class=\"tick\" x1=\"\(Self.f(x(t)))\" x2=\"\(Self.f(x(t)))\" y1=\"\(Self.f(y))\" y2=\"\(Self.f(y + 5))\" stroke=\"#333\"/>"
                + Self.text(label, x: x(t), y: y + 18, anchor: "middle")
            t += step
        }
        axis += Self.text(clock ? (seconds >= 3600 ? "time (h:mm:ss)" : "time (m:ss)") : "seconds", x: right, y: y + 32, anchor: "end") + "</g>"
        var height = y + 42
        // The legend: once any lane was judged against the truth, all three outcomes (so a
        // picture with no false alarm still says how one would look).
        var entries = SpanLane.Outcome.allCases.filter(outcomes.contains)
        if !outcomes.isDisjoint(with: [.hit, .miss, .falseAlarm]) {
            entries = SpanLane.Outcome.allCases.filter { [.hit, .miss, .falseAlarm].contains($0) || outcomes.contains($0) }
        }
        var legend = ""
        if !entries.isEmpty {
            legend = "<g class=\"legend\">"
            var lx = left, ly = height + 4
            for o in entries {
                let text = Self.legendText(o)
                let showsMark = markOutcomes.contains(o) || (o == .hit || o == .falseAlarm) && !markOutcomes.isEmpty
                let entryWidth = 18 + (showsMark ? 16 : 0) + Self.textWidth(text, size: Self.fontSize) + 18
                if lx + entryWidth > Double(width) - Self.margin && lx > left {
                    lx = left
                    ly += 22
                }
                let (fill, stroke) = Self.style(o)
                legend += "<g class=\"legend-entry\" data-outcome=\"\(o.rawValue)\"><rect x=\"\(Self.f(lx))\" y=\"\(Self.f(ly + 3))\" width=\"14\" height=\"12\" fill=\"\(fill)\" stroke=\"\(stroke)\"/>"
                var tx = lx + 18
                if showsMark && o != .miss && o != .truth {
                    legend += Self.markShape(o, x: tx + 6, y: ly + 1)
                    tx += 16
                }
                legend += Self.text(text, x: tx, y: ly + 13) + "</g>"
                lx += entryWidth
            }
            legend += "</g>"
            height = ly + 24
        }
        let defs = """
            <defs><pattern id="hatch-miss" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">\
            <rect width="6" height="6" fill="#fde3c8"/><line x1="0" y1="0" x2="0" y2="6" stroke="#f57900" stroke-width="3"/></pattern>\
            <pattern id="hatch-false-alarm" width="6" height="6" patternUnits="userSpaceOnUse">\
            <rect width="6" height="6" fill="#ef2929"/><path d="M0 0L6 6M6 0L0 6" stroke="#a40000" stroke-width="1.2"/></pattern></defs>
            """
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" width="\(width)" height="\(Int(height.rounded(.up)))" viewBox="0 0 \(width) \(Int(height.rounded(.up)))" font-family="sans-serif" font-size="12">
            \(defs)
            <rect width="100%" height="100%" fill="white"/>
            \(Self.text(title, x: Self.margin, y: 24, size: Self.titleSize, className: "title"))
            \(body.joined(separator: "\n"))
            \(axis)
            \(legend)
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
