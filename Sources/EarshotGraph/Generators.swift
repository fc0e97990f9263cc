import Foundation

/// Ops that convert values or make new tensors: Cast, Identity, Shape, Size, ConstantOfShape, Range.
enum Generators {
    /// ONNX's TensorProto.DataType codes of the types these kernels hold.
    static func dtype(onnxCode code: Int) -> GraphDType? {
        switch code {
        case 1: return .float32
        case 6, 7: return .int64  // int32 is held as int64, its values wrapped to 32 bits
        case 9: return .bool
        default: return nil
        }
    }

    /// Cast to float, int64, int32 (held as int64) or bool. Float to int64 truncates toward zero;
    /// NaN, infinities and values out of range give Int64.min, as onnxruntime does on x86-64
    /// (to int32: Int32.min; an integer to int32 keeps its low 32 bits, as C's conversion does).
    static func cast(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["input"], required: 1, attributes: n.opset >= 19 ? ["to", "saturate"] : ["to"])
        let x = try n.input(0, "input")
        guard let code = try n.int("to") else { throw n.error("attribute 'to' is required") }
        guard let target = dtype(onnxCode: code) else {
            throw n.unsupported("Cast to ONNX data type \(code) (these kernels hold float (1), int32 (6, as int64), int64 (7) and bool (9))")
        }
        if code == 6 {  // int32
            let wide = x.dtype == .float32 ? x.floats.map { truncatedInt64(Double($0)) } : x.integers
            let narrow = wide.map { v -> Int64 in
                if x.dtype == .float32 { return Int64(Int32(exactly: v) ?? .min) }
                return Int64(Int32(truncatingIfNeeded: v))
            }
            return [GraphTensor(shape: x.shape, integers: narrow)]
        }
        switch (x.dtype, target) {
        case (.float32, .float32), (.int64, .int64), (.bool, .bool):
            return [x]
        case (.float32, .int64):
            return [GraphTensor(shape: x.shape, integers: x.floats.map { truncatedInt64(Double($0)) })]
        case (.float32, .bool):
            return [GraphTensor(shape: x.shape, integers: x.floats.map { $0 != 0 ? 1 : 0 }, dtype: .bool)]
        case (.int64, .float32), (.bool, .float32):
            return [GraphTensor(shape: x.shape, floats: x.integers.map { Float($0) })]
        case (.int64, .bool):
            return [GraphTensor(shape: x.shape, integers: x.integers.map { $0 != 0 ? 1 : 0 }, dtype: .bool)]
        case (.bool, .int64):
            return [GraphTensor(shape: x.shape, integers: x.integers)]
        }
    }

    static func identity(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["input"], required: 1, attributes: [])
        return [try n.input(0, "input")]
    }

    /// Shape, with start and end (opset 15) clamped to the rank.
    static func shape(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["data"], required: 1, attributes: n.opset >= 15 ? ["start", "end"] : [])
        let x = try n.input(0, "data")
        func clamped(_ value: Int) -> Int {
            let v = value < 0 ? value + x.rank : value
            return Swift.min(Swift.max(v, 0), x.rank)
        }
        let start = clamped(try n.int("start", default: 0))
        let end = clamped(try n.int("end", default: x.rank))
        let dims = start < end ? x.shape[start..<end].map { Int64($0) } : []
        return [GraphTensor(shape: [dims.count], integers: dims)]
    }

    static func size(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["data"], required: 1, attributes: [])
        return [GraphTensor(scalar: Int64(try n.input(0, "data").count))]
    }

    static func constantOfShape(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["input"], required: 1, attributes: ["value"])
        let shape = try n.integerList(try n.input(0, "input"), "input")
        let count = try n.count(shape, "the shape")
        let value = try n.tensor("value") ?? GraphTensor(shape: [1], floats: [0])
        guard value.count == 1, elementCount(value.shape) == 1 else {
            throw n.error("attribute 'value' must hold one value; it has shape \(value.shape)")
        }
        switch value.dtype {
        case .float32: return [GraphTensor(shape: shape, floats: [Float](repeating: value.floats[0], count: count))]
        case .int64, .bool:
            if value.dtype == .bool, value.integers[0] != 0, value.integers[0] != 1 {
                throw n.error("attribute 'value' is bool but holds \(value.integers[0])")
            }
            return [GraphTensor(shape: shape, integers: [Int64](repeating: value.integers[0], count: count), dtype: value.dtype)]
        }
    }

    /// Range: start, start + delta, ... while short of limit. The float values accumulate
    /// (value += delta), as onnxruntime's do; the count is ceil((limit - start) / delta).
    static func range(_ n: Node) throws(GraphError) -> [GraphTensor] {
        try n.expect(inputs: ["start", "limit", "delta"], required: 3, attributes: [])
        let start = try n.scalarInput(try n.input(0, "start", [.float32, .int64]), "start")
        let limit = try n.scalarInput(try n.input(1, "limit", [start.dtype]), "limit")
        let delta = try n.scalarInput(try n.input(2, "delta", [start.dtype]), "delta")
        func count(_ span: Double, _ step: Double) throws(GraphError) -> Int {
            guard step != 0 else { throw n.error("delta is 0") }
            let steps = (span / step).rounded(.up)
            guard !steps.isNaN, steps <= Double(GraphOps.maxElementCount) else {
                throw n.error("the range would hold more than \(GraphOps.maxElementCount) values")
            }
            return steps > 0 ? Int(steps) : 0
        }
        if start.dtype == .float32 {
            let (s, l, d) = (start.floats[0], limit.floats[0], delta.floats[0])
            guard s.isFinite, l.isFinite, d.isFinite else { throw n.error("start, limit and delta must be finite") }
            let total = try count(Double(l - s), Double(d))
            var values = [Float](repeating: 0, count: total)
            var v = s
            for i in 0..<total {
                values[i] = v
                v += d
            }
            return [GraphTensor(shape: [total], floats: values)]
        }
        let (s, l, d) = (start.integers[0], limit.integers[0], delta.integers[0])
        let (span, overflow) = l.subtractingReportingOverflow(s)
        guard !overflow else { throw n.error("limit - start overflows int64") }
        let total = try count(Double(span), Double(d))
        return [GraphTensor(shape: [total], integers: (0..<total).map { s &+ Int64($0) &* d })]
    }
}
