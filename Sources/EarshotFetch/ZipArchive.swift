import CZlib
import Foundation

/// A zip archive (a Python wheel is one) read in Swift, its deflated entries inflated by zlib:
/// the central directory at its end lists the entries; each entry's data follows its local
/// header, stored or deflated, and is checked against the directory's size and CRC-32.
/// ref: PKWARE APPNOTE.TXT 6.3 (4.3.7 local header, 4.3.12 central directory, 4.3.16 end record).
/// ZIP64 archives (entries or archives over 4 GiB) and encrypted entries are refused.
public struct ZipArchive: Sendable {
    /// An entry of the central directory.
    public struct Entry: Sendable, Equatable {
        /// Its path inside the archive (`openwakeword/resources/models/alexa_v0.1.onnx`).
        public let name: String
        /// Its size once extracted, in bytes.
        public let size: Int
        let compressedSize: Int
        let method: UInt16
        let flags: UInt16
        let crc32: UInt32
        let localHeaderOffset: Int
    }

    /// The archive's name in messages (its path or URL).
    public let name: String
    public let entries: [Entry]
    private let data: Data

    /// The archive at `url` (mapped, not read whole).
    public init(contentsOf url: URL, name: String? = nil) throws(ZipError) {
        let data: Data
        do { data = try Data(contentsOf: url, options: .alwaysMapped) } catch {
            throw ZipError(archive: name ?? url.path, reason: "cannot read it: \(error.localizedDescription)")
        }
        try self.init(data: data, name: name ?? url.path)
    }

    public init(data: Data, name: String) throws(ZipError) {
        self.data = data
        self.name = name
        let reader = ByteReader(data: data, archive: name)
        // The end record: 22 bytes and a comment of at most 65535, at the archive's end.
        guard data.count >= 22 else { throw ZipError(archive: name, reason: "not a zip archive (\(data.count) bytes)") }
        var end = -1
        var at = data.count - 22
        let lowest = max(0, data.count - 22 - 0xFFFF)
        while at >= lowest {
            if try reader.u32(at) == 0x0605_4b50 { end = at; break }
            at -= 1
        }
        guard end >= 0 else { throw ZipError(archive: name, reason: "not a zip archive (no end of central directory record)") }
        let count = Int(try reader.u16(end + 10))
        let directorySize = Int(try reader.u32(end + 12))
        let directoryOffset = Int(try reader.u32(end + 16))
        if count == 0xFFFF || directorySize == 0xFFFF_FFFF || directoryOffset == 0xFFFF_FFFF {
            throw ZipError(archive: name, reason: "a ZIP64 archive (over 4 GiB or 65535 entries), which is not read here")
        }
        guard directoryOffset + directorySize <= end else {
            throw ZipError(archive: name, reason: "its central directory (\(directorySize) bytes at \(directoryOffset)) lies outside the archive")
        }
        var entries: [Entry] = []
        var offset = directoryOffset
        for index in 0..<count {
            guard try reader.u32(offset) == 0x0201_4b50 else {
                throw ZipError(archive: name, reason: "central directory entry \(index) at byte \(offset) has no signature")
            }
            let nameLength = Int(try reader.u16(offset + 28))
            let extraLength = Int(try reader.u16(offset + 30))
            let commentLength = Int(try reader.u16(offset + 32))
            let entry = Entry(name: try reader.text(offset + 46, count: nameLength), size: Int(try reader.u32(offset + 24)),
                              compressedSize: Int(try reader.u32(offset + 20)), method: try reader.u16(offset + 10),
                              flags: try reader.u16(offset + 8), crc32: try reader.u32(offset + 16),
                              localHeaderOffset: Int(try reader.u32(offset + 42)))
            if entry.size == 0xFFFF_FFFF || entry.compressedSize == 0xFFFF_FFFF || entry.localHeaderOffset == 0xFFFF_FFFF {
                throw ZipError(archive: name, reason: "\(entry.name) is a ZIP64 entry, which is not read here")
            }
            entries.append(entry)
            offset += 46 + nameLength + extraLength + commentLength
        }
        self.entries = entries
    }

    /// The entry of this path, if the archive has it.
    public func entry(named path: String) -> Entry? {
        entries.first { $0.name == path }
    }

    /// An entry's bytes, inflated and checked (size and CRC-32). An entry larger than
    /// `maxBytes` is refused before anything is inflated.
    public func contents(of entry: Entry, maxBytes: Int = 1 << 30) throws(ZipError) -> Data {
        guard entry.size <= maxBytes else {
            throw ZipError(archive: name, reason: "\(entry.name) is \(entry.size) bytes, more than the \(maxBytes) allowed")
        }
        guard entry.flags & 1 == 0 else { throw ZipError(archive: name, reason: "\(entry.name) is encrypted") }
        let reader = ByteReader(data: data, archive: name)
        let local = entry.localHeaderOffset
        guard try reader.u32(local) == 0x0403_4b50 else {
            throw ZipError(archive: name, reason: "\(entry.name): no local header at byte \(local)")
        }
        let start = local + 30 + Int(try reader.u16(local + 26)) + Int(try reader.u16(local + 28))
        guard start >= 0, start + entry.compressedSize <= data.count else {
            throw ZipError(archive: name, reason: "\(entry.name): its \(entry.compressedSize) bytes at \(start) lie outside the archive")
        }
        var output = [UInt8](repeating: 0, count: entry.size)
        switch entry.method {
        case 0:
            guard entry.compressedSize == entry.size else {
                throw ZipError(archive: name, reason: "\(entry.name): stored with \(entry.compressedSize) bytes but said to be \(entry.size)")
            }
            data.copyBytes(to: &output, from: data.startIndex + start..<data.startIndex + start + entry.size)
        case 8:
            try inflate(data, from: start, count: entry.compressedSize, into: &output, entry: entry.name)
        default:
            throw ZipError(archive: name, reason: "\(entry.name): compression method \(entry.method) (only stored and deflated are read)")
        }
        let crc = output.withUnsafeBufferPointer { UInt32(CZlib.crc32(0, $0.baseAddress, uInt($0.count))) }
        guard crc == entry.crc32 else {
            throw ZipError(archive: name, reason: "\(entry.name): CRC-32 \(hex32(crc)) where the archive says \(hex32(entry.crc32)): damaged")
        }
        return Data(output)
    }

    /// Raw deflate (`inflateInit2` with -15 window bits) of `count` bytes at `from` into
    /// `output`, which must come out exactly full.
    private func inflate(_ data: Data, from start: Int, count: Int, into output: inout [UInt8], entry: String) throws(ZipError) {
        let archive = name
        let result: String? = data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> String? in
            output.withUnsafeMutableBufferPointer { out -> String? in
                var stream = z_stream()
                guard earshot_inflate_init_raw(&stream) == Z_OK else { return "zlib could not start" }
                defer { inflateEnd(&stream) }
                let input = raw.baseAddress!.advanced(by: start).assumingMemoryBound(to: Bytef.self)
                stream.next_in = UnsafeMutablePointer(mutating: input)
                stream.avail_in = uInt(count)
                // An empty output still needs a place to point at.
                var spare: UInt8 = 0
                stream.next_out = out.count > 0 ? out.baseAddress! : withUnsafeMutablePointer(to: &spare) { $0 }
                stream.avail_out = uInt(out.count)
                let status = CZlib.inflate(&stream, Z_FINISH)
                if status == Z_STREAM_END {
                    return stream.total_out == out.count ? nil : "inflates to \(stream.total_out) bytes, not \(out.count)"
                }
                if status == Z_BUF_ERROR && stream.avail_out == 0 { return "inflates to more than its \(out.count) bytes" }
                let message = stream.msg.map { String(cString: $0) } ?? "zlib status \(status)"
                return "damaged deflate data (\(message))"
            }
        }
        if let result { throw ZipError(archive: archive, reason: "\(entry): \(result)") }
    }
}

/// A zip archive that cannot be read, or an entry of it: the archive and the reason.
public struct ZipError: Error, Sendable, Equatable, CustomStringConvertible {
    public var archive: String
    public var reason: String
    public var description: String { "\(archive): \(reason)" }
}

private func hex32(_ value: UInt32) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: 8 - digits.count) + digits
}

/// Little-endian fields of the archive, every read bounds-checked.
private struct ByteReader {
    let data: Data
    let archive: String

    func bytes(_ at: Int, _ count: Int) throws(ZipError) -> Data.SubSequence {
        guard at >= 0, count >= 0, at + count <= data.count else {
            throw ZipError(archive: archive, reason: "truncated: \(count) bytes at \(at) lie beyond its \(data.count)")
        }
        return data[data.startIndex + at..<data.startIndex + at + count]
    }

    func u16(_ at: Int) throws(ZipError) -> UInt16 {
        let b = try bytes(at, 2)
        return UInt16(b[b.startIndex]) | UInt16(b[b.startIndex + 1]) << 8
    }

    func u32(_ at: Int) throws(ZipError) -> UInt32 {
        let b = try bytes(at, 4)
        return (0..<4).reduce(0) { $0 | UInt32(b[b.startIndex + $1]) << (8 * UInt32($1)) }
    }

    func text(_ at: Int, count: Int) throws(ZipError) -> String {
        String(decoding: try bytes(at, count), as: UTF8.self)
    }
}
