import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotModel

@Suite("safetensors")
struct SafeTensorsTests {
    @Test("F32, F16 and BF16 tensors read as the floats they hold")
    func dtypes() throws {
        let f32: [Float] = [1.5, -2.25, 3e-8, 65504]
        let f16: [Float16] = [0.5, -1.75, 6.1035156e-05, 65504]  // includes the smallest normal and the largest value
        let bf16Bits: [UInt16] = [0x3F80, 0xC040, 0x7F7F]  // 1.0, -3.0, the largest finite bfloat16
        let data = safetensorsData([
            ("a", "F32", [2, 2], littleEndianBytes(f32.map(\.bitPattern))),
            ("b", "F16", [4], littleEndianBytes(f16.map(\.bitPattern))),
            ("c", "BF16", [3, 1], littleEndianBytes(bf16Bits)),
        ])
        let tensors = try SafeTensors.parse(data, path: "t.safetensors")
        #expect(tensors["a"] == Tensor(shape: [2, 2], dtype: "F32", values: f32))
        #expect(tensors["b"] == Tensor(shape: [4], dtype: "F16", values: f16.map(Float.init)))
        #expect(tensors["c"]?.values == [1, -3, Float(bitPattern: 0x7F7F_0000)])
        #expect(tensors.count == 3)  // __metadata__ is not a tensor
    }

    @Test("A header as other writers lay it out reads the same: white space, escaped names, whole numbers written as reals; a header that is no JSON object is refused")
    func headerText() throws {
        let header = " {\n \"__metadata__\": {\"format\": \"pt\", \"nested\": [1, {\"a\": null}]},\n"
            + " \"caf\\u00e9\\t\\\"w\\\"\" : { \"shape\" : [ 2 , 1.0 ], \"dtype\": \"F32\", \"data_offsets\": [0, 8e0] } }"
        var data = Data(littleEndianBytes([UInt64(header.utf8.count)]))
        data += Data(header.utf8) + Data(littleEndianBytes([Float(1.5).bitPattern, Float(-2).bitPattern]))
        #expect(try SafeTensors.parse(data, path: "t") == ["café\t\"w\"": Tensor(shape: [2, 1], dtype: "F32", values: [1.5, -2])])
        for (text, reason) in [("[1, 2]", "header is not a JSON object"), ("{\"w\": ", "header is not JSON"),
                               ("{\"w\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", "tensor 'w': entry lacks dtype, shape or data_offsets")] {
            let bad = Data(littleEndianBytes([UInt64(text.utf8.count)])) + Data(text.utf8) + Data(count: 4)
            #expect(throws: ModelError.safetensors(path: "t", reason: reason), "\(text)") { try SafeTensors.parse(bad, path: "t") }
        }
    }

    @Test("Unknown dtypes and offsets outside the data are refused with the tensor's name")
    func damaged() throws {
        #expect(throws: ModelError.tensorDType(path: "t", name: "x", found: "I64", expected: "F32, F16, BF16")) {
            try SafeTensors.parse(safetensorsData([("x", "I64", [1], [UInt8](repeating: 0, count: 8))]), path: "t")
        }
        var data = safetensorsData([("x", "F32", [3], [UInt8](repeating: 0, count: 12))])
        data.removeLast(4)
        #expect(throws: ModelError.safetensors(path: "t", reason: "tensor 'x': offsets [0, 12] do not hold [3] F32 within 8 data bytes")) {
            try SafeTensors.parse(data, path: "t")
        }
    }

    @Test("A model stored in F16 loads and runs close to its F32 original")
    func halfPrecisionModel() throws {
        let original = Repo.root.appendingPathComponent("Models/silero-vad")
        let folder = try Repo.temporaryFolder().appendingPathComponent("silero-f16")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: original.appendingPathComponent("model.json"), to: folder.appendingPathComponent("model.json"))
        let tensors = try SafeTensors.read(path: original.appendingPathComponent("weights.safetensors").path)
        let converted = tensors.keys.sorted().map { name in
            (name, "F16", tensors[name]!.shape, littleEndianBytes(tensors[name]!.values.map { Float16($0).bitPattern }))
        }
        try safetensorsData(converted).write(to: folder.appendingPathComponent("weights.safetensors"))
        let half = try Model(contentsOf: folder)
        let full = try Model(contentsOf: original)
        #expect(half.contentHash != full.contentHash)
        var random = SeededRandom(seed: 5)
        var a = half.makeState(), b = full.makeState()
        var worst: Float = 0
        for _ in 0..<20 {
            let block = random.gaussian(count: 512, deviation: 0.1)
            worst = max(worst, abs(try half.prediction(from: block, using: &a)[0] - full.prediction(from: block, using: &b)[0]))
        }
        // F16 keeps 11 significant bits (relative rounding 5e-4 per weight): probabilities
        // stay within 0.02 of the F32 model's.
        #expect(worst < 0.02, "max |diff| = \(worst)")
    }
}

@Suite("Damaged inputs are errors, never crashes")
struct DamagedInputTests {
    @Test("A tensor shape whose size overflows is refused")
    func overflowingShape() throws {
        let header = Array("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}".utf8)
        var data = Data(withUnsafeBytes(of: UInt64(header.count).littleEndian, Array.init))
        data += header
        #expect(throws: ModelError.safetensors(path: "t", reason: "tensor 'w': offsets [0, 0] do not hold [4294967296, 4294967296] F32 within 0 data bytes")) {
            try SafeTensors.parse(data, path: "t")
        }
    }

    @Test("A state of another model is refused by a step")
    func badStates() throws {
        let model = try Model(contentsOf: Repo.root.appendingPathComponent("Models/silero-vad"))
        let other = try Model(contentsOf: Repo.root.appendingPathComponent("Models/silero-vad-8k"))
        var state = other.makeState()  // another model's state: its hash and context differ
        #expect(throws: ModelError.stateModelMismatch(expected: model.contentHash, found: other.contentHash)) {
            try model.prediction(from: [Float](repeating: 0, count: 512), using: &state)
        }
        // In a batch: the step is refused and no state moves, its own streams' included.
        let block = [Float](repeating: 0.25, count: 512)
        var states = [model.makeState(), other.makeState(), model.makeState()]
        let before = states
        #expect(throws: ModelError.stateModelMismatch(expected: model.contentHash, found: other.contentHash)) {
            try model.predictions(from: [block, block, block], using: &states)
        }
        #expect(states == before)
        // Equal hashes are the only ones a step takes: the key a step compares is the hash's number.
        #expect(ModelState.key(model.contentHash) != nil && ModelState.key(model.contentHash) != ModelState.key(other.contentHash))
        #expect(ModelState.key(model.contentHash.uppercased()) == nil || model.contentHash == model.contentHash.uppercased())
        #expect(ModelState.key("+" + model.contentHash.dropFirst()) == nil)
        #expect(ModelState.key("0123456789abcdef") == 0x0123_4567_89AB_CDEF)
        #expect(ModelState.key("0123456789ABCDEF") == nil && ModelState.key("0123456789abcde") == nil && ModelState.key("0123456789abcdeg") == nil)
    }
}
