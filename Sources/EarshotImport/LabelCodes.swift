import EarshotJSON
import EarshotModel
import Foundation

/// A file of labels' short codes (`earshot import --label-codes`): a JSON object whose keys are
/// labels and whose values are their codes, as BirdNET-Analyzer's eBird taxonomy file
/// (`eBird_taxonomy_codes_2024E.json`) maps "Scientific name_Common name" to an eBird species
/// code. Keys that are not labels of the model are passed over (that file also maps each code
/// back to its label); a Raven table writes a label's code as its Species Code.
public enum LabelCodes {
    /// The largest file read (BirdNET-Analyzer's is about 0.5 MB).
    static let maxBytes = 64 << 20

    /// The codes of `labels` that the file at `path` gives.
    public static func read(path: String, labels: [String]) throws(ImportError) -> [String: String] {
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? nil
        guard let size, let data = size <= maxBytes ? FileManager.default.contents(atPath: path) : nil else {
            let reason = !FileManager.default.fileExists(atPath: path) ? "no such file"
                : (size ?? 0) > maxBytes ? "more than \(maxBytes >> 20) MB" : "cannot read the file"
            throw .labelCodes(path: path, reason: reason)
        }
        return try parse([UInt8](data), path: path, labels: labels)
    }

    /// The codes of `labels` in a file's bytes (`path` names it in errors).
    static func parse(_ bytes: [UInt8], path: String, labels: [String]) throws(ImportError) -> [String: String] {
        let object: [String: JSONValue]
        do {
            guard let o = try JSONValue.parse(bytes).object else { throw ImportError.labelCodes(path: path, reason: "not a JSON object of label: code") }
            object = o
        } catch let error as ImportError {
            throw error
        } catch {
            throw .labelCodes(path: path, reason: "not JSON (\(error))")
        }
        var codes: [String: String] = [:]
        for label in labels {
            guard let value = object[label] else { continue }
            guard let code = value.string, ModelManifest.Outputs.isLabelCode(code) else {
                throw .labelCodes(path: path, reason: "the code of '\(label)' is not a one-line string")
            }
            codes[label] = code
        }
        guard !codes.isEmpty else { throw .labelCodes(path: path, reason: "none of its keys is a label of the model") }
        return codes
    }
}
