import CSndFile
import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotAudio

@Suite("Audio files that are hostile or unusual")
struct HostileAudioTests {
    /// Writes `bytes` into a pipe from another thread; returns the path of the pipe's read end
    /// (/dev/fd/N), and closes it when `body` returns.
    static func throughPipe<R>(_ bytes: Data, _ body: (String) throws -> R) throws -> R {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw FixtureError(message: "pipe: \(String(cString: strerror(errno)))") }
        let writeEnd = fds[1]
        let writer = Thread {
            bytes.withUnsafeBytes { raw in
                var done = 0
                while done < raw.count {
                    let n = write(writeEnd, raw.baseAddress! + done, raw.count - done)
                    if n <= 0 { break }
                    done += n
                }
            }
            close(writeEnd)
        }
        writer.start()
        defer { close(fds[0]) }
        return try body("/dev/fd/\(fds[0])")
    }

    @Test("An Ogg stream through a pipe has an unknown length, not a truncated one, and reads whole")
    func oggThroughPipe() throws {
        let path = Repo.path("AudioSamples/speech-noise-16k.ogg")
        let whole = try AudioFile.readMono(path: path).samples
        let piped = try Self.throughPipe(try Data(contentsOf: URL(fileURLWithPath: path))) { pipePath -> [Float] in
            let file = try AudioFile(path: pipePath)
            #expect(file.frameCount == nil)
            #expect(file.duration == nil)
            var samples: [Float] = []
            while true {
                let chunk = try file.readMono(maxFrames: 4096)
                if chunk.isEmpty { break }
                samples += chunk
            }
            return samples
        }
        #expect(piped == whole)
    }

    @Test("A file of 1024 channels is read in pieces sized by samples, not frames")
    func manyChannels() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("wide.wav").path
        let channels = 1024, frames = 30  // about 63 KB of 16-bit PCM
        var random = SeededRandom.fromEnvironment()
        let samples = random.gaussian(count: channels * frames, deviation: 0.1).map { max(-0.9, min(0.9, $0)) }
        try writeAudio(path, samples: samples, channels: channels, sampleRate: 16000, format: Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16))
        let file = try AudioFile(path: path)
        #expect(file.channelCount == 1024)
        // Asked for a huge number of frames, a read takes at most maxSamplesPerRead samples.
        let mono = try file.readMono(maxFrames: 262_144)
        #expect(mono.count == frames)
        #expect(file.scratchSamples <= AudioFile.maxSamplesPerRead)
        #expect(file.scratchSamples == min(262_144, AudioFile.maxSamplesPerRead / channels) * channels)
        // Sized by the caller in samples (as FileLabeler does), the scratch is that size.
        let again = try AudioFile(path: path)
        let perChannel = try again.readChannels(maxFrames: 262_144 / channels)
        #expect(perChannel.count == 1024 && perChannel[0].count == frames)
        #expect(again.scratchSamples == 262_144)
    }

    @Test("A pipe that carries nothing is an empty file, not a stream of no audio")
    func emptyPipe() throws {
        #expect(throws: AudioError.self) {
            try Self.throughPipe(Data()) { try AudioFile(path: $0) }
        }
    }
}
