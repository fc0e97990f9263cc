import Foundation

/// One stream's state: the audio context the front end carries from block to block and every
/// recurrent layer's carry. A value: a copy is a snapshot; making a new one is a reset.
public struct ModelState: Sendable, Equatable {
    /// The content hash of the model the state belongs to.
    public let modelHash: String
    /// `modelHash` as the number its 16 hex digits spell (nil if it is not such): a step checks
    /// the state's model with one compare of these, not of strings.
    let modelKey: UInt64?
    /// The last `contextSamples` samples of the previous block (zeros at stream start).
    var context: [Float]
    /// Each recurrent layer's carry, one after another (LSTM: [h][c]; GRU: [h]); a graph's float
    /// state tensors, one after another.
    var carry: [Float]
    /// A graph's int8 state tensors (those that only ever hold int8 values), one after another,
    /// one byte per value.
    var codes: [Int8]
    /// Steps taken since the stream started.
    public internal(set) var steps: Int

    init(modelHash: String, context: [Float], carry: [Float], codes: [Int8] = [], steps: Int) {
        self.modelHash = modelHash
        self.modelKey = Self.key(modelHash)
        self.context = context
        self.carry = carry
        self.codes = codes
        self.steps = steps
    }

    /// The number 16 lowercase hex digits spell; nil for anything else (so that two hashes have
    /// the same key only when they are the same string).
    static func key(_ hash: String) -> UInt64? {
        guard hash.utf8.count == 16, hash.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) else { return nil }
        return UInt64(hash, radix: 16)
    }

    /// Bytes of state per stream (context and carries as Float32, int8 state tensors a byte per value).
    public var byteCount: Int { (context.count + carry.count) * MemoryLayout<Float>.size + codes.count }

    static let magic: [UInt8] = Array("ESTATE".utf8)
    /// The serialized format's version (version 2, without int8 codes, is read too).
    public static let formatVersion: UInt32 = 3

    /// The most steps a state may have taken: 2^48 steps of even a 1 ms block is 8,900 years,
    /// and counters far below Int.max never overflow on the way.
    public static let maxSteps = 1 << 48

    /// Serialized: "ESTATE", format version (u32), model hash (16 ASCII hex), steps (u64),
    /// context count (u32), carry count (u32), code count (u32), the floats, the codes (a byte
    /// each), then a CRC-32C (u32) of everything before it; all little-endian. (Version 2 had no
    /// code count and no codes.)
    public func serialized() -> [UInt8] {
        var bytes = Self.magic
        bytes.reserveCapacity(Self.magic.count + 44 + 4 * (context.count + carry.count) + codes.count)
        func append<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
        append(Self.formatVersion)
        bytes += Array(modelHash.utf8.prefix(16)) + [UInt8](repeating: 0x30, count: max(0, 16 - modelHash.utf8.count))
        append(UInt64(steps))
        append(UInt32(context.count))
        append(UInt32(carry.count))
        append(UInt32(codes.count))
        for v in context { append(v.bitPattern) }
        for v in carry { append(v.bitPattern) }
        for c in codes { bytes.append(UInt8(bitPattern: c)) }
        append(CRC32C.checksum(bytes))
        return bytes
    }

    /// Reads serialized bytes without checking which model they belong to (Model.restoreState
    /// does). Damaged bytes (the checksum differs), a step count beyond `maxSteps` and NaN or
    /// infinite values are refused.
    static func deserialize(_ bytes: [UInt8]) throws(ModelError) -> ModelState {
        let header = Self.magic.count + 4 + 16 + 8 + 4 + 4
        guard bytes.count >= header + 4, Array(bytes.prefix(Self.magic.count)) == Self.magic else {
            throw .stateFormat(reason: "not an earshot model state (\(bytes.count) bytes, no ESTATE header)")
        }
        func read<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
            bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
        }
        var offset = Self.magic.count
        let version = read(UInt32.self, at: offset)
        guard version == Self.formatVersion || version == 2 else {
            throw .stateFormat(reason: "state format version \(version); this earshot reads versions 2 and \(Self.formatVersion)")
        }
        let stored = read(UInt32.self, at: bytes.count - 4)
        let computed = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<(bytes.count - 4)])) }
        guard stored == computed else {
            throw .stateFormat(reason: "checksum mismatch (stored \(String(stored, radix: 16)), computed \(String(computed, radix: 16))): the bytes are damaged")
        }
        offset += 4
        let hash = String(decoding: bytes[offset..<(offset + 16)], as: UTF8.self)
        offset += 16
        let rawSteps = read(UInt64.self, at: offset)
        guard rawSteps <= UInt64(Self.maxSteps) else {
            throw .stateFormat(reason: "step count \(rawSteps) exceeds \(Self.maxSteps)")
        }
        let contextCount = Int(read(UInt32.self, at: offset + 8))
        let carryCount = Int(read(UInt32.self, at: offset + 12))
        offset += 16
        var codeCount = 0
        if version >= 3 {
            guard bytes.count >= offset + 4 + 4 else { throw .stateFormat(reason: "\(bytes.count) bytes: the header is cut short") }
            codeCount = Int(read(UInt32.self, at: offset))
            offset += 4
        }
        guard bytes.count == offset + 4 * (contextCount + carryCount) + codeCount + 4 else {
            throw .stateFormat(reason: "\(bytes.count) bytes, expected \(offset + 4 * (contextCount + carryCount) + codeCount + 4) for \(contextCount) context, "
                               + "\(carryCount) carry values and \(codeCount) codes")
        }
        let floats = (0..<(contextCount + carryCount)).map { Float(bitPattern: read(UInt32.self, at: offset + 4 * $0)) }
        if let bad = floats.firstIndex(where: { !$0.isFinite }) {
            let place = bad < contextCount ? "context value \(bad)" : "carry value \(bad - contextCount)"
            throw .stateFormat(reason: "\(place) is \(floats[bad]): a state holds finite numbers only")
        }
        let codeStart = offset + 4 * (contextCount + carryCount)
        let codes = bytes[codeStart..<(codeStart + codeCount)].map { Int8(bitPattern: $0) }
        return ModelState(modelHash: hash, context: Array(floats[0..<contextCount]),
                          carry: Array(floats[contextCount...]), codes: codes, steps: Int(rawSteps))
    }
}

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as iSCSI and ext4 use it.
package enum CRC32C {
    private static let table: [UInt32] = (0..<256).map { i -> UInt32 in
        var c = UInt32(i)
        for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
        return c
    }

    package static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }

    package static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        table.withUnsafeBufferPointer { t in
            for b in bytes { crc = t[Int((crc ^ UInt32(b)) & 0xFF)] ^ (crc >> 8) }
        }
        return crc ^ 0xFFFF_FFFF
    }
}
