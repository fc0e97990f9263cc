import CEarshotKernels

/// floor(a / b) for b > 0.
func floorDivide(_ a: Int, _ b: Int) -> Int { a >= 0 ? a / b : -((-a + b - 1) / b) }

/// ceil(a / b) for b > 0.
func ceilDivide(_ a: Int, _ b: Int) -> Int { a >= 0 ? (a + b - 1) / b : -((-a) / b) }

/// The spatial settings of a convolution or pooling, per spatial axis.
struct Window {
    var kernel: [Int]
    var strides: [Int]
    var dilations: [Int]
    var padBegin: [Int]
    var padEnd: [Int]
    var output: [Int]

    /// The largest stride, dilation, pad or kernel size accepted: keeps every index computation
    /// far from overflow.
    static let limit = Int(Int32.max)

    /// Reads strides, dilations, pads and auto_pad for spatial axes of sizes `input`, with the
    /// kernel sizes already known, and computes the output sizes.
    /// `pooling`: onnxruntime sizes SAME padding of a pooling without the dilation, and with
    /// ceil_mode drops a last window that would start in the end padding.
    init(_ n: Node, input: [Int], kernel: [Int], pooling: Bool, ceilMode: Bool) throws(GraphError) {
        let spatial = input.count
        self.kernel = kernel
        func list(_ name: String, count: Int, default value: Int, minimum: Int) throws(GraphError) -> [Int] {
            guard let values = try n.ints(name) else { return [Int](repeating: value, count: count) }
            guard values.count == count else {
                throw n.error("attribute '\(name)' has \(values.count) values; expected \(count) for \(spatial) spatial axes")
            }
            guard values.allSatisfy({ $0 >= minimum && $0 <= Window.limit }) else {
                throw n.error("attribute '\(name)' \(values) has a value outside \(minimum)...\(Window.limit)")
            }
            return values
        }
        strides = try list("strides", count: spatial, default: 1, minimum: 1)
        dilations = pooling && n.op == .averagePool && n.opset < 19
            ? [Int](repeating: 1, count: spatial)
            : try list("dilations", count: spatial, default: 1, minimum: 1)
        let pads = try list("pads", count: 2 * spatial, default: 0, minimum: 0)
        guard kernel.allSatisfy({ $0 >= 1 && $0 <= Window.limit }) else {
            throw n.error("kernel shape \(kernel) has a size outside 1...\(Window.limit)")
        }
        if pooling {
            for d in 0..<spatial where pads[d] >= kernel[d] || pads[d + spatial] >= kernel[d] {
                throw n.error("pads \(pads) are not all smaller than the kernel \(kernel)")
            }
        }
        padBegin = Array(pads[..<spatial])
        padEnd = Array(pads[spatial...])
        output = []
        let autoPad = try n.string("auto_pad", default: "NOTSET")
        for d in 0..<spatial {
            let extent = (kernel[d] - 1) * dilations[d] + 1
            switch autoPad {
            case "NOTSET":
                break
            case "VALID":
                padBegin[d] = 0
                padEnd[d] = 0
            case "SAME_UPPER", "SAME_LOWER":
                let target = (input[d] + strides[d] - 1) / strides[d]
                let needed = (target - 1) * strides[d] + (pooling ? kernel[d] : extent) - input[d]
                padBegin[d] = autoPad == "SAME_LOWER" ? (needed + 1) / 2 : needed / 2
                padEnd[d] = needed - padBegin[d]
            default:
                throw n.error("auto_pad '\(autoPad)' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER")
            }
            if pooling, padBegin[d] < 0 || padEnd[d] < 0 {
                throw n.error("auto_pad \(autoPad) needs negative padding on spatial axis \(d) (a stride longer than the kernel)")
            }
            let span = input[d] + padBegin[d] + padEnd[d] - extent
            guard span >= 0 else {
                throw n.error("the kernel \(kernel) (dilations \(dilations)) is larger than the padded input \(input) on spatial axis \(d)")
            }
            var size = (ceilMode ? ceilDivide(span, strides[d]) : span / strides[d]) + 1
            if ceilMode, (size - 1) * strides[d] >= input[d] + padBegin[d] { size -= 1 }
            output.append(size)
        }
    }
}

enum Convolution {
    /// Conv, 1-D and 2-D, with groups (depthwise included), strides, dilations, pads, auto_pad
    /// and an optional bias. Each output sums over input channels, then kernel rows, then kernel
    /// columns, in float, then adds the bias.
    static func conv(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["X", "W", "B"], required: 2,
                     attributes: ["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"])
        let x = try n.input(0, "X", [.float32])
        let w = try n.input(1, "W", [.float32])
        let bias = try n.optionalInput(2, "B", [.float32])
        guard x.rank == 3 || x.rank == 4 else {
            if x.rank > 4 { throw n.unsupported("\(x.rank - 2)-D convolution (1-D and 2-D only)") }
            throw n.error("input X has shape \(x.shape); expected [N, C, L] or [N, C, H, W]")
        }
        guard w.rank == x.rank else { throw n.error("input W has shape \(w.shape); expected rank \(x.rank) like X \(x.shape)") }
        let kernel = Array(w.shape[2...])
        if let stated = try n.ints("kernel_shape"), stated != kernel {
            throw n.error("kernel_shape \(stated) differs from W's spatial shape \(kernel)")
        }
        let group = try n.int("group", default: 1)
        let (batch, channels, outChannels) = (x.shape[0], x.shape[1], w.shape[0])
        guard group >= 1, group <= max(channels, 1), channels % group == 0, outChannels % group == 0 else {
            throw n.error("group \(group) does not divide the \(channels) input channels and \(outChannels) output channels")
        }
        guard w.shape[1] * group == channels else {
            throw n.error("W \(w.shape) takes \(w.shape[1]) channels per group; X \(x.shape) has \(channels) in \(group) groups")
        }
        if let bias, bias.shape != [outChannels] {
            throw n.error("input B has shape \(bias.shape); expected [\(outChannels)]")
        }
        let window = try Window(n, input: Array(x.shape[2...]), kernel: kernel, pooling: false, ceilMode: false)
        // 1-D runs as 2-D with a height of 1.
        let field = ReceptiveField(spatial: Array(x.shape[2...]), kernel: kernel, window)
        let (height, width, kh, kw, oh, ow) = (field.height, field.width, field.kh, field.kw, field.oh, field.ow)
        let outShape = [batch, outChannels] + window.output
        let total = try n.count(outShape, "the output")
        let groupIn = channels / group
        let groupOut = outChannels / group
        // Per batch item and group: the receptive fields laid out as rows of `depth` values
        // (zeros where they reach into the padding), then every output is one dot product of a
        // filter with a row, in the vectorized kernel.
        var y = [Float](repeating: 0, count: total)
        let depth = groupIn * kh * kw, positions = oh * ow
        var fields = [Float](repeating: 0, count: try n.count([positions, depth], "the receptive fields"))
        if depth > 0 && positions > 0 && !w.floats.isEmpty { x.floats.withUnsafeBufferPointer { xs in
            w.floats.withUnsafeBufferPointer { ws in
                y.withUnsafeMutableBufferPointer { ys in
                    fields.withUnsafeMutableBufferPointer { fs in
                        for b in 0..<batch {
                            for g in 0..<group {
                                let groupInput = (b * channels + g * groupIn) * height * width
                                field.channelsFirst(channels: groupIn) { e, index in fs[e] = index.map { xs[groupInput + $0] } ?? 0 }
                                for m in (g * groupOut)..<((g + 1) * groupOut) {
                                    let plane = (b * outChannels + m) * positions
                                    let filter = ws.baseAddress! + m * depth
                                    let value = bias?.floats[m] ?? 0
                                    for p in 0..<positions {
                                        ys[plane + p] = earshot_dot(filter, fs.baseAddress! + p * depth, depth) + value
                                    }
                                }
                            }
                        }
                    }
                }
            }
        } }
        return [GraphTensor(shape: outShape, floats: y)]
    }
}

enum Pooling {
    /// MaxPool (with its Indices output) and AveragePool, 1-D and 2-D.
    static func pool(_ n: Node) throws(GraphError) -> [GraphTensor] {
        let isMax = n.op == .maxPool
        var attributes: Set<String> = ["auto_pad", "ceil_mode", "kernel_shape", "pads", "strides"]
        if isMax {
            attributes.formUnion(["dilations", "storage_order"])
        } else {
            attributes.insert("count_include_pad")
            if n.opset >= 19 { attributes.insert("dilations") }
        }
        try n.expect(inputs: ["X"], required: 1, attributes: attributes)
        let x = try n.input(0, "X", [.float32])
        guard x.rank == 3 || x.rank == 4 else {
            if x.rank > 4 { throw n.unsupported("\(x.rank - 2)-D pooling (1-D and 2-D only)") }
            throw n.error("input X has shape \(x.shape); expected [N, C, L] or [N, C, H, W]")
        }
        guard let kernel = try n.ints("kernel_shape") else { throw n.error("attribute 'kernel_shape' is required") }
        let spatial = x.rank - 2
        guard kernel.count == spatial else {
            throw n.error("kernel_shape \(kernel) has \(kernel.count) sizes; X \(x.shape) has \(spatial) spatial axes")
        }
        let ceilMode = try n.int("ceil_mode", default: 0) != 0
        let window = try Window(n, input: Array(x.shape[2...]), kernel: kernel, pooling: true, ceilMode: ceilMode)
        let storageOrder = try n.int("storage_order", default: 0)
        guard storageOrder == 0 || storageOrder == 1 else { throw n.error("storage_order \(storageOrder) is not 0 or 1") }
        let includePad = try n.int("count_include_pad", default: 0) != 0
        let field = ReceptiveField(spatial: Array(x.shape[2...]), kernel: kernel, window)
        let (height, width, kh, kw, oh, ow) = (field.height, field.width, field.kh, field.kw, field.oh, field.ow)
        let (sh, sw, dh, dw, ph, pw, eh, ew) = (field.sh, field.sw, field.dh, field.dw, field.ph, field.pw, field.eh, field.ew)
        let outShape = Array(x.shape[..<2]) + window.output
        let total = try n.count(outShape, "the output")
        let planes = x.shape[0] * x.shape[1]
        var y = [Float](repeating: 0, count: total)
        var indices = [Int64](repeating: 0, count: isMax ? total : 0)
        /// The window steps i < size whose position start + i * dilation lies in low..<high.
        func steps(_ start: Int, _ dilation: Int, _ size: Int, _ low: Int, _ high: Int) -> ClosedRange<Int>? {
            let first = max(0, ceilDivide(low - start, dilation))
            let last = min(size - 1, floorDivide(high - 1 - start, dilation))
            return first <= last ? first...last : nil
        }
        x.floats.withUnsafeBufferPointer { xs in
            for p in 0..<planes {
                let base = p * height * width
                for oy in 0..<oh {
                    let top = oy * sh - ph
                    let rows = steps(top, dh, kh, 0, height)
                    for ox in 0..<ow {
                        let left = ox * sw - pw
                        let columns = steps(left, dw, kw, 0, width)
                        let out = (p * oh + oy) * ow + ox
                        if isMax {
                            var best = -Float.greatestFiniteMagnitude
                            var (bestRow, bestColumn) = (-1, -1)
                            if let rows, let columns {
                                for i in rows {
                                    let r = top + i * dh
                                    for j in columns {
                                        let c = left + j * dw
                                        let v = xs[base + r * width + c]
                                        if bestRow < 0 || v > best {
                                            best = v
                                            (bestRow, bestColumn) = (r, c)
                                        }
                                    }
                                }
                            }
                            y[out] = best
                            let position = storageOrder == 0 ? bestRow * width + bestColumn : bestRow + bestColumn * height
                            indices[out] = Int64(base + position)
                        } else {
                            var sum: Float = 0
                            var valid = 0
                            if let rows, let columns {
                                for i in rows {
                                    let row = base + (top + i * dh) * width
                                    for j in columns { sum += xs[row + left + j * dw] }
                                }
                                valid = rows.count * columns.count
                            }
                            // Including pads: the window steps inside the padded input.
                            let padded = (steps(top, dh, kh, -ph, height + eh)?.count ?? 0) * (steps(left, dw, kw, -pw, width + ew)?.count ?? 0)
                            let divisor = includePad ? padded : valid
                            y[out] = divisor > 0 && valid > 0 ? sum / Float(divisor) : 0
                        }
                    }
                }
            }
        }
        var outputs = [GraphTensor(shape: outShape, floats: y)]
        if isMax { outputs.append(GraphTensor(shape: outShape, integers: indices)) }
        return outputs
    }
}
