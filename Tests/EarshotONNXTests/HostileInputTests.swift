import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotONNX

/// Bytes no ONNX writer makes, built by hand: each must give its own typed error, naming the
/// file and where in the model the problem is, or (for what protobuf allows) a correct model.
@Suite("Hostile ONNX input")
struct HostileInputTests {
    static func read(_ bytes: [UInt8]) -> Result<OnnxModel, OnnxError> {
        Result { () throws(OnnxError) in try OnnxModel(bytes: bytes, name: "t.onnx") }
    }

    static func error(_ bytes: [UInt8]) -> OnnxError? {
        if case let .failure(error) = read(bytes) { return error }
        return nil
    }

    /// A model whose graph "g" holds one initializer.
    static func withInitializer(_ tensor: Proto) -> [UInt8] { Onnx.model(Onnx.graph("g", initializers: [tensor])) }

    @Test("An empty input")
    func empty() {
        #expect(Self.error([]) == .empty(path: "t.onnx"))
        #expect(throws: OnnxError.empty(path: "t.onnx")) { try OnnxModel(bytes: Data(), name: "t.onnx") }
        #expect(throws: OnnxError.empty(path: "t.onnx")) { try OnnxModel(bytes: [], name: "t.onnx") }
    }

    @Test("A varint longer than 10 bytes; one of exactly 10 is read")
    func hugeVarint() {
        #expect(Self.error([0x08] + [UInt8](repeating: 0xFF, count: 11) + [0x01])
                == .malformed(path: "t.onnx", context: "model", reason: "a varint longer than 10 bytes at byte 1 (ir_version (field 1))"))
        // A field key that never ends.
        #expect(Self.error([UInt8](repeating: 0x80, count: 12))
                == .malformed(path: "t.onnx", context: "model", reason: "a varint longer than 10 bytes at byte 0 (a field key)"))
        let longest = Self.read(Onnx.model(Onnx.graph("g"), irVersion: .max))
        #expect((try? longest.get().irVersion) == -1)
    }

    @Test("A length past the end of the file, and past the end of its message")
    func lengthPastEnd() {
        #expect(Self.error([0x3A, 100, 1, 2, 3])
                == .truncated(path: "t.onnx", offset: 2, reading: "graph (field 7) (100 bytes; 3 remain) in model"))
        // raw_data claims more than its tensor message holds, though the file goes on.
        var tensor = Proto().string(8, "w").varint(2, 1).int(1, 1)
        tensor = tensor.raw(Proto.key(9, 2) + Proto.varint(40) + [0, 0, 0, 0])
        let bytes = Self.withInitializer(tensor) + Proto().string(1000, String(repeating: "x", count: 64)).bytes
        guard case let .truncated(path, _, reading)? = Self.error(bytes) else {
            Issue.record("not truncated: \(String(describing: Self.error(bytes)))")
            return
        }
        #expect(path == "t.onnx" && reading == "raw_data (field 9) (40 bytes; 4 remain) in graph 'g' > initializer 'w'")
        // A varint cut off by the end of the input.
        #expect(Self.error([0x08, 0x80]) == .truncated(path: "t.onnx", offset: 1, reading: "the varint of ir_version (field 1) in model"))
    }

    /// Graphs nested through If nodes' then_branch attributes, `depth` graphs in all.
    static func nest(_ depth: Int) -> Proto {
        var graph = Onnx.graph("g\(depth)", initializers: [Onnx.floatTensor("w", [1])])
        for level in stride(from: depth - 1, through: 1, by: -1) {
            graph = Onnx.graph("g\(level)", nodes: [Onnx.node("if\(level)", "If", inputs: ["c"], outputs: ["y"],
                                                              attributes: [Onnx.graphAttribute("then_branch", graph)])])
        }
        return graph
    }

    @Test("Graphs nested 33 deep are refused; 32 are read")
    func recursionBomb() throws {
        #expect(Self.error(Onnx.model(Self.nest(33)))
                == .limit(path: "t.onnx", what: "the nesting of graphs in node attributes (If, Loop and Scan bodies)", limit: 32))
        var graph = try Self.read(Onnx.model(Self.nest(32))).get().graph
        var depth = 1
        while case let .graph(inner)? = graph.nodes.first?.attributes["then_branch"] {
            graph = inner
            depth += 1
        }
        #expect(depth == 32 && graph.initializers.first?.floats == [1])
        // A bomb as deep as the input allows (thousands of levels) stops at the limit all the same.
        var bomb: [UInt8] = []
        for _ in 0..<2000 {  // graph { node { attribute { g: bomb } } }, innermost first
            let attribute = Proto().string(1, "then_branch").message(6, Proto(bytes: bomb))
            bomb = Proto().message(1, Proto().string(4, "If").message(5, attribute)).bytes
        }
        guard case .limit? = Self.error(Onnx.model(Proto(bytes: bomb))) else {
            Issue.record("a deep bomb gave \(String(describing: Self.error(Onnx.model(Proto(bytes: bomb)))))")
            return
        }
    }

    @Test("maxNodes counts the nodes of every graph, nested bodies too, before decoding any: one over is refused naming the count")
    func nodeCount() throws {
        // Main graph: two nodes and an If whose branches hold three and four (nine in all).
        let nodes = { (n: Int, prefix: String) in (0..<n).map { Onnx.node("\(prefix)\($0)", "Relu", inputs: ["x"], outputs: ["\(prefix)\($0)"]) } }
        let branches = [Onnx.graphAttribute("then_branch", Onnx.graph("then", nodes: nodes(3, "t"))),
                        Onnx.graphAttribute("else_branch", Onnx.graph("else", nodes: nodes(4, "e")))]
        let bytes = Onnx.model(Onnx.graph("g", nodes: nodes(2, "m") + [Onnx.node("if", "If", inputs: ["c"], outputs: ["y"], attributes: branches)]))
        #expect(throws: OnnxError.tooManyNodes(path: "t.onnx", count: 10, limit: 9)) { try OnnxModel(bytes: bytes, name: "t.onnx", maxNodes: 9) }
        #expect(try OnnxModel(bytes: bytes, name: "t.onnx", maxNodes: 10).graph.nodes.count == 3)
        #expect(OnnxError.tooManyNodes(path: "m.onnx", count: 100_000, limit: 50_000).description
                == "m.onnx: 100000 nodes (those of If, Loop and Scan bodies counted), more than the limit of 50000")
        // Damage after the nodes counted is still reported as damage.
        let damaged = Onnx.model(Onnx.graph("g", nodes: nodes(2, "m")).raw([0x0A, 0x7F]))
        guard case .truncated? = Self.error(damaged) else {
            Issue.record("\(String(describing: Self.error(damaged)))")
            return
        }
        #expect(throws: OnnxError.self) { try OnnxModel(bytes: damaged, name: "t.onnx", maxNodes: 1) }
    }

    @Test("A tensor with dims [-1]")
    func negativeDimension() {
        let tensor = Onnx.tensor("w", type: 1, dims: [-1]) { $0.bytes(9, [0, 0, 0, 0]) }
        #expect(Self.error(Self.withInitializer(tensor))
                == .malformed(path: "t.onnx", context: "graph 'g' > initializer 'w'", reason: "negative dimension -1 in dims [-1]"))
    }

    @Test("Dims whose product overflows; dims far larger than the data")
    func overflowingDims() {
        let tensor = Onnx.tensor("w", type: 1, dims: [1 << 32, 1 << 32]) { $0.bytes(9, [0, 0, 0, 0]) }
        #expect(Self.error(Self.withInitializer(tensor))
                == .malformed(path: "t.onnx", context: "graph 'g' > initializer 'w'",
                              reason: "dims [4294967296, 4294967296] hold more elements than an Int can count"))
        // 2^61 floats: the element count fits an Int, the byte count does not.
        let bytesOverflow = Onnx.tensor("w", type: 1, dims: [1 << 61]) { $0.bytes(9, [0, 0, 0, 0]) }
        #expect(Self.error(Self.withInitializer(bytesOverflow))
                == .malformed(path: "t.onnx", context: "graph 'g' > initializer 'w'",
                              reason: "raw_data holds 4 bytes; dims [2305843009213693952] of FLOAT need more than Int.max"))
        // 2^40 values announced, one given: refused before anything is allocated for them.
        let typed = Onnx.tensor("w", type: 1, dims: [1 << 40]) { $0.fixed32(4, 0) }
        #expect(Self.error(Self.withInitializer(typed))
                == .malformed(path: "t.onnx", context: "graph 'g' > initializer 'w'",
                              reason: "float_data (field 4) holds 1 value; dims [1099511627776] need 1099511627776"))
        // A zero among huge dims: an empty tensor, not an overflow.
        let empty = Onnx.tensor("w", type: 1, dims: [1 << 40, 1 << 40, 0])
        #expect((try? Self.read(Self.withInitializer(empty)).get().graph.initializers.first?.count) == 0)
    }

    @Test("raw_data whose length does not match the dims")
    func rawLengthMismatch() {
        let tensor = Onnx.tensor("w", type: 1, dims: [2]) { $0.bytes(9, [0, 0, 0, 0, 0, 0, 0]) }
        #expect(Self.error(Self.withInitializer(tensor))
                == .malformed(path: "t.onnx", context: "graph 'g' > initializer 'w'", reason: "raw_data holds 7 bytes; dims [2] of FLOAT need 8"))
        let missing = Onnx.tensor("w", type: 7, dims: [3])
        #expect(Self.error(Self.withInitializer(missing))
                == .malformed(path: "t.onnx", context: "graph 'g' > initializer 'w'",
                              reason: "no values (neither raw_data nor int64_data (field 7)); dims [3] need 3"))
    }

    @Test("Group wire types (3, 4) and the invalid ones (6, 7)")
    func groups() {
        #expect(Self.error([0x0B, 0x0C])
                == .malformed(path: "t.onnx", context: "model", reason: "ir_version (field 1) uses the group wire type 3 at byte 1, which ONNX never writes"))
        let node = Proto().string(4, "Relu").raw(Proto.key(77, 4))
        #expect(Self.error(Onnx.model(Onnx.graph("g", nodes: [node])))
                == .malformed(path: "t.onnx", context: "graph 'g' > node #0 (Relu)", reason: "field 77 uses the group wire type 4 at byte 25, which ONNX never writes"))
        #expect(Self.error([0x0E]) == .malformed(path: "t.onnx", context: "model", reason: "ir_version (field 1) has the invalid wire type 6 at byte 1"))
        #expect(Self.error([0x00]) == .malformed(path: "t.onnx", context: "model", reason: "field number 0 at byte 0 is outside protobuf's 1...536870911"))
    }

    @Test("A model without a graph")
    func noGraph() {
        #expect(Self.error(Onnx.model(nil)) == .malformed(path: "t.onnx", context: "model", reason: "the model has no graph (ModelProto.graph, field 7)"))
    }

    @Test("Tensors in external files, of types not decoded, with segments")
    func unsupportedTensors() {
        let external = Onnx.tensor("w", type: 1, dims: [4]) {
            $0.message(13, Proto().string(1, "location").string(2, "weights.bin")).varint(14, 1)
        }
        let error = Self.error(Self.withInitializer(external))
        #expect(error == .externalData(path: "t.onnx", tensor: "graph 'g' > initializer 'w'"))
        #expect(error?.description.contains("save_as_external_data=False") == true)
        let strings = Onnx.tensor("w", type: 8, dims: [1]) { $0.string(6, "text") }
        #expect(Self.error(Self.withInitializer(strings)) == .unsupportedDataType(path: "t.onnx", tensor: "graph 'g' > initializer 'w'", type: 8))
        #expect(Self.error(Self.withInitializer(Onnx.tensor("w", type: 99, dims: [])))
                == .unsupportedDataType(path: "t.onnx", tensor: "graph 'g' > initializer 'w'", type: 99))
        #expect(Self.error(Self.withInitializer(Onnx.tensor("w", type: 0, dims: [])))
                == .unsupportedDataType(path: "t.onnx", tensor: "graph 'g' > initializer 'w'", type: 0))
        let segmented = Onnx.floatTensor("w", [1]).message(3, Proto().varint(1, 0).varint(2, 1))
        #expect(Self.error(Self.withInitializer(segmented))
                == .unsupported(path: "t.onnx", context: "graph 'g' > initializer 'w'", feature: "a segmented tensor (TensorProto.segment, field 3)"))
        let sparse = Onnx.graph("g").message(15, Proto())
        #expect(Self.error(Onnx.model(sparse))
                == .unsupported(path: "t.onnx", context: "graph 'g'", feature: "a sparse initializer (GraphProto.sparse_initializer, field 15)"))
    }

    @Test("Values in a field their type does not use; UINT64 above Int64.max")
    func wrongFields() {
        let misplaced = Onnx.tensor("w", type: 7, dims: [1]) { $0.fixed32(4, 0) }
        #expect(Self.error(Self.withInitializer(misplaced))
                == .malformed(path: "t.onnx", context: "graph 'g' > initializer 'w'",
                              reason: "INT64 values in float_data (field 4); they belong in raw_data or int64_data (field 7)"))
        let both = Onnx.floatTensor("w", [1]).fixed32(4, 0)
        #expect(Self.error(Self.withInitializer(both))
                == .malformed(path: "t.onnx", context: "graph 'g' > initializer 'w'", reason: "values in both raw_data (field 9) and float_data (field 4)"))
        let huge = Onnx.tensor("w", type: 13, dims: [2]) { $0.packed(11, [5, .max]) }
        #expect(Self.error(Self.withInitializer(huge))
                == .malformed(path: "t.onnx", context: "graph 'g' > initializer 'w'",
                              reason: "value #1 (18446744073709551615) of this UINT64 tensor is above Int64.max, the largest integer the reader holds"))
    }

    @Test("Packed and unpacked repeated fields read alike; unknown fields of every wire type are skipped")
    func repeatedForms() throws {
        let packedAttributes = [
            Proto().string(1, "floats").varint(20, 6).bytes(7, [Float(1.5), -2].flatMap { littleEndian($0.bitPattern) }),
            Proto().string(1, "ints").varint(20, 7).packed(8, [3, UInt64(bitPattern: -4)]),
        ]
        let unpackedAttributes = [
            Proto().string(1, "floats").varint(20, 6).fixed32(7, Float(1.5).bitPattern).fixed32(7, Float(-2).bitPattern),
            Proto().string(1, "ints").varint(20, 7).varint(8, 3).int(8, -4),
        ]
        let unpackedTensors = [
            Onnx.tensor("f", type: 1, dims: [2]) { $0.fixed32(4, Float(0.5).bitPattern).unknownFields().fixed32(4, Float(-1).bitPattern) },
            Onnx.tensor("i", type: 7, dims: [2]) { $0.int(7, -7).int(7, 1 << 40) },
            Proto().varint(2, 11).fixed64(10, (2.5).bitPattern).string(8, "d").int(1, 1),  // fields in any order
            Onnx.tensor("h", type: 10, dims: [2]) { $0.packed(5, [UInt64(Float16(0.25).bitPattern)]).varint(5, UInt64(Float16(-3).bitPattern)) },
        ]
        for forms in [packedAttributes, unpackedAttributes] {
            let node = Onnx.node("n", "Op", inputs: ["x", ""], outputs: ["y"], attributes: forms).unknownFields()
            let graph = Onnx.graph("g", nodes: [node], initializers: unpackedTensors).unknownFields()
            let model = try OnnxModel(bytes: Proto(bytes: Onnx.model(graph)).unknownFields().bytes, name: "t")
            let read = try #require(model.graph.nodes.first)
            #expect(read.attributes == ["floats": .floats([1.5, -2]), "ints": .ints([3, -4])])
            #expect(read.inputs == ["x", ""])
            #expect(model.graph.initializers.map(\.floats) == [[0.5, -1], nil, [2.5], [0.25, -3]])
            #expect(model.graph.initializers[1].integers == [-7, 1 << 40])
        }
    }

    @Test("Attributes: the type inferred when absent, a value missing, two values, a name twice")
    func attributeForms() throws {
        func node(_ attributes: [Proto]) -> [UInt8] { Onnx.model(Onnx.graph("g", nodes: [Onnx.node("n", "Op", attributes: attributes)])) }
        let untyped = try OnnxModel(bytes: node([Proto().string(1, "a").int(3, 5), Proto().string(1, "b").string(9, "x"),
                                                 Proto().string(1, "c").message(5, Onnx.floatTensor("t", [2]))]), name: "t")
        #expect(untyped.graph.nodes[0].attributes == ["a": .int(5), "b": .strings(["x"]),
                                                      "c": .tensor(OnnxTensor(name: "t", dataType: .float, dims: [1], floats: [2], integers: nil, count: 1))])
        #expect(Self.error(node([Proto().string(1, "a")]))
                == .malformed(path: "t.onnx", context: "graph 'g' > node 'n' (Op) > attribute 'a'", reason: "the attribute has neither a type nor a value"))
        #expect(Self.error(node([Proto().string(1, "a").int(3, 1).fixed32(2, 0)]))
                == .malformed(path: "t.onnx", context: "graph 'g' > node 'n' (Op) > attribute 'a'", reason: "the attribute has no type and sets several values: f, i"))
        #expect(Self.error(node([Proto().string(1, "a").varint(20, 5)]))
                == .malformed(path: "t.onnx", context: "graph 'g' > node 'n' (Op) > attribute 'a'", reason: "type GRAPH without a graph (field 6)"))
        #expect(Self.error(node([Proto().string(1, "a").varint(20, 99)]))
                == .malformed(path: "t.onnx", context: "graph 'g' > node 'n' (Op) > attribute 'a'", reason: "unknown attribute type 99"))
        #expect(Self.error(node([Proto().string(1, "a").int(3, 1), Proto().string(1, "a").int(3, 2)]))
                == .malformed(path: "t.onnx", context: "graph 'g' > node 'n' (Op)", reason: "attribute 'a' appears twice"))
        #expect(Self.error(node([Proto().string(1, "a").varint(20, 11)]))
                == .unsupported(path: "t.onnx", context: "graph 'g' > node 'n' (Op) > attribute 'a'", feature: "a sparse tensor attribute"))
    }

    @Test("Errors deep in subgraphs name the whole way there")
    func locations() {
        let bad = Onnx.tensor("w", type: 1, dims: [3]) { $0.bytes(9, [0]) }
        let inner = Onnx.graph("inner", initializers: [bad])
        let node = Onnx.node("", "Loop", attributes: [Proto().string(1, "body").varint(20, 10).message(11, Onnx.graph("first")).message(11, inner)])
        #expect(Self.error(Onnx.model(Onnx.graph("main", nodes: [Onnx.node("a", "Relu"), node])))
                == .malformed(path: "t.onnx", context: "graph 'main' > node #1 (Loop) > attribute 'body' > graph #1 'inner' > initializer 'w'",
                              reason: "raw_data holds 1 byte; dims [3] of FLOAT need 12"))
    }

    @Test("Strings that are not UTF-8 are read with U+FFFD")
    func invalidUTF8() throws {
        let model = Proto().bytes(2, [0x61, 0xFF, 0xC3]).message(7, Onnx.graph("g")).bytes
        #expect(try OnnxModel(bytes: model, name: "t").producerName == "a\u{FFFD}\u{FFFD}")
    }

    @Test("Files: missing, a folder; error messages name the file")
    func files() throws {
        #expect(throws: OnnxError.fileNotFound(path: "/nonexistent/model.onnx")) { try OnnxModel.read(path: "/nonexistent/model.onnx") }
        let folder = try Repo.temporaryFolder().path
        #expect(throws: OnnxError.cannotRead(path: folder, reason: "it is a folder")) { try OnnxModel.read(path: folder) }
        let errors: [OnnxError] = [
            .fileNotFound(path: "m.onnx"), .cannotRead(path: "m.onnx", reason: "r"), .empty(path: "m.onnx"),
            .truncated(path: "m.onnx", offset: 3, reading: "x"), .malformed(path: "m.onnx", context: "c", reason: "r"),
            .unsupportedDataType(path: "m.onnx", tensor: "t", type: 8), .externalData(path: "m.onnx", tensor: "t"),
            .unsupported(path: "m.onnx", context: "c", feature: "f"), .limit(path: "m.onnx", what: "w", limit: 32),
            .tooManyNodes(path: "m.onnx", count: 2, limit: 1),
        ]
        for error in errors { #expect(error.description.hasPrefix("m.onnx: "), "\(error)") }
        #expect(OnnxError.unsupportedDataType(path: "m", tensor: "t", type: 8).description
                == "m: t: element type 8 (STRING) is not supported; the reader decodes FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, BOOL, FLOAT16, DOUBLE, UINT32, UINT64, BFLOAT16")
    }
}
