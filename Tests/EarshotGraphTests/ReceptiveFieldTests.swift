import Testing

@testable import EarshotGraph

/// `ReceptiveField`, the one place a convolution's fields are computed, against fields worked out
/// by hand.
@Suite("Receptive fields")
struct ReceptiveFieldTests {
    /// TFLite's window on a 3 x 4 plane: a 2 x 2 kernel, strides [2, 1], dilations [1, 2], pads
    /// [top 1, left 1, bottom 0, right 0], so a 2 x 3 output.
    static let tflite = ReceptiveField(height: 3, width: 4, kernel: (2, 2), output: (2, 3), strides: [2, 1], dilations: [1, 2],
                                       pads: [1, 1, 0, 0])
    /// Per output position, its taps' plane positions (row x 4 + column; nil in the padding), by
    /// hand: output (oy, ox)'s tap (i, j) reads row 2 oy - 1 + i, column ox - 1 + 2 j.
    static let taps: [[Int?]] = [
        [nil, nil, nil, 1], [nil, nil, 0, 2], [nil, nil, 1, 3],
        [nil, 5, nil, 9], [4, 6, 8, 10], [5, 7, 9, 11],
    ]

    @Test("Each tap's position, and whether it lies within the padded input")
    func positions() {
        let f = Self.tflite
        var got: [[Int?]] = []
        for oy in 0..<2 {
            for ox in 0..<3 { got.append([(0, 0), (0, 1), (1, 0), (1, 1)].map { f.position(oy, ox, $0.0, $0.1) }) }
        }
        #expect(got == Self.taps)
        #expect(f.input(0, 0, 0, 0) == (row: -1, column: -1) && f.withinPadding(0, 0, 0, 0))
        #expect(f.input(1, 2, 1, 1) == (row: 2, column: 3) && f.withinPadding(1, 2, 1, 1))
    }

    @Test("Channels last (NHWC, TFLite's filters) and channels first (NCHW, ONNX's), element by element")
    func layouts() {
        var last: [Int?] = []
        Self.tflite.channelsLast(channels: 2, stride: 3, offset: 1) { e, index in
            #expect(e == last.count)
            last.append(index)
        }
        // [positions][kh][kw][2]: position p's channel c is at p x 3 + 1 + c.
        #expect(last == Self.taps.flatMap { $0.flatMap { p in [p.map { $0 * 3 + 1 }, p.map { $0 * 3 + 2 }] } })
        #expect(last.prefix(8) == [nil, nil, nil, nil, nil, nil, 4, 5])
        // [positions][2][kh][kw]: channel c's plane starts at 12 c; -1 in the padding.
        let first = Self.tflite.channelsFirstMap(channels: 2)
        #expect(first == Self.taps.flatMap { taps in [0, 12].flatMap { c in taps.map { Int32($0.map { c + $0 } ?? -1) } } })
        #expect(first.prefix(16) == [-1, -1, -1, 1, -1, -1, -1, 13, -1, -1, 0, 2, -1, -1, 12, 14])
    }

    @Test("An ONNX 1-D window is a plane of height 1: pads [2, 0], stride 2 over 5 values")
    func onnx() throws {
        let node = Node(name: "conv", op: .conv, opset: 17, inputs: [], attributes: ["pads": .ints([2, 0]), "strides": .ints([2])],
                        outputCount: 1)
        let window = try Window(node, input: [5], kernel: [3], pooling: false, ceilMode: false)
        let f = ReceptiveField(spatial: [5], kernel: [3], window)
        #expect((f.height, f.width, f.oh, f.ow) == (1, 5, 1, 3))
        #expect(f.channelsFirstMap(channels: 1) == [-1, -1, 0, 0, 1, 2, 2, 3, 4])
        #expect(f.withinPadding(0, 2, 0, 2) && f.position(0, 2, 0, 2) == 4 && f.position(0, 0, 0, 0) == nil)
    }
}
