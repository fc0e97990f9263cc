import CEarshotKernels

/// Interleaved PCM as it comes from a socket, a Redis entry or a capture device: little-endian
/// signed integers of 1 to 4 bytes, or 32-bit floats, in frames of `channels` samples. The one
/// decoder of such bytes: to floats in -1...1, mixed to mono (a frame's samples summed in
/// channel order, then scaled by 1 / channels, as `AudioFile.readMono` mixes) or kept interleaved.
///
///     let pcm = PCMFormat(encoding: .integer(bytes: 2), channels: 2)
///     var mono: [Float] = []
///     bytes.withUnsafeBytes { pcm.appendMono($0, to: &mono) }   // one sample per whole frame
public struct PCMFormat: Sendable, Equatable {
    /// How one sample is stored.
    public enum Encoding: Sendable, Equatable {
        /// Signed little-endian integers of 1...4 bytes; full scale is 2^(8 bytes - 1).
        case integer(bytes: Int)
        /// IEEE 754 single precision, little-endian.
        case float32
    }

    public var encoding: Encoding
    /// Samples in a frame (1...).
    public var channels: Int

    public init(encoding: Encoding, channels: Int) {
        self.encoding = encoding
        self.channels = channels
    }

    /// Bytes of one sample.
    public var sampleBytes: Int {
        switch encoding {
        case let .integer(bytes): return bytes
        case .float32: return 4
        }
    }

    /// Bytes of one frame (a sample of every channel).
    public var frameBytes: Int { sampleBytes * channels }

    /// The whole frames of `raw` (bytes after the last whole frame are left alone) as one mono
    /// sample each, appended to `out`; the array keeps its capacity, so a caller that empties it
    /// with `removeAll(keepingCapacity:)` decodes chunk after chunk without allocating.
    public func appendMono(_ raw: UnsafeRawBufferPointer, to out: inout [Float]) {
        let frames = raw.count / max(1, frameBytes)
        Self.append(frames, to: &out) { o in
            switch encoding {
            case let .integer(width):
                let scale = 1 / (Float(1 << (8 * width - 1)) * Float(channels))
                if width == 2 && channels == 1 {
                    // The common case (16-bit mono, as Home Assistant sends), vectorized.
                    earshot_pcm16_decode(raw.baseAddress!.assumingMemoryBound(to: UInt8.self), frames, scale, o.baseAddress!)
                    return
                }
                // An exact sum of the frame's integers (no rounding before the scale).
                for f in 0..<frames {
                    var sum: Int64 = 0
                    for c in 0..<channels { sum += Int64(Self.integer(raw, at: (f * channels + c) * width, width: width)) }
                    o[f] = Float(sum) * scale
                }
            case .float32:
                let scale = 1 / Float(channels)
                for f in 0..<frames {
                    var sum: Float = 0
                    for c in 0..<channels { sum += Self.float(raw, at: (f * channels + c) * 4) }
                    o[f] = channels == 1 ? sum : sum * scale
                }
            }
        }
    }

    /// The whole frames of `raw` as every channel's samples, interleaved, appended to `out`.
    public func appendInterleaved(_ raw: UnsafeRawBufferPointer, to out: inout [Float]) {
        let samples = raw.count / max(1, frameBytes) * channels
        Self.append(samples, to: &out) { o in
            switch encoding {
            case let .integer(width):
                let scale = 1 / Float(1 << (8 * width - 1))
                if width == 2 {
                    earshot_pcm16_decode(raw.baseAddress!.assumingMemoryBound(to: UInt8.self), samples, scale, o.baseAddress!)
                    return
                }
                for i in 0..<samples { o[i] = Float(Self.integer(raw, at: i * width, width: width)) * scale }
            case .float32:
                for i in 0..<samples { o[i] = Self.float(raw, at: i * 4) }
            }
        }
    }

    /// `appendMono` of chunks cut anywhere: the bytes of a partial last frame wait in `carry`
    /// (held by the caller, empty at the start) and go before the next chunk's.
    public func appendMono(_ bytes: UnsafeRawBufferPointer, carry: inout [UInt8], to out: inout [Float]) {
        if carry.isEmpty {
            appendMonoKeeping(bytes, carry: &carry, to: &out)
        } else {
            (carry + bytes).withUnsafeBytes { appendMonoKeeping($0, carry: &carry, to: &out) }
        }
    }

    private func appendMonoKeeping(_ raw: UnsafeRawBufferPointer, carry: inout [UInt8], to out: inout [Float]) {
        let whole = raw.count / max(1, frameBytes) * frameBytes
        if whole < raw.count { carry = Array(raw[whole...]) } else if !carry.isEmpty { carry = [] }
        appendMono(UnsafeRawBufferPointer(rebasing: raw[..<whole]), to: &out)
    }

    /// `count` values appended to `out`, written by `fill` in place (nothing when 0).
    @inline(__always)
    private static func append(_ count: Int, to out: inout [Float], _ fill: (UnsafeMutableBufferPointer<Float>) -> Void) {
        guard count > 0 else { return }
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: count))
        out.withUnsafeMutableBufferPointer { fill(UnsafeMutableBufferPointer(rebasing: $0[start...])) }
    }

    /// The signed little-endian integer of `width` bytes at `at`, sign-extended.
    @inline(__always)
    private static func integer(_ raw: UnsafeRawBufferPointer, at: Int, width: Int) -> Int32 {
        var v: Int32 = 0
        for b in 0..<width { v |= Int32(raw[at + b]) << (8 * b) }
        let shift = Int32(32 - 8 * width)
        return (v << shift) >> shift
    }

    @inline(__always)
    private static func float(_ raw: UnsafeRawBufferPointer, at: Int) -> Float {
        Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: at, as: UInt32.self)))
    }
}
