/// The receptive fields of a convolution or a pooling on a plane: which input row and column each
/// tap of each output position's kernel reads, the padding included (a 1-D window is a plane of
/// height 1). The one place their indices are computed: the reference kernels (ONNX's Conv,
/// TFLite's Conv2D and DepthwiseConv2D) and the compiled steps (gathered fields, channels-last
/// runs, pooling windows, the int8 products' taps) take them from here, in the layout each wants
/// (`channelsFirst`, NCHW; `channelsLast`, NHWC).
/// ref: ONNX's Conv and pooling (pads, strides, dilations); TFLite's reference_ops::Conv.
struct ReceptiveField {
    /// The input plane.
    let height, width: Int
    /// The kernel.
    let kh, kw: Int
    /// The output plane.
    let oh, ow: Int
    /// Strides and dilations along the rows and the columns.
    let sh, sw, dh, dw: Int
    /// The padding before the first row and column, and after the last.
    let ph, pw, eh, ew: Int

    /// An ONNX window (`Window`) on 1 or 2 spatial axes; `spatial`: the input's spatial sizes.
    init(spatial: [Int], kernel: [Int], _ w: Window) {
        let two = spatial.count == 2
        (height, width) = two ? (spatial[0], spatial[1]) : (1, spatial[0])
        (kh, kw) = two ? (kernel[0], kernel[1]) : (1, kernel[0])
        (oh, ow) = two ? (w.output[0], w.output[1]) : (1, w.output[0])
        (sh, sw) = two ? (w.strides[0], w.strides[1]) : (1, w.strides[0])
        (dh, dw) = two ? (w.dilations[0], w.dilations[1]) : (1, w.dilations[0])
        (ph, pw) = two ? (w.padBegin[0], w.padBegin[1]) : (0, w.padBegin[0])
        (eh, ew) = two ? (w.padEnd[0], w.padEnd[1]) : (0, w.padEnd[0])
    }

    /// TFLite's window: `strides` and `dilations` [h, w], `pads` [top, left, bottom, right], the
    /// output's size as the model states it.
    init(height: Int, width: Int, kernel: (h: Int, w: Int), output: (h: Int, w: Int), strides: [Int], dilations: [Int], pads: [Int]) {
        (self.height, self.width) = (height, width)
        (kh, kw) = kernel
        (oh, ow) = output
        (sh, sw, dh, dw) = (strides[0], strides[1], dilations[0], dilations[1])
        (ph, pw, eh, ew) = (pads[0], pads[1], pads[2], pads[3])
    }

    /// A plane of one column (unpadded, a kernel of one column) read as one row: the same values
    /// in the same memory and the taps in the same order, so that a kernel whose vector lanes run
    /// along a row runs along the plane's long axis (a depthwise convolution over time: 100 x 1
    /// planes). Any other field as it is.
    var oneRow: ReceptiveField {
        guard width == 1, kw == 1, ow == 1, pw == 0, ew == 0, height > 1 else { return self }
        return ReceptiveField(height: 1, width: height, kernel: (1, kh), output: (1, oh), strides: [1, sh], dilations: [1, dh], pads: [0, ph, 0, eh])
    }

    /// The input row and column that tap (i, j) of output (oy, ox) reads; outside the plane, it
    /// reads the padding.
    @inline(__always)
    func input(_ oy: Int, _ ox: Int, _ i: Int, _ j: Int) -> (row: Int, column: Int) {
        (oy * sh - ph + i * dh, ox * sw - pw + j * dw)
    }

    /// The plane position (row × width + column) that tap (i, j) of output (oy, ox) reads; nil in
    /// the padding.
    @inline(__always)
    func position(_ oy: Int, _ ox: Int, _ i: Int, _ j: Int) -> Int? {
        let (row, column) = input(oy, ox, i, j)
        return row >= 0 && row < height && column >= 0 && column < width ? row * width + column : nil
    }

    /// Whether tap (i, j) of output (oy, ox) lies within the padded input (inside, or in the
    /// padding before or after it): what a pooling with count_include_pad counts.
    @inline(__always)
    func withinPadding(_ oy: Int, _ ox: Int, _ i: Int, _ j: Int) -> Bool {
        let (row, column) = input(oy, ox, i, j)
        return row >= -ph && row < height + eh && column >= -pw && column < width + ew
    }

    /// Every field over `channels` planes laid out channels first, [positions][channels][kh][kw]
    /// (as ONNX's filters are): `body(e, index)` for each element e in order, with the index of
    /// the value it reads, (channel × height + row) × width + column, or nil in the padding.
    @inline(__always)
    func channelsFirst(channels: Int, _ body: (_ element: Int, _ index: Int?) -> Void) {
        let plane = height * width
        var e = 0
        for oy in 0..<oh {
            for ox in 0..<ow {
                for c in 0..<channels {
                    for i in 0..<kh {
                        for j in 0..<kw {
                            body(e, position(oy, ox, i, j).map { c * plane + $0 })
                            e += 1
                        }
                    }
                }
            }
        }
    }

    /// Every field laid out channels last, [positions][kh][kw][channels] (as TFLite's filters
    /// are), over an input [row][column][stride] whose first channel is `offset` into each
    /// position: `body(e, index)` for each element e in order, with the index of the value it
    /// reads, position × stride + offset + channel, or nil in the padding.
    @inline(__always)
    func channelsLast(channels: Int, stride: Int, offset: Int = 0, _ body: (_ element: Int, _ index: Int?) -> Void) {
        var e = 0
        for oy in 0..<oh {
            for ox in 0..<ow {
                for i in 0..<kh {
                    for j in 0..<kw {
                        let p = position(oy, ox, i, j)
                        for c in 0..<channels {
                            body(e, p.map { $0 * stride + offset + c })
                            e += 1
                        }
                    }
                }
            }
        }
    }

    /// `channelsFirst` as an index map, `padding` where a field reads the padding.
    func channelsFirstMap(channels: Int, padding: Int32 = -1) -> [Int32] {
        var map = [Int32](repeating: padding, count: oh * ow * channels * kh * kw)
        channelsFirst(channels: channels) { e, index in
            if let index { map[e] = Int32(index) }
        }
        return map
    }
}
