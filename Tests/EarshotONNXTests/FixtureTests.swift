import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotONNX

/// What tools/make_onnx_fixtures.py states each fixture holds (read back with onnx).
struct ExpectedModel: Decodable {
    let irVersion: Int64
    let producerName: String
    let producerVersion: String
    let opsetImports: [ExpectedOpset]
    let metadata: [String: String]
    let graph: ExpectedGraph

    enum CodingKeys: String, CodingKey {
        case irVersion = "ir_version", producerName = "producer_name", producerVersion = "producer_version"
        case opsetImports = "opset_imports", metadata, graph
    }
}

struct ExpectedOpset: Decodable {
    let domain: String
    let version: Int64
}

struct ExpectedGraph: Decodable {
    let name: String
    let nodes: [ExpectedNode]
    let initializers: [ExpectedTensor]
    let inputs: [ExpectedValueInfo]
    let outputs: [ExpectedValueInfo]
    let valueInfo: [ExpectedValueInfo]

    enum CodingKeys: String, CodingKey {
        case name, nodes, initializers, inputs, outputs, valueInfo = "value_info"
    }
}

struct ExpectedNode: Decodable {
    let name: String
    let opType: String
    let domain: String
    let inputs: [String]
    let outputs: [String]
    let attributes: [String: ExpectedAttribute]

    enum CodingKeys: String, CodingKey {
        case name, opType = "op_type", domain, inputs, outputs, attributes
    }
}

struct ExpectedAttribute: Decodable {
    let type: String
    let floatBits: UInt32?
    let int: Int64?
    let string: String?
    let tensor: ExpectedTensor?
    let graph: ExpectedGraph?
    let floatsBits: [UInt32]?
    let ints: [Int64]?
    let strings: [String]?
    let tensors: [ExpectedTensor]?
    let graphs: [ExpectedGraph]?

    enum CodingKeys: String, CodingKey {
        case type, floatBits = "float_bits", int, string, tensor, graph, floatsBits = "floats_bits", ints, strings, tensors, graphs
    }
}

struct ExpectedTensor: Decodable {
    let name: String
    let dataType: Int
    let dims: [Int]
    let floatBits: [UInt32]?
    let integers: [Int64]?

    enum CodingKeys: String, CodingKey {
        case name, dataType = "data_type", dims, floatBits = "float_bits", integers
    }
}

struct ExpectedValueInfo: Decodable {
    let name: String
    let elemType: Int?
    let shape: [ExpectedDimension?]?

    enum CodingKeys: String, CodingKey {
        case name, elemType = "elem_type", shape
    }
}

struct ExpectedDimension: Decodable {
    let value: Int?
    let param: String?
}

enum Fixtures {
    static let folder = Repo.root.appendingPathComponent("Tests/EarshotONNXTests/Fixtures")
    static let names = ["initializers", "attributes", "subgraphs"]

    static func path(_ name: String) -> String { folder.appendingPathComponent("\(name).onnx").path }

    static func bytes(_ name: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path(name)))) }

    static func expected(_ name: String) throws -> ExpectedModel {
        try JSONDecoder().decode(ExpectedModel.self, from: Data(contentsOf: folder.appendingPathComponent("\(name).json")))
    }
}

/// Compares what the reader gave with what onnx read, recording every difference with where it is.
enum Compare {
    static func model(_ actual: OnnxModel, _ expected: ExpectedModel, _ file: String) {
        #expect(actual.irVersion == expected.irVersion, "\(file): ir_version")
        #expect(actual.producerName == expected.producerName, "\(file): producer_name")
        #expect(actual.producerVersion == expected.producerVersion, "\(file): producer_version")
        #expect(actual.opsetImports == expected.opsetImports.map { OnnxOpset(domain: $0.domain, version: $0.version) }, "\(file): opset_import")
        #expect(actual.metadata == expected.metadata, "\(file): metadata_props")
        graph(actual.graph, expected.graph, "\(file): graph '\(expected.graph.name)'")
    }

    static func graph(_ actual: OnnxGraph, _ expected: ExpectedGraph, _ at: String) {
        #expect(actual.name == expected.name, "\(at): name")
        #expect(actual.nodes.count == expected.nodes.count, "\(at): node count")
        for (a, e) in zip(actual.nodes, expected.nodes) { node(a, e, "\(at) > node '\(e.name)'") }
        #expect(actual.initializers.count == expected.initializers.count, "\(at): initializer count")
        for (a, e) in zip(actual.initializers, expected.initializers) { tensor(a, e, "\(at) > initializer '\(e.name)'") }
        for (role, a, e) in [("input", actual.inputs, expected.inputs), ("output", actual.outputs, expected.outputs),
                             ("value_info", actual.valueInfo, expected.valueInfo)] {
            #expect(a.count == e.count, "\(at): \(role) count")
            for (a, e) in zip(a, e) { valueInfo(a, e, "\(at) > \(role) '\(e.name)'") }
        }
    }

    static func node(_ actual: OnnxNode, _ expected: ExpectedNode, _ at: String) {
        #expect(actual.name == expected.name, "\(at): name")
        #expect(actual.opType == expected.opType, "\(at): op_type")
        #expect(actual.domain == expected.domain, "\(at): domain")
        #expect(actual.inputs == expected.inputs, "\(at): inputs")
        #expect(actual.outputs == expected.outputs, "\(at): outputs")
        #expect(actual.attributes.keys.sorted() == expected.attributes.keys.sorted(), "\(at): attribute names")
        for (name, e) in expected.attributes {
            guard let a = actual.attributes[name] else { continue }
            attribute(a, e, "\(at) > attribute '\(name)'")
        }
    }

    static func attribute(_ actual: OnnxAttribute, _ expected: ExpectedAttribute, _ at: String) {
        switch (actual, expected.type) {
        case let (.float(value), "float"): #expect(value.bitPattern == expected.floatBits, "\(at)")
        case let (.int(value), "int"): #expect(value == expected.int, "\(at)")
        case let (.string(value), "string"): #expect(value == expected.string, "\(at)")
        case let (.floats(values), "floats"): #expect(values.map(\.bitPattern) == expected.floatsBits, "\(at)")
        case let (.ints(values), "ints"): #expect(values == expected.ints, "\(at)")
        case let (.strings(values), "strings"): #expect(values == expected.strings, "\(at)")
        case let (.tensor(value), "tensor"):
            if let e = expected.tensor { tensor(value, e, "\(at) > tensor") } else { Issue.record("\(at): no expected tensor") }
        case let (.graph(value), "graph"):
            if let e = expected.graph { graph(value, e, "\(at) > graph '\(e.name)'") } else { Issue.record("\(at): no expected graph") }
        case let (.tensors(values), "tensors"):
            #expect(values.count == expected.tensors?.count, "\(at): count")
            for (index, (a, e)) in zip(values, expected.tensors ?? []).enumerated() { tensor(a, e, "\(at) > tensor #\(index)") }
        case let (.graphs(values), "graphs"):
            #expect(values.count == expected.graphs?.count, "\(at): count")
            for (index, (a, e)) in zip(values, expected.graphs ?? []).enumerated() { graph(a, e, "\(at) > graph #\(index)") }
        default:
            Issue.record("\(at): read as \(actual), expected a \(expected.type)")
        }
    }

    static func tensor(_ actual: OnnxTensor, _ expected: ExpectedTensor, _ at: String) {
        #expect(actual.name == expected.name, "\(at): name")
        #expect(actual.dataType.rawValue == expected.dataType, "\(at): data_type")
        #expect(actual.dims == expected.dims, "\(at): dims")
        #expect(actual.count == expected.dims.reduce(1, *), "\(at): count")
        #expect(actual.floats?.map(\.bitPattern) == expected.floatBits, "\(at): float values (bits)")
        #expect(actual.integers == expected.integers, "\(at): integer values")
    }

    static func valueInfo(_ actual: OnnxValueInfo, _ expected: ExpectedValueInfo, _ at: String) {
        #expect(actual.name == expected.name, "\(at): name")
        #expect(actual.elementType?.rawValue == expected.elemType, "\(at): elem_type")
        let shape = expected.shape.map { dims in
            dims.map { dim -> OnnxDimension in
                if let value = dim?.value { return .value(value) }
                if let param = dim?.param { return .param(param) }
                return .unknown
            }
        }
        #expect(actual.shape == shape, "\(at): shape")
    }
}

@Suite("ONNX fixtures (made by tools/make_onnx_fixtures.py)")
struct FixtureTests {
    @Test("Each fixture reads exactly as onnx reads it", arguments: Fixtures.names)
    func matchesOnnx(name: String) throws {
        let model = try OnnxModel.read(path: Fixtures.path(name))
        Compare.model(model, try Fixtures.expected(name), name)
    }

    @Test("Every fixture in the folder is checked")
    func everyFixtureChecked() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Fixtures.folder.path)
        #expect(Set(files.filter { $0.hasSuffix(".onnx") }) == Set(Fixtures.names.map { "\($0).onnx" }))
        #expect(Set(files.filter { $0.hasSuffix(".json") }) == Set(Fixtures.names.map { "\($0).json" }))
    }

    @Test("Tensors and attributes are equal by their bits: NaN equals itself, -0 is not 0")
    func bitwiseEquality() {
        func tensor(_ values: [Float]) -> OnnxTensor {
            OnnxTensor(name: "t", dataType: .float, dims: [values.count], floats: values, integers: nil, count: values.count)
        }
        #expect(tensor([.nan, 1]) == tensor([.nan, 1]))
        #expect(tensor([0]) != tensor([-0.0]))
        #expect(tensor([1]) != OnnxTensor(name: "t", dataType: .int64, dims: [1], floats: nil, integers: [1], count: 1))
        #expect(OnnxAttribute.floats([.nan]) == .floats([.nan]) && OnnxAttribute.float(0) != .float(-0.0))
    }

    @Test("A file, its bytes and its Data read the same")
    func sameFromEverySource() throws {
        for name in Fixtures.names {
            let bytes = try Fixtures.bytes(name)
            let fromFile = try OnnxModel.read(path: Fixtures.path(name))
            #expect(try OnnxModel(bytes: bytes, name: name) == fromFile)
            #expect(try OnnxModel(bytes: Data(bytes), name: name) == fromFile)
        }
    }

    @Test("Initializers: every readable type, raw and typed, to the bit")
    func initializers() throws {
        let graph = try OnnxModel.read(path: Fixtures.path("initializers")).graph
        func tensor(_ name: String) -> OnnxTensor? { graph.initializers.first { $0.name == name } }
        // The raw and typed forms of each type hold the same values.
        for (a, b) in [("i64_raw", "i64_typed"), ("i32_raw", "i32_typed"), ("i8_raw", "i8_typed"), ("u8_raw", "u8_typed"),
                       ("i16_raw", "i16_typed"), ("u16_raw", "u16_typed"), ("u32_raw", "u32_typed"), ("u64_raw", "u64_typed"),
                       ("f16_raw", "f16_typed")] {
            #expect(tensor(a)?.integers == tensor(b)?.integers && tensor(a)?.floats?.map(\.bitPattern) == tensor(b)?.floats?.map(\.bitPattern), "\(a) and \(b)")
        }
        #expect(tensor("f32_scalar") == OnnxTensor(name: "f32_scalar", dataType: .float, dims: [], floats: [42.5], integers: nil, count: 1))
        #expect(tensor("f32_empty")?.floats == [] && tensor("f32_empty")?.dims == [0, 3])
        #expect(tensor("bool_raw")?.integers == [1, 0, 1])
        #expect(tensor("u64_raw")?.integers == [0, 1, .max])
        #expect(tensor("bf16_raw")?.floats?.prefix(2) == [1, -3])
        #expect(tensor("f16_raw")?.floats?.first == 0.5)
    }

    @Test("Attributes of every kind, omitted optional inputs, dynamic dims, metadata")
    func attributes() throws {
        let model = try OnnxModel.read(path: Fixtures.path("attributes"))
        let nodes = model.graph.nodes
        #expect(nodes.map(\.opType) == ["Everything", "Clip", "Dropout", "Constant", "Add"])
        #expect(nodes[1].inputs == ["e", "", "clip_max"])
        #expect(nodes[2].outputs == ["dropped", ""])
        #expect(nodes[4].name == "")
        let everything = nodes[0].attributes
        #expect(everything["i"] == .int(-9_000_000_000))
        #expect(everything["s"] == .string("hello, wörld ✓"))
        #expect(everything["s_invalid"] == .string("a\u{FFFD}\u{FFFD}b\u{FFFD}"))
        #expect(everything["empty_floats"] == .floats([]))
        if case let .graph(graph)? = everything["g"] {
            #expect(graph.initializers.first?.floats == [2])
        } else {
            Issue.record("attribute g is not a graph")
        }
        #expect(model.graph.inputs[0].shape == [.param("batch"), .unknown, .value(2)])
        #expect(model.graph.inputs[1].shape == [])
        #expect(model.graph.outputs[0].elementType == .float && model.graph.outputs[0].shape == nil)
        #expect(model.graph.valueInfo[1].name == "sequence" && model.graph.valueInfo[1].elementType == nil)
        #expect(model.metadata["ünïcode"] == "✓ yes")
        #expect(model.opsetImports == [OnnxOpset(domain: "", version: 17), OnnxOpset(domain: "com.earshot.test", version: 1)])
    }

    @Test("If bodies with their own initializers and Constant nodes, nested three deep")
    func subgraphs() throws {
        let graph = try OnnxModel.read(path: Fixtures.path("subgraphs")).graph
        let branch = try #require(graph.nodes.first)
        guard case let .graph(thenBody)? = branch.attributes["then_branch"], case let .graph(elseBody)? = branch.attributes["else_branch"] else {
            Issue.record("If without its branches: \(branch.attributes)")
            return
        }
        #expect(thenBody.initializers.map(\.name) == ["then_scale"])
        #expect(thenBody.nodes.first?.attributes["value"] == .tensor(OnnxTensor(name: "bias", dataType: .float, dims: [3],
                                                                                 floats: [0.5, -0.5, 0], integers: nil, count: 3)))
        #expect(elseBody.initializers.first?.integers == [4] && elseBody.initializers.first?.dims == [])
        let inner = try #require(elseBody.nodes.first { $0.opType == "If" })
        guard case let .graph(innerThen)? = inner.attributes["then_branch"] else {
            Issue.record("inner If without then_branch")
            return
        }
        #expect(innerThen.nodes.first?.attributes["value_float"] == .float(1))
    }
}
