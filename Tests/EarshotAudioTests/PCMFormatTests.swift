import EarshotAudio
import EarshotTestSupport
import Testing

@Suite("PCM decoding: the one decoder of a service's chunks, a cluster's entries and a capture's periods")
struct PCMFormatTests {
    /// Integers as `width`-byte little-endian bytes.
    static func bytes(_ values: [Int32], width: Int) -> [UInt8] {
        values.flatMap { v in (0..<width).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
    }

    @Test("Integers of 1 to 4 bytes mix to the mean of a frame's channels, summed exactly; full scale is 2^(8 width - 1)")
    func integersToMono() {
        // Two frames of three channels at each width: extremes, zero, and values whose sum does not fit the width.
        let cases: [(width: Int, values: [Int32], mono: [Float])] = [
            (1, [127, -128, 1, 64, 64, 64], [0, 192.0 / (128 * 3)]),
            (2, [32767, -32768, 0, 16384, 16384, 16385], [-1.0 / (32768 * 3), 49153.0 / (32768 * 3)]),
            (3, [8_388_607, 8_388_607, -8_388_608, 1, 2, 3], [8_388_606.0 / (8_388_608 * 3), 6.0 / (8_388_608 * 3)]),
            (4, [Int32.max, Int32.max, Int32.min, -1, -1, -1], [Float(Double(Int32.max) - 2_147_483_648 + Double(Int32.max)) * (1 / (2_147_483_648 * 3)),
                                                                Float(-3) * (1 / (2_147_483_648 * 3))]),
        ]
        for (width, values, mono) in cases {
            let pcm = PCMFormat(encoding: .integer(bytes: width), channels: 3)
            var out: [Float] = [7]
            Self.bytes(values, width: width).withUnsafeBytes { pcm.appendMono($0, to: &out) }
            #expect(out.count == 3 && out[0] == 7, "width \(width)")
            // Within one unit in the last place: the scale 1 / (full scale × channels) is rounded once.
            for (got, want) in zip(out.dropFirst(), mono) { #expect(abs(got - want) <= want.ulp, "width \(width): \(got) against \(want)") }
        }
        // Mono 16-bit (the vectorized path): exactly v / 32768.
        var mono: [Float] = []
        let values: [Int32] = [-32768, -1, 0, 1, 12345, 32767]
        Self.bytes(values, width: 2).withUnsafeBytes { PCMFormat(encoding: .integer(bytes: 2), channels: 1).appendMono($0, to: &mono) }
        #expect(mono == values.map { Float($0) / 32768 })
    }

    @Test("Floats mix to their sum in channel order times 1 / channels, as AudioFile.readMono mixes a file; one channel is copied")
    func floatsToMono() {
        let frames: [[Float]] = [[0.5, -0.25], [1e-3, 0.75], [-1, 1]]
        let raw = littleEndianBytes(frames.joined().map(\.bitPattern))
        var out: [Float] = []
        raw.withUnsafeBytes { PCMFormat(encoding: .float32, channels: 2).appendMono($0, to: &out) }
        #expect(out == AudioFile.mix([frames.map { $0[0] }, frames.map { $0[1] }]))
        #expect(out == [0.125, (Float(1e-3) + 0.75) * 0.5, 0])
        var one: [Float] = []
        raw.withUnsafeBytes { PCMFormat(encoding: .float32, channels: 1).appendMono($0, to: &one) }
        #expect(one == Array(frames.joined()))
    }

    @Test("Interleaved: every sample kept, as a capture hands them on: s16 / 32768, s32 / 2^31, floats bit for bit")
    func interleaved() {
        let ints: [Int32] = [-32768, 32767, 0, -1, 4096, 77]
        var s16: [Float] = []
        Self.bytes(ints, width: 2).withUnsafeBytes { PCMFormat(encoding: .integer(bytes: 2), channels: 2).appendInterleaved($0, to: &s16) }
        #expect(s16 == ints.map { Float($0) / 32768 })
        let wide: [Int32] = [Int32.min, Int32.max, 0, -1, 123_456_789, 3]
        var s32: [Float] = []
        Self.bytes(wide, width: 4).withUnsafeBytes { PCMFormat(encoding: .integer(bytes: 4), channels: 3).appendInterleaved($0, to: &s32) }
        #expect(s32 == wide.map { Float($0) / 2_147_483_648 })
        let floats: [Float] = [-0.0, .infinity, 0.1, -1e-30, 1, -1]
        var f32: [Float] = []
        littleEndianBytes(floats.map(\.bitPattern)).withUnsafeBytes { PCMFormat(encoding: .float32, channels: 3).appendInterleaved($0, to: &f32) }
        #expect(f32.map(\.bitPattern) == floats.map(\.bitPattern))
    }

    @Test("Only whole frames are read; chunks cut anywhere, their partial frames carried, decode as the whole did")
    func partialFrames() {
        let pcm = PCMFormat(encoding: .integer(bytes: 3), channels: 2)
        let values: [Int32] = (0..<40).map { Int32($0 * 209_715 - 4_000_000) }
        let raw = Self.bytes(values, width: 3)
        var whole: [Float] = []
        raw.withUnsafeBytes { pcm.appendMono($0, to: &whole) }
        #expect(whole.count == 20)
        var cut: [Float] = []
        raw.dropLast(5).withUnsafeBytes { pcm.appendMono($0, to: &cut) }
        #expect(cut == Array(whole.prefix(19)))
        var random = SeededRandom.fromEnvironment()
        var pieces: [Float] = [], carry: [UInt8] = []
        var at = 0
        while at < raw.count {
            let n = min(Int.random(in: 1...13, using: &random), raw.count - at)
            raw[at..<(at + n)].withUnsafeBytes { pcm.appendMono($0, carry: &carry, to: &pieces) }
            at += n
        }
        #expect(pieces == whole && carry.isEmpty, "seed \(random.seed)")
    }
}
