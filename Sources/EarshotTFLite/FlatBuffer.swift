/// A bounds-checked reader of FlatBuffers (the format TFLite files are written in): tables with
/// their vtables, scalars, strings and vectors, each read only after its bytes are proven to
/// lie inside the buffer. Offsets to tables, vectors and strings are unsigned and point forward;
/// a vtable is found by a signed offset and is checked like everything else. Nothing here traps
/// on any input.
struct FlatBuffer {
    let bytes: [UInt8]
    let path: String

    init(bytes: [UInt8], path: String) {
        self.bytes = bytes
        self.path = path
    }

    func fail(_ context: String, _ offset: Int, _ reason: String) -> TFLiteError {
        .malformed(path: path, context: context, offset: offset, reason: reason)
    }

    /// Checks that `count` bytes from `offset` lie inside the buffer.
    func check(_ offset: Int, _ count: Int, _ context: String) throws(TFLiteError) {
        guard offset >= 0, count >= 0, offset <= bytes.count, count <= bytes.count - offset else {
            throw fail(context, offset, "\(count) bytes from there run past the end of the file (\(bytes.count) bytes)")
        }
    }

    func u8(_ at: Int, _ context: String) throws(TFLiteError) -> UInt8 {
        try check(at, 1, context)
        return bytes[at]
    }

    func u16(_ at: Int, _ context: String) throws(TFLiteError) -> UInt16 {
        try check(at, 2, context)
        return UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8
    }

    func u32(_ at: Int, _ context: String) throws(TFLiteError) -> UInt32 {
        try check(at, 4, context)
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(bytes[at + i]) << (8 * i) }
        return v
    }

    func u64(_ at: Int, _ context: String) throws(TFLiteError) -> UInt64 {
        try check(at, 8, context)
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(bytes[at + i]) << (8 * i) }
        return v
    }

    /// Follows the unsigned offset stored at `at` to what it points to.
    func follow(_ at: Int, _ context: String) throws(TFLiteError) -> Int {
        let offset = Int(try u32(at, context))
        guard offset > 0 else { throw fail(context, at, "an offset of 0 points to itself") }
        let target = at + offset
        try check(target, 4, context)
        return target
    }

    /// The root table.
    func root(_ context: String) throws(TFLiteError) -> Table {
        try table(at: try follow(0, context), context)
    }

    /// The table at `position`, with its vtable checked.
    func table(at position: Int, _ context: String) throws(TFLiteError) -> Table {
        let soffset = Int(Int32(bitPattern: try u32(position, context)))
        let vtable = position - soffset
        let size = Int(try u16(vtable, "\(context) (vtable)"))
        guard size >= 4, size % 2 == 0 else { throw fail(context, vtable, "a vtable of \(size) bytes") }
        try check(vtable, size, "\(context) (vtable)")
        let inline = Int(try u16(vtable + 2, "\(context) (vtable)"))
        try check(position, inline, "\(context) (table)")
        return Table(buffer: self, position: position, vtable: vtable, fieldCount: (size - 4) / 2, inlineSize: inline, context: context)
    }
}

/// A table of a `FlatBuffer`: fields by index (the order of the schema's declaration; a union
/// takes two, its type and its value).
struct Table {
    let buffer: FlatBuffer
    let position: Int
    let vtable: Int
    let fieldCount: Int
    let inlineSize: Int
    let context: String

    /// Where field `index` lies (nil when absent), checked to hold `size` bytes within the table.
    private func field(_ index: Int, size: Int) throws(TFLiteError) -> Int? {
        guard index < fieldCount else { return nil }
        let offset = Int(try buffer.u16(vtable + 4 + 2 * index, context))
        guard offset != 0 else { return nil }
        guard offset + size <= inlineSize else {
            throw buffer.fail(context, vtable + 4 + 2 * index, "field \(index) at \(offset) lies outside its table of \(inlineSize) bytes")
        }
        return position + offset
    }

    func has(_ index: Int) throws(TFLiteError) -> Bool { try field(index, size: 1) != nil }

    func u8(_ index: Int, default value: UInt8 = 0) throws(TFLiteError) -> UInt8 {
        guard let at = try field(index, size: 1) else { return value }
        return try buffer.u8(at, context)
    }

    func i8(_ index: Int, default value: Int8 = 0) throws(TFLiteError) -> Int8 {
        Int8(bitPattern: try u8(index, default: UInt8(bitPattern: value)))
    }

    func bool(_ index: Int, default value: Bool = false) throws(TFLiteError) -> Bool {
        try u8(index, default: value ? 1 : 0) != 0
    }

    func i32(_ index: Int, default value: Int32 = 0) throws(TFLiteError) -> Int32 {
        guard let at = try field(index, size: 4) else { return value }
        return Int32(bitPattern: try buffer.u32(at, context))
    }

    func u32(_ index: Int, default value: UInt32 = 0) throws(TFLiteError) -> UInt32 {
        guard let at = try field(index, size: 4) else { return value }
        return try buffer.u32(at, context)
    }

    func u64(_ index: Int, default value: UInt64 = 0) throws(TFLiteError) -> UInt64 {
        guard let at = try field(index, size: 8) else { return value }
        return try buffer.u64(at, context)
    }

    /// The sub-table of field `index`, nil when absent.
    func table(_ index: Int, _ name: String) throws(TFLiteError) -> Table? {
        guard let at = try field(index, size: 4) else { return nil }
        return try buffer.table(at: try buffer.follow(at, "\(context) > \(name)"), "\(context) > \(name)")
    }

    /// The vector of field `index`: where its elements start and how many there are, checked
    /// to hold `count * elementSize` bytes. nil when absent.
    private func vector(_ index: Int, elementSize: Int, _ name: String) throws(TFLiteError) -> (start: Int, count: Int)? {
        guard let at = try field(index, size: 4) else { return nil }
        let where_ = "\(context) > \(name)"
        let v = try buffer.follow(at, where_)
        let count = Int(try buffer.u32(v, where_))
        guard count <= (buffer.bytes.count - v - 4) / elementSize else {
            throw buffer.fail(where_, v, "a vector of \(count) elements of \(elementSize) bytes runs past the end of the file")
        }
        return (v + 4, count)
    }

    func string(_ index: Int, _ name: String) throws(TFLiteError) -> String? {
        guard let (start, count) = try vector(index, elementSize: 1, name) else { return nil }
        return String(decoding: buffer.bytes[start..<start + count], as: UTF8.self)
    }

    func bytes(_ index: Int, _ name: String) throws(TFLiteError) -> ArraySlice<UInt8>? {
        guard let (start, count) = try vector(index, elementSize: 1, name) else { return nil }
        return buffer.bytes[start..<start + count]
    }

    /// The elements of a vector of `size`-byte elements, each read from its position; empty when absent.
    private func elements<T>(_ index: Int, size: Int, _ name: String, _ read: (Int) throws(TFLiteError) -> T) throws(TFLiteError) -> [T] {
        guard let (start, count) = try vector(index, elementSize: size, name) else { return [] }
        var out: [T] = []
        out.reserveCapacity(count)
        for i in 0..<count { out.append(try read(start + size * i)) }
        return out
    }

    func i32s(_ index: Int, _ name: String) throws(TFLiteError) -> [Int32] {
        try elements(index, size: 4, name) { (at: Int) throws(TFLiteError) in Int32(bitPattern: try buffer.u32(at, context)) }
    }

    func i64s(_ index: Int, _ name: String) throws(TFLiteError) -> [Int64] {
        try elements(index, size: 8, name) { (at: Int) throws(TFLiteError) in Int64(bitPattern: try buffer.u64(at, context)) }
    }

    func f32s(_ index: Int, _ name: String) throws(TFLiteError) -> [Float] {
        try elements(index, size: 4, name) { (at: Int) throws(TFLiteError) in Float(bitPattern: try buffer.u32(at, context)) }
    }

    /// The tables of a vector of tables, each named `name i` in errors.
    func tables(_ index: Int, _ name: String) throws(TFLiteError) -> [Table] {
        var i = 0
        return try elements(index, size: 4, name) { (at: Int) throws(TFLiteError) in
            let where_ = "\(context) > \(name) \(i)"
            i += 1
            return try buffer.table(at: try buffer.follow(at, where_), where_)
        }
    }
}
