import Testing

@testable import EarshotModel

/// The split of work between threads that a window classifier's consecutive steps, the blocks of
/// a stateless prefix and a channel set's batched step share.
@Suite("partRange: consecutive runs, every item once")
struct PartRangeTests {
    @Test("0 to 100 items in 1 to 9 parts: the runs in order cover every item once, their sizes differ by at most one, and with fewer items than parts as many runs hold one item as there are items")
    func split() {
        for count in 0...100 {
            for parts in 1...9 {
                let runs = (0..<parts).map { partRange($0, of: parts, count: count) }
                #expect(runs.flatMap { Array($0) } == Array(0..<count), "\(count) items in \(parts) parts")
                #expect(zip(runs, runs.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound }, "\(count) items in \(parts) parts")
                let sizes = runs.map(\.count)
                #expect(sizes.max()! - sizes.min()! <= 1, "\(count) items in \(parts) parts: \(sizes)")
                #expect(sizes.filter { $0 > 0 }.count == min(count, parts), "\(count) items in \(parts) parts: \(sizes)")
            }
        }
        // The later runs the larger.
        #expect((0..<3).map { partRange($0, of: 3, count: 7) } == [0..<2, 2..<4, 4..<7])
        #expect((0..<2).map { partRange($0, of: 2, count: 45) } == [0..<22, 22..<45])
        #expect((0..<3).map { partRange($0, of: 3, count: 2) } == [0..<0, 0..<1, 1..<2])
    }
}
