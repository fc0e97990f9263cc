import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotModel

/// Hostile packages and state bytes: each is refused with a typed error naming the reason,
/// never a crash and never a model that runs on garbage.
@Suite("Hostile packages and states")
struct HostileModelTests {
    static let silero = Repo.root.appendingPathComponent("Models/silero-vad")

    /// State bytes with a fresh checksum: what a forger (not a damaged disk) would hand over.
    static func resigned(_ bytes: [UInt8]) -> [UInt8] {
        var out = bytes
        let crc = CRC32C.checksum(Array(out[0..<(out.count - 4)]))
        withUnsafeBytes(of: crc.littleEndian) { for (i, b) in $0.enumerated() { out[out.count - 4 + i] = b } }
        return out
    }

    @Test("CRC-32C gives the standard check value")
    func crcCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
    }

    @Test("A manifest duration that would overflow (padMs 1e18) is refused at load, naming the field")
    func hugeDecisionValues() throws {
        for (field, value) in [("padMs", 1e18), ("minSilenceMs", -1.0), ("maxSegmentSeconds", 1e300), ("threshold", 7.0),
                               ("minSegmentMs", 86_400_001.0)] {
            let folder = try editedPackage { m in
                var decision = m["decision"] as? [String: Any] ?? [:]
                decision[field] = value
                m["decision"] = decision
            }
            defer { try? FileManager.default.removeItem(at: folder) }
            let outcome = Result { () throws(ModelError) in try Model(contentsOf: folder) }
            guard case let .failure(.manifest(path, reason)) = outcome else {
                Issue.record("\(field) \(value): \(outcome)")
                continue
            }
            #expect(path == folder.path)
            #expect(reason.hasPrefix("decision.\(field) \(value) in the model's manifest: expected"), "\(reason)")
        }
    }

    @Test("A sample rate no resampler takes is refused at load")
    func hugeSampleRate() throws {
        let folder = try editedPackage { m in
            var audio = m["audio"] as? [String: Any] ?? [:]
            audio["sampleRate"] = 1 << 40
            m["audio"] = audio
        }
        defer { try? FileManager.default.removeItem(at: folder) }
        #expect(throws: ModelError.self) { try Model(contentsOf: folder) }
    }

    @Test("A state whose step count is Int64.max is refused; a state at the limit steps on without trapping")
    func stepCounter() throws {
        let model = try Model(contentsOf: Self.silero)
        var bytes = model.makeState().serialized()
        for i in 26..<34 { bytes[i] = 0xFF }  // steps sit after "ESTATE", the version (4) and the hash (16)
        bytes[33] = 0x7F  // Int64.max
        #expect(throws: ModelError.stateFormat(reason: "step count 9223372036854775807 exceeds 281474976710656")) {
            try model.restoreState(Self.resigned(bytes))
        }
        var state = model.makeState()
        state.steps = ModelState.maxSteps
        var restored = try model.restoreState(state.serialized())
        _ = try model.prediction(from: [Float](repeating: 0, count: 512), using: &restored)
        _ = try model.predictions(forConsecutive: [[Float]](repeating: [Float](repeating: 0, count: 512), count: 3), using: &restored)
        #expect(restored.steps == ModelState.maxSteps)
    }

    @Test("Every single-bit flip of a serialized state is refused")
    func bitFlips() throws {
        let model = try Model(contentsOf: Self.silero)
        var state = model.makeState()
        var random = SeededRandom.fromEnvironment()
        for _ in 0..<20 { _ = try model.prediction(from: random.gaussian(count: 512, deviation: 0.1), using: &state) }
        let bytes = state.serialized()
        #expect(try model.restoreState(bytes) == state)
        var accepted = 0
        for bit in 0..<(bytes.count * 8) {
            var flipped = bytes
            flipped[bit / 8] ^= 1 << UInt8(bit % 8)
            if (try? model.restoreState(flipped)) != nil { accepted += 1 }
        }
        #expect(accepted == 0, "\(accepted) of \(bytes.count * 8) flips accepted")
    }

    @Test("NaN or infinity in a restored state is refused, even with a valid checksum")
    func nonFiniteState() throws {
        let model = try Model(contentsOf: Self.silero)
        let header = 6 + 4 + 16 + 8 + 4 + 4 + 4  // magic, version, hash, steps, context, carry and code counts
        for (offset, value, place) in [(0, Float.nan, "context value 0"), (64 * 4 + 8, Float.infinity, "carry value 2")] {
            var bytes = model.makeState().serialized()
            withUnsafeBytes(of: value.bitPattern.littleEndian) { for (i, b) in $0.enumerated() { bytes[header + offset + i] = b } }
            #expect(throws: ModelError.stateFormat(reason: "\(place) is \(value): a state holds finite numbers only")) {
                try model.restoreState(Self.resigned(bytes))
            }
        }
    }

    @Test("Tensors that share bytes in the weights file are refused")
    func overlappingTensors() throws {
        let header = Array(#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#.utf8)
        var data = Data(withUnsafeBytes(of: UInt64(header.count).littleEndian, Array.init))
        data += header + [UInt8](repeating: 0, count: 12)
        #expect(throws: ModelError.safetensors(path: "t", reason: "tensors 'a' (bytes 0..<8) and 'b' (bytes 4..<12) overlap")) {
            try SafeTensors.parse(data, path: "t")
        }
        // The same bytes for two names is an overlap too.
        let same = Array(#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#.utf8)
        var twice = Data(withUnsafeBytes(of: UInt64(same.count).littleEndian, Array.init))
        twice += same + [UInt8](repeating: 0, count: 8)
        #expect(throws: ModelError.self) { try SafeTensors.parse(twice, path: "t") }
    }

    @Test("NaN or infinite weights are refused at load, naming the tensor")
    func nonFiniteWeights() throws {
        for (value, text) in [(Float.nan, "nan"), (-Float.infinity, "-inf")] {
            let data = safetensorsData([("w", "F32", [3], littleEndianBytes([Float(1), value, 2].map(\.bitPattern)))])
            #expect(throws: ModelError.safetensors(path: "t", reason: "tensor 'w': value 1 is \(text); weights must be finite numbers")) {
                try SafeTensors.parse(data, path: "t")
            }
        }
        // All-NaN weights in a whole package: refused, not a model that says "speech" everywhere.
        let model = try Model(contentsOf: Self.silero)
        let tensors = try SafeTensors.read(path: Self.silero.appendingPathComponent("weights.safetensors").path)
        var poisoned = tensors
        for (name, t) in tensors { poisoned[name] = Tensor(shape: t.shape, values: [Float](repeating: .nan, count: t.values.count)) }
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try FileManager.default.copyItem(at: Self.silero.appendingPathComponent("model.json"), to: folder.appendingPathComponent("model.json"))
        try SafeTensors.serialize(poisoned).write(to: folder.appendingPathComponent("weights.safetensors"))
        #expect(throws: ModelError.self) { try Model(contentsOf: folder) }
        _ = model
    }

    @Test("A package is written whole or not at all: an existing folder is refused, or replaced without stale files")
    func packageWrite() throws {
        let model = try Model(contentsOf: Self.silero)
        let tensors = try SafeTensors.read(path: Self.silero.appendingPathComponent("weights.safetensors").path)
        let parent = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: parent) }
        let folder = parent.appendingPathComponent("pkg")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try "stale".write(to: folder.appendingPathComponent("stale.txt"), atomically: true, encoding: .utf8)
        #expect(throws: ModelError.cannotWrite(path: folder.path, reason: "a file or folder is there already (replace it explicitly)")) {
            try Model.write(manifest: model.manifest, tensors: tensors, to: folder)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["stale.txt"])
        try Model.write(manifest: model.manifest, tensors: tensors, to: folder, replacing: true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == ["model.json", "weights.safetensors"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: parent.path) == ["pkg"])  // no temporary folder left
        #expect(try SafeTensors.read(path: folder.appendingPathComponent("weights.safetensors").path) == tensors)
        #expect(try Model(contentsOf: folder).manifest == model.manifest)
    }
}
