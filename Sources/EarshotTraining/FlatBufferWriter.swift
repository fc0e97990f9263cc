/// A FlatBuffer written front to back: a table is laid out before the vectors, strings and
/// tables it refers to, so every offset points forward as the format requires (uoffset_t is
/// unsigned); each table's vtable sits just before it. Scalars and vector elements are aligned
/// to their size, byte vectors marked `aligned16` to 16 (TFLite's buffers: force_align 16).
/// ref: flatbuffers/include/flatbuffers/flatbuffer_builder.h (the same wire format, written
/// from the other end).
struct FlatBufferWriter {
    /// A table's field value.
    indirect enum Field {
        case u8(UInt8), i8(Int8), bool(Bool), i32(Int32), u32(UInt32)
        case table(Table)
        case tables([Table])
        case string(String)
        case strings([String])
        case i32s([Int32])
        case i64s([Int64])
        case f32s([Float])
        case bytes([UInt8], aligned16: Bool)
    }

    /// A table: field number → value (absent fields take the schema's defaults).
    struct Table {
        var fields: [(Int, Field)] = []
        init(_ fields: [(Int, Field?)]) { self.fields = fields.compactMap { i, f in f.map { (i, $0) } } }
    }

    private(set) var bytes: [UInt8] = []

    /// The buffer of `root`, with a 4-character file identifier after the root offset.
    static func write(root: Table, identifier: String) -> [UInt8] {
        var w = FlatBufferWriter()
        w.bytes = [0, 0, 0, 0] + Array(identifier.utf8.prefix(4))
        let at = w.table(root)
        w.patch(0, UInt32(at))
        return w.bytes
    }

    private mutating func align(_ n: Int) { while bytes.count % n != 0 { bytes.append(0) } }

    private mutating func append<T: FixedWidthInteger>(_ v: T) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// Writes `value` (an offset from `at` to a later position) at `at`.
    private mutating func patch(_ at: Int, _ value: UInt32) {
        for b in 0..<4 { bytes[at + b] = UInt8(truncatingIfNeeded: value >> (8 * b)) }
    }

    private mutating func patchOffset(_ at: Int, to target: Int) { patch(at, UInt32(target - at)) }

    private static func scalarSize(_ f: Field) -> Int? {
        switch f {
        case .u8, .i8, .bool: return 1
        case .i32, .u32: return 4
        default: return nil
        }
    }

    /// Writes a table (vtable first, then the table, then what it refers to); its position.
    private mutating func table(_ t: Table) -> Int {
        // Inline layout: the soffset, then 4-byte fields (scalars and offsets), then bytes.
        let fields = t.fields.sorted { (Self.scalarSize($0.1) ?? 4) > (Self.scalarSize($1.1) ?? 4) }
        var slot: [Int: Int] = [:]
        var size = 4
        for (i, f) in fields {
            let s = Self.scalarSize(f) ?? 4
            size = (size + s - 1) / s * s
            slot[i] = size
            size += s
        }
        size = (size + 3) / 4 * 4
        let count = (t.fields.map(\.0).max() ?? -1) + 1
        align(2)
        // The vtable's end must leave the table 4-aligned: pad before it.
        let vtableBytes = 4 + 2 * count
        while (bytes.count + vtableBytes) % 4 != 0 { bytes.append(0) }
        let vtable = bytes.count
        append(UInt16(vtableBytes))
        append(UInt16(size))
        for i in 0..<count { append(UInt16(slot[i] ?? 0)) }
        let start = bytes.count
        bytes.append(contentsOf: [UInt8](repeating: 0, count: size))
        let soffset = Int32(start - vtable)
        for b in 0..<4 { bytes[start + b] = UInt8(truncatingIfNeeded: UInt32(bitPattern: soffset) >> (8 * b)) }
        var later: [(Int, Field)] = []
        for (i, f) in fields {
            let at = start + (slot[i] ?? 0)
            switch f {
            case let .u8(v): bytes[at] = v
            case let .i8(v): bytes[at] = UInt8(bitPattern: v)
            case let .bool(v): bytes[at] = v ? 1 : 0
            case let .i32(v): patch(at, UInt32(bitPattern: v))
            case let .u32(v): patch(at, v)
            default: later.append((at, f))
            }
        }
        for (at, f) in later { patchOffset(at, to: reference(f)) }
        return start
    }

    /// A vector of `count` offsets, then each element `write(self, k)` writes; its position.
    private mutating func offsets(_ count: Int, _ write: (inout FlatBufferWriter, Int) -> Int) -> Int {
        align(4)
        let at = bytes.count
        append(UInt32(count))
        let slots = bytes.count
        bytes.append(contentsOf: [UInt8](repeating: 0, count: 4 * count))
        for k in 0..<count { patchOffset(slots + 4 * k, to: write(&self, k)) }
        return at
    }

    /// Writes a vector, string or table; its position.
    private mutating func reference(_ f: Field) -> Int {
        func vector<T: FixedWidthInteger>(_ values: [T], alignment: Int) -> Int {
            align(4)
            while (bytes.count + 4) % alignment != 0 { bytes.append(0) }
            let at = bytes.count
            append(UInt32(values.count))
            for v in values { append(v) }
            return at
        }
        switch f {
        case let .table(t): return table(t)
        case let .tables(ts): return offsets(ts.count) { $0.table(ts[$1]) }
        case let .strings(ss): return offsets(ss.count) { $0.reference(.string(ss[$1])) }
        case let .string(s):
            let at = vector(Array(s.utf8), alignment: 4)
            bytes.append(0)
            return at
        case let .i32s(v): return vector(v, alignment: 4)
        case let .i64s(v): return vector(v, alignment: 8)
        case let .f32s(v): return vector(v.map(\.bitPattern), alignment: 4)
        case let .bytes(v, aligned16): return vector(v, alignment: aligned16 ? 16 : 4)
        case .u8, .i8, .bool, .i32, .u32: return 0
        }
    }
}
