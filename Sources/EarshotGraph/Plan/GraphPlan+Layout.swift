extension GraphPlan {
    /// A stream's arena laid out by liveness. The builder gives every tensor a place of its own
    /// (`Builder.allocate`: a block); here each block lives from the first step that touches it to
    /// the last, in every order the steps may run in (as written, and the consecutive split's:
    /// the steps that do not depend on the state first), and blocks whose lives never meet share
    /// their floats. The inputs and outputs (a stream's state among them) and what a chosen output
    /// is read from stay whole for the run; so does a block that a step reads before any step
    /// writes it. A network's working set then is about its largest set of tensors alive at once
    /// instead of the sum of all of them (BirdNET V2.4: 64 MB a stream before).
    struct Layout: Sendable {
        /// The builder's blocks, in floats, in order: they tile its arena.
        let blocks: [Range<Int>]
        /// Per block, the steps' times it lives (first...last) in each order; nil: the whole run
        /// (pinned), or (`untouched`) no step touches it.
        let lives: [[ClosedRange<Int>]?]
        let pinned: [Bool]
        /// Per block, its first float in the laid-out arena.
        let placed: [Int]
        /// Floats of the laid-out arena (a multiple of 16).
        let size: Int

        /// The block that holds `ref`'s values; nil for a constant. `.none` in the outer optional:
        /// the ref runs over more than one block (the layout cannot move it).
        func block(of ref: Ref) -> Int?? { Self.block(of: ref, in: blocks) }

        /// The block of `blocks` (in order, tiling the arena) that holds `ref`'s values, as
        /// `block(of:)`.
        static func block(of ref: Ref, in blocks: [Range<Int>]) -> Int?? {
            guard !ref.shared else { return .some(nil) }
            let floats = ref.coded ? (ref.offset / 4)..<((ref.offset + ref.count + 3) / 4) : ref.offset..<(ref.offset + ref.count)
            // The last block starting at or before the ref.
            var low = 0, high = blocks.count
            while low < high {
                let mid = (low + high) / 2
                if blocks[mid].lowerBound <= floats.lowerBound { low = mid + 1 } else { high = mid }
            }
            let b = low - 1
            guard b >= 0, floats.upperBound <= blocks[b].upperBound || floats.isEmpty else { return nil }
            return .some(b)
        }

        /// `ref` at its block's new place.
        func move(_ ref: Ref) -> Ref {
            guard case let .some(b?) = block(of: ref) else { return ref }
            let delta = placed[b] - blocks[b].lowerBound
            return Ref(shared: false, offset: ref.offset + (ref.coded ? 4 * delta : delta), count: ref.count, coded: ref.coded)
        }

        /// Whether blocks i and j are alive at one time in some order.
        func meet(_ i: Int, _ j: Int) -> Bool { Self.meet(i, j, lives: lives, pinned: pinned) }

        /// Whether blocks i and j, living `lives` with `pinned` kept whole, are alive at one time
        /// in some order.
        static func meet(_ i: Int, _ j: Int, lives: [[ClosedRange<Int>]?], pinned: [Bool]) -> Bool {
            if pinned[i] || pinned[j] { return true }
            guard let a = lives[i], let b = lives[j] else { return false }
            return zip(a, b).contains { $0.overlaps($1) }
        }

        /// The layout of `blocks` for `steps` run in each of `orders` (per step, its time; the
        /// first order is the steps' own), `pinned` kept whole for the run; nil when a step's
        /// place runs over two blocks.
        init?(blocks: [Range<Int>], steps: [any Step], orders: [[Int]], pinned pins: [Ref]) {
            self.blocks = blocks
            var lives = [[ClosedRange<Int>]?](repeating: nil, count: blocks.count)
            var pinned = [Bool](repeating: false, count: blocks.count)
            func blockIndex(_ ref: Ref) -> Int?? { Self.block(of: ref, in: blocks) }
            for ref in pins {
                guard let b = blockIndex(ref) else { return nil }
                if let b { pinned[b] = true }
            }
            var firstReader = [Bool](repeating: false, count: blocks.count)
            for (k, step) in steps.enumerated() {
                var touched: [(block: Int, read: Bool)] = []
                for (refs, read) in [(step.reads, true), (step.writes, false)] {
                    for ref in refs where ref.count > 0 {
                        guard let b = blockIndex(ref) else { return nil }
                        if let b { touched.append((b, read)) }
                    }
                }
                for (b, _) in touched {
                    if let life = lives[b] {
                        lives[b] = zip(life, orders).map { min($0.lowerBound, $1[k])...max($0.upperBound, $1[k]) }
                    } else {
                        lives[b] = orders.map { $0[k]...$0[k] }
                        firstReader[b] = touched.contains { $0.block == b && $0.read }
                    }
                }
            }
            // Read before any step writes it: what it held before the steps counts.
            for b in blocks.indices where firstReader[b] { pinned[b] = true }
            // Largest first, each at the lowest place clear of the blocks it meets.
            var placed = [Int](repeating: 0, count: blocks.count)
            var done: [Int] = []
            var size = 0
            let live = blocks.indices.filter { pinned[$0] || lives[$0] != nil }
            for b in live.sorted(by: { (blocks[$0].count, $1) > (blocks[$1].count, $0) }) {
                let taken = done.filter { Self.meet(b, $0, lives: lives, pinned: pinned) }.map { placed[$0]..<(placed[$0] + blocks[$0].count) }
                    .sorted { $0.lowerBound < $1.lowerBound }
                var at = 0
                for range in taken where range.overlaps(at..<(at + blocks[b].count)) {
                    at = max(at, range.upperBound)
                }
                placed[b] = at
                done.append(b)
                size = max(size, at + blocks[b].count)
            }
            self.lives = lives
            self.pinned = pinned
            self.placed = placed
            self.size = size
        }
    }

    /// The steps, inputs, outputs and chosen outputs at the places `layout` gives; nil when a step
    /// cannot be moved (`Step.relocated`).
    static func relocate(_ layout: Layout, steps: [any Step], inputs: [Ref], outputs: [Ref],
                         chosen: [Chosen?]) -> (steps: [any Step], inputs: [Ref], outputs: [Ref], chosen: [Chosen?])? {
        var moved: [any Step] = []
        for step in steps {
            guard let step = step.relocated(layout.move) else { return nil }
            moved.append(step)
        }
        let chosen = chosen.map { c in c.map { Chosen(condition: $0.condition.relocated(layout.move), x: layout.move($0.x), y: layout.move($0.y)) } }
        return (moved, inputs.map(layout.move), outputs.map(layout.move), chosen)
    }
}
