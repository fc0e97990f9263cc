/// Which of a graph's state tensors only ever hold int8 values (whole numbers in -128...127):
/// a stream can keep those as one byte each between steps, not as floats, and a step reads and
/// writes a quarter of the memory (a microWakeWord model's streaming windows are such states).
public enum IntegerRanges {
    /// The int8 range.
    static let int8: ClosedRange<Int64> = -128...127

    /// Whether a float is an int8 value: a whole number in -128...127.
    public static func isInt8(_ v: Float) -> Bool { v.rounded() == v && -128 <= v && v <= 127 }

    /// Per state (`states[i]`: its input and output tensors, its first values), whether it holds
    /// int8 values at every step. By induction: its first values are int8, and when every state
    /// so marked holds int8 values at the start of a step, its output does too, as the ops
    /// between prove it (TFLite's int8 kernels clamp to their activation range, Quantize to its
    /// [min, max], ops that move values keep their inputs' values, Where picks one of two).
    public static func int8States(nodes: [GraphNode], constants: [String: GraphTensor],
                                  states: [(input: String, output: String, initial: [Float])]) -> [Bool] {
        var marked = states.map { s in s.initial.allSatisfy(isInt8) }
        while true {
            var ranges: [String: ClosedRange<Int64>] = [:]
            for (s, m) in zip(states, marked) where m { ranges[s.input] = int8 }
            func range(_ name: String) -> ClosedRange<Int64>? {
                if let r = ranges[name] { return r }
                guard let c = constants[name], c.dtype == .float32 else { return nil }
                let values = c.floats
                guard let low = values.min(), let high = values.max(), -16_777_216 <= low, high <= 16_777_216,
                      values.allSatisfy({ $0.rounded() == $0 }) else { return nil }
                let r = Int64(low)...Int64(high)
                ranges[name] = r
                return r
            }
            func union(_ names: [String]) -> ClosedRange<Int64>? {
                var all: ClosedRange<Int64>?
                for name in names {
                    guard let r = range(name) else { return nil }
                    all = all.map { min($0.lowerBound, r.lowerBound)...max($0.upperBound, r.upperBound) } ?? r
                }
                return all
            }
            func activation(_ node: GraphNode) -> ClosedRange<Int64>? {
                guard case let .ints(r)? = node.attributes["activation"], r.count == 2, r[0] <= r[1] else { return nil }
                return r[0]...r[1]
            }
            func quantizeRange(_ node: GraphNode) -> ClosedRange<Int64>? {
                func value(_ name: String, _ absent: Int64) -> Int64? {
                    guard let a = node.attributes[name] else { return absent }
                    if case let .int(v) = a { return v }
                    return nil
                }
                guard let low = value("min", int8.lowerBound), let high = value("max", int8.upperBound), low <= high else { return nil }
                return low...high
            }
            for node in nodes {
                let out: ClosedRange<Int64>?
                switch node.op {
                case .tfliteConv2D, .tfliteDepthwiseConv2D, .tfliteFullyConnected: out = activation(node)
                case .quantize: out = quantizeRange(node)
                case .concat: out = union(node.inputs.filter { !$0.isEmpty })
                case .where where node.inputs.count == 3: out = union(Array(node.inputs[1...]))
                // Ops that only move values: an output holds values of its data inputs, nothing else.
                case .reshape, .slice, .split, .squeeze, .unsqueeze, .transpose, .identity, .flatten, .gather, .expand, .tile:
                    out = node.inputs.first.flatMap { union([$0]) }
                default: out = nil
                }
                if let out { for name in node.outputs where !name.isEmpty { ranges[name] = out } }
            }
            let next = zip(states, marked).map { s, m in m && (ranges[s.output].map { int8.lowerBound <= $0.lowerBound && $0.upperBound <= int8.upperBound } ?? false) }
            if next == marked { return marked }
            marked = next
        }
    }
}
