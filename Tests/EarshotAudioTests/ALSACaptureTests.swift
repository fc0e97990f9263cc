import EarshotTestSupport
import Foundation
import Synchronization
import Testing

@testable import EarshotAudio

extension FilePCM {
    static func settings(name: String, samples: [Float], channels: Int = 1, rate: Int = 16000) throws -> ALSACapture.Settings {
        var s = ALSACapture.Settings()
        s.device = name
        s.channels = channels
        s.sampleRate = rate
        s.configuration = try configuration(name: name, samples: samples)
        s.maxFrames = samples.count / channels
        // The file PCM delivers as fast as it is read, far faster than real time: queue the
        // whole file so that nothing is dropped (tests of dropping set this lower).
        s.queuedFrames = samples.count / channels + 16000
        return s
    }
}

@Suite("ALSA capture (file PCM, no hardware)")
struct ALSACaptureTests {
    @Test("Captured frames equal the file's, in order, split into periods")
    func capturesTheFile() async throws {
        var random = SeededRandom(seed: 9)
        let signal = random.gaussian(count: 20_000, deviation: 0.2).map { max(-1, min($0, 0.99)) }
        let capture = try ALSACapture(FilePCM.settings(name: "earshot_test", samples: signal))
        #expect(capture.periodFrames > 0 && capture.bufferFrames >= capture.periodFrames)
        var got: [Float] = []
        var nextFrame = 0
        for try await chunk in capture.chunks() {
            #expect(chunk.firstFrame == nextFrame)
            nextFrame += chunk.frames
            got += chunk.samples
        }
        let expected = signal.map { Float(Int16(clamping: Int(($0 * 32768).rounded()))) / 32768 }
        #expect(got == expected)
        #expect(capture.droppedFrames == 0)
    }

    @Test("S32_LE and FLOAT_LE captures read their samples at full precision", arguments: [ALSACapture.SampleFormat.s32, .float])
    func formats(_ format: ALSACapture.SampleFormat) async throws {
        var random = SeededRandom(seed: 4)
        let signal = random.gaussian(count: 5000, deviation: 0.2).map { max(-1, min($0, 0.99)) }
        var settings = try FilePCM.settings(name: "earshot_\(format)", samples: signal)
        settings.format = format
        settings.configuration = try FilePCM.configuration(name: "earshot_\(format)", samples: signal, format: format.rawValue)
        let capture = try ALSACapture(settings)
        var got: [Float] = []
        for try await chunk in capture.chunks() { got += chunk.samples }
        // S32: 2^-31 steps, below float32's own rounding of these values; float: exact.
        #expect(maxAbsDifference(got, signal) <= (format == .float ? 0 : 6e-8))
    }

    @Test("Stereo capture keeps each channel's samples")
    func stereo() async throws {
        let left = sine(frequency: 440, sampleRate: 16000, count: 8000), right = sine(frequency: 1000, sampleRate: 16000, count: 8000, amplitude: 0.25)
        let interleaved = zip(left, right).flatMap { [$0, $1] }
        let capture = try ALSACapture(FilePCM.settings(name: "earshot_stereo", samples: interleaved, channels: 2))
        var l: [Float] = [], r: [Float] = []
        for try await chunk in capture.chunks() {
            l += chunk.channel(0)
            r += chunk.channel(1)
        }
        #expect(maxAbsDifference(l, left) <= 1.0 / 32768)
        #expect(maxAbsDifference(r, right) <= 1.0 / 32768)
    }

    @Test("A consumer that falls behind loses the oldest chunks, and every lost frame is counted")
    func slowConsumer() async throws {
        let signal = [Float](repeating: 0.1, count: 64_000)
        var settings = try FilePCM.settings(name: "earshot_slow", samples: signal)
        settings.queuedFrames = 640
        let capture = try ALSACapture(settings)
        var received = 0
        for try await chunk in capture.chunks() {
            received += chunk.frames
            try await Task.sleep(for: .milliseconds(20))  // far slower than the file PCM delivers
        }
        #expect(capture.droppedFrames > 0)
        #expect(received + capture.droppedFrames == 64_000)
    }

    @Test("Cancelling the consumer stops capture and joins the thread")
    func cancel() async throws {
        var settings = try FilePCM.settings(name: "earshot_cancel", samples: [Float](repeating: 0, count: 16000))
        settings.maxFrames = nil  // would run for ever: the file PCM never ends
        let capture = try ALSACapture(settings)
        let received = Atomic<Int>(0)
        let task = Task {
            for try await chunk in capture.chunks() { received.add(chunk.frames, ordering: .relaxed) }
        }
        // Cancel once audio flows (bounded wait: the machine may be busy).
        for _ in 0..<500 where received.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(received.load(ordering: .relaxed) > 0)
        task.cancel()
        try await task.value
        await capture.stop()
        #expect(!capture.isRunning)
    }

    @Test("A PCM name that does not exist is a typed error with ALSA's reason and a hint")
    func unknownDevice() throws {
        var settings = ALSACapture.Settings()
        settings.device = "earshot_no_such_pcm"
        settings.configuration = "pcm.other { type null }"
        #expect(throws: AudioError.deviceUnavailable(
            device: "earshot_no_such_pcm", reason: "No such file or directory",
            hint: "run `earshot devices` for the capture devices; a card's PCM is named like `hw:1,0`, or `plughw:1,0` to let ALSA convert rate and format")) {
            try ALSACapture(settings)
        }
    }
}
