import CEarshotKernels
import Foundation

/// An element-wise op of two broadcast inputs: the vectorized kernel when the shapes match or an
/// operand is one value, else over the precomputed broadcast maps.
struct BinaryStep: Step {
    enum Kind: Sendable {
        case add, sub, mul, div, max, min, pow
        /// Pow by a fixed 2.
        case square

        /// The kind of op `op`; nil for an op of another family.
        init?(_ op: GraphOp) {
            switch op {
            case .add: self = .add
            case .sub: self = .sub
            case .mul: self = .mul
            case .div: self = .div
            case .max: self = .max
            case .min: self = .min
            case .pow: self = .pow
            default: return nil
            }
        }
    }

    let kind: Kind
    var a: GraphPlan.Ref
    var b: GraphPlan.Ref
    var y: GraphPlan.Ref
    /// Per output element, the element of a (of b) it reads; nil when a (b) has the output's
    /// shape. A one-value operand has a map of zeros.
    let mapA: [Int32]?
    let mapB: [Int32]?

    /// A stretch of the output where the operand of the output's shape is read in place and the
    /// broadcast one either repeats one value (`step` 0: a value per channel) or runs along with
    /// it (`step` 1: a row repeated, as a window over frames).
    struct Stretch: Sendable {
        let start, count, other, step: Int32
    }
    /// When one operand has the output's shape and the other's map is such stretches of 16
    /// values or more on average: the stretches, each one call of the vectorized kernel.
    let stretches: [Stretch]?
    /// When one operand has the output's shape and the other's map repeats with a short period
    /// (a value per channel on the innermost axis, as a batch norm over [.., 2]): the map's first
    /// period. The broadcast operand is then laid out over a whole number of periods once per
    /// run, and the kernel runs on both operands in place.
    let period: [Int32]?

    init(kind: Kind, a: GraphPlan.Ref, b: GraphPlan.Ref, y: GraphPlan.Ref, mapA: [Int32]?, mapB: [Int32]?) {
        (self.kind, self.a, self.b, self.y, self.mapA, self.mapB) = (kind, a, b, y, mapA, mapB)
        let oneSided = kind != .square && (mapA == nil) != (mapB == nil)
        stretches = oneSided ? Self.stretches(mapA ?? mapB ?? []) : nil
        period = oneSided && stretches == nil ? Self.period(mapA ?? mapB ?? []) : nil
    }

    /// The longest period a map is laid out over (`Self.tile` values); longer periods take the
    /// value-by-value path.
    static let tile = 512

    /// The first period of `map` when it repeats with a period of at most `tile` values and
    /// the output holds at least 16 periods; else nil.
    static func period(_ map: [Int32]) -> [Int32]? {
        guard let first = map.first else { return nil }
        var candidate = 1
        while candidate <= tile, candidate * 16 <= map.count {
            if map[candidate] == first, (candidate..<map.count).allSatisfy({ map[$0] == map[$0 - candidate] }) {
                return Array(map[0..<candidate])
            }
            candidate += 1
        }
        return nil
    }

    /// A broadcast map cut into stretches of one value or of consecutive values; nil when they
    /// average under 16 values.
    static func stretches(_ map: [Int32]) -> [Stretch]? {
        var stretches: [Stretch] = []
        var i = 0
        while i < map.count {
            let step: Int32 = i + 1 < map.count && map[i + 1] == map[i] ? 0 : 1
            var j = i + 1
            while j < map.count, map[j] == map[i] + step * Int32(j - i) { j += 1 }
            stretches.append(Stretch(start: Int32(i), count: Int32(j - i), other: map[i], step: step))
            i = j
        }
        return stretches.count * 16 <= map.count ? stretches : nil
    }

    /// nil when `shape` is the output's, else the broadcast index of every output element.
    static func map(_ shape: [Int], to out: [Int]) -> [Int32]? {
        shape == out ? nil : broadcastOffsets(from: shape, to: out).map { Int32($0) }
    }

    /// The C kernel's op: every kind has one.
    private var kernelOp: Int32 {
        switch kind {
        case .add: return Int32(EARSHOT_ADD)
        case .sub: return Int32(EARSHOT_SUB)
        case .mul: return Int32(EARSHOT_MUL)
        case .div: return Int32(EARSHOT_DIV)
        case .square: return Int32(EARSHOT_SQUARE)
        case .max: return Int32(EARSHOT_MAX)
        case .min: return Int32(EARSHOT_MIN)
        case .pow: return Int32(EARSHOT_POW)
        }
    }

    func run(_ c: Context) {
        // Same shapes, or one operand a single value: the vectorized kernel.
        if mapA == nil || a.count == 1, mapB == nil || b.count == 1 {
            let op = kernelOp
            for s in 0..<c.streams {
                earshot_binary(op, c.read(a, s), mapA == nil ? 1 : 0, c.read(b, s), mapB == nil ? 1 : 0, c.write(y, s), y.count)
            }
            return
        }
        // One operand broadcast in stretches: the vectorized kernel on each.
        if let stretches {
            let op = kernelOp
            let broadcastB = mapB != nil
            stretches.withUnsafeBufferPointer { runs in
                for s in 0..<c.streams {
                    let pa = c.read(a, s), pb = c.read(b, s), out = c.write(y, s)
                    for r in runs {
                        let (start, count, other, step) = (Int(r.start), Int(r.count), Int(r.other), Int(r.step))
                        if broadcastB {
                            earshot_binary(op, pa + start, 1, pb + other, step, out + start, count)
                        } else {
                            earshot_binary(op, pa + other, step, pb + start, 1, out + start, count)
                        }
                    }
                }
            }
            return
        }
        // One operand broadcast with a short period: that operand laid out over whole periods, then
        // the vectorized kernel on both in place, a tile at a time.
        if let period {
            let op = kernelOp
            let p = period.count, tile = p * Swift.max(1, Self.tile / p), n = y.count
            let broadcastB = mapB != nil
            period.withUnsafeBufferPointer { map in
                withUnsafeTemporaryAllocation(of: Float.self, capacity: tile) { laid in
                    guard let laid = laid.baseAddress else { return }
                    for s in 0..<c.streams {
                        let pa = c.read(a, s), pb = c.read(b, s), out = c.write(y, s)
                        let source = broadcastB ? pb : pa
                        for j in 0..<tile { laid[j] = source[Int(map[j % p])] }
                        var i = 0
                        while i < n {
                            let m = Swift.min(tile, n - i)
                            if broadcastB {
                                earshot_binary(op, pa + i, 1, laid, 1, out + i, m)
                            } else {
                                earshot_binary(op, laid, 1, pb + i, 1, out + i, m)
                            }
                            i += m
                        }
                    }
                }
            }
            return
        }
        // Any other broadcast: value by value through the same kernel, so that a value is the
        // same however its operands are laid out.
        let op = kernelOp
        apply(c) { p, q in
            var (p, q, r) = (p, q, Float(0))
            earshot_binary(op, &p, 0, &q, 0, &r, 1)
            return r
        }
    }

    @inline(__always)
    private func apply(_ c: Context, _ f: (Float, Float) -> Float) {
        let n = y.count
        for s in 0..<c.streams {
            let pa = c.read(a, s), pb = c.read(b, s), out = c.write(y, s)
            if mapA == nil && mapB == nil {
                for i in 0..<n { out[i] = f(pa[i], pb[i]) }
            } else if mapA == nil && b.count == 1 {
                let v = pb[0]
                for i in 0..<n { out[i] = f(pa[i], v) }
            } else if mapB == nil && a.count == 1 {
                let v = pa[0]
                for i in 0..<n { out[i] = f(v, pb[i]) }
            } else {
                mapA.withUnsafeBufferPointerOrNil { ia in
                    mapB.withUnsafeBufferPointerOrNil { ib in
                        for i in 0..<n { out[i] = f(pa[ia.map { Int($0[i]) } ?? i], pb[ib.map { Int($0[i]) } ?? i]) }
                    }
                }
            }
        }
    }
}

extension BinaryStep {
    var reads: [GraphPlan.Ref] { [a, b] }
    var writes: [GraphPlan.Ref] { [y] }
}

extension BinaryStep {
    func relocated(_ move: (GraphPlan.Ref) -> GraphPlan.Ref) -> (any Step)? {
        var moved = self
        (moved.a, moved.b, moved.y) = (move(a), move(b), move(y))
        return moved
    }
}
