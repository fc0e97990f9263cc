import Foundation

/// A file of labels (`earshot import --labels-file`): one label a line (BirdNET's
/// `Scientific name_Common name` lines are kept whole), or a CSV (a `.csv` file, or a first line
/// with a `name`, `display_name` or `label` column among commas, as YAMNet's class map has)
/// whose name column gives them. Quoted CSV fields may hold commas and doubled quotes.
public enum LabelsFile {
    /// The columns that name the labels in a CSV, in order of preference (case ignored).
    static let nameColumns = ["name", "display_name", "label", "labels", "class", "class_name"]

    /// The most labels a file may give (a model's scores are at most 2^24 values).
    static let maxLabels = 1 << 20

    /// Reads the labels at `path`.
    public static func read(path: String) throws(ImportError) -> [String] {
        guard let data = FileManager.default.contents(atPath: path) else {
            let reason = FileManager.default.fileExists(atPath: path) ? "cannot read the file" : "no such file"
            throw .labelsFile(path: path, reason: reason, hint: "give a file of labels, one a line, or a CSV with a name column")
        }
        guard var text = String(data: data, encoding: .utf8) else {
            throw .labelsFile(path: path, reason: "not UTF-8 text", hint: "save the labels as UTF-8")
        }
        if text.hasPrefix("\u{FEFF}") { text.removeFirst() }
        return try parse(text, path: path)
    }

    /// The labels of a file's text (`path` names it in errors and says whether it is a CSV).
    static func parse(_ text: String, path: String) throws(ImportError) -> [String] {
        // Lines (\n, \r\n: one Character in Swift, or \r); trailing empty lines are no labels.
        var lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).map(String.init)
        while let last = lines.last, last.trimmingCharacters(in: .whitespaces).isEmpty { lines.removeLast() }
        guard !lines.isEmpty else { throw .labelsFile(path: path, reason: "no labels", hint: "write one label a line") }
        guard lines.count <= maxLabels + 1 else {
            throw .labelsFile(path: path, reason: "\(lines.count) lines, more than \(maxLabels) labels", hint: "give one label per score")
        }
        let header = fields(lines[0]).map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        let column = nameColumns.lazy.compactMap { header.firstIndex(of: $0) }.first
        let csv = path.lowercased().hasSuffix(".csv") || (header.count > 1 && column != nil)
        var labels: [String] = []
        labels.reserveCapacity(lines.count)
        if csv {
            guard let column else {
                throw .labelsFile(path: path, reason: "the CSV's first line (\(header.joined(separator: ", "))) has no name column",
                                  hint: "name the labels' column one of: \(nameColumns.joined(separator: ", "))")
            }
            for (i, line) in lines.enumerated().dropFirst() {
                let row = fields(line)
                guard column < row.count else {
                    throw .labelsFile(path: path, reason: "line \(i + 1) has \(row.count) fields, no \(header[column]) column", hint: "give every row its name")
                }
                labels.append(row[column].trimmingCharacters(in: .whitespaces))
            }
        } else {
            labels = lines.map { $0.trimmingCharacters(in: .whitespaces) }
        }
        if let empty = labels.firstIndex(where: \.isEmpty) {
            throw .labelsFile(path: path, reason: "label \(empty + 1) (line \(empty + (csv ? 2 : 1))) is empty", hint: "give every score a name")
        }
        return labels
    }

    /// A CSV line's fields: commas outside quotes split them; a quoted field's "" is one ".
    static func fields(_ line: String) -> [String] {
        var fields: [String] = [], field = "", quoted = false
        var chars = line.makeIterator()
        var pending: Character? = nil
        while let c = pending ?? chars.next() {
            pending = nil
            if quoted {
                if c == "\"" {
                    if let next = chars.next() {
                        if next == "\"" { field.append("\"") } else { quoted = false; pending = next }
                    } else { quoted = false }
                } else { field.append(c) }
            } else if c == "\"" && field.isEmpty {
                quoted = true
            } else if c == "," {
                fields.append(field)
                field = ""
            } else { field.append(c) }
        }
        fields.append(field)
        return fields
    }
}
