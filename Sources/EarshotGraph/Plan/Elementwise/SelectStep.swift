/// Where(a op b, X, Y): each output element X's where the comparison holds, else Y's. A
/// condition of one value a stream copies X or Y whole.
struct SelectStep: Step {
    enum Comparison: Sendable {
        case equal, greater, greaterOrEqual, less, lessOrEqual

        /// The comparison op `op`; nil for an op of another family.
        init?(_ op: GraphOp) {
            switch op {
            case .equal: self = .equal
            case .greater: self = .greater
            case .greaterOrEqual: self = .greaterOrEqual
            case .less: self = .less
            case .lessOrEqual: self = .lessOrEqual
            default: return nil
            }
        }

        @inline(__always) func holds(_ a: Float, _ b: Float) -> Bool {
            switch self {
            case .equal: return a == b
            case .greater: return a > b
            case .greaterOrEqual: return a >= b
            case .less: return a < b
            case .lessOrEqual: return a <= b
            }
        }
    }

    /// The comparison, over its own (broadcast) shape.
    struct Condition: Sendable {
        let kind: Comparison
        var a, b: GraphPlan.Ref
        let mapA, mapB: [Int32]?
        let shape: [Int]
    }

    var condition: Condition
    /// Per output element, the element of the condition (of X, of Y) it reads; nil when that has
    /// the output's shape (as BinaryStep's maps).
    let conditionMap: [Int32]?
    var x, y, out: GraphPlan.Ref
    let mapX, mapY: [Int32]?

    var reads: [GraphPlan.Ref] { [condition.a, condition.b, x, y] }
    var writes: [GraphPlan.Ref] { [out] }

    /// Whether it copies X or Y whole (one condition value a stream; X, Y and the output of one
    /// shape): then what it writes can be read from X or Y instead.
    var choosesWhole: Bool {
        condition.a.count == 1 && condition.b.count == 1 && mapX == nil && mapY == nil && x.count == out.count && y.count == out.count
    }

    func run(_ c: Context) {
        let n = out.count
        let single = condition.a.count == 1 && condition.b.count == 1
        for s in 0..<c.streams {
            let pa = c.read(condition.a, s), pb = c.read(condition.b, s)
            if out.coded {
                // Codes: one choice for the whole output (the builder makes no other of codes).
                let holds = condition.kind.holds(pa[0], pb[0])
                c.bytes(out, s).copyMemory(from: c.bytes(holds ? x : y, s), byteCount: n)
                continue
            }
            let px = c.read(x, s), py = c.read(y, s), po = c.write(out, s)
            if single {
                // One choice for the whole output: a copy (or a fill) of X or Y.
                let holds = condition.kind.holds(pa[0], pb[0])
                let (from, map) = holds ? (px, mapX) : (py, mapY)
                let count = holds ? x.count : y.count
                if let map, count > 1 {
                    map.withUnsafeBufferPointer { m in for i in 0..<n { po[i] = from[Int(m[i])] } }
                } else if map != nil {
                    po.update(repeating: from[0], count: n)
                } else {
                    po.update(from: from, count: n)
                }
                continue
            }
            func at(_ map: [Int32]?, _ i: Int) -> Int { map.map { Int($0[i]) } ?? i }
            for i in 0..<n {
                let k = at(conditionMap, i)
                let holds = condition.kind.holds(pa[at(condition.mapA, k)], pb[at(condition.mapB, k)])
                po[i] = holds ? px[at(mapX, i)] : py[at(mapY, i)]
            }
        }
    }
}

extension SelectStep.Condition {
    /// The condition reading the places `move` gives for its own.
    func relocated(_ move: (GraphPlan.Ref) -> GraphPlan.Ref) -> Self {
        var moved = self
        (moved.a, moved.b) = (move(a), move(b))
        return moved
    }
}

extension SelectStep {
    func relocated(_ move: (GraphPlan.Ref) -> GraphPlan.Ref) -> (any Step)? {
        var moved = self
        (moved.condition, moved.x, moved.y, moved.out) = (condition.relocated(move), move(x), move(y), move(out))
        return moved
    }
}
