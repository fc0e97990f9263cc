import Foundation

/// A copy of `count` values to `dst` from element `src` of source `source`, or (source -1)
/// `count` copies of `fill`.
struct Run: Sendable {
    var dst: Int
    var source: Int
    var src: Int
    var count: Int
    var fill: Float

    /// Single-element runs in output order joined where they continue each other.
    static func joined(_ elements: [Run]) -> [Run] {
        var runs: [Run] = []
        // Mostly given in order already: sorted only when not.
        let inOrder = zip(elements, elements.dropFirst()).allSatisfy { $0.dst < $1.dst }
        for e in inOrder ? elements : elements.sorted(by: { $0.dst < $1.dst }) { append(e, to: &runs) }
        return runs
    }

    /// `e`, the run after the last of `runs` in output order, added to it where it continues it
    /// (as `joined` joins them).
    static func append(_ e: Run, to runs: inout [Run]) {
        if let last = runs.last, last.dst + last.count == e.dst, last.source == e.source,
           e.source >= 0 ? last.src + last.count == e.src : last.fill.bitPattern == e.fill.bitPattern {
            runs[runs.count - 1].count += e.count
        } else {
            runs.append(e)
        }
    }

    /// Applies the runs to codes (a fill is a whole number in the int8 range): sources[i] is
    /// source i's first code.
    @inline(__always)
    static func applyCodes(_ runs: UnsafeBufferPointer<Run>, to y: UnsafeMutableRawPointer, from sources: (Int) -> UnsafeRawPointer) {
        for r in runs {
            if r.source < 0 {
                memset(y + r.dst, Int32(Int8(r.fill)), r.count)
            } else {
                (y + r.dst).copyMemory(from: sources(r.source) + r.src, byteCount: r.count)
            }
        }
    }

    /// Applies the runs: sources[i] is source i's first value.
    @inline(__always)
    static func apply(_ runs: UnsafeBufferPointer<Run>, to y: UnsafeMutablePointer<Float>, from sources: (Int) -> UnsafePointer<Float>) {
        for r in runs {
            if r.count == 1 {
                y[r.dst] = r.source < 0 ? r.fill : sources(r.source)[r.src]
            } else if r.source < 0 {
                (y + r.dst).update(repeating: r.fill, count: r.count)
            } else {
                (y + r.dst).update(from: sources(r.source) + r.src, count: r.count)
            }
        }
    }
}
