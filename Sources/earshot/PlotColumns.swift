/// Values over positions 0..<length (samples of a file's clock) reduced to `count` columns, one
/// a pixel of the picture: column c holds the positions from ceil(c·length/count) up to the
/// next column's first, and keeps, per value, the least and the greatest that fell in it.
/// Memory is `count × width` pairs whatever the length, so a picture of ten hours takes what
/// one of a minute does; values come in any chunks, in any order.
struct ColumnExtremes {
    /// Columns.
    let count: Int
    /// Positions the columns cover; a later one counts in the last column.
    let length: Int
    /// Values per position (1 for a waveform, a label's score each, a mel band each).
    let width: Int
    /// [count][width]: the least and the greatest value seen; +inf and -inf in an empty column.
    private(set) var low: [Float]
    private(set) var high: [Float]

    init(count: Int, length: Int, width: Int = 1) {
        self.count = max(1, count)
        self.length = max(1, length)
        self.width = max(1, width)
        low = [Float](repeating: .infinity, count: self.count * self.width)
        high = [Float](repeating: -.infinity, count: self.count * self.width)
    }

    /// The column of a position (those before 0 or from `length` on go to the first or last).
    func column(of position: Int) -> Int {
        min(max(position, 0), length - 1) * count / length
    }

    /// The first position of column c (`length` for c == count).
    func firstPosition(of c: Int) -> Int { (c * length + count - 1) / count }

    /// Whether any value fell in column c.
    func isEmpty(_ c: Int) -> Bool { low[c * width] > high[c * width] }

    /// The least and the greatest of value `v` in column c.
    func range(_ c: Int, value v: Int = 0) -> (low: Float, high: Float) { (low[c * width + v], high[c * width + v]) }

    /// Columns that hold something, in order.
    var filled: [Int] { (0..<count).filter { !isEmpty($0) } }

    /// The values of one position (`width` of them).
    mutating func add<C: Collection>(_ values: C, at position: Int) where C.Element == Float {
        let base = column(of: position) * width
        for (i, v) in zip(0..<width, values) where !v.isNaN {
            low[base + i] = min(low[base + i], v)
            high[base + i] = max(high[base + i], v)
        }
    }

    /// Consecutive samples (width 1) from `position` on: each column's share in one pass.
    mutating func add(samples: ArraySlice<Float>, from position: Int) {
        var i = samples.startIndex
        while i < samples.endIndex {
            let p = position + (i - samples.startIndex)
            let c = column(of: p)
            // To the next column's first position (the rest of the chunk after the last).
            let end = c == count - 1 ? samples.endIndex : min(samples.endIndex, i + max(1, firstPosition(of: c + 1) - p))
            var lo = low[c], hi = high[c]
            for v in samples[i..<end] where !v.isNaN {
                lo = min(lo, v)
                hi = max(hi, v)
            }
            low[c] = lo
            high[c] = hi
            i = end
        }
    }
}

/// A lane's spans and marks in the picture's columns. A span or mark that falls in a pixel
/// its neighbour of the same kind already covers joins it (its count and times kept for the
/// tooltip), so a lane of ten hours' segments draws no more shapes than the picture has pixels.
struct SpanLane {
    /// What a span or mark is, against the truth when there is one.
    enum Outcome: String, CaseIterable {
        /// A true span that a detection of its label found, or a detection that found one.
        case hit
        /// A true span no detection of its label found.
        case miss
        /// A detection over no true span of its label.
        case falseAlarm = "false-alarm"
        /// A true span with nothing to compare it with.
        case truth
        /// A segment or detection with no truth to compare it with.
        case detected
    }

    struct Item {
        var first: Int, last: Int  // columns
        var outcome: Outcome
        var count: Int
        var start: Double, end: Double  // seconds

        /// Takes in another span or mark of its outcome.
        mutating func join(first a: Int, last b: Int, start: Double, end: Double) {
            first = min(first, a)
            last = max(last, b)
            count += 1
            self.start = min(self.start, start)
            self.end = max(self.end, end)
        }
    }

    /// Columns of the picture and the seconds they cover.
    let columns: Int
    let seconds: Double
    private(set) var spans: [Item] = []
    private(set) var marks: [Item] = []
    /// The last span and mark of each outcome: where the next of its kind may join.
    private var lastSpan: [Outcome: Int] = [:], lastMark: [Outcome: Int] = [:]

    init(columns: Int, seconds: Double) {
        self.columns = max(1, columns)
        self.seconds = max(seconds, 1e-9)
    }

    func column(_ t: Double) -> Int { min(columns - 1, max(0, Int((t / seconds * Double(columns)).rounded(.down)))) }

    /// A span from `start` to `end` (seconds). Spans of a lane come in order of their start
    /// (a label's segments on one channel, sorted truth), so each joins the last or follows it.
    mutating func span(_ start: Double, _ end: Double, _ outcome: Outcome) {
        let a = column(start), b = column(max(start, end))
        if let i = lastSpan[outcome], spans[i].last + 1 >= a, spans[i].first <= b {
            spans[i].join(first: a, last: b, start: start, end: end)
            return
        }
        lastSpan[outcome] = spans.count
        spans.append(Item(first: a, last: b, outcome: outcome, count: 1, start: start, end: end))
    }

    /// A mark (a detection) at `t` seconds.
    mutating func mark(_ t: Double, _ outcome: Outcome) {
        let c = column(t)
        if let i = lastMark[outcome], marks[i].first == c {
            marks[i].join(first: c, last: c, start: t, end: t)
            return
        }
        lastMark[outcome] = marks.count
        marks.append(Item(first: c, last: c, outcome: outcome, count: 1, start: t, end: t))
    }

    /// Every outcome drawn in the lane.
    var outcomes: Set<Outcome> { Set(spans.map(\.outcome) + marks.map(\.outcome)) }
}

/// True spans of one label and what found them: a segment that overlaps a span finds it, a
/// detection finds it from its start to `window` seconds after its end (as `evaluate --stream`
/// counts a word found). Spans are kept sorted with the greatest end so far, so each question
/// looks only at the spans that can answer it.
struct TruthMatch {
    private(set) var spans: [(start: Double, end: Double)]
    private(set) var found: [Bool]
    private let reach: [Double]  // the greatest end among spans[0...i]
    let window: Double

    init(spans: [(start: Double, end: Double)], window: Double) {
        self.spans = spans.sorted { ($0.start, $0.end) < ($1.start, $1.end) }
        found = Array(repeating: false, count: spans.count)
        var most = -Double.infinity
        reach = self.spans.map { most = max(most, $0.end); return most }
        self.window = window
    }

    /// Marks the spans that `start...end` (extended by `slack` after each span's end) meets;
    /// whether it met any.
    private mutating func meet(_ start: Double, _ end: Double, slack: Double) -> Bool {
        // The last span that starts at or before `end`, then back while an end can still reach.
        var lo = 0, hi = spans.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if spans[mid].start <= end { lo = mid + 1 } else { hi = mid }
        }
        var met = false
        var i = lo - 1
        while i >= 0, reach[i] + slack >= start {
            if spans[i].end + slack >= start { found[i] = true; met = true }
            i -= 1
        }
        return met
    }

    /// A segment: a hit when it overlaps a true span.
    mutating func segment(_ start: Double, _ end: Double) -> SpanLane.Outcome {
        meet(start, end, slack: 0) ? .hit : .falseAlarm
    }

    /// A detection at `t`: a hit when a true span holds it, or ended at most `window` before.
    mutating func detection(_ t: Double) -> SpanLane.Outcome {
        meet(t, t, slack: window) ? .hit : .falseAlarm
    }
}
