@testable import EarshotGraph
import Foundation
import Testing

/// The arena laid out by liveness (`GraphPlan.Layout`): tensors whose lives never meet share
/// their floats, and a plan so laid out computes what the same plan with every tensor in a place
/// of its own computes, bit for bit, whatever its arena held before.
struct ArenaLayoutTests {
    /// A seeded generator (Knuth's 64-bit LCG, its high bits), so that a failing graph can be made
    /// again from its seed.
    struct Seeded {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 17
        }
    }

    static func values(_ count: Int, seed: Int) -> [Float] {
        var g = Seeded(state: UInt64(seed))
        return (0..<count).map { _ in Float(Int(g.next() % 4001)) / 1000 - 2 }  // -2...2
    }

    /// `steps` consecutive runs of one stream: input 0 given values(..., seed: seed + step),
    /// the carried inputs (1...) the outputs 1... of the run before (the first run: zeros); the
    /// bits of every output of every run. With `consecutive`, through the consecutive split
    /// (`prepareConsecutive`, `finishConsecutive`); otherwise run by run. The workspace starts full
    /// of NaN (the arena holds whatever the last run left there).
    static func runs(_ plan: GraphPlan, steps: Int, seed: Int, consecutive: Bool) throws -> [[UInt32]] {
        var ws = GraphWorkspace()
        ws.arena = [Float](repeating: .nan, count: plan.arenaFloats * steps + 16)
        var carried = plan.inputShapes.dropFirst().map { [Float](repeating: 0, count: $0.reduce(1, *)) }
        var got: [[UInt32]] = []
        func load(_ step: Int, _ input: Int, _ buffer: UnsafeMutableBufferPointer<Float>) {
            let v = input == 0 ? values(buffer.count, seed: seed + step) : carried[input - 1]
            for k in 0..<buffer.count { buffer[k] = v[k] }
        }
        func store(_ step: Int, _ output: Int, _ v: UnsafeBufferPointer<Float>) {
            if output == 0 { got.append([]) }
            got[got.count - 1] += v.map(\.bitPattern)
            if output >= 1 && output <= carried.count { carried[output - 1] = Array(v) }
        }
        if consecutive {
            let split = plan.consecutive(carrying: Set(plan.inputShapes.indices.dropFirst()))
            try plan.prepareConsecutive(split, count: steps, workspace: &ws, load: load)
            try plan.finishConsecutive(split, count: steps, workspace: &ws, load: load, store: store)
        } else {
            for step in 0..<steps {
                try plan.run(streams: 1, workspace: &ws, load: { _, i, b in load(step, i, b) }, store: { _, j, v in store(step, j, v) })
            }
        }
        return got
    }

    /// A random graph over [4, 8] tensors: x (given each run) and a state s, element-wise ops,
    /// reshapes (a view of their input's place) and slices joined by a Concat (copies), each
    /// reading earlier tensors (the recent ones most); outputs the last tensor and a new state.
    static func randomGraph(seed: Int) -> (nodes: [GraphNode], constants: [String: GraphTensor]) {
        var g = Seeded(state: UInt64(seed) &+ 0xABCD)
        var names = ["x", "s"]
        var nodes: [GraphNode] = []
        let constants = ["shape": GraphTensor(shape: [2], integers: [4, 8]),
                         "low": GraphTensor(shape: [1], integers: [0]), "mid": GraphTensor(shape: [1], integers: [2]),
                         "high": GraphTensor(shape: [1], integers: [4]), "axis": GraphTensor(shape: [1], integers: [0])]
        func pick() -> String {
            // The last few most often: long and short lives both.
            let back = Int(g.next() % 4) == 0 ? Int(g.next() % UInt64(names.count)) : Int(g.next() % UInt64(min(3, names.count)))
            return names[names.count - 1 - back]
        }
        let count = 6 + Int(g.next() % 20)
        for k in 0..<count {
            let out = "t\(k)"
            switch g.next() % 8 {
            case 0: nodes.append(GraphNode(op: .add, name: "n\(k)", inputs: [pick(), pick()], outputs: [out]))
            case 1: nodes.append(GraphNode(op: .mul, name: "n\(k)", inputs: [pick(), pick()], outputs: [out]))
            case 2: nodes.append(GraphNode(op: .sub, name: "n\(k)", inputs: [pick(), pick()], outputs: [out]))
            case 3: nodes.append(GraphNode(op: .sigmoid, name: "n\(k)", inputs: [pick()], outputs: [out]))
            case 4: nodes.append(GraphNode(op: .abs, name: "n\(k)", inputs: [pick()], outputs: [out]))
            case 5: nodes.append(GraphNode(op: .reshape, name: "n\(k)", inputs: [pick(), "shape"], outputs: [out]))
            case 6: nodes.append(GraphNode(op: .max, name: "n\(k)", inputs: [pick(), pick()], outputs: [out]))
            default:
                let (a, b) = (pick(), pick())
                nodes.append(GraphNode(op: .slice, name: "n\(k)a", inputs: [a, "mid", "high", "axis"], outputs: [out + "a"]))
                nodes.append(GraphNode(op: .slice, name: "n\(k)b", inputs: [b, "low", "mid", "axis"], outputs: [out + "b"]))
                nodes.append(GraphNode(op: .concat, name: "n\(k)", inputs: [out + "a", out + "b"], outputs: [out], attributes: ["axis": .int(0)]))
            }
            names.append(out)
        }
        // The new state reads the old one, so that the carried part is not empty.
        nodes.append(GraphNode(op: .add, name: "state", inputs: ["s", pick()], outputs: ["s out"]))
        nodes.append(GraphNode(op: .mul, name: "last", inputs: [names[names.count - 1], "s out"], outputs: ["y"]))
        return (nodes, constants)
    }

    /// `count` element-wise steps one after another from `first`, alternating `ops`, their
    /// outputs `prefix` 0, 1, ...; the last one's name.
    static func chain(_ nodes: inout [GraphNode], from first: String, count: Int, ops: (GraphOp, GraphOp), prefix: String) -> String {
        var last = first
        for k in 0..<count {
            nodes.append(GraphNode(op: k % 2 == 0 ? ops.0 : ops.1, name: "\(prefix) step \(k)", inputs: [last], outputs: ["\(prefix)\(k)"]))
            last = "\(prefix)\(k)"
        }
        return last
    }

    /// Three runs of `laid` equal those of `own` bit for bit, run by run and through the
    /// consecutive split.
    static func expectSameRuns(_ laid: GraphPlan, _ own: GraphPlan, seed: Int) throws {
        for consecutive in [false, true] {
            #expect(try runs(laid, steps: 3, seed: seed, consecutive: consecutive) == runs(own, steps: 3, seed: seed, consecutive: consecutive))
        }
    }

    /// The random graphs' inputs and outputs.
    static let randomInputs: [(name: String, shape: [Int])] = [("x", [4, 8]), ("s", [4, 8])], randomOutputs = ["y", "s out"]

    static func plan(_ graph: (nodes: [GraphNode], constants: [String: GraphTensor]), layOut: Bool) throws -> GraphPlan {
        try GraphPlan(nodes: graph.nodes, constants: graph.constants, inputs: randomInputs, outputs: randomOutputs, opset: 17, layOut: layOut)
    }

    @Test("A chain's arena holds its inputs, outputs and two places its steps take in turn, not all of its tensors, and its runs equal those with every tensor in a place of its own, bit for bit")
    func chainShares() throws {
        var nodes: [GraphNode] = []
        let last = Self.chain(&nodes, from: "x", count: 12, ops: (.sigmoid, .abs), prefix: "t")
        nodes.append(GraphNode(op: .add, name: "state", inputs: ["s", last], outputs: ["s out"]))
        nodes.append(GraphNode(op: .neg, name: "last", inputs: ["s out"], outputs: ["y"]))
        let graph = (nodes: nodes, constants: [String: GraphTensor]())
        let (laid, own) = (try Self.plan(graph, layOut: true), try Self.plan(graph, layOut: false))
        // 16 tensors of 32 floats each in a place of its own; laid out: x, s, y, s out (inputs
        // and outputs) and two places the chain's steps take in turn.
        #expect(own.arenaFloats == 16 * 32)
        #expect(laid.arenaFloats == 6 * 32)
        try Self.expectSameRuns(laid, own, seed: 5)
    }

    @Test("A hybrid op's input quantization takes its places in the laid-out arena too: a chain through it shares its floats, and its runs equal those with every tensor in a place of its own, bit for bit")
    func hybridQuantizeShares() throws {
        var nodes: [GraphNode] = []
        let last = Self.chain(&nodes, from: "x", count: 6, ops: (.sigmoid, .neg), prefix: "t")
        nodes.append(GraphNode(op: .tfliteHybridQuantize, name: "q", inputs: [last], outputs: ["codes", "scales"],
                               attributes: ["axis": .int(1), "asymmetric": .int(1)]))
        nodes.append(GraphNode(op: .abs, name: "a", inputs: ["codes"], outputs: ["u0"]))
        nodes.append(GraphNode(op: .sigmoid, name: "b", inputs: ["u0"], outputs: ["u1"]))
        nodes.append(GraphNode(op: .add, name: "state", inputs: ["s", "u1"], outputs: ["s out"]))
        nodes.append(GraphNode(op: .neg, name: "last", inputs: ["s out"], outputs: ["y"]))
        let graph = (nodes: nodes, constants: [String: GraphTensor]())
        let (laid, own) = (try Self.plan(graph, layOut: true), try Self.plan(graph, layOut: false))
        #expect(laid.arenaFloats < own.arenaFloats / 2, "\(laid.arenaFloats) of \(own.arenaFloats)")
        try Self.expectSameRuns(laid, own, seed: 9)
    }

    @Test("TFLite Micro's front end takes its places in the laid-out arena too: a chain before and after it shares its floats, and its runs (its states carried) equal those with every tensor in a place of its own, bit for bit")
    func microFrontendShares() throws {
        var nodes: [GraphNode] = []
        let before = Self.chain(&nodes, from: "x", count: 4, ops: (.neg, .abs), prefix: "t")
        nodes.append(GraphNode(op: .microFrontend, name: "front end", inputs: [before, "noise", "pending", "started"],
                               outputs: ["features", "noise out", "pending out", "started out"]))
        let last = Self.chain(&nodes, from: "features", count: 4, ops: (.sigmoid, .neg), prefix: "u")
        nodes.append(GraphNode(op: .neg, name: "last", inputs: [last], outputs: ["y"]))
        let inputs: [(name: String, shape: [Int])] = [("x", [1, 800]), ("noise", [1, 80]), ("pending", [1, 40]), ("started", [1])]
        func plan(layOut: Bool) throws -> GraphPlan {
            try GraphPlan(nodes: nodes, constants: [:], inputs: inputs, outputs: ["y", "noise out", "pending out", "started out"], opset: 17, layOut: layOut)
        }
        let (laid, own) = (try plan(layOut: true), try plan(layOut: false))
        #expect(laid.arenaFloats < own.arenaFloats * 3 / 4, "\(laid.arenaFloats) of \(own.arenaFloats)")
        try Self.expectSameRuns(laid, own, seed: 11)
    }

    @Test("Random graphs (element-wise ops, views, copies, a state): any two blocks alive at one time, in the steps' order or the consecutive split's, never share a float; the laid-out plan equals the plan with every tensor in a place of its own, run by run and through the consecutive split, bit for bit",
          arguments: 0..<60)
    func randomGraphs(seed: Int) throws {
        let graph = Self.randomGraph(seed: seed)
        let (laid, own) = (try Self.plan(graph, layOut: true), try Self.plan(graph, layOut: false))
        #expect(laid.arenaFloats <= own.arenaFloats, "seed \(seed)")
        if laid.laidOut, let layout = try GraphPlan.layout(nodes: graph.nodes, constants: graph.constants, inputs: Self.randomInputs,
                                                           outputs: Self.randomOutputs, opset: 17) {
            // The blocks in use (the others, allocated then left unread, take no floats).
            let used = layout.blocks.indices.filter { (layout.pinned[$0] || layout.lives[$0] != nil) && !layout.blocks[$0].isEmpty }
            for i in used {
                for j in used where j > i && layout.meet(i, j) {
                    let a = layout.placed[i]..<(layout.placed[i] + layout.blocks[i].count)
                    let b = layout.placed[j]..<(layout.placed[j] + layout.blocks[j].count)
                    #expect(!a.overlaps(b), "seed \(seed): blocks \(i) and \(j) alive at once share \(a.clamped(to: b))")
                }
            }
        }
        let expected = try Self.runs(own, steps: 4, seed: seed, consecutive: false)
        #expect(try Self.runs(laid, steps: 4, seed: seed, consecutive: false) == expected, "seed \(seed)")
        #expect(try Self.runs(laid, steps: 4, seed: seed, consecutive: true) == expected, "seed \(seed)")
        #expect(try Self.runs(own, steps: 4, seed: seed, consecutive: true) == expected, "seed \(seed)")
    }

    @Test("Over the random graphs, the laid-out arenas are smaller than the sum of their tensors")
    func randomGraphsShare() throws {
        var (laid, own) = (0, 0)
        for seed in 0..<60 {
            let graph = Self.randomGraph(seed: seed)
            laid += try Self.plan(graph, layOut: true).arenaFloats
            own += try Self.plan(graph, layOut: false).arenaFloats
        }
        #expect(laid * 2 < own, "laid out \(laid) floats, every tensor its own \(own)")
    }
}
