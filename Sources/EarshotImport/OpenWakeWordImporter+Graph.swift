import EarshotGraph
import EarshotModel

private typealias OWW = OpenWakeWordImporter

/// openWakeWord's graphs joined into one: the front end (melspectrogram, the window of frames,
/// the embedding, made incremental where it can be) written by the importer's one builder.
extension GraphSpecBuilder {
    /// The front end's nodes: audio to the int16 scale, the melspectrogram (as x / 10 + 2),
    /// the window of the latest 76 frames, and the embedding of it ("embedding (new)", [1, 96]),
    /// and the step count ("steps", saturating at 5; the first step keeps the 3 frames that
    /// reach before the stream as ones). Returns its state tensors: the frames window, the
    /// step count, and the incremental embedding's caches.
    mutating func addOpenWakeWordFrontEnd(_ f: OpenWakeWordImporter.FrontEnd) -> [GraphSpec.StateSpec] {
        // The step count, saturating at 5.
        let one = weight("one", shape: [1], values: [1]), five = weight("five", shape: [1], values: [5])
        node("Add", "steps + 1", ["steps", one], ["steps + 1"])
        node("Min", "steps (next)", ["steps + 1", five], ["steps (next)"])
        // openWakeWord's first step has no audio before the stream: its melspectrogram runs on
        // the first 1280 samples alone and gives 5 frames. The 3 frames whose 512 samples
        // reach into the 480 before the stream are not kept then: the window keeps its first
        // values (ones) in their place, and the melspectrogram's largest value (the floor
        // of its range is 80 dB below) is taken over the kept frames alone.
        let beforeStream = OWW.contextSamples / OWW.melHop
        let later = weight("frames after the first step", shape: [OWW.framesPerStep, 1], values: (0..<OWW.framesPerStep).map { $0 < beforeStream ? 0 : 1 })
        node("Min", "started", ["steps", one], ["started"])
        node("Max", "frames kept", ["started", later], ["frames kept"])
        node("Sub", "frames not kept", [one, "frames kept"], ["frames not kept"])
        // Audio in [-1, 1] to the int16 scale openWakeWord feeds its melspectrogram model.
        let scale = weight("int16 scale", shape: [1], values: [32768])
        node("Mul", "samples as int16", ["samples", scale], ["samples (int16)"])
        let firstMelNode = nodes.count
        let melOut = append(f.mel, tensors: f.melTensors, prefix: "mel/", input: "samples (int16)")
        keepFrames(inMaximaOf: f, prefix: "mel/", from: firstMelNode)
        let ten = weight("mel / 10", shape: [1], values: [10]), two = weight("mel + 2", shape: [1], values: [2])
        node("Div", "mel / 10", [melOut, ten], ["mel scaled"])
        node("Add", "mel + 2", ["mel scaled", two], ["mel frames"])
        let newFrames = reshape("mel frames", [OWW.framesPerStep, OWW.mels])
        node("Mul", "kept frames", [newFrames, "frames kept"], ["kept frames"])
        node("Add", "new frames", ["kept frames", "frames not kept"], ["new frames"])
        // The window of the latest 76 frames.
        node("Concat", "frames window", ["frames", "new frames"], ["frames + new"], ["axis": .int(0)])
        slice("frames + new", axis: 0, from: OWW.framesPerStep, to: OWW.frames + OWW.framesPerStep, into: "frames (next)")
        var streamStates: [GraphSpec.StateSpec] = [
            .init(input: "frames", output: "frames (next)", shape: [OWW.frames, OWW.mels],
                  initial: weight("frames (first values)", shape: [OWW.frames, OWW.mels], values: [Float](repeating: 1, count: OWW.frames * OWW.mels)), starts: OWW.framesStart),
            .init(input: "steps", output: "steps (next)", shape: [1], initial: weight("steps (first values)", shape: [1], values: [0]), starts: OWW.stepsStart),
        ]
        let embOut: String
        let saved = self
        var caches: [GraphSpec.StateSpec] = []
        if let incremental = try? addIncremental(f.embedding, tensors: f.embeddingTensors, prefix: "embedding/", window: "frames (next)",
                                                  newRows: OWW.framesPerStep, states: &caches) {
            embOut = incremental
        } else {
            self = saved
            caches = []
            let window = reshape("frames (next)", [1, OWW.frames, OWW.mels, 1])
            embOut = append(f.embedding, tensors: f.embeddingTensors, prefix: "embedding/", input: window)
        }
        streamStates += caches
        let new = reshape(embOut, [1, OWW.embeddingSize])
        node("Identity", "embedding (new)", [new], ["embedding (new)"])
        return streamStates
    }

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
        guard g.nodes.count >= 3, g.nodes.first?.op == "Reshape", g.nodes.last?.op == "Reshape", g.audioShape == [1, 76, 32, 1] else { throw OWW.NotIncremental() }
        // The whole graph on the window's first values (ones), for every tensor's shape and the caches' first values.
        let values = try OWW.values(of: g, tensors: t, input: 1)
        let body = g.nodes.dropFirst().dropLast()
        var chain = g.nodes[0].outputs[0]  // the tensor the next node reads
        guard let first = values[chain], first.rank == 4, first.shape[2] == 76 else { throw OWW.NotIncremental() }
        var n = newRows, rows = 76
        var current = ""  // the new rows of `chain`, once sliced
        var k = 0
        for layer in body {
            guard layer.inputs.first == chain, layer.outputs.count == 1, let x = values[chain], x.rank == 4 else { throw OWW.NotIncremental() }
            let a = layer.attributes ?? [:]
            func ints(_ key: String) -> [Int64]? { if case let .ints(v)? = a[key] { return v } else { return nil } }
            let out = prefix + layer.outputs[0]
            switch layer.op {
            case "Conv":
                guard let kernel = ints("kernel_shape"), kernel.count == 2, (ints("strides") ?? [1, 1])[0] == 1,
                      (ints("dilations") ?? [1, 1])[0] == 1, let pads = Optional(ints("pads") ?? [0, 0, 0, 0]), pads.count == 4,
                      pads[0] == 0, pads[2] == 0, a["auto_pad"] == nil || a["auto_pad"] == .string("NOTSET") else { throw OWW.NotIncremental() }
                let kt = Int(kernel[0])
                var recent: String
                if current.isEmpty {
                    // The first layer reads the window itself: its last n + k - 1 rows.
                    let sliced = "\(prefix)window rows"
                    slice(window, axis: 0, from: rows - (n + kt - 1), to: rows, into: sliced)
                    recent = reshape(sliced, [1, 1, n + kt - 1, x.shape[3]])
                } else if kt > 1 {
                    let cache = "\(prefix)cache \(k)", next = "\(prefix)cache \(k) (next)"
                    k += 1
                    recent = "\(prefix)\(layer.name) rows"
                    node("Concat", recent, [cache, current], [recent], ["axis": .int(2)])
                    slice(recent, axis: 2, from: n, to: n + kt - 1, into: next)
                    // First values: the kt - 1 rows before the last of the input on the window's first values.
                    let (c, h, w) = (x.shape[1], x.shape[2], x.shape[3])
                    var firstValues: [Float] = []
                    for ch in 0..<c { for r in (h - (kt - 1))..<h { for col in 0..<w { firstValues.append(x.floats[(ch * h + r) * w + col]) } } }
                    states.append(.init(input: cache, output: next, shape: [1, c, kt - 1, w],
                                        initial: weight("\(cache) (first values)", shape: [1, c, kt - 1, w], values: firstValues)))
                } else {
                    recent = current
                }
                for input in layer.inputs.dropFirst() where !input.isEmpty {
                    if let w = t[input] { tensors[prefix + input] = w }
                }
                node("Conv", prefix + layer.name, [recent] + layer.inputs.dropFirst().map { $0.isEmpty ? "" : prefix + $0 }, [out], a)
                rows -= kt - 1
            case "LeakyRelu":
                guard !current.isEmpty else { throw OWW.NotIncremental() }
                node("LeakyRelu", prefix + layer.name, [current], [out], a)
            case "Max", "Min":
                guard !current.isEmpty, layer.inputs.count == 2, let constant = t[layer.inputs[1]], constant.values.count == 1 else { throw OWW.NotIncremental() }
                tensors[prefix + layer.inputs[1]] = constant
                node(layer.op, prefix + layer.name, [current, prefix + layer.inputs[1]], [out], a)
            case "MaxPool":
                guard !current.isEmpty, let kernel = ints("kernel_shape"), kernel.count == 2, let strides = ints("strides"), strides.count == 2,
                      kernel[0] == strides[0], (ints("pads") ?? [0, 0, 0, 0]).allSatisfy({ $0 == 0 }) else { throw OWW.NotIncremental() }
                let st = Int(strides[0])
                guard n % st == 0, rows % st == 0 else { throw OWW.NotIncremental() }
                node("MaxPool", prefix + layer.name, [current], [out], a)
                n /= st
                rows /= st
            default:
                throw OWW.NotIncremental()
            }
            chain = layer.outputs[0]
            current = out
        }
        guard let last = g.nodes.last, last.inputs.first == chain, n == 1, rows == 1 else { throw OWW.NotIncremental() }
        return current
    }

    /// Each ReduceMax of the melspectrogram graph (added from node `from` on, its names
    /// prefixed) whose input holds a step's frames ([..., 8, n]) reads the frames not kept
    /// as -1e30, so that its maximum is over the kept frames only (openWakeWord's first
    /// step computes the melspectrogram of its 5 frames alone).
    mutating func keepFrames(inMaximaOf f: OpenWakeWordImporter.FrontEnd, prefix: String, from: Int) {
        guard f.mel.nodes.contains(where: { $0.op == "ReduceMax" }), let values = try? OWW.values(of: f.mel, tensors: f.melTensors, input: 0) else { return }
        let floor = weight("not kept: -1e30", shape: [1], values: [-1e30])
        var i = from
        while i < nodes.count {
            let n = nodes[i]
            guard n.op == "ReduceMax", let input = n.inputs.first, input.hasPrefix(prefix),
                  let shape = values[String(input.dropFirst(prefix.count))]?.shape, shape.count >= 2, shape[shape.count - 2] == OWW.framesPerStep else {
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
}
