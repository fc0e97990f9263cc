import EarshotAudio
import EarshotFeatures
import EarshotTestSupport
import Foundation
import Testing

/// TensorFlow Lite Micro's audio front end against pymicro-features (what pymicro-wakeword feeds
/// microWakeWord's models): every value of every frame equal, on a recording of speech and on
/// signals at the front end's edges (tools/microfrontend_reference.py, tools/microwakeword_reference.py).
@Suite("TFLite Micro's audio front end against pymicro-features")
struct MicroFrontendTests {
    static func littleEndian<T: FixedWidthInteger>(_ path: String, as: T.Type) throws -> [T] {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        return data.withUnsafeBytes { raw in
            (0..<(data.count / MemoryLayout<T>.size)).map { T(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * MemoryLayout<T>.size, as: T.self)) }
        }
    }

    /// Frames of `samples` as pymicro-features makes them: one per 160 new samples once 480 are in.
    static func frames(_ samples: [Int16], path: MicroFrontend.Path? = nil) -> [UInt16] {
        var noise = [UInt32](repeating: 0, count: MicroFrontend.channels)
        var out: [UInt16] = []
        var frame = [UInt16](repeating: 0, count: MicroFrontend.channels)
        var start = 0
        while start + MicroFrontend.windowSamples <= samples.count {
            samples.withUnsafeBufferPointer { s in
                if let path {
                    MicroFrontend.frame(s.baseAddress! + start, noise: &noise, into: &frame, path: path)
                } else {
                    MicroFrontend.frame(s.baseAddress! + start, noise: &noise, into: &frame)
                }
            }
            out += frame
            start += MicroFrontend.stepSamples
        }
        return out
    }

    @Test("Edge signals: silence, full-scale square and sine, noise, tiny noise, a jump in level, a chirp (each path the CPU has)",
          arguments: ["silence", "square", "sine", "noise", "tiny", "jump", "chirp"])
    func edges(_ name: String) throws {
        let folder = Repo.path("Tests/EarshotFeaturesTests/Goldens/microfrontend")
        let samples = try Self.littleEndian("\(folder)/\(name).s16", as: Int16.self)
        let expected = try Self.littleEndian("\(folder)/\(name).u16", as: UInt16.self)
        #expect(expected.count == 98 * 40)
        for path in MicroFrontend.paths {  // each path the CPU has
            let got = Self.frames(samples, path: path)
            #expect(got.count == expected.count)
            let differing = zip(got, expected).filter { $0 != $1 }.count
            #expect(differing == 0, "\(name) on \(path): \(differing) of \(expected.count) values differ")
        }
    }

    @Test("Sixteen streams at once (one per vector lane), on each path the CPU has: each the edge signal's reference, or the recording's frames alone, bit for bit",
          arguments: MicroFrontend.paths)
    func lanes(_ path: MicroFrontend.Path) throws {
        let folder = Repo.path("Tests/EarshotFeaturesTests/Goldens/microfrontend")
        let names = ["silence", "square", "sine", "noise", "tiny", "jump", "chirp"]
        var signals = try names.map { try Self.littleEndian("\(folder)/\($0).s16", as: Int16.self) }
        var expected = try names.map { try Self.littleEndian("\(folder)/\($0).u16", as: UInt16.self) }
        let (audio, _) = try AudioFile.readMono(path: Repo.path("Tests/EarshotTests/Goldens/microwakeword/wake-words.wav"))
        let recording = audio.map { Int16(($0 * 32768).rounded()) }
        let length = signals[0].count
        for l in names.count..<MicroFrontend.lanes {
            let part = Array(recording[(l * 7_919)..<(l * 7_919 + length)])
            signals.append(part)
            expected.append(Self.frames(part))
        }
        let lanes = MicroFrontend.lanes, channels = MicroFrontend.channels, frames = expected[0].count / channels
        #expect(frames == 98 && expected.allSatisfy { $0.count == frames * channels })
        var noise = [UInt32](repeating: 0, count: lanes * channels), out = [UInt16](repeating: 0, count: lanes * channels)
        var got = [[UInt16]](repeating: [], count: lanes)
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: MicroFrontend.lanesScratchBytes, alignment: 64)
        defer { scratch.deallocate() }
        let copies = signals.map { s in
            let p = UnsafeMutablePointer<Int16>.allocate(capacity: s.count)
            p.initialize(from: s, count: s.count)
            return p
        }
        defer { copies.forEach { $0.deallocate() } }
        for f in 0..<frames {
            let pointers: [UnsafePointer<Int16>?] = copies.map { UnsafePointer($0 + f * MicroFrontend.stepSamples) }
            pointers.withUnsafeBufferPointer { MicroFrontend.frames(lanes: $0.baseAddress!, noise: &noise, into: &out, scratch: scratch, path: path) }
            for l in 0..<lanes { got[l] += (0..<channels).map { out[$0 * lanes + l] } }
        }
        for l in 0..<lanes {
            let differing = zip(got[l], expected[l]).filter { $0 != $1 }.count
            #expect(differing == 0, "lane \(l): \(differing) of \(expected[l].count) values differ")
        }
    }

    @Test("Any noise estimates (a restored state may hold any 32-bit values, up to 2^32 - 1): on each path, one stream and sixteen at once, the plain C path's values and estimates",
          arguments: MicroFrontend.paths)
    func anyEstimates(_ path: MicroFrontend.Path) throws {
        let (audio, _) = try AudioFile.readMono(path: Repo.path("Tests/EarshotTests/Goldens/microwakeword/wake-words.wav"))
        let recording = audio.map { Int16(($0 * 32768).rounded()) }
        let lanes = MicroFrontend.lanes, channels = MicroFrontend.channels
        let edges: [UInt32] = [0, 1, 2, 3, 4, 5, 1023, 1 << 26, (1 << 31) - 1, 1 << 31, UInt32.max - 1, UInt32.max]
        var random = SeededRandom(seed: 29)
        var start = [UInt32](repeating: 0, count: lanes * channels)
        for k in start.indices {
            start[k] = k < edges.count * 4 ? edges[k % edges.count] >> UInt32(k / edges.count * 2) : UInt32.random(in: 0...UInt32.max, using: &random) >> UInt32.random(in: 0...31, using: &random)
        }
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: MicroFrontend.lanesScratchBytes, alignment: 64)
        defer { scratch.deallocate() }
        try recording.withUnsafeBufferPointer { r in
            let base = try #require(r.baseAddress)
            var noise = start, out = [UInt16](repeating: 0, count: lanes * channels)
            // Lane l is stream l: its estimates are channels l, l + lanes, ... of `noise`.
            var alone = (0..<lanes).map { l in (0..<channels).map { start[$0 * lanes + l] } }
            for f in 0..<6 {
                let samples = (0..<lanes).map { l in base + (l * 7_919 + f * MicroFrontend.stepSamples) }
                let pointers: [UnsafePointer<Int16>?] = samples
                pointers.withUnsafeBufferPointer { MicroFrontend.frames(lanes: $0.baseAddress!, noise: &noise, into: &out, scratch: scratch, path: path) }
                for l in 0..<lanes {
                    var frame = [UInt16](repeating: 0, count: channels), reference = frame
                    var one = alone[l]
                    MicroFrontend.frame(samples[l], noise: &alone[l], into: &reference, path: .portable)
                    MicroFrontend.frame(samples[l], noise: &one, into: &frame, path: path)
                    #expect(frame == reference && one == alone[l], "one stream, lane \(l), frame \(f) on \(path)")
                    #expect((0..<channels).map { out[$0 * lanes + l] } == reference, "lane \(l), frame \(f) on \(path)")
                    #expect((0..<channels).map { noise[$0 * lanes + l] } == alone[l], "lane \(l)'s estimates, frame \(f) on \(path)")
                }
            }
        }
    }

    @Test("A recording of speech and wake phrases: the features microWakeWord's reference run took (each path the CPU has)")
    func recording() throws {
        let goldens = Repo.path("Tests/EarshotTests/Goldens/microwakeword")
        let (audio, rate) = try AudioFile.readMono(path: goldens + "/wake-words.wav")
        #expect(rate == 16000)
        let samples = audio.map { Int16(($0 * 32768).rounded()) }
        let expected = try Reference.float32(goldens + "/features.f32")
        #expect(expected.count > 60_000)
        for path in MicroFrontend.paths {  // each path the CPU has
            let got = Self.frames(samples, path: path).map { Float($0) * MicroFrontend.featureScale }
            #expect(got.count == expected.count)
            let differing = zip(got, expected).filter { $0 != $1 }.count
            #expect(differing == 0, "on \(path): \(differing) of \(expected.count) values differ")
        }
    }
}
