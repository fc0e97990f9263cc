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
    public let manifest: ModelManifest
    /// The package folder.
    public let path: String
    /// FNV-1a 64 of weights.safetensors: identifies the weights.
    public let contentHash: String
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
    /// Workspaces not in use, taken by one step at a time (`withWorkspace`).
    private let workspaces = Locked<[WorkspaceBox]>([])
    /// Workspaces of graph tiles run ahead (`predictions(forConsecutive:)`), kept for the next.
    private let tileWorkspaces = Locked<[GraphWorkspace]>([])
    /// Per layer: where its carry starts in the state.
    let stateOffsets: [Int]
    let stateCount: Int
    /// Per layer: input (channels, time).
    let shapes: [(channels: Int, time: Int)]
    /// Per layer: its type as the manifest gives it ("conv1d+batchNorm" where one was folded in).
    let layerTypes: [String]
    let weightsBytes: Int

    public var name: String { manifest.name }
    public var sampleRate: Int { manifest.audio.sampleRate }
    /// New samples per step.
    public var chunkSamples: Int { manifest.audio.chunkSamples }
    public var labels: [String] { manifest.outputs.labels }

    /// Loads and checks a package: `folder/model.json` and `folder/weights.safetensors`. Every
    /// tensor is checked against its layer before any audio is seen.
    public convenience init(contentsOf folder: URL) throws(ModelError) {
        let manifestPath = folder.appendingPathComponent("model.json").path
        let weightsPath = folder.appendingPathComponent("weights.safetensors").path
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: manifestPath))
        } catch {
            if !FileManager.default.fileExists(atPath: folder.path) {
                throw .cannotRead(path: folder.path, reason: "no such model folder")
            }
            throw .cannotRead(path: manifestPath, reason: error.localizedDescription)
        }
        let manifest: ModelManifest
        do {
            manifest = try JSONDecoder().decode(ModelManifest.self, from: data)
        } catch {
            throw .manifest(path: manifestPath, reason: Self.describe(error))
        }
        let weights = try SafeTensors.map(path: weightsPath)
        try self.init(manifest: manifest, tensors: try SafeTensors.parse(weights, path: weightsPath), path: folder.path,
                      contentHash: SafeTensors.contentHash(weights), weightsBytes: weights.count)
    }

    /// A model from a manifest and tensors in memory, checked as a package on disk is.
    public convenience init(manifest: ModelManifest, tensors: [String: Tensor], name path: String = "(in memory)",
                            fftPlanning: FFTPlanning = .measure) throws(ModelError) {
        let data = SafeTensors.serialize(tensors)
        try self.init(manifest: manifest, tensors: tensors, path: path, contentHash: SafeTensors.contentHash(data), weightsBytes: data.count,
                      fftPlanning: fftPlanning)
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

    init(manifest: ModelManifest, tensors: [String: Tensor], path: String, contentHash: String, weightsBytes: Int,
         fftPlanning: FFTPlanning = .measure) throws(ModelError) {
        self.fftPlanning = fftPlanning
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
        let fe = manifest.frontEnd
        if let spec = manifest.graph {
            guard fe.type == "samples" || fe.type == "features" else {
                throw .manifest(path: path, reason: "frontEnd.type '\(fe.type)': a graph takes a block of samples ('samples') or of features ('features')")
            }
            guard manifest.network.isEmpty else { throw .manifest(path: path, reason: "a package has a network or a graph, not both") }
            guard audio.chunkSamples <= 1 << 24, audio.contextSamples <= 1 << 24 else {
                throw .manifest(path: path, reason: "audio sizes must lie in 0...\(1 << 24) samples")
            }
            let program = try GraphProgram(spec: spec, tensors: tensors, path: path, blockSamples: audio.contextSamples + audio.chunkSamples)
            guard program.scoreCount == manifest.outputs.labels.count else {
                throw .manifest(path: path, reason: "the graph gives \(program.scoreCount) scores for \(manifest.outputs.labels.count) labels")
            }
            guard manifest.outputs.activation == "none", manifest.outputs.reduceTime == nil else {
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
            self.contentHash = contentHash
            self.layers = []
            self.shapes = []
            self.layerTypes = []
            self.stateOffsets = []
            self.stateCount = program.stateCount
            self.weightsBytes = weightsBytes
            return
        }
        graph = nil
        guard fe.type == "stft" else {
            throw .manifest(path: path, reason: "frontEnd.type '\(fe.type)': this earshot runs 'stft' (or 'samples' with a graph)")
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
        guard ["sigmoid", "softmax", "none"].contains(manifest.outputs.activation) else {
            throw .manifest(path: path, reason: "outputs.activation '\(manifest.outputs.activation)': expected sigmoid, softmax or none")
        }
        guard ["mean", "last", nil].contains(manifest.outputs.reduceTime) else {
            throw .manifest(path: path, reason: "outputs.reduceTime '\(manifest.outputs.reduceTime ?? "")': expected mean or last")
        }
        self.manifest = manifest
        self.path = path
        self.contentHash = contentHash
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

    /// A fresh stream: zero context and zero carries.
    public func makeState() -> ModelState {
        ModelState(modelHash: contentHash, context: [Float](repeating: 0, count: manifest.audio.contextSamples),
                   carry: [Float](repeating: 0, count: stateCount), steps: 0)
    }

    /// A state from `ModelState.serialized()` bytes; they must come from this model.
    public func restoreState(_ bytes: [UInt8]) throws(ModelError) -> ModelState {
        let state = try ModelState.deserialize(bytes)
        guard state.modelHash == contentHash else { throw .stateModelMismatch(expected: contentHash, found: state.modelHash) }
        guard state.context.count == manifest.audio.contextSamples, state.carry.count == stateCount else {
            throw .stateFormat(reason: "\(state.context.count) context and \(state.carry.count) carry values; this model has \(manifest.audio.contextSamples) and \(stateCount)")
        }
        return state
    }

    /// Advances one stream by one step: `block` is `chunkSamples` new samples at `sampleRate`.
    /// Returns one score per label.
    public func prediction(from block: [Float], using state: inout ModelState) throws(ModelError) -> [Float] {
        var scores: [Float] = []
        try prediction(from: block, using: &state, into: &scores)
        return scores
    }

    /// As `prediction(from:using:)`, writing the scores into `scores` (one per label): with the
    /// same array from step to step, a step allocates no memory at all.
    public func prediction(from block: [Float], using state: inout ModelState, into scores: inout [Float]) throws(ModelError) {
        try check(block, state)
        scores.setCount(labels.count)
        if let graph {
            let context = state.context
            try withWorkspace { ws throws(ModelError) in
                // The carry in the workspace (never empty, so its address is never nil).
                var carry: [Float] = []
                swap(&carry, &ws.carries)
                defer { swap(&carry, &ws.carries) }
                carry.removeAll(keepingCapacity: true)
                carry.append(contentsOf: state.carry)
                carry.append(0)
                try carry.withUnsafeMutableBufferPointer { c throws(ModelError) in
                    try scores.withUnsafeMutableBufferPointer { s throws(ModelError) in
                        try graphForward(graph, streams: 1, block: { _ in block }, context: { _ in context }, carries: c.baseAddress!,
                                         scores: s.baseAddress!, workspace: &ws)
                    }
                }
                for i in state.carry.indices { state.carry[i] = carry[i] }
            }
            Self.advance(&state, by: block)
            return
        }
        try withWorkspace { ws in
            forwardOne(block, context: state.context, carry: &state.carry, scores: &scores, workspace: &ws)
        }
        Self.advance(&state, by: block)
    }

    private func forwardOne(_ block: [Float], context: [Float], carry: inout [Float], scores: inout [Float], workspace ws: inout Workspace) {
        carry.withUnsafeMutableBufferPointer { c in
            scores.withUnsafeMutableBufferPointer { s in
                forward(streams: 1, block: { _ in block }, context: { _ in context }, carries: c.baseAddress!,
                        scores: s.baseAddress!, workspace: &ws)
            }
        }
    }

    /// Advances many streams by one step each, `blocks[i]` with `states[i]`, in one batched pass:
    /// each layer runs once for all of them (one matrix product, not one per stream). Equal,
    /// bit for bit, to calling `prediction(from:using:)` for each.
    public func predictions(from blocks: [[Float]], using states: inout [ModelState]) throws(ModelError) -> [[Float]] {
        var flat: [Float] = []
        try predictions(from: blocks, using: &states, into: &flat)
        let n = labels.count
        return (0..<blocks.count).map { Array(flat[($0 * n)..<(($0 + 1) * n)]) }
    }

    /// As `predictions(from:using:)`, writing stream i's scores at `scores[i * labels.count...]`:
    /// with the same arrays from step to step, a step allocates no memory at all. The streams go
    /// through the network `batchTile` at a time, so that a tile's activations stay in cache.
    public func predictions(from blocks: [[Float]], using states: inout [ModelState], into scores: inout [Float]) throws(ModelError) {
        guard blocks.count == states.count else { throw .batchSize(blocks: blocks.count, states: states.count) }
        for i in blocks.indices { try check(blocks[i], states[i]) }
        let n = labels.count, S = stateCount
        scores.setCount(blocks.count * n)
        try withWorkspace { ws throws(ModelError) in
            var carries: [Float] = []
            swap(&carries, &ws.carries)
            defer { swap(&carries, &ws.carries) }
            for start in stride(from: 0, to: blocks.count, by: Self.batchTile) {
                let count = min(Self.batchTile, blocks.count - start)
                carries.setCount(max(count * S, 1))
                try carries.withUnsafeMutableBufferPointer { c throws(ModelError) in
                    // The tile's carries side by side: [count][stateCount].
                    for b in 0..<count {
                        states[start + b].carry.withUnsafeBufferPointer { (c.baseAddress! + b * S).update(from: $0.baseAddress!, count: S) }
                    }
                    try scores.withUnsafeMutableBufferPointer { out throws(ModelError) in
                        if let graph {
                            try graphForward(graph, streams: count, block: { blocks[start + $0] }, context: { states[start + $0].context },
                                             carries: c.baseAddress!, scores: out.baseAddress! + start * n, workspace: &ws)
                        } else {
                            forward(streams: count, block: { blocks[start + $0] }, context: { states[start + $0].context },
                                    carries: c.baseAddress!, scores: out.baseAddress! + start * n, workspace: &ws)
                        }
                    }
                    for b in 0..<count {
                        states[start + b].carry.withUnsafeMutableBufferPointer { $0.baseAddress!.update(from: c.baseAddress! + b * S, count: S) }
                    }
                }
            }
        }
        for i in states.indices { Self.advance(&states[i], by: blocks[i]) }
    }

    /// Streams through the graph, one step each: stream b's audio input is its context
    /// `context(b)` then its new samples `block(b)`; carries and scores as in `forward`.
    private func graphForward(_ graph: GraphProgram, streams: Int, block: (Int) -> [Float], context: (Int) -> [Float],
                              carries: UnsafeMutablePointer<Float>, scores: UnsafeMutablePointer<Float>,
                              workspace ws: inout Workspace) throws(ModelError) {
        try graph.run(streams: streams, workspace: &ws.graph, audio: { b, buffer in Self.fill(buffer, context(b), block(b)) },
                      carries: carries, scores: scores)
    }

    /// Streams in one pass through the network: enough for matrix products, few enough that
    /// their activations stay in a core's cache.
    static let batchTile = 64

    /// Advances one stream by many consecutive steps, as calling `prediction(from:using:)` for
    /// each block in turn would (bit for bit), but faster: the layers before the first one with
    /// state (the front end, the convolutions) run once over all the blocks as a batch; only the
    /// layers from the first recurrent one on go step by step.
    public func predictions(forConsecutive blocks: [[Float]], using stream: inout ModelState) throws(ModelError) -> [[Float]] {
        for block in blocks { try check(block, stream) }
        // Work on a copy: the stream's state changes only when every block has gone through.
        var state = stream
        guard !blocks.isEmpty else { return [] }
        let c = manifest.audio.contextSamples
        var contexts: [[Float]] = []
        contexts.reserveCapacity(blocks.count)
        var context = state.context
        for block in blocks {
            contexts.append(context)
            context = Self.nextContext(context, block, count: c)
        }
        if let graph {
            let scores = try graphConsecutive(graph, blocks, contexts: contexts, carry: &state.carry)
            state.context = context
            state.steps = min(state.steps &+ blocks.count, ModelState.maxSteps)
            stream = state
            return scores
        }
        let firstStateful = layers.firstIndex { $0.stateCount > 0 } ?? layers.count
        let recurrent = firstStateful < layers.count ? layers[firstStateful].recurrent : nil
        var scores: [[Float]] = []
        scores.reserveCapacity(blocks.count)
        let window = 64
        if blocks.count < 2 * window {
            // Everything before the first layer with state: all blocks as one batch, split over the cores.
            let x = try statelessPrefix(blocks, contexts: contexts, layers: firstStateful)
            scores = rest(x, inputProducts: recurrent?.inputProducts(x), from: firstStateful, state: &state)
        } else {
            // A long run: while this thread takes window w through the recurrence, a helper thread
            // prepares the next windows (front end, stateless layers, the recurrent layer's input
            // products); this thread prepares windows too when the next one is not ready.
            let ranges = stride(from: 0, to: blocks.count, by: window).map { $0..<min($0 + window, blocks.count) }
            let windowContexts = contexts
            let windows = WindowPipeline<Prepared>(count: ranges.count) { w in
                let prefix = self.prefix(blocks[ranges[w]], contexts: windowContexts[ranges[w]], layers: firstStateful)
                return prefix.map { x in
                    let first = firstStateful < self.layers.count ? self.layers[firstStateful].recurrent : nil
                    return Prepared(x: x, inputProducts: first?.inputProducts(x))
                }
            }
            defer { windows.stop() }
            for w in ranges.indices {
                let prepared = try windows.take(w).get()
                scores += rest(prepared.x, inputProducts: prepared.inputProducts, from: firstStateful, state: &state)
            }
        }
        state.context = context
        state.steps = min(state.steps &+ blocks.count, ModelState.maxSteps)  // saturates; never traps
        stream = state
        return scores
    }

    /// Consecutive blocks of one stream through the graph, `batchTile` blocks at a time: the part
    /// that does not depend on the state runs once per tile.
    private func graphConsecutive(_ graph: GraphProgram, _ blocks: [[Float]], contexts: [[Float]],
                                  carry: inout [Float]) throws(ModelError) -> [[Float]] {
        let n = labels.count, tile = Self.batchTile
        let ranges = stride(from: 0, to: blocks.count, by: tile).map { $0..<min($0 + tile, blocks.count) }
        var flat = [Float](repeating: 0, count: blocks.count * n)
        @Sendable func audio(_ range: Range<Int>) -> (Int, UnsafeMutableBufferPointer<Float>) -> Void {
            { k, buffer in Self.fill(buffer, contexts[range.lowerBound + k], blocks[range.lowerBound + k]) }
        }
        // A long run: while this thread takes tile w through the steps that need the state, a
        // helper thread prepares the next tiles (the steps that do not). Workspaces go back to a
        // pool when a tile is done, so their memory is reused, not allocated tile after tile.
        let pool = tileWorkspaces
        let pipeline = ranges.count >= 2 ? WindowPipeline<GraphWorkspace>(count: ranges.count) { w in
            Result { () throws(ModelError) -> GraphWorkspace in
                var ws = pool.withLock { $0.popLast() } ?? GraphWorkspace()
                try graph.prepareConsecutive(count: ranges[w].count, workspace: &ws, audio: audio(ranges[w]))
                return ws
            }
        } : nil
        defer { pipeline?.stop() }
        carry.append(0)  // never empty, so its address is never nil
        defer { carry.removeLast() }
        try carry.withUnsafeMutableBufferPointer { c throws(ModelError) in
            try flat.withUnsafeMutableBufferPointer { out throws(ModelError) in
                for (w, range) in ranges.enumerated() {
                    var ws = GraphWorkspace()
                    if let pipeline {
                        ws = try pipeline.take(w).get()
                    } else {
                        try graph.prepareConsecutive(count: range.count, workspace: &ws, audio: audio(range))
                    }
                    try graph.finishConsecutive(count: range.count, workspace: &ws, audio: audio(range), carry: c.baseAddress!,
                                                scores: out.baseAddress! + range.lowerBound * n)
                    pool.withLock { [ws] in $0.append(ws) }
                }
            }
        }
        return (0..<blocks.count).map { Array(flat[($0 * n)..<(($0 + 1) * n)]) }
    }

    /// A graph's audio input: the context, then the block.
    private static func fill(_ buffer: UnsafeMutableBufferPointer<Float>, _ context: [Float], _ block: [Float]) {
        guard let start = buffer.baseAddress else { return }
        context.withUnsafeBufferPointer { if let p = $0.baseAddress { start.update(from: p, count: context.count) } }
        block.withUnsafeBufferPointer { if let p = $0.baseAddress { (start + context.count).update(from: p, count: block.count) } }
    }

    /// The layers from `first` on, for consecutive blocks of one stream already through the
    /// stateless prefix; `inputProducts` are those of layer `first` when it is recurrent.
    private func rest(_ prefix: Activations, inputProducts: [Float]?, from first: Int, state: inout ModelState) -> [[Float]] {
        var x = prefix
        var scratch = LayerScratch()
        state.carry.withUnsafeMutableBufferPointer { carry in
            for i in first..<layers.count {
                let layer = layers[i]
                let slice = UnsafeMutableBufferPointer(rebasing: carry[stateOffsets[i]..<(stateOffsets[i] + layer.stateCount)])
                if layer.stateCount == 0 {
                    x = layer.run(x, states: .none)  // stateless: the whole batch
                } else if let recurrent = layer.recurrent {
                    // The blocks follow one another: one recurrence over all their steps in order
                    // (column b * time + t), after the input products of all steps at once.
                    let ip = (i == first ? inputProducts : nil) ?? recurrent.inputProducts(x)
                    var y = Activations(channels: recurrent.hiddenSize, time: x.time, batch: x.batch)
                    ip.withUnsafeBufferPointer { p in
                        y.values.withUnsafeMutableBufferPointer { yv in
                            recurrent.recur(inputProducts: p.baseAddress!, firstColumn: 0, time: x.columns, count: 1,
                                            states: StateRows(slice), into: yv.baseAddress!, scratch: &scratch)
                        }
                    }
                    x = y
                } else {
                    // Any other layer with state (a causal convolution): block after block.
                    x = Activations.joined((0..<x.batch).map { layer.run(x.stream($0), state: slice) })
                }
            }
        }
        let n = labels.count
        var flat = [Float](repeating: 0, count: x.batch * n)
        flat.withUnsafeMutableBufferPointer { output(&x, into: $0.baseAddress!) }
        return (0..<x.batch).map { Array(flat[($0 * n)..<(($0 + 1) * n)]) }
    }

    /// Front end and the first `count` layers (none with state) for many blocks as one batch,
    /// the blocks split between the cores.
    private func statelessPrefix(_ blocks: [[Float]], contexts: [[Float]], layers count: Int) throws(ModelError) -> Activations {
        let parts = min(ProcessInfo.processInfo.activeProcessorCount, max(1, blocks.count / 16))
        let bounds = (0...parts).map { $0 * blocks.count / parts }
        let results = parallelMap(parts) { p in
            prefix(blocks[bounds[p]..<bounds[p + 1]], contexts: contexts[bounds[p]..<bounds[p + 1]], layers: count)
        }
        return Activations.joined(try results.map { (r) throws(ModelError) in try r.get() })
    }

    /// Front end and the first `count` layers for some blocks, on this thread.
    private func prefix(_ blocks: ArraySlice<[Float]>, contexts: ArraySlice<[Float]>, layers count: Int) -> Result<Activations, ModelError> {
        Result { () throws(ModelError) in
            try withWorkspace { ws in
                let first = blocks.startIndex
                guard let analyzer = ws.analyzer else { preconditionFailure("a layer network's workspace always has its analyzer") }
                frontEnd(streams: blocks.count, block: { blocks[first + $0] }, context: { contexts[first + $0] }, into: &ws.buffers[0],
                         padded: &ws.padded, analyzer: analyzer)
                let last = runLayers(0..<count, carries: nil, workspace: &ws)
                // The result leaves the workspace, which makes that buffer anew next time.
                var x = Activations.empty
                swap(&x, &ws.buffers[last])
                return x
            }
        }
    }

    private func check(_ block: [Float], _ state: ModelState) throws(ModelError) {
        guard block.count == chunkSamples else { throw .inputSize(model: name, expected: chunkSamples, found: block.count) }
        let bad = block.withUnsafeBufferPointer { earshot_first_nonfinite($0.baseAddress!, $0.count) }
        if bad >= 0 { throw .nonFiniteInput(model: name, sampleIndex: bad) }
        guard state.modelHash == contentHash, state.carry.count == stateCount,
              state.context.count == manifest.audio.contextSamples else {
            throw .stateModelMismatch(expected: contentHash, found: state.modelHash)
        }
    }

    /// The last `count` samples of context + block: the next step's context.
    static func nextContext(_ context: [Float], _ block: [Float], count c: Int) -> [Float] {
        if c == 0 { return [] }
        if block.count >= c { return Array(block[(block.count - c)...]) }
        return Array((context + block).suffix(c))
    }

    /// Keeps the last `contextSamples` of context + block for the next step, in place.
    private static func advance(_ state: inout ModelState, by block: [Float]) {
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

    /// Runs `body` with a workspace no other step is using: one from the model's pool, or a new
    /// one when every pooled one is busy. The pool keeps as many as ran at once.
    func withWorkspace<R>(_ body: (inout Workspace) throws(ModelError) -> R) throws(ModelError) -> R {
        let box: WorkspaceBox
        if let pooled = workspaces.withLock({ $0.popLast() }) {
            box = pooled
        } else {
            // A graph takes raw samples: no spectrum analyzer.
            box = WorkspaceBox(Workspace(analyzer: graph == nil ? try makeAnalyzer() : nil, layers: layers.count))
        }
        defer { workspaces.withLock { $0.append(box) } }
        return try body(&box.workspace)
    }

    private func makeAnalyzer() throws(ModelError) -> SpectrumAnalyzer {
        do {
            return try SpectrumAnalyzer(config: frontEnd, paddedWindow: window, planning: fftPlanning)
        } catch {
            throw .layer(path: path, layer: "frontEnd", reason: "\(error)")
        }
    }

    /// The network on `streams` streams, one step each: stream b's new samples are `block(b)`,
    /// its context `context(b)`, its carry at `carries + b * stateCount`, its scores go to
    /// `scores + b * labels.count`. Works in `ws` only: no allocation once it has run this many.
    func forward(streams: Int, block: (Int) -> [Float], context: (Int) -> [Float], carries: UnsafeMutablePointer<Float>,
                 scores: UnsafeMutablePointer<Float>, workspace ws: inout Workspace) {
        guard let analyzer = ws.analyzer else { preconditionFailure("a layer network's workspace always has its analyzer") }
        frontEnd(streams: streams, block: block, context: context, into: &ws.buffers[0], padded: &ws.padded, analyzer: analyzer)
        output(&ws.buffers[runLayers(layers.indices, carries: carries, workspace: &ws)], into: scores)
    }

    /// Layers `range` on the activations in `ws.buffers[range.lowerBound]`; returns the index of
    /// the buffer holding the result. Layer i writes buffer i + 1; activations work in place.
    /// `carries` as for `forward` (nil: the layers have no state).
    private func runLayers(_ range: Range<Int>, carries: UnsafeMutablePointer<Float>?, workspace ws: inout Workspace) -> Int {
        var source = range.lowerBound
        for i in range {
            let layer = layers[i]
            if case let .activation(activation) = layer {
                activation.apply(&ws.buffers[source])  // in place
                continue
            }
            let states = layer.stateCount > 0 ? StateRows(base: carries.map { $0 + stateOffsets[i] }, stride: stateCount) : .none
            layer.run(ws.buffers[source], into: &ws.buffers[i + 1], states: states, scratch: &ws.scratch[i])
            source = i + 1
        }
        return source
    }

    /// Where each position of a padded block (padLeft + context + block + padRight) reads from in
    /// context + block; -1 for a zero.
    static func padSource(contextAndBlock L: Int, padLeft: Int, padRight: Int, reflect: Bool) -> [Int] {
        (0..<(padLeft + L + padRight)).map { i in
            var j = i - padLeft
            if j < 0 || j >= L {
                guard reflect, L > 1 else { return -1 }
                let period = 2 * (L - 1)
                j %= period
                if j < 0 { j += period }
                if j >= L { j = period - j }
            }
            return j
        }
    }

    /// The front end for `streams` blocks (each after its context, padded): the spectra of their
    /// frames, column by column ([streams][frames][bins]), into `out`.
    func frontEnd(streams: Int, block: (Int) -> [Float], context: (Int) -> [Float], into out: inout Activations,
                  padded: inout [Float], analyzer: SpectrumAnalyzer) {
        let c = manifest.audio.contextSamples, total = padSource.count
        let frames = frontEnd.frameCount(forSamples: total), bins = frontEnd.binCount, hop = frontEnd.hopLength, nFFT = frontEnd.nFFT
        out.reshape(channels: bins, time: frames, batch: streams)
        padded.setCount(total)
        out.values.withUnsafeMutableBufferPointer { o in
            padded.withUnsafeMutableBufferPointer { p in
                padSource.withUnsafeBufferPointer { source in
                    let L = total - padLeft - padRight, middle = p.baseAddress! + padLeft
                    for n in 0..<streams {
                        // Context then block in the middle, then the padding from the middle.
                        context(n).withUnsafeBufferPointer { middle.update(from: $0.baseAddress!, count: c) }
                        block(n).withUnsafeBufferPointer { (middle + c).update(from: $0.baseAddress!, count: L - c) }
                        for i in 0..<padLeft { p[i] = source[i] < 0 ? 0 : middle[source[i]] }
                        for i in (padLeft + L)..<total { p[i] = source[i] < 0 ? 0 : middle[source[i]] }
                        for t in 0..<frames {
                            let frame = UnsafeBufferPointer(rebasing: p[(t * hop)..<(t * hop + nFFT)])
                            analyzer.analyze(frame: frame, into: UnsafeMutableBufferPointer(rebasing: o[((n * frames + t) * bins)..<((n * frames + t + 1) * bins)]))
                        }
                    }
                }
            }
        }
    }

    /// Scores from the last layer's output: the output activation in place, then each stream's
    /// time reduced; stream b's scores to `scores + b * channels`.
    func output(_ y: inout Activations, into scores: UnsafeMutablePointer<Float>) {
        switch manifest.outputs.activation {
        case "sigmoid": Layer.Activation.sigmoid.apply(&y)
        case "softmax": Layer.Activation.softmax.apply(&y)
        default: break
        }
        let C = y.channels, T = y.time, last = manifest.outputs.reduceTime == "last"
        y.values.withUnsafeBufferPointer { v in
            for b in 0..<y.batch {
                for c in 0..<C {
                    if last {
                        scores[b * C + c] = T > 0 ? v[(b * T + T - 1) * C + c] : 0
                    } else {
                        var sum: Float = 0
                        for t in 0..<T { sum += v[(b * T + t) * C + c] }
                        scores[b * C + c] = sum / Float(max(T, 1))
                    }
                }
            }
        }
    }
}

/// Working memory for steps of one model: the front end's arrays and every layer's output and
/// scratch, reused from step to step.
struct Workspace {
    /// The front end's FFT (nil for a graph, which takes raw samples).
    let analyzer: SpectrumAnalyzer?
    var padded: [Float] = []
    /// The front end's output, then each layer's.
    var buffers: [Activations]
    var scratch: [LayerScratch]
    /// A batch tile's carries side by side.
    var carries: [Float] = []
    /// A graph's arena and scratch.
    var graph = GraphWorkspace()

    init(analyzer: SpectrumAnalyzer?, layers: Int) {
        self.analyzer = analyzer
        buffers = Array(repeating: .empty, count: layers + 1)
        scratch = Array(repeating: LayerScratch(), count: layers)
    }
}

/// A pooled workspace. `@unchecked Sendable`: it moves between threads only through the model's
/// pool (behind a lock), and the one step that took it out is the only code touching it until it is
/// put back.
final class WorkspaceBox: @unchecked Sendable {
    var workspace: Workspace
    init(_ workspace: Workspace) { self.workspace = workspace }
}

/// `body(i)` for i in 0..<count on every core; the results in order.
package func parallelMap<T: Sendable>(_ count: Int, _ body: @Sendable (Int) -> T) -> [T] {
    let slots = ResultSlots<T>(count)
    DispatchQueue.concurrentPerform(iterations: count) { i in slots.set(i, body(i)) }
    return slots.values()
}

/// The results of a parallel loop. `@unchecked Sendable`: iteration i writes slot i only (its
/// own memory, no shared array), and the values are read after the loop has returned.
private final class ResultSlots<T>: @unchecked Sendable {
    private let slots: UnsafeMutableBufferPointer<T?>
    init(_ count: Int) {
        slots = .allocate(capacity: count)
        slots.initialize(repeating: nil)
    }
    deinit {
        _ = slots.deinitialize()
        slots.deallocate()
    }
    func set(_ i: Int, _ value: T) { slots[i] = value }
    func values() -> [T] { slots.map { $0! } }  // every slot was set by its iteration
}

/// A window of blocks through the stateless prefix.
struct Prepared: Sendable {
    var x: Activations
    var inputProducts: [Float]?
}

/// The windows of a long run, each prepared once, in order of claim, by a helper thread or by
/// the thread taking them (when the window it needs is not ready, it prepares the next
/// unclaimed one instead of waiting). At most `lookahead` windows are claimed and not yet taken.
private final class WindowPipeline<Value: Sendable>: Sendable {
    private let prepare: @Sendable (Int) -> Result<Value, ModelError>
    private let count: Int
    private struct Claims {
        /// The next window nobody has claimed.
        var next = 0
        /// Windows taken so far.
        var taken = 0
        /// No more claims; the helper ends.
        var stopped = false
        /// The helper has begun (so `stop` must wake it and wait for it).
        var helperStarted = false
    }
    private let claims = Locked(Claims())
    private let results: Locked<[Result<Value, ModelError>?]>
    private let ready: [DispatchSemaphore]
    /// Windows that may still be claimed before one is taken.
    private let room: DispatchSemaphore
    private let helperDone = DispatchSemaphore(value: 0)
    static var lookahead: Int { 3 }

    init(count: Int, prepare: @escaping @Sendable (Int) -> Result<Value, ModelError>) {
        self.prepare = prepare
        self.count = count
        results = Locked(Array(repeating: nil, count: count))
        ready = (0..<count).map { _ in DispatchSemaphore(value: 0) }
        room = DispatchSemaphore(value: Self.lookahead)
        DispatchQueue.global(qos: .userInitiated).async { [self] in
            // Stopped before it began (the taking thread did every window): nothing to do.
            let begins = claims.withLock { c in
                c.helperStarted = !c.stopped
                return c.helperStarted
            }
            guard begins else { return }
            while true {
                room.wait()
                guard let w = claim() else { break }
                run(w)
            }
            helperDone.signal()
        }
    }

    private func claim() -> Int? {
        claims.withLock { c in
            guard !c.stopped, c.next < count else { return nil }
            c.next += 1
            return c.next - 1
        }
    }

    private func run(_ w: Int) {
        let result = prepare(w)
        results.withLock { $0[w] = result }
        ready[w].signal()
    }

    /// Window w's preparation (windows are taken in order).
    func take(_ w: Int) -> Result<Value, ModelError> {
        // Not ready: prepare what nobody has claimed yet, while there is room.
        while results.withLock({ $0[w] == nil }), room.wait(timeout: .now()) == .success {
            guard let next = claim() else {
                room.signal()
                break
            }
            run(next)
        }
        ready[w].wait()
        room.signal()
        claims.withLock { $0.taken += 1 }
        let result = results.withLock { r in
            defer { r[w] = nil }
            return r[w]
        }
        return result ?? .failure(.layer(path: "", layer: "frontEnd", reason: "window \(w) has no result"))
    }

    /// Stops the helper: no more windows are claimed. Waits for a helper that has begun (it
    /// may be preparing a window); one that has not will end as soon as it begins. Gives back
    /// the room of windows claimed and never taken (a run that failed part way), so the
    /// semaphore ends where it started.
    func stop() {
        let started = claims.withLock { c in
            c.stopped = true
            return c.helperStarted
        }
        if started {
            room.signal()  // a helper waiting for room wakes, finds the run stopped and ends
            helperDone.wait()
        }
        let outstanding = claims.withLock { $0.next - $0.taken }
        for _ in 0..<max(0, outstanding) { room.signal() }
    }
}
