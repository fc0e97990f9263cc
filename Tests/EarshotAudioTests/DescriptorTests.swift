import CSndFile
import EarshotTestSupport
import Foundation
import Testing

@testable import EarshotAudio

/// A pipe whose writing end a thread fills with `bytes` (then closes); returns the reading end.
/// `pauseAfter`: the writer stops after that many bytes until `resume` is signalled (or 20 s
/// pass), then writes the rest.
private func pipeFeeding(_ bytes: [UInt8], pauseAfter: Int? = nil, resume: DispatchSemaphore? = nil) -> Int32 {
    var ends: [Int32] = [0, 0]
    _ = pipe(&ends)
    let writer = ends[1]
    Thread {
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
        let split = min(pauseAfter ?? bytes.count, bytes.count)
        _ = AudioFile.writeAll(bytes[0..<split], to: writer)
        if let resume { _ = resume.wait(timeout: .now() + 20) }
        _ = AudioFile.writeAll(bytes[split...], to: writer)
        close(writer)
    }.start()
    return ends[0]
}

private func readAll(_ file: AudioFile) throws -> [Float] {
    var all: [Float] = []
    while true {
        let chunk = try file.readMono(maxFrames: 4096)
        if chunk.isEmpty { return all }
        all += chunk
    }
}

@Suite("Audio from a descriptor: standard input, a pipe")
struct DescriptorTests {
    @Test("WAV, AIFF, AU and Ogg through a pipe give the file's samples; FLAC too, held in a file that has no name",
          arguments: [("wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16), ("aiff", SF_FORMAT_AIFF | SF_FORMAT_PCM_16),
                      ("au", SF_FORMAT_AU | SF_FORMAT_PCM_16), ("ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS),
                      ("flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16), ("caf", SF_FORMAT_CAF | SF_FORMAT_PCM_16)])
    func throughAPipe(_ ext: String, _ format: Int) throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("tone.\(ext)").path
        try writeAudio(path, samples: sine(frequency: 440, sampleRate: 16000, count: 40000, amplitude: 0.3), channels: 1, sampleRate: 16000,
                       format: Int32(format))
        let expected = try AudioFile.readMono(path: path).samples
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let spool = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: spool) }
        let fd = pipeFeeding(bytes)
        defer { close(fd) }
        let file = try AudioFile(descriptor: fd, name: "-", temporaryFolder: spool.path)
        #expect(file.path == "-" && file.sampleRate == 16000 && file.channelCount == 1)
        // Nothing with a name holds the stream, while it is read or after.
        let during = try FileManager.default.contentsOfDirectory(atPath: spool.path)
        #expect(during.isEmpty, "\(during)")
        let got = try readAll(file)
        #expect(got == expected, "\(ext): \(got.count) samples, expected \(expected.count)")
        #expect(AudioFile.readsFromPipe(Array(bytes.prefix(16))) == ["wav", "aiff", "au", "ogg"].contains(ext))
    }

    @Test("A WAV stream is read as it arrives: its first samples come before the writer has finished")
    func readAsItArrives() throws {
        let samples = sine(frequency: 440, sampleRate: 16000, count: 160_000, amplitude: 0.3)
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("tone.wav").path
        try writeAudio(path, samples: samples, channels: 1, sampleRate: 16000, format: Int32(SF_FORMAT_WAV | SF_FORMAT_PCM_16))
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        let resume = DispatchSemaphore(value: 0)
        // A third of the stream, then the writer waits for the reader to have read some.
        let fd = pipeFeeding(bytes, pauseAfter: bytes.count / 3, resume: resume)
        defer { close(fd) }
        let started = Date()
        let file = try AudioFile(descriptor: fd, temporaryFolder: folder.path)
        let first = try file.readMono(maxFrames: 16000)
        let waited = Date().timeIntervalSince(started)
        resume.signal()
        #expect(first.count == 16000 && waited < 10, "the first second took \(waited) s: the reader waited for the stream's end")
        let rest = try readAll(file)
        let whole = try AudioFile.readMono(path: path).samples
        #expect(first + rest == whole)
    }

    @Test("Raw PCM (s16, s32, float; interleaved channels) is read as it arrives")
    func rawPCM() throws {
        let values: [Int16] = [0, 16384, -16384, 32767, -32768, 1, -1, 100]
        let s16 = try AudioFile(descriptor: pipeFeeding(littleEndianBytes(values)), raw: RawPCMFormat(sampleRate: 8000))
        #expect(s16.sampleRate == 8000 && s16.frameCount == nil)
        #expect(try readAll(s16) == values.map { Float($0) / 32768 })
        let floats: [Float] = [0.5, -0.25, 0.125, 1]
        let stereo = try AudioFile(descriptor: pipeFeeding(littleEndianBytes(floats.map(\.bitPattern))),
                                   raw: RawPCMFormat(sampleRate: 16000, channelCount: 2, encoding: .float))
        let channels = try stereo.readChannels(maxFrames: 10)
        #expect(stereo.channelCount == 2 && channels == [[0.5, 0.125], [-0.25, 1]])
        let s32 = try AudioFile(descriptor: pipeFeeding(littleEndianBytes([Int32.min, 1 << 30])), raw: RawPCMFormat(sampleRate: 16000, encoding: .s32))
        #expect(try readAll(s32) == [-1, 0.5])
    }

    @Test("A stream that must be held is held up to the limit, then refused; an empty one is empty")
    func limits() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("tone.flac").path
        try writeAudio(path, samples: sine(frequency: 440, sampleRate: 16000, count: 160_000, amplitude: 0.3), channels: 1, sampleRate: 16000,
                       format: Int32(SF_FORMAT_FLAC | SF_FORMAT_PCM_16))
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        #expect(bytes.count > 50_000)
        #expect(throws: AudioError.tooLarge(path: "-", limitBytes: 50_000,
                                            reason: "a format that cannot be read from a pipe is held in a temporary file first")) {
            _ = try AudioFile(descriptor: pipeFeeding(bytes), spoolLimit: 50_000, temporaryFolder: folder.path)
        }
        #expect(throws: AudioError.empty(path: "stdin")) { _ = try AudioFile(descriptor: pipeFeeding([]), name: "stdin") }
        // A regular file on the descriptor (`< file.flac`) is read in place.
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        let inPlace = try readAll(try AudioFile(descriptor: fd, spoolLimit: 10))
        let expected = try AudioFile.readMono(path: path).samples
        #expect(inPlace == expected)
    }
}
