import Foundation

/// One stream's state: the audio context the front end carries from block to block and every
/// recurrent layer's carry. A value: a copy is a snapshot; making a new one is a reset.
public struct ModelState: Sendable, Equatable {
    /// The content hash of the model the state belongs to.
    public let modelHash: String
    /// The last `contextSamples` samples of the previous block (zeros at stream start).
    var context: [Float]
    /// Each recurrent layer's carry, one after another (LSTM: [h][c]; GRU: [h]).
    var carry: [Float]
    /// Steps taken since the stream started.
    public internal(set) var steps: Int

    /// Bytes of state per stream (context and carries, Float32).
    public var byteCount: Int { (context.count + carry.count) * MemoryLayout<Float>.size }

    static let magic: [UInt8] = Array("ESTATE".utf8)
    public static let formatVersion: UInt32 = 1

    /// Serialized: "ESTATE", format version (u32), model hash (16 ASCII hex), steps (u64),
    /// context count (u32), carry count (u32), then the floats, all little-endian.
    public func serialized() -> [UInt8] {
        var bytes = Self.magic
        func append<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
        append(Self.formatVersion)
        bytes += Array(modelHash.utf8.prefix(16)) + [UInt8](repeating: 0x30, count: max(0, 16 - modelHash.utf8.count))
        append(UInt64(steps))
        append(UInt32(context.count))
        append(UInt32(carry.count))
        for v in context + carry { append(v.bitPattern) }
        return bytes
    }

    /// Reads serialized bytes without checking which model they belong to (Model.restoreState does).
    static func deserialize(_ bytes: [UInt8]) throws(ModelError) -> ModelState {
        let header = Self.magic.count + 4 + 16 + 8 + 4 + 4
        guard bytes.count >= header, Array(bytes.prefix(Self.magic.count)) == Self.magic else {
            throw .stateFormat(reason: "not an earshot model state (\(bytes.count) bytes, no ESTATE header)")
        }
        func read<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
            bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
        }
        var offset = Self.magic.count
        let version = read(UInt32.self, at: offset)
        guard version == Self.formatVersion else {
            throw .stateFormat(reason: "state format version \(version); this earshot reads version \(Self.formatVersion)")
        }
        offset += 4
        let hash = String(decoding: bytes[offset..<(offset + 16)], as: UTF8.self)
        offset += 16
        guard let steps = Int(exactly: read(UInt64.self, at: offset)) else {
            throw .stateFormat(reason: "step count out of range")
        }
        let contextCount = Int(read(UInt32.self, at: offset + 8))
        let carryCount = Int(read(UInt32.self, at: offset + 12))
        offset += 16
        guard bytes.count == offset + 4 * (contextCount + carryCount) else {
            throw .stateFormat(reason: "\(bytes.count) bytes, expected \(offset + 4 * (contextCount + carryCount)) for \(contextCount) context and \(carryCount) carry values")
        }
        let floats = (0..<(contextCount + carryCount)).map { Float(bitPattern: read(UInt32.self, at: offset + 4 * $0)) }
        return ModelState(modelHash: hash, context: Array(floats[0..<contextCount]),
                          carry: Array(floats[contextCount...]), steps: steps)
    }
}
