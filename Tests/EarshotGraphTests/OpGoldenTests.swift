import EarshotGraph
import EarshotTestSupport
import Foundation
import Testing

/// One tensor of Goldens/ops.json: its values as one string of space-separated tokens, parsed
/// straight into Float or Int64 (so every stored value comes back exactly).
struct GoldenTensor: Decodable, Sendable {
    let dtype: GraphDType
    let shape: [Int]
    let data: String

    func tensor() throws -> GraphTensor {
        let tokens = data.split(separator: " ")
        switch dtype {
        case .float32:
            let values = try tokens.map { token -> Float in
                guard let value = Float(token) else { throw FixtureError(message: "not a float: \(token)") }
                return value
            }
            return GraphTensor(shape: shape, floats: values)
        case .int64, .bool:
            let values = try tokens.map { token -> Int64 in
                guard let value = Int64(token) else { throw FixtureError(message: "not an integer: \(token)") }
                return value
            }
            return GraphTensor(shape: shape, integers: values, dtype: dtype)
        }
    }
}

/// One attribute of Goldens/ops.json: an object with one key naming its kind.
struct GoldenAttribute: Decodable, Sendable {
    let value: GraphAttribute

    private enum Kind: String, CodingKey { case int, float, string, ints, floats, strings, tensor }

    init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: Kind.self)
        guard let kind = container.allKeys.first else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "an attribute without a kind"))
        }
        func numbers<T>(_ text: String, _ parse: (Substring) -> T?) throws -> [T] {
            try text.split(separator: " ").map {
                guard let v = parse($0) else { throw FixtureError(message: "bad attribute value \($0)") }
                return v
            }
        }
        switch kind {
        case .int: value = .int(try numbers(try container.decode(String.self, forKey: kind)) { Int64($0) }[0])
        case .float: value = .float(try numbers(try container.decode(String.self, forKey: kind)) { Float($0) }[0])
        case .string: value = .string(try container.decode(String.self, forKey: kind))
        case .ints: value = .ints(try numbers(try container.decode(String.self, forKey: kind)) { Int64($0) })
        case .floats: value = .floats(try numbers(try container.decode(String.self, forKey: kind)) { Float($0) })
        case .strings: value = .strings(try container.decode([String].self, forKey: kind))
        case .tensor: value = .tensor(try container.decode(GoldenTensor.self, forKey: kind).tensor())
        }
    }
}

/// One case of Goldens/ops.json (tools/make_op_goldens.py: a one-node model run in onnxruntime).
struct GoldenCase: Decodable, Sendable, CustomTestStringConvertible {
    let name: String
    let op: String
    let opset: Int
    let attributes: [String: GoldenAttribute]
    let inputs: [GoldenTensor?]
    let outputs: [GoldenTensor]
    /// Given for the cases whose output count the kernel must be told (Split).
    let outputCount: Int?

    var testDescription: String { name }

    private struct File: Decodable { let cases: [GoldenCase] }

    static let all: [GoldenCase] = {
        guard let data = try? Data(contentsOf: URL(fileURLWithPath: Repo.path("Tests/EarshotGraphTests/Goldens/ops.json"))),
              let file = try? JSONDecoder().decode(File.self, from: data) else { return [] }
        return file.cases
    }()

    /// Runs the case's node and compares every output with onnxruntime's.
    func check() throws -> Comparison {
        let tensors = try inputs.map { try $0?.tensor() }
        let results = try GraphOps.run(op, node: name, inputs: tensors, attributes: attributes.mapValues(\.value), opset: opset,
                                       outputCount: outputCount ?? outputs.count)
        var comparison = Comparison(name: name)
        guard results.count == outputs.count else {
            comparison.problems.append("\(results.count) outputs, expected \(outputs.count)")
            return comparison
        }
        for (i, (got, golden)) in zip(results, outputs).enumerated() {
            comparison.add(output: i, got: got, expected: try golden.tensor())
        }
        return comparison
    }
}

/// How one case's outputs compare with the reference: exact types, shapes and integers; floats
/// within 1e-5 + 1e-5 |expected|, NaN for NaN and the same infinity for an infinity.
struct Comparison {
    static let absolute: Float = 1e-5
    static let relative: Float = 1e-5

    let name: String
    var problems: [String] = []
    var worstDifference: Float = 0

    mutating func add(output i: Int, got: GraphTensor, expected: GraphTensor) {
        guard got.dtype == expected.dtype else {
            problems.append("output \(i) is \(got.dtype.rawValue), expected \(expected.dtype.rawValue)")
            return
        }
        guard got.shape == expected.shape else {
            problems.append("output \(i) has shape \(got.shape), expected \(expected.shape)")
            return
        }
        guard got.count == expected.count else {
            problems.append("output \(i) holds \(got.count) values, expected \(expected.count)")
            return
        }
        if got.dtype != .float32 {
            if let k = got.integers.indices.first(where: { got.integers[$0] != expected.integers[$0] }) {
                problems.append("output \(i)[\(k)] = \(got.integers[k]), expected \(expected.integers[k])")
            }
            return
        }
        for k in 0..<got.count {
            let (g, e) = (got.floats[k], expected.floats[k])
            if e.isNaN || e.isInfinite {
                if !(e.isNaN ? g.isNaN : g == e) { problems.append("output \(i)[\(k)] = \(g), expected \(e)") }
                continue
            }
            let difference = abs(g - e)
            if !(difference <= Comparison.absolute + Comparison.relative * abs(e)) {
                problems.append("output \(i)[\(k)] = \(g), expected \(e) (|diff| \(difference))")
            }
            if difference.isNaN {
                worstDifference = .nan
            } else if !worstDifference.isNaN {
                worstDifference = max(worstDifference, difference)
            }
        }
    }
}

@Suite("ONNX ops against onnxruntime")
struct OpGoldenTests {
    @Test("The reference file holds a case of every op")
    func coverage() {
        #expect(GoldenCase.all.count >= 200)
        #expect(Set(GoldenCase.all.map(\.op)) == GraphOps.onnxOps)
    }

    @Test("Outputs equal onnxruntime's", arguments: GoldenCase.all)
    func golden(_ c: GoldenCase) throws {
        let comparison = try c.check()
        #expect(comparison.problems.isEmpty, "\(c.name): \(comparison.problems.prefix(5).joined(separator: "; "))")
    }

    @Test("The largest difference over every case")
    func worstCase() throws {
        var worst = Comparison(name: "none")
        for c in GoldenCase.all {
            let comparison = try c.check()
            if comparison.worstDifference.isNaN || comparison.worstDifference > worst.worstDifference { worst = comparison }
        }
        print("EarshotGraph: \(GoldenCase.all.count) cases against onnxruntime; the largest |diff| is \(worst.worstDifference) in \(worst.name)")
        #expect(worst.worstDifference <= 1e-4)
    }
}
