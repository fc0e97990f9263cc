import CSndFile
import Testing

/// Writes interleaved samples with libsndfile in the given format (test fixture).
public func writeAudio(_ path: String, samples: [Float], channels: Int, sampleRate: Int,
                       format: Int32 = Int32(SF_FORMAT_WAV | SF_FORMAT_FLOAT)) throws {
    var info = SF_INFO()
    info.samplerate = Int32(sampleRate)
    info.channels = Int32(channels)
    info.format = format
    guard let file = sf_open(path, Int32(SFM_WRITE), &info) else {
        throw FixtureError(message: "\(path): \(String(cString: sf_strerror(nil)))")
    }
    defer { sf_close(file) }
    let written = samples.withUnsafeBufferPointer { sf_writef_float(file, $0.baseAddress, sf_count_t(samples.count / channels)) }
    #expect(Int(written) == samples.count / channels)
}

public struct FixtureError: Error, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}
