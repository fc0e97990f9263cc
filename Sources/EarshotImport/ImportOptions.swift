import EarshotModel

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

    /// The defaults.
    public init() {}

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
