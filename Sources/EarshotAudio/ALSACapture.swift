import CALSA
import Foundation
import Synchronization

/// Live capture from an ALSA PCM (`default`, `hw:1,0`, `plughw:1,0`, or any name in the ALSA
/// configuration) on a thread of its own, delivered as an `AsyncThrowingStream` of chunks.
///
/// - The PCM is opened and set up in `init`, so a wrong name or setting fails there, with ALSA's
///   reason and what to try.
/// - Overruns (the device's buffer filled before it was read) are recovered and counted;
///   a suspended device is resumed; a device that disappears ends the stream with
///   `AudioError.deviceFailed`.
/// - Between the capture thread and the consumer sits a bounded queue of chunks. When the
///   consumer falls behind, the oldest chunks are dropped and counted (`droppedFrames`).
/// - Cancelling the consuming task (or dropping the stream) stops capture; `stop()` also waits
///   for the thread to end and the device to be released.
public final class ALSACapture: Sendable {
    /// The sample format asked of the device.
    public enum SampleFormat: String, Sendable, CaseIterable {
        case s16 = "S16_LE", s32 = "S32_LE", float = "FLOAT_LE"

        /// Frames of `channels` samples in this format, as `PCMFormat` decodes them.
        func pcm(channels: Int) -> PCMFormat {
            switch self {
            case .s16: return PCMFormat(encoding: .integer(bytes: 2), channels: channels)
            case .s32: return PCMFormat(encoding: .integer(bytes: 4), channels: channels)
            case .float: return PCMFormat(encoding: .float32, channels: channels)
            }
        }
    }

    /// What to open and how.
    public struct Settings: Sendable {
        /// The PCM name.
        public var device: String = "default"
        /// Hz. Through `plug` (and `default`) ALSA converts whatever the hardware does to this.
        public var sampleRate: Int = 16000
        /// Channels captured.
        public var channels: Int = 1
        /// The sample format.
        public var format: SampleFormat = .s16
        /// Requested buffer latency; ALSA picks the period (about a quarter of it).
        public var latency: Duration = .milliseconds(40)
        /// Stop after this many frames (nil: until cancelled).
        public var maxFrames: Int?
        /// Audio held between the capture thread and the consumer before the oldest is dropped
        /// (frames; rounded up to whole periods). nil: two seconds.
        public var queuedFrames: Int?
        /// An ALSA configuration (text) to open the PCM from instead of the system's; for PCMs
        /// defined in-process, e.g. a `file` PCM fed from a raw file.
        public var configuration: String?

        /// The defaults: `default`, 16 kHz mono s16.
        public init() {}
    }

    /// A block of captured frames, interleaved.
    public struct Chunk: Sendable {
        /// Interleaved samples, -1...1.
        public var samples: [Float]
        /// Channels in `samples`.
        public var channels: Int
        /// Index of the chunk's first frame since capture started.
        public var firstFrame: Int
        /// When the chunk's last frame was read from the device.
        public var capturedAt: ContinuousClock.Instant
        /// Frames in the chunk.
        public var frames: Int { samples.count / max(channels, 1) }

        /// Channel k of the chunk.
        public func channel(_ k: Int) -> [Float] {
            stride(from: k, to: samples.count, by: channels).map { samples[$0] }
        }
    }

    /// What the device granted (rate, channels, period).
    public let settings: Settings
    /// Period and buffer sizes ALSA granted, in frames.
    public let periodFrames: Int
    /// The device buffer ALSA granted (frames).
    public let bufferFrames: Int

    /// The PCM handle: set up in init, then used only by the capture thread (or closed by
    /// deinit when capture never started), so no two threads touch it at once.
    private struct Handle: @unchecked Sendable { let pcm: OpaquePointer }
    private let handle: Handle
    private let started = Atomic<Bool>(false)
    private let stopRequested = Atomic<Bool>(false)
    private let dropped = Atomic<Int>(0)
    private let overrunCount = Atomic<Int>(0)
    private let finished = DispatchSemaphore(value: 0)

    /// The bound of the queue between the capture thread and the consumer, in periods.
    public var queuedChunks: Int {
        let frames = settings.queuedFrames ?? 2 * settings.sampleRate
        return max(1, (frames + periodFrames - 1) / periodFrames)
    }

    /// Frames dropped because the consumer fell behind.
    public var droppedFrames: Int { dropped.load(ordering: .relaxed) }
    /// Device overruns recovered.
    public var overruns: Int { overrunCount.load(ordering: .relaxed) }

    /// Opens the device.
    /// - Throws: `AudioError.deviceUnavailable` naming the device, the reason and what to try.
    public init(_ settings: Settings) throws(AudioError) {
        self.settings = settings
        let device = settings.device
        guard (1...1024).contains(settings.channels), (1000...768_000).contains(settings.sampleRate),
              settings.latency >= .milliseconds(1), settings.latency <= .seconds(10),
              (settings.maxFrames ?? 0) >= 0, (0...(1 << 30)).contains(settings.queuedFrames ?? 0) else {
            throw .deviceUnavailable(
                device: device,
                reason: "\(settings.channels) channels at \(settings.sampleRate) Hz, latency \(settings.latency), queue \(settings.queuedFrames ?? 0) frames",
                hint: "ask for 1...1024 channels at 1000...768000 Hz with a latency of 1 ms...10 s")
        }
        earshot_alsa_silence_errors()
        var pcm: OpaquePointer?
        var result: Int32
        if let text = settings.configuration {
            var config: OpaquePointer?
            var input: OpaquePointer?
            result = snd_config_top(&config)
            if result >= 0 {
                result = text.withCString { snd_input_buffer_open(&input, $0, text.utf8.count) }
            }
            if result >= 0 {
                result = snd_config_load(config, input)
                snd_input_close(input)
            }
            if result >= 0 { result = snd_pcm_open_lconf(&pcm, device, SND_PCM_STREAM_CAPTURE, Int32(SND_PCM_NONBLOCK), config) }
            if let config { snd_config_delete(config) }
        } else {
            // Non-blocking: the capture loop waits with a timeout, so that a stop is never stuck
            // behind a device that stalls.
            result = snd_pcm_open(&pcm, device, SND_PCM_STREAM_CAPTURE, Int32(SND_PCM_NONBLOCK))
        }
        guard result >= 0, let pcm else {
            throw .deviceUnavailable(device: device, reason: Self.message(result),
                                     hint: "run `earshot devices` for the capture devices; a card's PCM is named like `hw:1,0`, or `plughw:1,0` to let ALSA convert rate and format")
        }
        let format: snd_pcm_format_t
        switch settings.format {
        case .s16: format = SND_PCM_FORMAT_S16_LE
        case .s32: format = SND_PCM_FORMAT_S32_LE
        case .float: format = SND_PCM_FORMAT_FLOAT_LE
        }
        let latencyMicros = UInt32(max(1000, settings.latency.components.seconds * 1_000_000
                                       + settings.latency.components.attoseconds / 1_000_000_000_000))
        result = snd_pcm_set_params(pcm, format, SND_PCM_ACCESS_RW_INTERLEAVED, UInt32(settings.channels),
                                    UInt32(settings.sampleRate), 1, latencyMicros)
        guard result >= 0 else {
            snd_pcm_close(pcm)
            throw .deviceUnavailable(
                device: device,
                reason: "cannot capture \(settings.channels) ch \(settings.format.rawValue) at \(settings.sampleRate) Hz: \(Self.message(result))",
                hint: device.hasPrefix("hw:") ? "try `plug\(device)` so that ALSA converts, or another --rate/--channels"
                    : "try another --rate or --channels, or `earshot devices`")
        }
        var buffer: snd_pcm_uframes_t = 0, period: snd_pcm_uframes_t = 0
        snd_pcm_get_params(pcm, &buffer, &period)
        bufferFrames = Int(buffer)
        periodFrames = max(Int(period), 1)
        handle = Handle(pcm: pcm)
    }

    deinit {
        if !started.load(ordering: .acquiring) { snd_pcm_close(handle.pcm) }
    }

    static func message(_ code: Int32) -> String { String(cString: snd_strerror(code)) }

    /// Stops capture and waits for the capture thread to end (it releases the device first).
    public func stop() async {
        stopRequested.store(true, ordering: .releasing)
        guard started.load(ordering: .acquiring) else { return }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { [self] in
                finished.wait()
                finished.signal()
                done.resume()
            }
        }
    }

    /// Whether the capture thread is running.
    public var isRunning: Bool {
        guard started.load(ordering: .acquiring) else { return false }
        guard finished.wait(timeout: .now()) == .success else { return true }
        finished.signal()
        return false
    }

    /// Starts capture (once) and returns its chunks. Ends after `maxFrames`, on a device
    /// failure (throwing), or when the consumer goes away.
    public func chunks() -> AsyncThrowingStream<Chunk, Error> {
        let (stream, continuation) = AsyncThrowingStream<Chunk, Error>.makeStream(
            bufferingPolicy: .bufferingNewest(queuedChunks))
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else {
            continuation.finish(throwing: AudioError.deviceFailed(device: settings.device, reason: "capture was already started"))
            return stream
        }
        continuation.onTermination = { [self] _ in
            // The consumer went away (or the thread ended the stream): the thread stops within
            // one period. This handler must not wait for it (it may run under the stream's lock,
            // which the thread needs to hand over its last chunk); `stop()` joins.
            stopRequested.store(true, ordering: .releasing)
        }
        let thread = Thread { [self] in
            capture(into: continuation)
            snd_pcm_close(handle.pcm)
            finished.signal()
        }
        thread.name = "earshot capture \(settings.device)"
        thread.qualityOfService = .userInteractive
        thread.start()
        return stream
    }

    private func fail(_ continuation: AsyncThrowingStream<Chunk, Error>.Continuation, _ reason: String) {
        continuation.finish(throwing: AudioError.deviceFailed(device: settings.device, reason: reason))
    }

    /// The capture loop: read a period at a time, convert to Float, hand it on.
    private func capture(into continuation: AsyncThrowingStream<Chunk, Error>.Continuation) {
        let pcm = handle.pcm
        let c = settings.channels
        let framesPerRead = periodFrames
        let format = settings.format.pcm(channels: c)
        // [framesPerRead][channels] samples as the device writes them
        var buffer = [UInt8](repeating: 0, count: framesPerRead * format.frameBytes)
        var total = 0
        let started = ContinuousClock.now
        while !stopRequested.load(ordering: .acquiring) {
            var wanted = framesPerRead
            if let maxFrames = settings.maxFrames {
                wanted = min(wanted, maxFrames - total)
                if wanted <= 0 { break }
            }
            let got = buffer.withUnsafeMutableBytes { Int(snd_pcm_readi(pcm, $0.baseAddress, snd_pcm_uframes_t(wanted))) }
            if got == -Int(EAGAIN) {
                _ = snd_pcm_wait(pcm, 100)  // until audio is there, at most 100 ms, then look at the stop flag
                continue
            }
            if got == -Int(EPIPE) {
                // Overrun: the device's buffer filled before we read it; audio was lost there.
                // Count what the clock says was lost, and skip the frame count past it so that the
                // next chunk's first frame (and every time after it) stays on the device's clock.
                overrunCount.add(1, ordering: .relaxed)
                let elapsed = ContinuousClock.now - started
                let expected = Int(Double(elapsed.components.seconds) * Double(settings.sampleRate)
                                   + Double(elapsed.components.attoseconds) * 1e-18 * Double(settings.sampleRate))
                let lost = max(0, expected - total - bufferFrames)
                total += lost
                dropped.add(lost, ordering: .relaxed)
                let r = snd_pcm_prepare(pcm)
                if r < 0 { return fail(continuation, "cannot recover from an overrun: \(Self.message(r))") }
                continue
            }
            if got == -Int(ESTRPIPE) {
                // Suspended (e.g. system sleep): resume, or prepare if the device cannot.
                var r = snd_pcm_resume(pcm)
                while r == -Int32(EAGAIN) && !stopRequested.load(ordering: .acquiring) {
                    usleep(10_000)
                    r = snd_pcm_resume(pcm)
                }
                if r < 0 && snd_pcm_prepare(pcm) < 0 { return fail(continuation, "cannot resume after a suspend: \(Self.message(r))") }
                continue
            }
            if got < 0 { return fail(continuation, Self.message(Int32(got))) }
            var samples: [Float] = []
            samples.reserveCapacity(got * c)
            buffer.withUnsafeBytes { format.appendInterleaved(UnsafeRawBufferPointer(rebasing: $0[0..<(got * format.frameBytes)]), to: &samples) }
            let chunk = Chunk(samples: samples, channels: c, firstFrame: total, capturedAt: .now)
            total += got
            switch continuation.yield(chunk) {
            case let .dropped(old): dropped.add(old.frames, ordering: .relaxed)
            case .terminated: return
            default: break
            }
        }
        continuation.finish()
    }
}

/// A capture-capable PCM or a sound card, as `earshot devices` lists them.
public struct CaptureDevice: Sendable, Equatable {
    /// The PCM or card name ALSA knows.
    public var name: String
    /// ALSA's description of it.
    public var description: String

    /// PCMs that can capture (from ALSA's device hints) and the cards present.
    public static func list() -> (pcms: [CaptureDevice], cards: [CaptureDevice]) {
        earshot_alsa_silence_errors()
        var pcms: [CaptureDevice] = []
        var hints: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
        if snd_device_name_hint(-1, "pcm", &hints) >= 0, let hints {
            var i = 0
            while let hint = hints[i] {
                func get(_ id: String) -> String? {
                    guard let p = snd_device_name_get_hint(hint, id) else { return nil }
                    defer { free(p) }
                    return String(cString: p)
                }
                let io = get("IOID")
                if io == nil || io == "Input", let name = get("NAME") {
                    pcms.append(CaptureDevice(name: name, description: (get("DESC") ?? "").replacingOccurrences(of: "\n", with: " — ")))
                }
                i += 1
            }
            snd_device_name_free_hint(hints)
        }
        var cards: [CaptureDevice] = []
        var card: Int32 = -1
        while snd_card_next(&card) >= 0 && card >= 0 {
            var longName: UnsafeMutablePointer<CChar>?
            snd_card_get_longname(card, &longName)
            cards.append(CaptureDevice(name: "hw:\(card)", description: longName.map { String(cString: $0) } ?? "card \(card)"))
            free(longName)
        }
        return (pcms, cards)
    }
}
