import CSndFile
import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotAudio

/// Three different tones on three channels, interleaved.
func threeChannelSignal(frames: Int, sampleRate: Int) -> [Float] {
    let tones = [220.0, 440.0, 1000.0].map { sine(frequency: $0, sampleRate: Double(sampleRate), count: frames, amplitude: 0.3) }
    return (0..<frames).flatMap { f in tones.map { $0[f] } }
}

@Suite("AudioFile")
struct AudioFileTests {
    static let formats: [(name: String, ext: String, format: Int32, tolerance: Float)] = [
        // PCM quantisation: half a step of the format (1 / 2^bits).
        ("WAV PCM 16", "wav", Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16), 1.0 / 32768),
        ("WAV PCM 24", "wav", Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_24), 1.0 / 8_388_608),
        ("WAV PCM 32", "wav", Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_32), 1e-7),
        ("WAV float", "wav", Int32(SF_FORMAT_WAV | SF_FORMAT_FLOAT), 0),
        ("FLAC 16", "flac", Int32(SF_FORMAT_FLAC | SF_FORMAT_PCM_16), 1.0 / 32768),
        ("FLAC 24", "flac", Int32(SF_FORMAT_FLAC | SF_FORMAT_PCM_24), 1.0 / 8_388_608),
        ("AIFF 16", "aiff", Int32(SF_FORMAT_AIFF | SF_FORMAT_PCM_16), 1.0 / 32768),
        // Vorbis is lossy: at its default quality these tones come back within 5% of full scale
        // (measured 2.6%).
        ("Ogg Vorbis", "ogg", Int32(SF_FORMAT_OGG | SF_FORMAT_VORBIS), 0.05),
    ]

    @Test("Every format reads back its samples: rate, channels, frames, values", arguments: 0..<formats.count)
    func roundTrip(_ index: Int) throws {
        let f = Self.formats[index]
        let folder = try Repo.temporaryFolder()
        let path = folder.appendingPathComponent("three.\(f.ext)").path
        let frames = 22050
        let signal = threeChannelSignal(frames: frames, sampleRate: 22050)
        try writeAudio(path, samples: signal, channels: 3, sampleRate: 22050, format: f.format)

        let file = try AudioFile(path: path)
        #expect(file.sampleRate == 22050)
        #expect(file.channelCount == 3)
        #expect(file.frameCount == frames)
        var channels: [[Float]] = [[], [], []]
        while true {
            let chunk = try file.readChannels(maxFrames: 1000)
            if chunk[0].isEmpty { break }
            for c in 0..<3 { channels[c] += chunk[c] }
        }
        for c in 0..<3 {
            let expected = (0..<frames).map { signal[$0 * 3 + c] }
            let error = maxAbsDifference(channels[c], expected)
            #expect(error <= f.tolerance, "\(f.name) channel \(c): max |diff| = \(error)")
        }
    }

    @Test("Mixdown is the mean of the channels; one channel alone is that channel; any chunking equals whole")
    func channelModesAndChunking() throws {
        let folder = try Repo.temporaryFolder()
        let path = folder.appendingPathComponent("three.wav").path
        let frames = 10_007
        let signal = threeChannelSignal(frames: frames, sampleRate: 16000)
        try writeAudio(path, samples: signal, channels: 3, sampleRate: 16000, format: Int32(SF_FORMAT_WAV | SF_FORMAT_FLOAT))

        let whole = try AudioFile(path: path).readInterleaved(maxFrames: frames + 10)
        #expect(whole == signal)
        var random = SeededRandom.fromEnvironment()
        let file = try AudioFile(path: path)
        var mono: [Float] = []
        for size in random.chunkSizes(total: frames + 100, maxChunk: 1500) {
            mono += try file.readMono(maxFrames: size)
        }
        let expectedMono: [Float] = (0..<frames).map { f in
            let sum: Float = signal[f * 3] + signal[f * 3 + 1] + signal[f * 3 + 2]
            return sum / 3
        }
        #expect(maxAbsDifference(mono, expectedMono) <= 1e-7, "seed \(random.seed)")

        let second = try AudioFile(path: path)
        var channel1: [Float] = []
        for size in random.chunkSizes(total: frames, maxChunk: 999) {
            channel1 += try second.readChannel(1, maxFrames: size)
        }
        #expect(channel1 == (0..<frames).map { signal[$0 * 3 + 1] }, "seed \(random.seed)")
        #expect(try second.readChannel(1, maxFrames: 10).isEmpty)
        #expect(throws: AudioError.channelOutOfRange(path: path, channel: 3, channelCount: 3)) {
            try second.readChannel(3, maxFrames: 10)
        }
    }

    @Test("The bundled samples: FLAC equals WAV exactly, Ogg within Vorbis' loss")
    func bundledSamples() throws {
        let wav = try AudioFile.readMono(path: Repo.path("AudioSamples/speech-noise-16k.wav"))
        let flac = try AudioFile.readMono(path: Repo.path("AudioSamples/speech-noise-16k.flac"))
        let ogg = try AudioFile.readMono(path: Repo.path("AudioSamples/speech-noise-16k.ogg"))
        #expect(wav.sampleRate == 16000)
        #expect(wav.samples.count == 583_984)  // 36.499 s, see AudioSamples/README.md
        #expect(flac.samples == wav.samples)
        #expect(ogg.samples.count == wav.samples.count)
        // Vorbis coding error: RMS below -35 dBFS (measured -39 dBFS; the signal is about -20 dBFS).
        let noise = zip(ogg.samples, wav.samples).reduce(0) { $0 + Double(($1.0 - $1.1) * ($1.0 - $1.1)) }
        #expect(10 * log10(noise / Double(wav.samples.count)) < -35)
        let stereo = try AudioFile(path: Repo.path("AudioSamples/stereo-16k.wav"))
        #expect(stereo.channelCount == 2)
    }
}

@Suite("AudioFile errors")
struct AudioFileErrorTests {
    @Test("A missing file names its path")
    func missing() {
        #expect(throws: AudioError.fileNotFound(path: "/no/such/file.wav")) { try AudioFile(path: "/no/such/file.wav") }
    }

    @Test("A folder is refused as one")
    func folder() throws {
        let folder = try Repo.temporaryFolder().path
        #expect(throws: AudioError.cannotOpen(path: folder, reason: "it is a folder")) { try AudioFile(path: folder) }
    }

    @Test("A text file is not audio, with libsndfile's reason")
    func notAudio() throws {
        let path = try Repo.temporaryFolder().appendingPathComponent("notes.wav").path
        try Data("these are notes, not sound\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: AudioError.notAudio(path: path, reason: "Format not recognised.")) { try AudioFile(path: path) }
    }

    @Test("A WAV cut short reports the frames announced and the frames present")
    func truncatedWAV() throws {
        let folder = try Repo.temporaryFolder()
        let path = folder.appendingPathComponent("whole.wav").path
        try writeAudio(path, samples: sine(frequency: 440, sampleRate: 16000, count: 32000), channels: 1,
                       sampleRate: 16000, format: Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16))
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let cut = folder.appendingPathComponent("cut.wav").path
        try data.prefix(30000).write(to: URL(fileURLWithPath: cut))
        // 44-byte header, 2 bytes a frame: (30000 - 44) / 2 = 14978 frames remain of 32000.
        #expect(throws: AudioError.truncated(path: cut, expectedFrames: 32000, availableFrames: 14978)) {
            try AudioFile(path: cut)
        }
    }

    @Test("A FLAC cut short fails while reading, naming how far it got")
    func truncatedFLAC() throws {
        let folder = try Repo.temporaryFolder()
        let path = folder.appendingPathComponent("whole.flac").path
        var random = SeededRandom(seed: 7)
        try writeAudio(path, samples: random.gaussian(count: 32000, deviation: 0.1), channels: 1, sampleRate: 16000,
                       format: Int32(SF_FORMAT_FLAC | SF_FORMAT_PCM_16))
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        let cut = folder.appendingPathComponent("cut.flac").path
        try data.prefix(data.count / 2).write(to: URL(fileURLWithPath: cut))
        let file = try AudioFile(path: cut)
        #expect(file.frameCount == 32000)
        var caught: AudioError?
        do {
            while try !file.readMono(maxFrames: 4096).isEmpty {}
        } catch {
            caught = error
        }
        guard case let .truncated(errorPath, expected, available) = caught else {
            Issue.record("expected .truncated, got \(String(describing: caught))")
            return
        }
        #expect(errorPath == cut)
        #expect(expected == 32000)
        #expect(available == file.position)
        #expect(available > 0 && available < 32000)
    }

    @Test("A file with a header and no audio is empty")
    func empty() throws {
        let path = try Repo.temporaryFolder().appendingPathComponent("empty.wav").path
        try writeAudio(path, samples: [], channels: 1, sampleRate: 16000, format: Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16))
        #expect(throws: AudioError.empty(path: path)) { try AudioFile(path: path) }
    }

    @Test("An AIFF-C with an unknown codec is an unsupported encoding")
    func unsupportedEncoding() throws {
        let path = try Repo.temporaryFolder().appendingPathComponent("odd.aifc").path
        try Self.aifc(compression: "XYZW").write(to: URL(fileURLWithPath: path))
        #expect(throws: AudioError.unsupportedEncoding(path: path, reason: "File contains data in an unimplemented format.")) {
            try AudioFile(path: path)
        }
    }

    @Test("An Ogg file cut inside its header is malformed")
    func malformed() throws {
        let folder = try Repo.temporaryFolder()
        let data = try Data(contentsOf: URL(fileURLWithPath: Repo.path("AudioSamples/speech-noise-16k.ogg")))
        let cut = folder.appendingPathComponent("cut.ogg").path
        try data.prefix(3000).write(to: URL(fileURLWithPath: cut))
        #expect(throws: AudioError.malformed(path: cut, reason: "Supported file format but file is malformed.")) {
            try AudioFile(path: cut)
        }
    }

    /// A minimal AIFF-C file (mono, 16 bit, 8 kHz, 100 frames) with the given compression type.
    static func aifc(compression: String) -> Data {
        func be32(_ v: UInt32) -> [UInt8] { withUnsafeBytes(of: v.bigEndian, Array.init) }
        func be16(_ v: UInt16) -> [UInt8] { withUnsafeBytes(of: v.bigEndian, Array.init) }
        // 80-bit extended 8000.0: exponent 0x400B, mantissa 0xFA00...
        let rate: [UInt8] = [0x40, 0x0B, 0xFA, 0, 0, 0, 0, 0, 0, 0]
        let comm = be16(1) + be32(100) + be16(16) + rate + Array(compression.utf8) + [0, 0]
        let ssnd = be32(0) + be32(0) + [UInt8](repeating: 0, count: 200)
        var body = Array("AIFC".utf8) + Array("FVER".utf8) + be32(4) + be32(0xA280_5140)
        body += Array("COMM".utf8) + be32(UInt32(comm.count)) + comm
        body += Array("SSND".utf8) + be32(UInt32(ssnd.count)) + ssnd
        return Data(Array("FORM".utf8) + be32(UInt32(body.count)) + body)
    }
}
