import EarshotAudio
import EarshotModel
import Foundation

/// Why training or evaluation could not go on: names the file, folder or option and the reason.
public enum TrainingError: Error, Equatable, Sendable, CustomStringConvertible {
    case data(path: String, reason: String)
    case option(name: String, value: String, expected: String)
    case audio(path: String, reason: String)
    case model(reason: String)

    /// The text of `error`, met reading `path`, as the reason of a case that names the file: a
    /// library's error names it first, so that name is left out (the file is named once).
    static func reason(_ error: any Error, of path: String) -> String {
        let text = "\(error)"
        return text.hasPrefix(path + ": ") ? String(text.dropFirst(path.count + 2)) : text
    }

    public var description: String {
        switch self {
        case let .data(path, reason): return "\(path): \(reason)"
        case let .option(name, value, expected): return "--\(name) \(value): expected \(expected)"
        case let .audio(path, reason): return "\(path): \(reason)"
        case let .model(reason): return reason
        }
    }
}

/// One labelled recording.
public struct LabelledFile: Sendable, Equatable {
    /// The clip.
    public var path: String
    /// Its label.
    public var label: String
    /// What must not be split between training and validation (a speaker, say).
    public var group: String
}

/// Labelled audio: one subfolder per label (Create ML's labelled directories), or a CSV of
/// `file,label` lines (paths relative to the CSV's folder; a header line `file,label` is allowed).
public struct Dataset: Sendable, Equatable {
    /// Labels, sorted.
    public var labels: [String]
    /// The clips.
    public var files: [LabelledFile]
    /// Where it was read from.
    public var source: String

    /// File extensions taken as audio.
    public static let audioExtensions: Set<String> = ["wav", "flac", "ogg", "oga", "aif", "aiff", "aifc", "au", "caf", "w64", "mp3"]

    /// Reads a folder or CSV. `groupBy` is a regular expression on each file's name: its first
    /// capture group (or, without one, the whole match) is the file's group; files it does not
    /// match are groups of their own.
    /// `minimumLabels`: 2 for training a classifier; evaluation takes files of one label too.
    public static func load(_ path: String, groupBy: String? = nil, minimumLabels: Int = 2) throws(TrainingError) -> Dataset {
        let regex: NSRegularExpression?
        do { regex = try groupBy.map { try NSRegularExpression(pattern: $0) } } catch {
            throw .option(name: "group-by", value: groupBy ?? "", expected: "a regular expression (\(error.localizedDescription))")
        }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
            throw .data(path: path, reason: "no such folder or file")
        }
        let pairs = isFolder.boolValue ? try folderPairs(path) : try csvPairs(path)
        guard !pairs.isEmpty else { throw .data(path: path, reason: "no labelled audio files found") }
        let files = pairs.map { LabelledFile(path: $0.path, label: $0.label, group: group(of: $0.path, regex)) }
        let labels = Array(Set(files.map(\.label))).sorted()
        guard labels.count >= minimumLabels else { throw .data(path: path, reason: "one label (\(labels[0])): a classifier needs two or more") }
        return Dataset(labels: labels, files: files, source: path)
    }

    private static func group(of path: String, _ regex: NSRegularExpression?) -> String {
        let name = (path as NSString).lastPathComponent
        guard let regex, let match = regex.firstMatch(in: name, range: NSRange(name.startIndex..., in: name)) else { return name }
        let range = match.numberOfRanges > 1 && match.range(at: 1).location != NSNotFound ? match.range(at: 1) : match.range
        return Range(range, in: name).map { String(name[$0]) } ?? name
    }

    private static func folderPairs(_ root: String) throws(TrainingError) -> [(path: String, label: String)] {
        let fm = FileManager.default
        let folders: [String]
        do { folders = try fm.contentsOfDirectory(atPath: root).sorted() } catch {
            throw .data(path: root, reason: error.localizedDescription)
        }
        var pairs: [(String, String)] = []
        for label in folders where !label.hasPrefix(".") {
            let folder = (root as NSString).appendingPathComponent(label)
            var isFolder: ObjCBool = false
            guard fm.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else { continue }
            let names = ((try? fm.contentsOfDirectory(atPath: folder)) ?? []).sorted()
            for name in names where audioExtensions.contains((name as NSString).pathExtension.lowercased()) {
                pairs.append(((folder as NSString).appendingPathComponent(name), label))
            }
        }
        return pairs
    }

    private static func csvPairs(_ csv: String) throws(TrainingError) -> [(path: String, label: String)] {
        let text: String
        do { text = try String(contentsOfFile: csv, encoding: .utf8) } catch {
            throw .data(path: csv, reason: error.localizedDescription)
        }
        let base = (csv as NSString).deletingLastPathComponent
        var pairs: [(String, String)] = []
        for (number, line) in text.split(whereSeparator: \.isNewline).enumerated() {
            let fields = line.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            if number == 0 && fields.map({ $0.lowercased() }) == ["file", "label"] { continue }
            guard fields.count == 2, !fields[0].isEmpty, !fields[1].isEmpty else {
                throw .data(path: csv, reason: "line \(number + 1): expected file,label")
            }
            let file = fields[0].hasPrefix("/") ? fields[0] : (base as NSString).appendingPathComponent(fields[0])
            pairs.append((file, fields[1]))
        }
        return pairs
    }

    /// Training and validation halves with no group in both: whole groups, in an order shuffled
    /// by `seed`, go to validation until it holds `fraction` of the files.
    public func split(validationFraction fraction: Double, seed: UInt64) throws(TrainingError) -> (training: Dataset, validation: Dataset) {
        guard fraction > 0 && fraction < 1 else { throw .option(name: "validation-split", value: "\(fraction)", expected: "between 0 and 1") }
        var random = SplitMix64(seed: seed)
        let groups = Array(Set(files.map(\.group))).sorted().shuffled(using: &random)
        var held = Set<String>(), count = 0
        let sizes = Dictionary(grouping: files, by: \.group).mapValues(\.count)
        for g in groups where Double(count) < fraction * Double(files.count) {
            held.insert(g)
            count += sizes[g] ?? 0
        }
        let validation = files.filter { held.contains($0.group) }, training = files.filter { !held.contains($0.group) }
        guard !validation.isEmpty, !training.isEmpty else {
            throw .data(path: source, reason: "\(groups.count) group(s): too few to split into training and validation")
        }
        return (Dataset(labels: labels, files: training, source: source), Dataset(labels: labels, files: validation, source: source))
    }

    /// Files per label, in `labels` order.
    public var counts: [Int] { labels.map { l in files.filter { $0.label == l }.count } }
}

/// Reads each file mixed to mono and resampled to `rate`, on every core; a file that cannot be
/// read, or that holds NaN or infinite samples, is an error naming it.
func loadAudio(_ files: [LabelledFile], rate: Int) throws(TrainingError) -> [[Float]] {
    try loadAudioEach(files, rate: rate).map { (r) throws(TrainingError) in try r.get() }
}

/// As `loadAudio`, each file's outcome on its own (one bad file does not stop the others).
func loadAudioEach(_ files: [LabelledFile], rate: Int) -> [Result<[Float], TrainingError>] {
    parallelMap(files.count) { i -> Result<[Float], TrainingError> in
        let path = files[i].path
        do {
            let (samples, sourceRate) = try AudioFile.readMono(path: path)
            if let bad = samples.firstIndex(where: { !$0.isFinite }) {
                return .failure(.audio(path: path, reason: "sample \(bad) is \(samples[bad]): audio must be finite"))
            }
            guard sourceRate != rate else { return .success(samples) }
            let resampler = try Resampler(inputRate: Double(sourceRate), outputRate: Double(rate))
            return .success(try resampler.process(samples) + resampler.finish())
        } catch {
            return .failure(.audio(path: path, reason: TrainingError.reason(error, of: path)))
        }
    }
}
