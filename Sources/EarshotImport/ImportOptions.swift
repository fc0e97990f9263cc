import EarshotModel
import Foundation

/// How a model is imported, by every importer (ONNX, TFLite, openWakeWord): which inputs are
/// audio, state and settings, the step's size, the front end, and what the package says of
/// itself.
public struct ImportOptions: Sendable {
    /// Values for inputs that are settings, not audio (e.g. "sr": 16000).
    public var fixed: [String: Double] = [:]
    /// State pairs (input, output); found by name and shape when empty.
    public var states: [(input: String, output: String)] = []
    /// The input that takes audio; the one float input left when nil.
    public var audioInput: String?
    /// The output whose values are the scores; the one output left when nil.
    public var scoreOutput: String?
    /// The model's rate (Hz).
    public var sampleRate = 16000
    /// New samples per step; from the audio input's fixed size when nil.
    public var chunkSamples: Int?
    /// Samples of the previous block before each chunk.
    public var contextSamples = 0
    /// A fixed-window classifier as a stream: the samples it classifies each step (`--window`;
    /// the audio input's length when only `hopSamples` is given). The window is the stream's
    /// state: it starts as zeros, and each step shifts `hopSamples` new samples into it.
    public var windowSamples: Int?
    /// New samples per step of a window stream (`--hop`); the whole window when nil.
    public var hopSamples: Int?
    /// What a step takes: "samples" (a block of audio, the input's last axis), "features" (a
    /// block of features the caller computes, of the input's whole shape) or "microfrontend"
    /// (TFLite Micro's audio front end before a TFLite model). Nil: samples, or features when
    /// one stream's block (a leading batch axis as 1) has more than one axis longer than 1
    /// (openWakeWord's embedding model: [N, 76, 32, 1]).
    public var frontEnd: String?
    /// What the package says of itself (name, labels, decision, author, licence, source, ...);
    /// what it does not say the importer fills in: the name "imported", version "1", labels
    /// from the scores, a source naming the file.
    public var metadata = ModelManifest.Metadata()

    /// The file the labels come from (`--labels-file`), named when their count is wrong.
    public var labelsFile: String?

    /// The defaults.
    public init() {}

    /// Checks that the labels are one per score: a labels file of another count is named.
    func checkLabels(_ labels: [String], scores: Int, path: String) throws(ImportError) {
        guard labels.count != scores else { return }
        if let file = labelsFile {
            throw .labelsFile(path: file, reason: "\(labels.count) labels, but \(URL(fileURLWithPath: path).lastPathComponent) gives \(scores) scores",
                              hint: "give the labels file of this model: one label per score, in the scores' order")
        }
        throw .interface(path: path, reason: "\(labels.count) labels for \(scores) scores", hint: "give --labels or --labels-file with \(scores) names")
    }

    /// Whether the model is imported as a fixed-window stream (`--window` or `--hop` given).
    public var windowed: Bool { windowSamples != nil || hopSamples != nil }

    /// A window stream's (chunk, context): hop new samples after the window's other samples.
    /// `length` is the audio input's length when the model fixes it; nil when not.
    func window(length: Int?, path: String) throws(ImportError) -> (chunk: Int, context: Int) {
        guard chunkSamples == nil, contextSamples == 0 else {
            throw .interface(path: path, reason: "--window/--hop and --chunk/--context both say how the model streams",
                             hint: "give --window N --hop H (a window stream) or --chunk and --context, not both")
        }
        guard let window = windowSamples ?? length else {
            throw .interface(path: path, reason: "the audio input's length is not fixed", hint: "give --window N (the samples it classifies)")
        }
        if let length, length != window {
            throw .interface(path: path, reason: "--window \(window): the model's audio input takes \(length) samples",
                             hint: "leave --window out (it is the input's length) or give --window \(length)")
        }
        let hop = hopSamples ?? window
        guard window > 0, hop > 0, hop <= window else {
            throw .interface(path: path, reason: "--hop \(hop) with --window \(window)", hint: "the hop is 1 to \(window) samples")
        }
        return (hop, window - hop)
    }

    /// The package's name.
    var name: String { metadata.name ?? "imported" }

    /// The labels given (nil when none are).
    var labels: [String]? { metadata.labels.flatMap { $0.isEmpty ? nil : $0 } }

    /// The package's manifest with `metadata` (a source of its own before `source`) and the
    /// given labels and decision.
    func manifest(source: String, audio: ModelManifest.Audio, frontEnd: ModelManifest.FrontEnd, labels: [String],
                  decision: ModelManifest.Decision?) -> ModelManifest {
        var m = ModelManifest(name: name, version: metadata.version ?? "1", description: metadata.description, author: metadata.author,
                              license: metadata.license, source: metadata.source ?? source, audio: audio, frontEnd: frontEnd, network: [],
                              outputs: .init(activation: .none, labels: labels), decision: decision)
        m.url = metadata.url
        m.phrase = metadata.phrase
        m.languages = metadata.languages
        return m
    }
}
