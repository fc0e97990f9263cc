import EarshotJSON
import Foundation

/// A tensor read from a safetensors file, widened to Float.
public struct Tensor: Sendable, Equatable {
    /// Its shape.
    public var shape: [Int]
    /// Its element type as safetensors names it.
    public var dtype: String
    /// Its values, row-major.
    public var values: [Float]

    /// A tensor.
    public init(shape: [Int], dtype: String = "F32", values: [Float]) {
        self.shape = shape
        self.dtype = dtype
        self.values = values
    }
}

/// The safetensors format: an 8-byte little-endian header length, a JSON header mapping each
/// name to {dtype, shape, data_offsets: [begin, end]} (offsets into the data after the header),
/// then the raw little-endian data. F32 and F16 (and BF16) are read.
/// ref: huggingface safetensors format description
package enum SafeTensors {
    static let supportedDTypes = ["F32", "F16", "BF16"]

    /// The file's bytes, memory-mapped: parsed, hashed and measured from this one mapping.
    static func map(path: String) throws(ModelError) -> Data {
        do {
            return try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
        } catch {
            throw .cannotRead(path: path, reason: error.localizedDescription)
        }
    }

    package static func read(path: String) throws(ModelError) -> [String: Tensor] {
        try parse(try map(path: path), path: path)
    }

    static func parse(_ data: Data, path: String) throws(ModelError) -> [String: Tensor] {
        guard data.count >= 8 else { throw .safetensors(path: path, reason: "\(data.count) bytes: shorter than the 8-byte header length") }
        let headerLength = data.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
        guard headerLength <= UInt64(data.count - 8) else {
            throw .safetensors(path: path, reason: "header length \(headerLength) exceeds the file (\(data.count) bytes)")
        }
        let headerEnd = 8 + Int(headerLength)
        let object: JSONValue
        do {
            object = try data.withUnsafeBytes { raw in try JSONValue.parse(UnsafeRawBufferPointer(rebasing: raw[8..<headerEnd])) }
        } catch {
            throw .safetensors(path: path, reason: "header is not JSON")
        }
        guard case let .object(header) = object else { throw .safetensors(path: path, reason: "header is not a JSON object") }
        let dataLength = data.count - headerEnd
        var tensors: [String: Tensor] = [:]
        var ranges: [(range: Range<Int>, name: String)] = []
        for (name, value) in header where name != "__metadata__" {
            guard let dtype = value["dtype"]?.string, let shape = Self.integers(value["shape"]),
                  let offsets = Self.integers(value["data_offsets"]), offsets.count == 2
            else { throw .safetensors(path: path, reason: "tensor '\(name)': entry lacks dtype, shape or data_offsets") }
            guard supportedDTypes.contains(dtype) else {
                throw .tensorDType(path: path, name: name, found: dtype, expected: supportedDTypes.joined(separator: ", "))
            }
            let width = dtype == "F32" ? 4 : 2
            // The element count and byte size, refusing shapes whose product overflows.
            var count = 1, overflow = false
            for d in shape + [width] {
                let (product, over) = count.multipliedReportingOverflow(by: max(d, 0))
                count = product
                overflow = overflow || over || d < 0
            }
            let bytes = count
            count = overflow ? 0 : bytes / width
            guard !overflow, offsets[0] >= 0, offsets[0] <= offsets[1], offsets[1] <= dataLength,
                  offsets[1] - offsets[0] == bytes
            else {
                throw .safetensors(path: path, reason: "tensor '\(name)': offsets \(offsets) do not hold \(shape) \(dtype) within \(dataLength) data bytes")
            }
            let start = headerEnd + offsets[0]
            let values: [Float] = data.withUnsafeBytes { raw in
                (0..<count).map { i in
                    switch dtype {
                    case "F32": return Float(bitPattern: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: start + 4 * i, as: UInt32.self)))
                    case "F16": return Float(Float16(bitPattern: UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: start + 2 * i, as: UInt16.self))))
                    default:  // BF16: the high half of a float32
                        let bits = UInt32(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: start + 2 * i, as: UInt16.self)))
                        return Float(bitPattern: bits << 16)
                    }
                }
            }
            if let bad = values.firstIndex(where: { !$0.isFinite }) {
                throw .safetensors(path: path, reason: "tensor '\(name)': value \(bad) is \(values[bad]); weights must be finite numbers")
            }
            tensors[name] = Tensor(shape: shape, dtype: dtype, values: values)
            ranges.append((offsets[0]..<offsets[1], name))
        }
        // Every tensor has bytes of its own: two that share bytes are a damaged (or forged) file.
        ranges.sort { ($0.range.lowerBound, $0.range.upperBound, $0.name) < ($1.range.lowerBound, $1.range.upperBound, $1.name) }
        for (a, b) in zip(ranges, ranges.dropFirst()) where b.range.lowerBound < a.range.upperBound {
            throw .safetensors(path: path, reason: "tensors '\(a.name)' (bytes \(a.range.lowerBound)..<\(a.range.upperBound)) and '\(b.name)' (bytes \(b.range.lowerBound)..<\(b.range.upperBound)) overlap")
        }
        return tensors
    }

    /// A header's list of whole numbers (nil when it is not one).
    private static func integers(_ value: JSONValue?) -> [Int]? {
        guard let array = value?.array else { return nil }
        let numbers = array.compactMap(\.integer)
        return numbers.count == array.count ? numbers : nil
    }

    /// F32 tensors as a safetensors file's bytes, names in sorted order (the same tensors give
    /// the same bytes).
    static func serialize(_ tensors: [String: Tensor]) -> Data {
        var header: [String] = []
        var body = Data()
        for name in tensors.keys.sorted() {
            let t = tensors[name]!  // a key of the dictionary being walked
            let begin = body.count
            for v in t.values { withUnsafeBytes(of: v.bitPattern.littleEndian) { body.append(contentsOf: $0) } }
            let shape = t.shape.map(String.init).joined(separator: ",")
            header.append("\(JSONText.quoted(name)):{\"dtype\":\"F32\",\"shape\":[\(shape)],\"data_offsets\":[\(begin),\(body.count)]}")
        }
        var json = Data("{\(header.joined(separator: ","))}".utf8)
        while json.count % 8 != 0 { json.append(0x20) }  // the data starts 8-byte aligned
        var out = Data()
        withUnsafeBytes(of: UInt64(json.count).littleEndian) { out.append(contentsOf: $0) }
        return out + json + body
    }

    /// FNV-1a, 64 bit, of the bytes: identifies a weights file's content.
    package static func contentHash(_ data: Data) -> String {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        data.withUnsafeBytes { raw in
            for byte in raw {
                hash ^= UInt64(byte)
                hash &*= 0x0000_0100_0000_01B3
            }
        }
        return String(hash, radix: 16).leftPadded(to: 16)
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
