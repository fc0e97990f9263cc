import CEarshotKernels
import EarshotFeatures
import EarshotGraph
import Foundation

/// A stateful sequence model: immutable weights, loaded once and shared by every stream
/// (`Sendable`); the per-stream state is a separate value (`makeState()`).
///
///     let model = try Model(contentsOf: URL(fileURLWithPath: "Models/silero-vad"))
///     var state = model.makeState()
///     let scores = try model.prediction(from: block, using: &state)
public final class Model: Sendable {
    /// The package's model.json.
    public let manifest: ModelManifest
    /// The package folder.
    public let path: String
    /// FNV-1a 64 of weights.safetensors: identifies the weights.
    public let contentHash: String
    /// `contentHash` as a number (see `ModelState.modelKey`).
    let contentKey: UInt64?
    let layers: [Layer]
    /// An imported graph (then `layers` is empty and the front end is the raw block).
    let graph: GraphProgram?
    let frontEnd: STFTConfig
    /// [nFFT] analysis window, computed once.
    let window: [Float]
    let padLeft: Int, padRight: Int
    /// Per position of a padded block: where it reads from in context + block (-1: a zero).
    let padSource: [Int]
    /// How the front end's FFT is planned (`.estimate`: the same bits in every process).
    public let fftPlanning: FFTPlanning
    /// The arithmetic its graph's products run in: the one asked for at load, else the
    /// manifest's `precision`, else fp32. A chain of layers runs in fp32 whatever is asked.
    public let precision: Precision
    /// Workspaces not in use, taken by one step at a time (`withWorkspace`).
    let workspaces = Locked<[WorkspaceBox]>([])
    /// Workspaces of graph tiles run ahead (`predictions(forConsecutive:)`), kept for the next.
    let tileWorkspaces = Locked<[GraphWorkspace]>([])
    /// Per layer: where its carry starts in the state.
    let stateOffsets: [Int]
    let stateCount: Int
    /// Per layer: input (channels, time).
    let shapes: [(channels: Int, time: Int)]
    /// Per layer: its type as the manifest gives it ("conv1d+batchNorm" where one was folded in).
    let layerTypes: [String]
    let weightsBytes: Int

    /// The package's name.
    public var name: String { manifest.name }
    /// The audio rate a step takes (Hz).
    public var sampleRate: Int { manifest.audio.sampleRate }
    /// New samples per step.
    public var chunkSamples: Int { manifest.audio.chunkSamples }
    /// One per score, in order.
    public var labels: [String] { manifest.outputs.labels }

    /// Loads and checks a package: `folder/model.json` and `folder/weights.safetensors`. Every
    /// tensor is checked against its layer before any audio is seen.
    ///
    ///     let model = try Model(contentsOf: URL(fileURLWithPath: "Models/silero-vad"))
    ///     var state = model.makeState()
    ///     let speech = try model.prediction(from: block, using: &state)[0]
    ///
    /// - Parameters:
    ///   - folder: the package folder.
    ///   - precision: the arithmetic of the graph's products (nil: the manifest's `precision`,
    ///     else fp32).
    ///   - stepSamples: new samples per step, for a model of samples (a window stream's hop, per
    ///     run): its block (context and chunk) stays, the chunk becomes this many samples, 1 up
    ///     to the block. Nil: the package's.
    /// - Throws: `ModelError` naming the file and the field, tensor or layer that is missing,
    ///   damaged or inconsistent (`.notFound`, `.cannotRead`, `.manifest`, `.safetensors`, `.tensorShape`, ...).
    public convenience init(contentsOf folder: URL, precision: Precision? = nil, stepSamples: Int? = nil) throws(ModelError) {
        let manifestPath = folder.appendingPathComponent("model.json").path
        let weightsPath = folder.appendingPathComponent("weights.safetensors").path
        // A folder that is not a package is a missing input, said as such (not an I/O error).
        let fm = FileManager.default
        guard fm.fileExists(atPath: folder.path) else { throw .notFound(folder: folder.path, file: nil) }
        for (file, path) in [("model.json", manifestPath), ("weights.safetensors", weightsPath)] where !fm.fileExists(atPath: path) {
            throw .notFound(folder: folder.path, file: file)
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: manifestPath))
        } catch {
            throw .cannotRead(path: manifestPath, reason: error.localizedDescription)
        }
        var manifest: ModelManifest
        do {
            manifest = try JSONDecoder().decode(ModelManifest.self, from: data)
        } catch {
            throw .manifest(path: manifestPath, reason: Self.describe(error))
        }
        if let step = stepSamples {
            let block = manifest.audio.contextSamples + manifest.audio.chunkSamples
            guard manifest.frontEnd.type == .samples, manifest.graph != nil, (1...block).contains(step) else {
                throw .manifest(path: manifestPath, reason: "a step of \(step) samples: only a graph of samples takes its step per run, 1 to its block of \(block)")
            }
            manifest.audio.chunkSamples = step
            manifest.audio.contextSamples = block - step
        }
        let weights = try SafeTensors.map(path: weightsPath)
        // The weights' hash (a pass over every byte) is taken on another thread while the model is built.
        let hash = Background { SafeTensors.contentHash(weights) }
        // Done before the load returns, even on an error: the file is mapped, and one changed
        // later must not be read.
        defer { _ = hash.value() }
        try self.init(manifest: manifest, tensors: try SafeTensors.parse(weights, path: weightsPath), path: folder.path,
                      contentHash: hash.value, weightsBytes: weights.count, precision: precision)
    }

    /// A model from a manifest and tensors in memory, checked as a package on disk is.
    public convenience init(manifest: ModelManifest, tensors: [String: Tensor], name path: String = "(in memory)",
                            fftPlanning: FFTPlanning = .estimate, precision: Precision? = nil) throws(ModelError) {
        let data = SafeTensors.serialize(tensors)
        let hash = SafeTensors.contentHash(data)
        try self.init(manifest: manifest, tensors: tensors, path: path, contentHash: { hash }, weightsBytes: data.count,
                      fftPlanning: fftPlanning, precision: precision)
    }

    /// Writes a package: `folder/model.json` and `folder/weights.safetensors` (F32). Loading it
    /// gives a model equal to `Model(manifest:tensors:)`. The package is written whole into a
    /// temporary folder beside `folder` and renamed into place, so a failed write leaves nothing
    /// half-made; an existing `folder` is refused unless `replacing` (then it is replaced whole:
    /// no stale file of the old package stays).
    public static func write(manifest: ModelManifest, tensors: [String: Tensor], to folder: URL,
                             replacing: Bool = false) throws(ModelError) {
        let fm = FileManager.default
        let target = folder.standardizedFileURL
        let exists = fm.fileExists(atPath: target.path)
        if exists && !replacing {
            throw .cannotWrite(path: target.path, reason: "a file or folder is there already (replace it explicitly)")
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let parent = target.deletingLastPathComponent()
        let temporary = parent.appendingPathComponent(".\(target.lastPathComponent).\(UUID().uuidString).partial")
        let aside = parent.appendingPathComponent(".\(target.lastPathComponent).\(UUID().uuidString).old")
        do {
            try fm.createDirectory(at: parent, withIntermediateDirectories: true)
            try fm.createDirectory(at: temporary, withIntermediateDirectories: false)
            try (encoder.encode(manifest) + Data("\n".utf8)).write(to: temporary.appendingPathComponent("model.json"))
            try SafeTensors.serialize(tensors).write(to: temporary.appendingPathComponent("weights.safetensors"))
            if exists {
                try fm.moveItem(at: target, to: aside)
                do { try fm.moveItem(at: temporary, to: target) } catch {
                    try? fm.moveItem(at: aside, to: target)  // put the old package back
                    throw error
                }
                try? fm.removeItem(at: aside)
            } else {
                try fm.moveItem(at: temporary, to: target)
            }
        } catch {
            try? fm.removeItem(at: temporary)
            throw .cannotWrite(path: target.path, reason: error.localizedDescription)
        }
    }

    /// `contentHash` gives the weights' hash when the model is otherwise built.
    init(manifest: ModelManifest, tensors: [String: Tensor], path: String, contentHash: () -> String, weightsBytes: Int,
         fftPlanning: FFTPlanning = .estimate, precision: Precision? = nil) throws(ModelError) {
        self.fftPlanning = fftPlanning
        self.precision = manifest.graph == nil ? .fp32 : precision ?? manifest.precision ?? .fp32
        guard manifest.format == ModelManifest.format, manifest.formatVersion == ModelManifest.formatVersion else {
            throw .unsupportedFormat(path: path, found: "\(manifest.format) v\(manifest.formatVersion)",
                                     expected: "\(ModelManifest.format) v\(ModelManifest.formatVersion)")
        }
        let audio = manifest.audio
        guard (1...Self.maxSampleRate).contains(audio.sampleRate), audio.chunkSamples > 0, audio.contextSamples >= 0 else {
            throw .manifest(path: path, reason: "audio: sampleRate must be in 1...\(Self.maxSampleRate) Hz, chunkSamples > 0, contextSamples >= 0")
        }
        if let bad = manifest.decision?.firstInvalid() {
            throw .manifest(path: path, reason: "decision.\(bad.field) \(bad.value) in the model's manifest: expected \(bad.expected)")
        }
        if let events = manifest.decision?.events {
            if let bad = events.firstInvalid() {
                throw .manifest(path: path, reason: "decision.\(bad.field) \(bad.value) in the model's manifest: expected \(bad.expected)")
            }
            guard manifest.decision?.detectionWindow == nil else {
                throw .manifest(path: path, reason: "decision: a model gives events or detections, not both (events and detectionWindow are set)")
            }
            let labels = Set(manifest.outputs.labels)
            if let unknown = (events.labelThresholds ?? [:]).keys.sorted().first(where: { !labels.contains($0) }) {
                throw .manifest(path: path, reason: "decision.events.labelThresholds: '\(unknown)' is not one of the model's labels")
            }
        }
        if let codes = manifest.outputs.labelCodes {
            let labels = Set(manifest.outputs.labels)
            if let unknown = codes.keys.sorted().first(where: { !labels.contains($0) }) {
                throw .manifest(path: path, reason: "outputs.labelCodes: '\(unknown)' is not one of the model's labels")
            }
            if let bad = codes.sorted(by: { $0.key < $1.key }).first(where: { !ModelManifest.Outputs.isLabelCode($0.value) }) {
                throw .manifest(path: path, reason: "outputs.labelCodes: the code of '\(bad.key)' is not a one-line string")
            }
        }
        let fe = manifest.frontEnd
        if let spec = manifest.graph {
            guard fe.type == .samples || fe.type == .features else {
                throw .manifest(path: path, reason: "frontEnd.type '\(fe.type.rawValue)': a graph takes a block of samples ('samples') or of features ('features')")
            }
            guard manifest.network.isEmpty else { throw .manifest(path: path, reason: "a package has a network or a graph, not both") }
            guard audio.chunkSamples <= 1 << 24, audio.contextSamples <= 1 << 24 else {
                throw .manifest(path: path, reason: "audio sizes must lie in 0...\(1 << 24) samples")
            }
            let program = try GraphProgram(spec: spec, tensors: tensors, path: path, blockSamples: audio.contextSamples + audio.chunkSamples,
                                           precision: self.precision, fp32Nodes: manifest.fp32Nodes ?? [])
            guard program.scoreCount == manifest.outputs.labels.count else {
                throw .manifest(path: path, reason: "the graph gives \(program.scoreCount) scores for \(manifest.outputs.labels.count) labels")
            }
            guard manifest.outputs.activation == .none, manifest.outputs.reduceTime == nil else {
                throw .manifest(path: path, reason: "a graph's outputs are its scores: outputs.activation 'none' and no reduceTime")
            }
            graph = program
            frontEnd = STFTConfig(nFFT: 2, hopLength: 1)
            window = []
            padLeft = 0
            padRight = 0
            padSource = []
            self.manifest = manifest
            self.path = path
            self.contentHash = contentHash()
            self.contentKey = ModelState.key(self.contentHash)
            self.layers = []
            self.shapes = []
            self.layerTypes = []
            self.stateOffsets = []
            self.stateCount = program.stateCount
            self.weightsBytes = weightsBytes
            return
        }
        graph = nil
        guard fe.type == .stft else {
            throw .manifest(path: path, reason: "frontEnd.type '\(fe.type.rawValue)': this earshot runs 'stft' (or 'samples' with a graph)")
        }
        let limit = 1 << 24
        let sizes = [audio.chunkSamples, audio.contextSamples, fe.nFFT, fe.hopLength, fe.padLeft ?? 0, fe.padRight ?? 0]
        guard sizes.allSatisfy({ (0...limit).contains($0) }) else {
            throw .manifest(path: path, reason: "audio and frontEnd sizes must lie in 0...\(limit) samples")
        }
        frontEnd = STFTConfig(nFFT: fe.nFFT, hopLength: fe.hopLength, winLength: fe.winLength, window: fe.window ?? .hann,
                              periodic: fe.periodic ?? true, center: false, padMode: fe.padMode ?? .reflect,
                              spectrum: fe.spectrum ?? .magnitude)
        do {
            try frontEnd.validate()
            window = Window.padded(Window.make(frontEnd.window, length: frontEnd.winLength, periodic: frontEnd.periodic),
                                   toLength: frontEnd.nFFT)
            // Plans the FFT as this model's steps will (once per size and planning).
            _ = try SpectrumAnalyzer(config: frontEnd, paddedWindow: window, planning: fftPlanning)
        } catch {
            throw .manifest(path: path, reason: "frontEnd: \(error)")
        }
        padLeft = fe.padLeft ?? 0
        padRight = fe.padRight ?? 0
        let blockLength = audio.contextSamples + audio.chunkSamples + padLeft + padRight
        padSource = Self.padSource(contextAndBlock: audio.contextSamples + audio.chunkSamples, padLeft: padLeft,
                                   padRight: padRight, reflect: frontEnd.padMode == .reflect)
        var channels = frontEnd.binCount
        let time = frontEnd.frameCount(forSamples: blockLength)
        guard time > 0 else { throw .manifest(path: path, reason: "frontEnd: a block of \(blockLength) samples holds no \(fe.nFFT)-sample frame") }

        var loader = LayerLoader(path: path, tensors: tensors)
        let network = try loader.network(manifest.network, channels: channels, time: time)
        let layers = network.map(\.layer)
        var offsets: [Int] = [], stateCount = 0
        for layer in layers {
            offsets.append(stateCount)
            stateCount += layer.stateCount
        }
        channels = network.last.map { $0.layer.outputChannels(input: $0.input.channels) } ?? channels
        let used = loader.used
        let unused = Set(tensors.keys).subtracting(used)
        guard unused.isEmpty else { throw .unusedTensors(path: path, names: unused.sorted()) }
        guard channels == manifest.outputs.labels.count else {
            throw .manifest(path: path, reason: "the network ends with \(channels) channels for \(manifest.outputs.labels.count) labels")
        }
        self.manifest = manifest
        self.path = path
        self.contentHash = contentHash()
        self.contentKey = ModelState.key(self.contentHash)
        self.layers = layers
        self.shapes = network.map(\.input)
        self.layerTypes = network.map(\.type)
        self.stateOffsets = offsets
        self.stateCount = stateCount
        self.weightsBytes = weightsBytes
    }

    /// The highest audio rate a package may declare (Hz).
    public static let maxSampleRate = 384_000

    static func describe(_ error: Error) -> String {
        switch error {
        case let DecodingError.keyNotFound(key, context):
            return "missing field '\((context.codingPath + [key]).map(\.stringValue).joined(separator: "."))'"
        case let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context),
             let DecodingError.dataCorrupted(context):
            return "'\(context.codingPath.map(\.stringValue).joined(separator: "."))': \(context.debugDescription)"
        default:
            return "\(error)"
        }
    }

    /// A fresh stream: zero context, and zero carries (or the first values a graph's states name).
    public func makeState() -> ModelState {
        var state = ModelState(modelHash: contentHash, context: [Float](repeating: 0, count: manifest.audio.contextSamples),
                               carry: [Float](repeating: 0, count: carryCount), codes: [Int8](repeating: 0, count: codeCount), steps: 0)
        if let graph { graph.initialState.withUnsafeBufferPointer { pack($0, into: &state) } }
        return state
    }

    /// Floats a stream's state keeps after its context (a graph's float state tensors; a chain's carries).
    var carryCount: Int { graph?.carryCount ?? stateCount }
    /// Int8 codes a stream's state keeps (a graph's state tensors that only ever hold int8 values).
    var codeCount: Int { graph?.codeCount ?? 0 }

    /// A state from `ModelState.serialized()` bytes; they must come from this model.
    ///
    ///     let saved = state.serialized()                 // move it, store it
    ///     var resumed = try model.restoreState(saved)    // steps on exactly as `state` would
    ///
    /// - Parameter bytes: what `serialized()` gave.
    /// - Returns: the state, ready for the next step.
    /// - Throws: `ModelError.stateFormat` for damaged bytes (checksum, sizes, NaN or infinite
    ///   values, a step count out of range), `.stateModelMismatch` for another model's state.
    public func restoreState(_ bytes: [UInt8]) throws(ModelError) -> ModelState {
        var state = try ModelState.deserialize(bytes)
        guard state.modelHash == contentHash else { throw .stateModelMismatch(expected: contentHash, found: state.modelHash) }
        if codeCount > 0, state.codes.isEmpty, state.carry.count == stateCount, state.context.count == manifest.audio.contextSamples {
            // Version 2 kept every state tensor as floats: the int8 ones become codes.
            let floats = state.carry
            guard let graph, graph.stateCoded.indices.allSatisfy({ i in
                !graph.stateCoded[i] || floats[graph.stateOffsets[i]..<(graph.stateOffsets[i] + graph.stateSizes[i])].allSatisfy(IntegerRanges.isInt8)
            }) else {
                throw .stateFormat(reason: "an int8 state tensor holds a value that is not a whole number in -128...127")
            }
            state.carry = [Float](repeating: 0, count: carryCount)
            state.codes = [Int8](repeating: 0, count: codeCount)
            floats.withUnsafeBufferPointer { pack($0, into: &state) }
        }
        guard state.context.count == manifest.audio.contextSamples, state.carry.count == carryCount, state.codes.count == codeCount else {
            throw .stateFormat(reason: "\(state.context.count) context, \(state.carry.count) carry values and \(state.codes.count) codes; "
                               + "this model has \(manifest.audio.contextSamples), \(carryCount) and \(codeCount)")
        }
        return state
    }

    func check(_ block: [Float], _ state: ModelState) throws(ModelError) {
        try withUnsafePointer(to: block) { b throws(ModelError) in
            try withUnsafePointer(to: state) { s throws(ModelError) in try check(b, s) }
        }
    }

    /// As `check(_:_:)` on a block and a state where they lie (neither is copied, so a batch of
    /// many streams is checked without touching more than each one's header and samples).
    func check(_ block: UnsafePointer<[Float]>, _ state: UnsafePointer<ModelState>) throws(ModelError) {
        let count = block.pointee.count
        guard count == chunkSamples else { throw .inputSize(model: name, expected: chunkSamples, found: count) }
        let bad = block.pointee.withUnsafeBufferPointer { earshot_first_nonfinite($0.baseAddress!, $0.count) }
        if bad >= 0 { throw .nonFiniteInput(model: name, sampleIndex: bad) }
        let s = state.pointee
        // contentHash is always 16 lowercase hex digits (SafeTensors.contentHash), so its key is set.
        let sameModel = contentKey != nil && s.modelKey == contentKey
        guard sameModel, s.carry.count == carryCount, s.codes.count == codeCount, s.context.count == manifest.audio.contextSamples else {
            throw .stateModelMismatch(expected: contentHash, found: s.modelHash)
        }
    }

    /// The last `count` samples of context + block: the next step's context.
    static func nextContext(_ context: [Float], _ block: [Float], count c: Int) -> [Float] {
        if c == 0 { return [] }
        if block.count >= c { return Array(block[(block.count - c)...]) }
        return Array((context + block).suffix(c))
    }

    /// Keeps the last `contextSamples` of context + block for the next step, in place.
    static func advance(_ state: inout ModelState, by block: [Float]) {
        let c = state.context.count
        state.context.withUnsafeMutableBufferPointer { context in
            if block.count >= c {
                for i in 0..<c { context[i] = block[block.count - c + i] }
            } else {
                let keep = c - block.count
                for i in 0..<keep { context[i] = context[i + block.count] }
                for i in 0..<block.count { context[keep + i] = block[i] }
            }
        }
        if state.steps < ModelState.maxSteps { state.steps += 1 }  // saturates; never traps
    }
}
