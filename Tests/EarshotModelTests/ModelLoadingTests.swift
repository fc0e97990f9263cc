import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotModel

func editLayer(_ index: Int, _ manifest: inout [String: Any], _ edit: (inout [String: Any]) -> Void) {
    var network = manifest["network"] as? [[String: Any]] ?? []
    edit(&network[index])
    manifest["network"] = network
}

@Suite("Model loading checks everything before any audio")
struct ModelLoadingTests {
    @Test("A missing folder is named")
    func missing() {
        #expect(throws: ModelError.notFound(folder: "/no/such/model", file: nil)) {
            try Model(contentsOf: URL(fileURLWithPath: "/no/such/model"))
        }
    }

    @Test("A folder without model.json or weights.safetensors is not found as a package, naming the folder and the file")
    func notAPackage() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        #expect(throws: ModelError.notFound(folder: folder.path, file: "model.json")) { try Model(contentsOf: folder) }
        try Data(contentsOf: Repo.root.appendingPathComponent("Models/silero-vad/model.json")).write(to: folder.appendingPathComponent("model.json"))
        #expect(throws: ModelError.notFound(folder: folder.path, file: "weights.safetensors")) { try Model(contentsOf: folder) }
        #expect(ModelError.notFound(folder: "/m", file: "model.json").description
                == "no model.json in /m: not a model package (a package holds model.json and weights.safetensors; earshot import and earshot train write one)")
    }

    @Test("Another format version is refused")
    func formatVersion() throws {
        let folder = try editedPackage { $0["formatVersion"] = 99 }
        #expect(throws: ModelError.unsupportedFormat(path: folder.path, found: "earshot-model v99", expected: "earshot-model v1")) {
            try Model(contentsOf: folder)
        }
    }

    @Test("An unknown layer type names its index and type")
    func unknownLayer() throws {
        let folder = try editedPackage { m in
            var network = m["network"] as? [[String: Any]] ?? []
            network.insert(["type": "attention"], at: 2)
            m["network"] = network
        }
        #expect(throws: ModelError.unknownLayer(path: folder.path, index: 2, type: "attention")) { try Model(contentsOf: folder) }
    }

    @Test("A tensor the weights lack names the layer and the tensor")
    func missingTensor() throws {
        let folder = try editedPackage { editLayer(2, &$0) { $0["weight"] = "encoder.1.kernel" } }
        #expect(throws: ModelError.missingTensor(path: folder.path, layer: "encoder.1", tensor: "encoder.1.kernel")) {
            try Model(contentsOf: folder)
        }
    }

    @Test("A tensor of the wrong shape names what was expected and found")
    func wrongShape() throws {
        let folder = try editedPackage { editLayer(2, &$0) { $0["outChannels"] = 65 } }
        #expect(throws: ModelError.tensorShape(path: folder.path, layer: "encoder.1", name: "encoder.1.weight",
                                               expected: [65, 128, 3], found: [64, 128, 3])) {
            try Model(contentsOf: folder)
        }
    }

    @Test("Tensors no layer uses are refused")
    func unused() throws {
        let folder = try editedPackage { m in
            var network = m["network"] as? [[String: Any]] ?? []
            network.removeLast()
            m["network"] = network
        }
        #expect(throws: ModelError.unusedTensors(path: folder.path, names: ["decoder.out.bias", "decoder.out.weight"])) {
            try Model(contentsOf: folder)
        }
    }

    @Test("Layers that do not chain are refused with the reason")
    func chaining() throws {
        let folder = try editedPackage { editLayer(0, &$0) { $0["inChannels"] = 128 } }
        #expect(throws: ModelError.layer(path: folder.path, layer: "encoder.0", reason: "inChannels 128, but its input has 129 channels")) {
            try Model(contentsOf: folder)
        }
    }

    @Test("Truncated or garbage weights and a broken manifest are errors, not crashes")
    func damagedFiles() throws {
        let folder = try editedPackage { _ in }
        let weights = folder.appendingPathComponent("weights.safetensors")
        let data = try Data(contentsOf: weights)
        try data.prefix(1000).write(to: weights)
        #expect(throws: ModelError.safetensors(path: weights.path, reason: "header length 1400 exceeds the file (1000 bytes)")) {
            try Model(contentsOf: folder)
        }
        try data.prefix(data.count - 10).write(to: weights)
        #expect(throws: ModelError.self) { try Model(contentsOf: folder) }
        var random = SeededRandom(seed: 11)
        try Data((0..<4096).map { _ in UInt8.random(in: 0...255, using: &random) }).write(to: weights)
        #expect(throws: ModelError.self) { try Model(contentsOf: folder) }
        try Data([1, 2, 3]).write(to: weights)
        #expect(throws: ModelError.safetensors(path: weights.path, reason: "3 bytes: shorter than the 8-byte header length")) {
            try Model(contentsOf: folder)
        }
        let manifest = folder.appendingPathComponent("model.json")
        try Data("{\"format\": \"earshot-model\"".utf8).write(to: manifest)
        #expect(throws: ModelError.self) { try Model(contentsOf: folder) }
        try Data("{\"format\": \"earshot-model\", \"formatVersion\": 1}".utf8).write(to: manifest)
        #expect(throws: ModelError.manifest(path: manifest.path, reason: "missing field 'name'")) { try Model(contentsOf: folder) }
    }

    @Test("The description states sizes, counts and costs")
    func description() throws {
        let model = try Model(contentsOf: Repo.root.appendingPathComponent("Tests/Fixtures/silero-vad-layers"))
        let d = model.description
        #expect(d.stateBytesPerStream == (64 + 2 * 128) * 4)
        #expect(d.parameterCount == 243_585)  // every stored tensor's values
        #expect(d.layerCounts == ["conv1d": 5, "relu": 5, "lstm": 1])
        // conv 129->128 k3 over 4 steps + 128->64 k3 s2 (2) + 64->64 s2 (1) + 64->128 (1) + LSTM + 1x1 out
        #expect(d.multiplyAddsPerStep == 4 * 128 * 129 * 3 + 2 * 64 * 128 * 3 + 64 * 64 * 3 + 128 * 64 * 3 + 4 * 128 * 256 + 128)
        #expect(d.labels == ["speech"])
        #expect(d.sampleRate == 16000 && d.chunkSamples == 512 && d.contextSamples == 64)
    }

    @Test("The store loads a folder once and hands out the same model until it is unloaded")
    func store() async throws {
        let store = ModelStore()
        let folder = Repo.root.appendingPathComponent("Models/silero-vad")
        async let a = store.model(at: folder)
        async let b = store.model(at: folder)
        let (first, second) = try await (a, b)
        #expect(first === second)
        await store.unload(folder)
        let third = try await store.model(at: folder)
        #expect(third !== first)
        #expect(third.contentHash == first.contentHash)
        await #expect(throws: ModelError.notFound(folder: "/no/model", file: nil)) {
            try await store.model(at: URL(fileURLWithPath: "/no/model"))
        }
    }
}
