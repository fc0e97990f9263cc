import EarshotAudio
import EarshotModel

/// Everything that decides a stream's future events, as one value: the model state (all its
/// state tensors), the resampler's state (the source samples it still needs), the samples not
/// yet in a block, the block and sample counters, the label rules and the label logic's
/// trackers, score sums, open segments and refractory timers.
///
/// Taken at any chunk boundary and restored in another process (on another machine), a stream
/// goes on exactly as the uninterrupted stream would: the same events, bit for bit.
///
///     let saved = try await stream.snapshot().serialized()     // store it, move it
///     let resumed = try StreamClassifier(model: model, restoring: StreamSnapshot(serialized: saved))
public struct StreamSnapshot: Sendable, Equatable {
    /// The serialized format's version: 2 adds many-label event rules and trackers (and keeps
    /// score sums only for segments), 3 their sensitivity, aligned windows and labels kept;
    /// older snapshots are still read.
    public static let formatVersion: UInt32 = 3
    /// The most samples a restored count may hold (a stream of 2^52 samples at 384 kHz is 370
    /// years), so that sums and products of counts never overflow; steps are held to the steps
    /// such samples make (`maxSteps(of:)`).
    static let maxSamples = 1 << 52
    /// The most steps of `stepSamples` samples each a restored count may hold.
    static func maxSteps(of stepSamples: Int) -> Int { maxSamples / max(stepSamples, 1) }
    static let magic: [UInt8] = Array("ESNAPSHOT".utf8)

    /// The content hash of the model the stream runs.
    public let modelHash: String
    /// The rate of the stream's source audio.
    public let sourceSampleRate: Int
    /// Source samples the stream had received.
    public let sourceSamples: Int
    /// Model steps the stream had taken.
    public let steps: Int
    /// The label rules the stream runs with (they go with it).
    public let options: LabelOptions
    /// The rest (state, resampler, buffers, trackers), in the serialized layout.
    let body: [UInt8]
    /// The version of the layout `body` is in (a snapshot read from older bytes keeps theirs).
    let formatVersion: UInt32

    init(modelHash: String, sourceSampleRate: Int, sourceSamples: Int, steps: Int, options: LabelOptions, body: [UInt8],
         formatVersion: UInt32 = StreamSnapshot.formatVersion) {
        self.formatVersion = formatVersion
        self.modelHash = modelHash
        self.sourceSampleRate = sourceSampleRate
        self.sourceSamples = sourceSamples
        self.steps = steps
        self.options = options
        self.body = body
    }

    /// Serialized: "ESNAPSHOT", format version (u32), model hash, source rate, source samples,
    /// steps, the label options, the body, then a CRC-32C (u32) of everything before it; all
    /// little-endian. A snapshot read from older bytes is written in their version.
    public func serialized() -> [UInt8] {
        var w = SnapshotWriter()
        w.bytes = Self.magic
        w.u32(formatVersion)
        w.string(modelHash)
        w.int(sourceSampleRate)
        w.int(sourceSamples)
        w.int(steps)
        options.save(to: &w, version: formatVersion)
        w.bytes += body
        w.u32(CRC32C.checksum(w.bytes))
        return w.bytes
    }

    /// Reads `serialized()` bytes.
    /// - Throws: `StreamError.snapshot` naming what is wrong: not a snapshot, another format
    ///   version, a checksum that differs (damaged bytes), values out of range.
    public init(serialized bytes: [UInt8]) throws(StreamError) {
        guard bytes.count >= Self.magic.count + 8, Array(bytes.prefix(Self.magic.count)) == Self.magic else {
            throw .snapshot(reason: "not an earshot stream snapshot (\(bytes.count) bytes, no ESNAPSHOT header)")
        }
        let stored = bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: bytes.count - 4, as: UInt32.self)) }
        let computed = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<(bytes.count - 4)])) }
        var r = SnapshotReader(bytes: Array(bytes[Self.magic.count..<(bytes.count - 4)]))
        let version = try r.u32()
        guard (1...Self.formatVersion).contains(version) else {
            throw .snapshot(reason: "format version \(version); this earshot reads versions 1...\(Self.formatVersion)")
        }
        guard stored == computed else {
            throw .snapshot(reason: "checksum mismatch (stored \(String(stored, radix: 16)), computed \(String(computed, radix: 16))): the bytes are damaged")
        }
        modelHash = try r.string()
        sourceSampleRate = try r.int(in: 1...10_000_000, "source rate")
        sourceSamples = try r.int(in: 0...Self.maxSamples, "source samples")
        steps = try r.int(in: 0...ModelState.maxSteps, "steps")
        options = try LabelOptions(from: &r, version: version)
        body = Array(r.rest)
        formatVersion = version
    }
}

// MARK: The layout

/// Little-endian fields, each with its length where it has one.
struct SnapshotWriter {
    var bytes: [UInt8] = []
    mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
    mutating func int(_ v: Int) { withUnsafeBytes(of: Int64(v).littleEndian) { bytes += $0 } }
    mutating func bool(_ v: Bool) { bytes.append(v ? 1 : 0) }
    mutating func double(_ v: Double) { withUnsafeBytes(of: v.bitPattern.littleEndian) { bytes += $0 } }
    mutating func optionalDouble(_ v: Double?) { bool(v != nil); if let v { double(v) } }
    mutating func optionalInt(_ v: Int?) { bool(v != nil); if let v { int(v) } }
    mutating func string(_ s: String) { bytes8(Array(s.utf8)) }
    mutating func bytes8(_ b: [UInt8]) { int(b.count); bytes += b }
    mutating func floats(_ f: ArraySlice<Float>) {
        int(f.count)
        for v in f { u32(v.bitPattern) }
    }
    mutating func doubles(_ d: [Double]) {
        int(d.count)
        for v in d { double(v) }
    }
}

/// Reads what `SnapshotWriter` wrote; every read is checked against the bytes left.
struct SnapshotReader {
    let bytes: [UInt8]
    var offset = 0

    var rest: ArraySlice<UInt8> { bytes[offset...] }

    private mutating func take(_ n: Int, _ what: String) throws(StreamError) -> ArraySlice<UInt8> {
        guard n >= 0, n <= bytes.count - offset else {
            throw .snapshot(reason: "\(what) needs \(n) bytes at offset \(offset); \(bytes.count - offset) are left (the snapshot is cut short)")
        }
        defer { offset += n }
        return bytes[offset..<(offset + n)]
    }

    private mutating func load<T: FixedWidthInteger>(_: T.Type, _ what: String) throws(StreamError) -> T {
        let b = try take(MemoryLayout<T>.size, what)
        return b.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(as: T.self)) }
    }

    mutating func u32() throws(StreamError) -> UInt32 { try load(UInt32.self, "a u32") }
    mutating func int(in range: ClosedRange<Int> = Int.min...Int.max, _ what: String = "a number") throws(StreamError) -> Int {
        let v = Int(try load(Int64.self, what))
        guard range.contains(v) else { throw .snapshot(reason: "\(what) \(v) is out of range \(range.lowerBound)...\(range.upperBound)") }
        return v
    }
    mutating func bool() throws(StreamError) -> Bool {
        let b = try take(1, "a flag")[offset - 1]
        guard b <= 1 else { throw .snapshot(reason: "a flag holds \(b)") }
        return b == 1
    }
    mutating func double(_ what: String = "a number") throws(StreamError) -> Double {
        let v = Double(bitPattern: try load(UInt64.self, what))
        guard v.isFinite else { throw .snapshot(reason: "\(what) is \(v)") }
        return v
    }
    mutating func optionalDouble(_ what: String) throws(StreamError) -> Double? { try bool() ? try double(what) : nil }
    mutating func optionalInt(in range: ClosedRange<Int>, _ what: String) throws(StreamError) -> Int? { try bool() ? try int(in: range, what) : nil }
    mutating func bytes8() throws(StreamError) -> [UInt8] {
        let n = try int(in: 0...max(0, bytes.count - offset - 8), "a byte count")
        return Array(try take(n, "bytes"))
    }
    mutating func string() throws(StreamError) -> String { String(decoding: try bytes8(), as: UTF8.self) }
    mutating func floats() throws(StreamError) -> [Float] {
        let n = try int(in: 0...max(0, (bytes.count - offset - 8) / 4), "a sample count")
        let raw = try take(4 * n, "samples")
        let values = raw.withUnsafeBytes { b in (0..<n).map { Float(bitPattern: UInt32(littleEndian: b.loadUnaligned(fromByteOffset: 4 * $0, as: UInt32.self))) } }
        if let bad = values.firstIndex(where: { !$0.isFinite }) { throw .snapshot(reason: "sample \(bad) of \(n) is \(values[bad])") }
        return values
    }
    mutating func doubles() throws(StreamError) -> [Double] {
        let n = try int(in: 0...max(0, (bytes.count - offset - 8) / 8), "a value count")
        var out: [Double] = []
        out.reserveCapacity(n)
        for _ in 0..<n { out.append(try double("a score sum")) }
        return out
    }
}

extension LabelOptions {
    /// The options; from format 2 on, the events rule after them.
    func save(to w: inout SnapshotWriter, version: UInt32 = StreamSnapshot.formatVersion) {
        w.double(threshold); w.optionalDouble(negativeThreshold); w.double(minSegmentMs); w.double(minSilenceMs)
        w.double(padMs); w.optionalDouble(maxSegmentSeconds); w.double(minSilenceAtMaxSegmentMs)
        w.bool(splitAtLongestSilence); w.bool(backgroundLabel != nil); w.string(backgroundLabel ?? "")
        w.bool(includeScores); w.optionalInt(detectionWindow); w.double(refractoryMs)
        guard version >= 2 else { return }
        w.bool(events != nil)
        events?.save(to: &w, version: version)
    }

    init(from r: inout SnapshotReader, version: UInt32 = StreamSnapshot.formatVersion) throws(StreamError) {
        self.init()
        threshold = try r.double("threshold"); negativeThreshold = try r.optionalDouble("negative threshold")
        minSegmentMs = try r.double("minSegmentMs"); minSilenceMs = try r.double("minSilenceMs"); padMs = try r.double("padMs")
        maxSegmentSeconds = try r.optionalDouble("maxSegmentSeconds"); minSilenceAtMaxSegmentMs = try r.double("minSilenceAtMaxSegmentMs")
        splitAtLongestSilence = try r.bool()
        let hasBackground = try r.bool()
        let background = try r.string()
        backgroundLabel = hasBackground ? background : nil
        includeScores = try r.bool(); detectionWindow = try r.optionalInt(in: 1...1_000_000, "detection window")
        refractoryMs = try r.double("refractoryMs")
        if version >= 2, try r.bool() { events = try Events(from: &r, version: version) }
        do { try validate() } catch { throw .snapshot(reason: "label options: \(error)") }
    }
}
