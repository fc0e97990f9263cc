import EarshotGraph
import EarshotTestSupport
import Testing

/// Calls made by bending the reference cases: other integers in shape and axis inputs, other
/// attribute values (extremes included), other shapes, NaN and infinity, inputs dropped or
/// added, other opsets. Each call must give well-formed outputs or a GraphError naming its node
/// and op; a trap would end the test run.
@Suite("Bent calls never trap")
struct RobustnessTests {
    static let integers: [Int64] = [-3, -2, -1, 0, 0, 1, 1, 2, 2, 3, 4, 5, 8, .min, .max, .min + 1, 1 << 40, -(1 << 40)]
    static let floats: [Float] = [0, -0.0, 1, -1, 0.5, 2.5, -7, .nan, .infinity, -.infinity, .greatestFiniteMagnitude, 1e-30]

    static func integer(_ random: inout SeededRandom) -> Int64 { integers.randomElement(using: &random) ?? 0 }

    static func tensor(_ random: inout SeededRandom, like t: GraphTensor) -> GraphTensor {
        var shape = t.shape
        if !shape.isEmpty, Bool.random(using: &random) {
            let d = Int.random(in: 0..<shape.count, using: &random)
            shape[d] = max(0, shape[d] + Int.random(in: -2...2, using: &random))
        }
        if Int.random(in: 0..<6, using: &random) == 0 { shape = Array(shape.dropLast()) }
        if Int.random(in: 0..<6, using: &random) == 0 { shape.append(Int.random(in: 1...3, using: &random)) }
        let count = shape.reduce(1, *)
        let dtype = Int.random(in: 0..<8, using: &random) == 0 ? [.float32, .int64, .bool].randomElement(using: &random)! : t.dtype
        switch dtype {
        case .float32:
            return GraphTensor(shape: shape, floats: (0..<count).map { _ in
                Int.random(in: 0..<4, using: &random) == 0 ? floats.randomElement(using: &random)! : Float.random(in: -3...3, using: &random)
            })
        case .int64:
            return GraphTensor(shape: shape, integers: (0..<count).map { _ in integer(&random) })
        case .bool:
            return GraphTensor(shape: shape, bools: (0..<count).map { _ in Bool.random(using: &random) })
        }
    }

    static func attribute(_ random: inout SeededRandom, like a: GraphAttribute) -> GraphAttribute {
        switch a {
        case .int: return .int(integer(&random))
        case .float: return .float(floats.randomElement(using: &random)!)
        case let .ints(values):
            let count = max(0, values.count + Int.random(in: -1...1, using: &random))
            return .ints((0..<count).map { _ in integer(&random) })
        case let .floats(values): return .floats(values.map { _ in floats.randomElement(using: &random)! })
        case .string:
            return .string(["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER", "constant", "reflect", "edge", "wrap", "forward", "reverse",
                            "bidirectional", "", "?"].randomElement(using: &random)!)
        case let .strings(values):
            return .strings(values.map { _ in ["Sigmoid", "Tanh", "Relu", "Elu", ""].randomElement(using: &random)! })
        case let .tensor(t): return .tensor(tensor(&random, like: t))
        }
    }

    /// A call to bend: an op's inputs, attributes, opset and output count.
    struct Call {
        var name: String
        var inputs: [GraphTensor?]
        var attributes: [String: GraphAttribute]
        var opset = 13
        var outputCount: Int?
    }

    /// Calls of Earshot's integer ops and front end, as TFLiteImporter emits them.
    static func integerCalls(_ op: String) -> [Call] {
        var random = SeededRandom(seed: 5)
        func ints(_ shape: [Int], _ range: ClosedRange<Int>) -> GraphTensor {
            GraphTensor(shape: shape, floats: (0..<shape.reduce(1, *)).map { _ in Float(Int.random(in: range, using: &random)) })
        }
        let requant: [String: GraphAttribute] = ["input_offset": .int(128), "output_offset": .int(-128), "multipliers": .ints([1_500_000_000, 1_200_000_000]),
                                                 "shifts": .ints([-7, -8]), "activation": .ints([-128, 127])]
        switch op {
        case "TFLiteConv2D":
            return [Call(name: "conv", inputs: [ints([1, 5, 1, 3], -128...127), ints([2, 3, 1, 3], -127...127), GraphTensor(shape: [2], integers: [100, -50])],
                         attributes: requant.merging(["strides": .ints([1, 1]), "dilations": .ints([1, 1]), "pads": .ints([1, 0, 1, 0])]) { $1 })]
        case "TFLiteDepthwiseConv2D":
            return [Call(name: "depthwise", inputs: [ints([1, 5, 1, 2], -128...127), ints([1, 3, 1, 2], -127...127), GraphTensor(shape: [2], integers: [7, 9])],
                         attributes: requant.merging(["strides": .ints([1, 1]), "dilations": .ints([2, 1]), "pads": .ints([0, 0, 0, 0]), "depth_multiplier": .int(1)]) { $1 })]
        case "TFLiteFullyConnected":
            return [Call(name: "dense", inputs: [ints([1, 6], -128...127), ints([2, 6], -127...127), GraphTensor(shape: [2], integers: [1, 2])],
                         attributes: requant.merging(["weights_offset": .int(0)]) { $1 })]
        case "TFLiteLookup":
            return [Call(name: "lookup", inputs: [ints([1, 8], -128...127)], attributes: ["table": .ints((0..<256).map { Int64($0 / 2) - 64 }), "low": .int(-128)])]
        case "Quantize":
            return [Call(name: "quantize", inputs: [GraphTensor(shape: [1, 3, 4], floats: (0..<12).map { Float($0) * 0.7 })],
                         attributes: ["scale": .float(0.1), "zero_point": .int(-128), "min": .int(-128), "max": .int(127)])]
        case "MicroFrontend":
            let samples = GraphTensor(shape: [1, 800], floats: (0..<800).map { _ in Float.random(in: -1...1, using: &random) })
            return [0, 1].map { started in
                Call(name: "front end", inputs: [samples, ints([1, 80], 0...65535), ints([1, 40], 0...600), GraphTensor(shape: [1], floats: [Float(started)])],
                     attributes: [:], outputCount: 4)
            }
        case "RFFT":
            return [Call(name: "rfft", inputs: [GraphTensor(shape: [2, 12], floats: (0..<24).map { _ in Float.random(in: -1...1, using: &random) })],
                         attributes: ["length": .int(16)])]
        case "TFLiteHybridQuantize":
            let x = GraphTensor(shape: [2, 3, 4], floats: (0..<24).map { _ in Float.random(in: -2...3, using: &random) })
            return [0, 1].map { asymmetric in
                Call(name: "hybrid input", inputs: [x], attributes: ["axis": .int(1), "asymmetric": .int(Int64(asymmetric))], outputCount: 2)
            }
        default:
            return []
        }
    }

    static func calls(_ op: String) throws -> [Call] {
        if GraphOps.integerOps.contains(op) { return integerCalls(op) }
        return try GoldenCase.all.filter { $0.op == op }.map { c in
            Call(name: c.name, inputs: try c.inputs.map { try $0?.tensor() }, attributes: c.attributes.mapValues(\.value), opset: c.opset,
                 outputCount: c.outputCount ?? c.outputs.count)
        }
    }

    @Test("Bent reference calls give outputs or typed errors", arguments: GraphOps.supportedOps.sorted())
    func bent(_ op: String) throws {
        let cases = try Self.calls(op)
        try #require(!cases.isEmpty)
        // The unbent calls run.
        for c in cases { _ = try GraphOps.run(op, node: c.name, inputs: c.inputs, attributes: c.attributes, opset: c.opset, outputCount: c.outputCount) }
        let seed = op.utf8.reduce(UInt64(1469598103934665603)) { ($0 ^ UInt64($1)) &* 1099511628211 }
        var random = SeededRandom(seed: seed)
        for trial in 0..<120 {
            let c = cases[trial % cases.count]
            var inputs = c.inputs
            var attributes = c.attributes
            var opset = c.opset
            var outputCount: Int? = c.outputCount
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                switch Int.random(in: 0..<7, using: &random) {
                case 0 where !inputs.isEmpty:
                    let i = Int.random(in: 0..<inputs.count, using: &random)
                    if let t = inputs[i] { inputs[i] = Self.tensor(&random, like: t) }
                case 1 where !attributes.isEmpty:
                    let name = attributes.keys.sorted().randomElement(using: &random)!
                    attributes[name] = Self.attribute(&random, like: attributes[name]!)
                case 2 where !inputs.isEmpty:
                    inputs[Int.random(in: 0..<inputs.count, using: &random)] = nil
                case 3:
                    inputs.append(inputs.last.flatMap { $0 } ?? GraphTensor(scalar: Float(1)))
                case 4:
                    opset = Int.random(in: 12...22, using: &random)
                case 5:
                    outputCount = Bool.random(using: &random) ? nil : Int.random(in: 0...4, using: &random)
                default:
                    // Integer inputs (shapes, axes, pads, indices) are where the edges are.
                    for i in inputs.indices where inputs[i]?.dtype == .int64 {
                        inputs[i]!.integers = inputs[i]!.integers.map { _ in Self.integer(&random) }
                    }
                }
            }
            let node = "\(c.name) trial \(trial)"
            do {
                let outputs = try GraphOps.run(op, node: node, inputs: inputs, attributes: attributes, opset: opset,
                                               outputCount: outputCount)
                for output in outputs {
                    #expect(output.count == output.shape.reduce(1, *), "\(node): \(output.dtype)\(output.shape) holds \(output.count) values")
                }
            } catch {
                #expect(error.node == node)
                #expect(error.op == op)
            }
        }
    }
}
