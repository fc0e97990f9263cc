import CSndFile
import Foundation

/// An audio file read through libsndfile, in chunks, so that a file of any length is never
/// held whole. Any format libsndfile reads (WAV PCM 8/16/24/32 and float, FLAC, Ogg Vorbis,
/// AIFF, ...), any channel count and sample rate. Samples come as Float in [-1, 1).
///
/// One reader serves one caller at a time; open another `AudioFile` to read the same file
/// elsewhere.
public final class AudioFile {
    /// The file.
    public let path: String
    /// Its sample rate (Hz).
    public let sampleRate: Int
    /// Its channels.
    public let channelCount: Int
    /// Frames the file holds (one frame = one sample of every channel); nil when the stream
    /// does not say (a pipe: libsndfile learns the length only at its end).
    public let frameCount: Int?
    /// libsndfile's names of the container and encoding, e.g. ("WAV (Microsoft)", "Signed 16 bit PCM").
    public let formatName: String
    /// Its encoding (libsndfile's name).
    public let encodingName: String
    /// Frames read so far.
    public private(set) var position = 0

    private let handle: OpaquePointer
    /// [frames][channels] interleaved read scratch.
    private var interleaved: [Float] = []
    /// Samples the read scratch holds (its memory, for tests).
    var scratchSamples: Int { interleaved.count }

    /// Seconds of audio, when the length is known.
    public var duration: Double? { frameCount.map { Double($0) / Double(sampleRate) } }

    /// The most samples (over all channels) one read takes, whatever frame count is asked for:
    /// reads are sized by memory, so that a file of many channels needs no more than one of few.
    public static let maxSamplesPerRead = 1 << 22

    /// Serializes sf_open and the reading of its process-wide error.
    private static let openLock = NSLock()

    /// Opens a file for reading in chunks.
    /// - Throws: `AudioError.fileNotFound`, `.notAudio`, `.malformed` or `.unsupportedEncoding`, naming the file.
    public convenience init(path: String) throws(AudioError) {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
            throw .fileNotFound(path: path)
        }
        if isFolder.boolValue { throw .cannotOpen(path: path, reason: "it is a folder") }
        try self.init(name: path) { info in sf_open(path, Int32(SFM_READ), &info) }
    }

    /// Opens what `open` opens (libsndfile's handle, or nil with its error set), named `name` in
    /// errors; `info` comes in as libsndfile is to read it (zeros, or a raw stream's layout).
    init(name path: String, info given: SF_INFO = SF_INFO(), opening open: (inout SF_INFO) -> OpaquePointer?) throws(AudioError) {
        self.path = path
        var info = given
        // libsndfile keeps the error of a failed open in one process-wide variable, which any
        // other open resets: opens and the reading of that error are taken one at a time, so that
        // files opened in parallel each get their own reason.
        let (opened, code, reason) = Self.openLock.withLock { () -> (OpaquePointer?, Int, String) in
            let h = open(&info)
            return h != nil ? (h, 0, "") : (nil, Int(sf_error(nil)), String(cString: sf_strerror(nil)))
        }
        guard let handle = opened else {
            switch code {
            case SF_ERR_UNRECOGNISED_FORMAT: throw .notAudio(path: path, reason: reason)
            case SF_ERR_MALFORMED_FILE: throw .malformed(path: path, reason: reason)
            case SF_ERR_UNSUPPORTED_ENCODING, Self.unimplementedFormatError:
                throw .unsupportedEncoding(path: path, reason: reason)
            case SF_ERR_SYSTEM: throw .cannotOpen(path: path, reason: reason)
            default: throw .malformed(path: path, reason: reason)
            }
        }
        self.handle = handle
        sampleRate = Int(info.samplerate)
        channelCount = Int(info.channels)
        // libsndfile gives SF_COUNT_MAX frames for a stream of unknown length, and for a pipe of
        // raw PCM or W64 that over the frame size: no file holds 2^48 frames (23 years at 384 kHz).
        frameCount = info.frames >= 1 << 48 ? nil : Int(info.frames)
        formatName = Self.formatName(Int32(info.format) & Int32(SF_FORMAT_TYPEMASK))
        encodingName = Self.formatName(Int32(info.format) & Int32(SF_FORMAT_SUBMASK))
        do {
            guard channelCount > 0, sampleRate > 0 else {
                throw AudioError.malformed(path: path, reason: "\(channelCount) channels at \(sampleRate) Hz")
            }
            if let frameCount, let declared = declaredFramesIfTruncated() {
                throw AudioError.truncated(path: path, expectedFrames: declared, availableFrames: frameCount)
            }
            guard frameCount != 0 else { throw AudioError.empty(path: path) }
        } catch let error as AudioError {
            sf_close(handle)
            throw error
        } catch {
            sf_close(handle)
            throw .readFailed(path: path, reason: "\(error)")
        }
    }

    deinit { sf_close(handle) }

    /// libsndfile's code for "File contains data in an unimplemented format" (SFE_UNIMPLEMENTED),
    /// which it returns for known containers with an unknown codec (e.g. AIFF-C compression types).
    static let unimplementedFormatError = 18

    /// Reads up to `maxFrames` frames, interleaved ([frames][channels]). Returns fewer at the
    /// end of the file and an empty array after it.
    public func readInterleaved(maxFrames: Int) throws(AudioError) -> [Float] {
        let frames = try readScratch(maxFrames: maxFrames)
        return Array(interleaved[0..<(frames * channelCount)])
    }

    /// Reads up to `maxFrames` frames, one array per channel.
    public func readChannels(maxFrames: Int) throws(AudioError) -> [[Float]] {
        let frames = try readScratch(maxFrames: maxFrames)
        let c = channelCount
        return interleaved.withUnsafeBufferPointer { buf in
            (0..<c).map { ch in (0..<frames).map { buf[$0 * c + ch] } }
        }
    }

    /// Reads up to `maxFrames` frames of one channel.
    public func readChannel(_ channel: Int, maxFrames: Int) throws(AudioError) -> [Float] {
        guard (0..<channelCount).contains(channel) else {
            throw .channelOutOfRange(path: path, channel: channel, channelCount: channelCount)
        }
        let frames = try readScratch(maxFrames: maxFrames)
        let c = channelCount
        return interleaved.withUnsafeBufferPointer { buf in (0..<frames).map { buf[$0 * c + channel] } }
    }

    /// Reads up to `maxFrames` frames mixed down to mono (the mean of the channels, as
    /// librosa.to_mono does).
    public func readMono(maxFrames: Int) throws(AudioError) -> [Float] {
        let frames = try readScratch(maxFrames: maxFrames)
        let c = channelCount
        if c == 1 { return Array(interleaved[0..<frames]) }
        let scale = 1 / Float(c)
        return interleaved.withUnsafeBufferPointer { buf in
            (0..<frames).map { f in
                var sum: Float = 0
                for ch in 0..<c { sum += buf[f * c + ch] }
                return sum * scale
            }
        }
    }

    /// Channels mixed down to mono as `readMono` mixes them (the mean, summed in channel order).
    public static func mix(_ channels: [[Float]]) -> [Float] {
        guard channels.count > 1 else { return channels.first ?? [] }
        let scale = 1 / Float(channels.count)
        return channels[0].indices.map { f in
            var sum: Float = 0
            for channel in channels { sum += channel[f] }
            return sum * scale
        }
    }

    /// Moves the read position to `frame`.
    public func seek(toFrame frame: Int) throws(AudioError) {
        guard sf_seek(handle, sf_count_t(frame), SEEK_SET) >= 0 else {
            throw .readFailed(path: path, reason: "cannot seek to frame \(frame): \(String(cString: sf_strerror(handle)))")
        }
        position = frame
    }

    /// Reads the rest of a file: whole, mixed down to mono. For short files and tests; stream
    /// long files with `readMono(maxFrames:)`.
    public static func readMono(path: String) throws(AudioError) -> (samples: [Float], sampleRate: Int) {
        let file = try AudioFile(path: path)
        var out: [Float] = []
        out.reserveCapacity(min(file.frameCount ?? 0, maxSamplesPerRead))
        while true {
            let chunk = try file.readMono(maxFrames: 65536)
            if chunk.isEmpty { break }
            out += chunk
        }
        return (out, file.sampleRate)
    }

    private func readScratch(maxFrames: Int) throws(AudioError) -> Int {
        let wanted = min(max(0, maxFrames), max(1, Self.maxSamplesPerRead / channelCount))
        if interleaved.count < wanted * channelCount {
            interleaved = [Float](repeating: 0, count: wanted * channelCount)
        }
        let got = interleaved.withUnsafeMutableBufferPointer { buf in
            Int(sf_readf_float(handle, buf.baseAddress, sf_count_t(wanted)))
        }
        position += max(got, 0)
        if got < wanted, let frameCount, position < frameCount {
            // The decoder stopped (with or without an error such as a lost sync) before the
            // frames the stream's header announced: the file ends early.
            throw .truncated(path: path, expectedFrames: frameCount, availableFrames: position)
        }
        if got < 0 || sf_error(handle) != 0 {
            throw .readFailed(path: path, reason: String(cString: sf_strerror(handle)))
        }
        if got == 0, wanted > 0, position == 0 { throw .empty(path: path) }  // a stream of unknown length that held nothing
        return got
    }

    /// For WAV-like files whose header promises more data than the file holds, libsndfile
    /// shortens `frames` to what is there and notes "data : N (should be M)" in its log.
    /// Returns the frames the header announced in that case.
    private func declaredFramesIfTruncated() -> Int? {
        var log = [CChar](repeating: 0, count: 4096)
        let length = log.withUnsafeMutableBufferPointer { buf in
            sf_command(handle, Int32(SFC_GET_LOG_INFO), buf.baseAddress, Int32(buf.count))
        }
        guard length > 0 else { return nil }
        let text = String(decoding: log.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        func numbers(_ line: Substring) -> [Int] {
            line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        }
        let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces)[...] }
        guard let data = lines.first(where: { $0.hasPrefix("data") && $0.contains("should be") }),
              let align = lines.first(where: { $0.hasPrefix("Block Align") }).flatMap({ numbers($0).first }),
              align > 0
        else { return nil }
        let bytes = numbers(data)  // [announced, present]
        guard bytes.count >= 2, bytes[0] > bytes[1] else { return nil }
        return bytes[0] / align
    }

    private static func formatName(_ format: Int32) -> String {
        var info = SF_FORMAT_INFO()
        info.format = format
        let result = sf_command(nil, Int32(SFC_GET_FORMAT_INFO), &info, Int32(MemoryLayout<SF_FORMAT_INFO>.size))
        guard result == 0, let name = info.name else { return "format 0x\(String(format, radix: 16))" }
        return String(cString: name)
    }
}
