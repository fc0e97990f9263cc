import EarshotFeatures

/// model.json: what a person reads and edits to know and change a model package.
public struct ModelManifest: Codable, Sendable, Equatable {
    /// The `format` every package says.
    public static let format = "earshot-model"
    /// The `formatVersion` this Earshot reads and writes.
    public static let formatVersion = 1

    /// "earshot-model".
    public var format: String
    /// The manifest format's version (1).
    public var formatVersion: Int
    /// The package's name: how `--model NAME`, `detection` and `info` call it.
    public var name: String
    /// The model's own version (its author's).
    public var version: String?
    /// One line on what it does, for people.
    public var description: String?
    /// Who made the model.
    public var author: String?
    /// The model's licence (an SPDX id where there is one).
    public var license: String?
    /// Where it came from (a file and a release, or the command that made it).
    public var source: String?
    /// Where the model comes from (its author's page), for attribution.
    public var url: String?
    /// Wake-word models: the words they listen for (e.g. "Okay Nabu").
    public var phrase: String?
    /// The languages the model was trained on (BCP 47 codes, e.g. "en").
    public var languages: [String]?
    /// The audio a step takes.
    public var audio: Audio
    /// What the front end makes of each block.
    public var frontEnd: FrontEnd
    /// A chain of layers (empty for a graph).
    public var network: [LayerSpec]
    /// A graph of ops instead of a chain of layers (imported models); `network` is then empty.
    public var graph: GraphSpec?
    /// How scores come out, and their labels.
    public var outputs: Outputs
    /// The default label rules (segments or detections); every one can be overridden.
    public var decision: Decision?
    /// How a trained classifier was made and how it decides on a whole clip.
    public var training: Training?
    /// The arithmetic of a graph's products unless the caller chooses (`fp32` when absent):
    /// `bf16` for a model checked to keep its results with it (`Precision`).
    public var precision: Precision?
    /// Nodes of the graph whose products stay fp32 when it runs in bf16: those whose rounding
    /// the model's results do not tolerate (openWakeWord's front end and embedding).
    public var fp32Nodes: [String]?

    /// A manifest.
    public init(format: String = ModelManifest.format, formatVersion: Int = ModelManifest.formatVersion, name: String,
                version: String? = nil, description: String? = nil, author: String? = nil, license: String? = nil,
                source: String? = nil, audio: Audio, frontEnd: FrontEnd, network: [LayerSpec], outputs: Outputs,
                decision: Decision? = nil, training: Training? = nil) {
        self.format = format
        self.formatVersion = formatVersion
        self.name = name
        self.version = version
        self.description = description
        self.author = author
        self.license = license
        self.source = source
        self.audio = audio
        self.frontEnd = frontEnd
        self.network = network
        self.outputs = outputs
        self.decision = decision
        self.training = training
    }

    /// The audio a step takes: rate, new samples per step, and samples of context before them.
    public struct Audio: Codable, Sendable, Equatable {
        /// Hz.
        public var sampleRate: Int
        /// New samples per model step (one block).
        public var chunkSamples: Int
        /// Samples of the previous block prepended to each block (zeros at stream start).
        public var contextSamples: Int

        /// The audio of a step.
        public init(sampleRate: Int, chunkSamples: Int, contextSamples: Int) {
            self.sampleRate = sampleRate
            self.chunkSamples = chunkSamples
            self.contextSamples = contextSamples
        }
    }

    /// The feature front end, applied to each block (context + chunk): STFT frames of the block,
    /// after padding its ends.
    public struct FrontEnd: Codable, Sendable, Equatable {
        /// STFT frames, the block of samples, or features the caller computes.
        public var type: FrontEndKind
        /// STFT: the FFT size.
        public var nFFT: Int
        /// STFT: samples between frames.
        public var hopLength: Int
        /// STFT: the window's length (default nFFT; centred in the FFT).
        public var winLength: Int?
        /// STFT: the window (default Hann).
        public var window: WindowKind?
        /// STFT: a periodic (true, as librosa) or symmetric window.
        public var periodic: Bool?
        /// STFT: samples of padding before the block.
        public var padLeft: Int?
        /// STFT: samples of padding after the block.
        public var padRight: Int?
        /// STFT: how the padding is filled.
        public var padMode: STFTConfig.PadMode?
        /// STFT: magnitude or power.
        public var spectrum: STFTConfig.Spectrum?

        /// A front end.
        public init(type: FrontEndKind, nFFT: Int, hopLength: Int, winLength: Int? = nil, window: WindowKind? = nil, periodic: Bool? = nil,
                    padLeft: Int? = nil, padRight: Int? = nil, padMode: STFTConfig.PadMode? = nil, spectrum: STFTConfig.Spectrum? = nil) {
            self.type = type
            self.nFFT = nFFT
            self.hopLength = hopLength
            self.winLength = winLength
            self.window = window
            self.periodic = periodic
            self.padLeft = padLeft
            self.padRight = padRight
            self.padMode = padMode
            self.spectrum = spectrum
        }
    }

    /// How the network's last output becomes one score per label per step.
    public struct Outputs: Codable, Sendable, Equatable {
        /// sigmoid (independent labels), softmax (one of the labels), or none.
        public var activation: Activation
        /// How per-time outputs become one score vector per step: mean or last.
        public var reduceTime: ReduceTime?
        /// One per score, in order.
        public var labels: [String]
        /// How the labels are written (default plain): formats split "Scientific_Common" labels.
        public var labelForm: LabelForm?
        /// Short codes of labels (BirdNET: eBird's species codes), which a Raven table writes as
        /// the Species Code; a label without one is written whole.
        public var labelCodes: [String: String]?

        /// Whether `code` can be a label's code: one line, not empty, no tab (a Raven table's
        /// column).
        public static func isLabelCode(_ code: String) -> Bool {
            !code.isEmpty && !code.contains { $0.isNewline || $0 == "\t" }
        }

        /// The outputs.
        public init(activation: Activation, reduceTime: ReduceTime? = nil, labels: [String]) {
            self.activation = activation
            self.reduceTime = reduceTime
            self.labels = labels
        }
    }

    /// Default settings of the label logic (thresholds in score units, durations in ms/s).
    public struct Decision: Codable, Sendable, Equatable {
        /// A step at or above it starts (or continues) a segment; a detection needs its window's mean above it.
        public var threshold: Double?
        /// Below it a step is silence inside a segment (default threshold - 0.15).
        public var negativeThreshold: Double?
        /// Segments this short or shorter are dropped.
        public var minSegmentMs: Double?
        /// Silence this long ends a segment.
        public var minSilenceMs: Double?
        /// Added before and after each segment.
        public var padMs: Double?
        /// Longer segments are split.
        public var maxSegmentSeconds: Double?
        /// Only silences longer than this are split points for long segments.
        public var minSilenceAtMaxSegmentMs: Double?
        /// Split long segments at their longest silence (true) or their last.
        public var splitAtLongestSilence: Bool?
        /// Softmax models: the label that is not an event (e.g. "_silence_").
        public var backgroundLabel: String?
        /// Wake words and other events without extent: a label is detected when the mean of
        /// its latest `detectionWindow` scores is above `threshold` (microWakeWord's
        /// sliding_window_size and probability_cutoff). Set, the model gives detections, not segments.
        public var detectionWindow: Int?
        /// After a detection, the same label is not detected again for this long (ms).
        public var refractoryMs: Double?
        /// Many-label window classifiers (sound events, birds): per-label thresholds, the k best
        /// labels of a window, events over consecutive windows. Set, the model gives events.
        public var events: EventRule?

        /// Label rules (nil: the defaults).
        public init(threshold: Double? = nil, minSegmentMs: Double? = nil, minSilenceMs: Double? = nil, padMs: Double? = nil,
                    backgroundLabel: String? = nil) {
            self.threshold = threshold
            self.minSegmentMs = minSegmentMs
            self.minSilenceMs = minSilenceMs
            self.padMs = padMs
            self.backgroundLabel = backgroundLabel
        }

        /// Scores are probabilities.
        public static let scoreRange: ClosedRange<Double> = 0...1
        /// Durations in ms: up to a day.
        public static let durationRangeMs: ClosedRange<Double> = 0...86_400_000
        /// Steps a detection averages.
        public static let detectionWindowRange: ClosedRange<Int> = 1...10_000
        /// The longest segment before a split, in seconds: 1 ms to a day.
        public static let maxSegmentRangeSeconds: ClosedRange<Double> = 0.001...86_400

        /// The first setting outside its range: (field, value, the range expected), or nil.
        public func firstInvalid() -> (field: String, value: Double, expected: String)? {
            let scores: [(String, Double?)] = [("threshold", threshold), ("negativeThreshold", negativeThreshold)]
            for case let (name, v?) in scores where !Self.scoreRange.contains(v) { return (name, v, "0...1") }
            let durations: [(String, Double?)] = [("minSegmentMs", minSegmentMs), ("minSilenceMs", minSilenceMs), ("padMs", padMs),
                                                  ("minSilenceAtMaxSegmentMs", minSilenceAtMaxSegmentMs)]
            for case let (name, v?) in durations where !Self.durationRangeMs.contains(v) {
                return (name, v, "\(Int(Self.durationRangeMs.lowerBound))...\(Int(Self.durationRangeMs.upperBound)) ms")
            }
            if let v = maxSegmentSeconds, !Self.maxSegmentRangeSeconds.contains(v) {
                return ("maxSegmentSeconds", v, "\(Self.maxSegmentRangeSeconds.lowerBound)...\(Int(Self.maxSegmentRangeSeconds.upperBound)) s")
            }
            if let w = detectionWindow, !Self.detectionWindowRange.contains(w) {
                return ("detectionWindow", Double(w), "\(Self.detectionWindowRange.lowerBound)...\(Self.detectionWindowRange.upperBound) steps")
            }
            if let v = refractoryMs, !Self.durationRangeMs.contains(v) {
                return ("refractoryMs", v, "\(Int(Self.durationRangeMs.lowerBound))...\(Int(Self.durationRangeMs.upperBound)) ms")
            }
            return nil
        }
    }

    /// Written by `earshot train`.
    public struct Training: Codable, Sendable, Equatable {
        /// A clip is fitted to this length (cut at the end, or padded with silence) before it is run.
        public var clipSeconds: Double
        /// A clip's class: the mean of the scores of its last steps covering this long.
        public var decisionSeconds: Double
        /// The command line and the figures of the run, for the record.
        public var command: String?
        /// The layers asked for (`--architecture`).
        public var architecture: String?
        /// The front end asked for (`--features`).
        public var features: String?
        /// The seed of every random choice of the training.
        public var seed: Int?
        /// Epochs run.
        public var epochs: Int?
        /// Clip accuracy on the validation set at the epoch kept.
        public var validationAccuracy: Double?
        /// Wall time of the training.
        public var trainingSeconds: Double?

        /// A training record.
        public init(clipSeconds: Double, decisionSeconds: Double) {
            self.clipSeconds = clipSeconds
            self.decisionSeconds = decisionSeconds
        }
    }
}

/// One layer of the network as the manifest gives it. Which fields apply depends on `type`.
public struct LayerSpec: Codable, Sendable, Equatable {
    /// The layer type (conv1d, lstm, gru, linear, layerNorm, batchNorm, an activation, ...).
    public var type: String
    /// The layer's name (for messages and `inspect`).
    public var name: String?
    // conv1d
    /// conv1d: input channels.
    public var inChannels: Int?
    /// conv1d: output channels.
    public var outChannels: Int?
    /// conv1d: taps.
    public var kernelSize: Int?
    /// conv1d: stride.
    public var stride: Int?
    /// conv1d: padding on each side.
    public var padding: Int?
    /// conv1d: dilation.
    public var dilation: Int?
    /// conv1d: groups.
    public var groups: Int?
    /// The weight tensor's name.
    public var weight: String?
    /// The bias tensor's name.
    public var bias: String?
    /// conv1d: pad nothing on the right; carry the last (kernelSize - 1) * dilation input
    /// frames from step to step in the state (zeros at stream start).
    public var causal: Bool?
    // linear
    /// linear: inputs.
    public var inFeatures: Int?
    /// linear: outputs.
    public var outFeatures: Int?
    // lstm, gru
    /// lstm, gru: inputs.
    public var inputSize: Int?
    /// lstm, gru: hidden units.
    public var hiddenSize: Int?
    /// lstm, gru: stacked layers.
    public var numLayers: Int?
    /// lstm, gru: the gates' order in the weights (e.g. ifgo).
    public var gateOrder: String?
    /// lstm, gru: a tensor of first states (default zeros).
    public var initialState: String?
    /// lstm, gru: input weights.
    public var weightIH: String?
    /// lstm, gru: recurrent weights.
    public var weightHH: String?
    /// lstm, gru: input bias.
    public var biasIH: String?
    /// lstm, gru: recurrent bias.
    public var biasHH: String?
    // layerNorm, batchNorm
    /// layerNorm: features normalized.
    public var normalizedShape: Int?
    /// batchNorm: features.
    public var numFeatures: Int?
    /// layerNorm, batchNorm: epsilon.
    public var eps: Double?
    /// batchNorm: the running mean's tensor.
    public var runningMean: String?
    /// batchNorm: the running variance's tensor.
    public var runningVar: String?

    /// A layer of a type, its fields to fill.
    public init(type: String) { self.type = type }
}

/// A manifest field with a fixed set of values: decoded from its string, and a value outside
/// the set is refused naming the field's choices.
public protocol ManifestChoice: RawRepresentable, Codable, CaseIterable, Sendable, Equatable where RawValue == String {}

extension ManifestChoice {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = Self(rawValue: text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription:
                "'\(text)': expected one of \(Self.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

extension ModelManifest {
    /// What a package's front end makes of each block: STFT frames (a chain of layers), the block
    /// of samples itself, or a block of features the caller computes (graphs).
    public enum FrontEndKind: String, ManifestChoice {
        case stft, samples, features
    }

    /// How scores come out of the network: as they are, through a sigmoid (independent labels)
    /// or a softmax (one of the labels).
    public enum Activation: String, ManifestChoice {
        case none, sigmoid, softmax
    }

    /// How per-time outputs become one score vector per step.
    public enum ReduceTime: String, ManifestChoice {
        case mean, last
    }
}
