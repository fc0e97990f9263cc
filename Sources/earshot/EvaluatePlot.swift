import Earshot
import EarshotTraining
import Foundation

/// `evaluate --plot`: the confusion matrix, or (`--stream`) the words and detections over time.
extension EvaluateCommand {
    static func writeSVG(_ svg: String, to path: String) throws {
        guard path.lowercased().hasSuffix(".svg") else { throw UsageError("--plot \(path): expected an .svg file") }
        let file = try OutputFile.open(path)
        try file.write(text: svg)
        try file.commit()
    }

    /// Per label: the true words (found: hits, not found: misses) and the detections (hits,
    /// false alarms) over time, each outcome its own colour and mark, with a legend.
    static func streamSVG(_ e: DetectionEvaluation, model: String, path: String, ignored: Set<String>) -> String {
        let labels = Set(e.words.map(\.label) + e.detections.map(\.segment.label)).subtracting(ignored).sorted()
        var picture = Plot(width: 1200, seconds: e.seconds, title: "\(model) on \(path): words and detections",
                           captions: labels.flatMap { ["words " + $0, "found " + $0] })
        for label in labels {
            var words = SpanLane(columns: picture.columns, seconds: e.seconds)
            for (word, found) in e.matches where word.label == label { words.span(word.start, word.end, found == nil ? .miss : .hit) }
            picture.lane(words, label: "words " + label, kind: "truth")
            var found = SpanLane(columns: picture.columns, seconds: e.seconds)
            for (i, d) in e.detections.enumerated() where d.segment.label == label {
                found.mark(d.announced, e.matchedDetections.contains(i) ? .hit : .falseAlarm)
            }
            picture.lane(found, label: "found " + label, kind: "segments")
        }
        return picture.finish()
    }

    /// The confusion matrix as a heat map: rows the true labels, columns the predicted, each cell
    /// its count, shaded by the fraction of its row. The canvas is sized from its texts (measured
    /// on the wide side): the title, the row labels at the left, the column labels slanted above.
    static func confusionSVG(_ e: Evaluation, model: String) -> String {
        let n = e.labels.count, cell = 48.0, margin = Plot.margin, size = Plot.fontSize
        let slant = 40.0 * Double.pi / 180
        let title = "\(model): accuracy \(String(format: "%.2f%%", e.accuracy * 100)) (rows: true, columns: predicted)"
        let titleSize = 14.0
        // Row labels right-aligned left of the grid; column labels rise at 40° from above their cells.
        let rowWidth = min(e.labels.map { Plot.textWidth($0, size: size) }.max() ?? 0, 300)
        let left = margin + rowWidth + 8
        let columnLabels = e.labels.map { Plot.fit($0, width: 300, size: size) }
        let rise = (columnLabels.map { Plot.textWidth($0, size: size) }.max() ?? 0) * sin(slant)
        let top = 20 + 14 + rise + size + 8
        var reach = 0.0  // the right end of the furthest column label
        for (j, label) in columnLabels.enumerated() {
            let start: Double = left + Double(j) * cell + cell / 2
            reach = max(reach, start + Plot.textWidth(label, size: size) * cos(slant) + size * sin(slant))
        }
        // As wide as the grid and its labels need, and the title up to 900 px (beyond, it is shortened).
        let width = Int(max(left + cell * Double(n) + margin, reach + margin, min(2 * margin + Plot.textWidth(title, size: titleSize), 900)).rounded(.up))
        let height = Int((top + cell * Double(n) + margin + 20).rounded(.up))
        var body = ""
        for (i, row) in e.confusion.enumerated() {
            let total = max(1, row.reduce(0, +))
            for (j, count) in row.enumerated() {
                let share = Double(count) / Double(total)
                let (r, g, b) = Plot.colour(share)
                let x = left + Double(j) * cell, y = top + Double(i) * cell
                body += "<rect class=\"cell\" data-true=\"\(Plot.escape(e.labels[i]))\" data-predicted=\"\(Plot.escape(e.labels[j]))\" data-count=\"\(count)\" "
                    + "x=\"\(Plot.f(x))\" y=\"\(Plot.f(y))\" width=\"\(cell)\" height=\"\(cell)\" fill=\"rgb(\(r),\(g),\(b))\" stroke=\"white\"/>"
                    + Plot.text(String(count), x: x + cell / 2, y: y + cell / 2 + 4, anchor: "middle", fill: share > 0.6 ? "black" : "white")
            }
            body += Plot.text(Plot.fit(e.labels[i], width: rowWidth, size: size), x: left - 8, y: top + Double(i) * cell + cell / 2 + 4, anchor: "end")
        }
        for (j, label) in columnLabels.enumerated() {
            let x = left + Double(j) * cell + cell / 2, y = top - 8
            body += "<text x=\"\(Plot.f(x))\" y=\"\(Plot.f(y))\" transform=\"rotate(-40 \(Plot.f(x)) \(Plot.f(y)))\">\(Plot.escape(label))</text>"
        }
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <svg xmlns="http://www.w3.org/2000/svg" width="\(width)" height="\(height)" viewBox="0 0 \(width) \(height)" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            \(Plot.text(Plot.fit(title, width: Double(width) - 2 * margin, size: titleSize), x: margin, y: 24, size: titleSize, className: "title"))
            \(body)
            </svg>

            """
    }
}
