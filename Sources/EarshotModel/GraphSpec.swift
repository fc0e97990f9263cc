import EarshotGraph

/// A model's network as a graph of ops over named N-D tensors (ONNX's op semantics), as
/// `earshot import` writes it into model.json. Float constants are tensors of
/// weights.safetensors (named by the node inputs that use them); small integer constants
/// (axes, shapes, pads) stand in `constants`. Each step reads the stream's audio block
/// (context + chunk) as `audioInput` and its state tensors, runs the nodes in order, and writes
/// the state outputs back: the stream's state is those tensors and nothing else.
public struct GraphSpec: Codable, Sendable, Equatable {
    /// The most nodes a graph may have: far beyond any streaming audio model (Silero VAD has 689
    /// with both branches of its If, openWakeWord's embedding 65), and a bound on what importing
    /// and loading a hostile file costs. `earshot import` refuses a model with more.
    public static let maxNodes = 50_000

    /// The ONNX opset whose semantics the ops follow.
    public var opset: Int
    /// The tensor that receives a block of audio, shaped `audioShape` (e.g. [1, 576]: the
    /// context and the chunk of one stream).
    public var audioInput: String
    /// The audio input's shape for one stream (context and chunk).
    public var audioShape: [Int]
    /// The tensor whose values are the step's scores (one per label).
    public var scoreOutput: String
    /// State tensors: read at the start of a step, written at its end; zeros at stream start
    /// unless a state names its first values.
    public var states: [StateSpec]
    /// Integer constants by name (float constants live in weights.safetensors).
    public var constants: [String: IntegerConstant]
    /// The nodes, in an order that computes each input before it is read.
    public var nodes: [NodeSpec]

    /// A graph.
    public init(opset: Int, audioInput: String, audioShape: [Int], scoreOutput: String, states: [StateSpec],
                constants: [String: IntegerConstant], nodes: [NodeSpec]) {
        self.opset = opset
        self.audioInput = audioInput
        self.audioShape = audioShape
        self.scoreOutput = scoreOutput
        self.states = states
        self.constants = constants
        self.nodes = nodes
    }

    /// A state tensor: read from `input` at a step's start, written from `output` at its end.
    public struct StateSpec: Codable, Sendable, Equatable {
        /// The tensor a step reads (ONNX: a graph input).
        public var input: String
        /// The tensor a step writes, which the next step reads as `input` (ONNX: an output).
        public var output: String
        /// Its shape for one stream.
        public var shape: [Int]
        /// The weight tensor holding the state's values at stream start (as TFLite's variables
        /// take theirs from an init subgraph); zeros when nil.
        public var initial: String?
        /// What its first values are, in words, where they are not plain zeros or follow from
        /// the others (`earshot inspect` shows it).
        public var starts: String?

        /// A state pair; `initial` names a constant with its first values (default zeros).
        public init(input: String, output: String, shape: [Int], initial: String? = nil, starts: String? = nil) {
            self.input = input
            self.output = output
            self.shape = shape
            self.initial = initial
            self.starts = starts
        }
    }

    /// An integer constant kept in the manifest.
    public struct IntegerConstant: Codable, Sendable, Equatable {
        /// Its shape for one stream.
        public var shape: [Int]
        /// Its values.
        public var values: [Int64]
        /// "int64" or "bool".
        public var dtype: String

        /// A constant.
        public init(shape: [Int], values: [Int64], dtype: String = "int64") {
            self.shape = shape
            self.values = values
            self.dtype = dtype
        }

        private enum CodingKeys: String, CodingKey { case shape, values, runs, dtype }

        /// The values as runs of consecutive integers, [first, count] each, when they are four
        /// values or more on average (a framing's indices: 511 runs instead of 523,264 values,
        /// which a manifest then reads in a moment); nil otherwise.
        var runs: [[Int64]]? {
            var runs: [[Int64]] = []
            for v in values {
                if let last = runs.last, last[0] &+ last[1] == v { runs[runs.count - 1][1] += 1 } else { runs.append([v, 1]) }
                if runs.count * 4 > values.count { return nil }
            }
            return runs.count * 4 <= values.count ? runs : nil
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            shape = try c.decode([Int].self, forKey: .shape)
            dtype = try c.decode(String.self, forKey: .dtype)
            if let runs = try c.decodeIfPresent([[Int64]].self, forKey: .runs) {
                // Runs are short to write and long to hold: exactly the shape's values, and at most
                // 2^24 of them (128 MB).
                var values: [Int64] = []
                let count = shape.reduce(1) { $0.multipliedReportingOverflow(by: Swift.max($1, 0)).overflow ? Int.max : $0 * Swift.max($1, 0) }
                guard count <= 1 << 24 else {
                    throw DecodingError.dataCorruptedError(forKey: .runs, in: c, debugDescription: "runs of \(count) values: more than 2^24")
                }
                for run in runs {
                    guard run.count == 2, run[1] >= 0, run[1] <= Int64(count - values.count) else {
                        throw DecodingError.dataCorruptedError(forKey: .runs, in: c,
                                                               debugDescription: "a run is [first, count], the counts adding up to the shape's \(count) values")
                    }
                    values += (0..<run[1]).map { run[0] &+ $0 }
                }
                guard values.count == count else {
                    throw DecodingError.dataCorruptedError(forKey: .runs, in: c,
                                                           debugDescription: "runs of \(values.count) values, where the shape holds \(count)")
                }
                self.values = values
            } else {
                values = try c.decode([Int64].self, forKey: .values)
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(shape, forKey: .shape)
            try c.encode(dtype, forKey: .dtype)
            if let runs { try c.encode(runs, forKey: .runs) } else { try c.encode(values, forKey: .values) }
        }
    }

    /// A node: its op (ONNX's semantics), inputs, outputs and attributes.
    public struct NodeSpec: Codable, Sendable, Equatable {
        /// The op.
        public var op: String
        /// The node's name.
        public var name: String
        /// Tensor names; "" is an omitted optional input.
        public var inputs: [String]
        /// Its outputs.
        public var outputs: [String]
        /// Its attributes.
        public var attributes: [String: AttributeValue]?

        /// A node.
        public init(op: String, name: String, inputs: [String], outputs: [String], attributes: [String: AttributeValue]? = nil) {
            self.op = op
            self.name = name
            self.inputs = inputs
            self.outputs = outputs
            self.attributes = attributes
        }
    }

    /// An op's attribute as JSON holds it: whole numbers and strings (and lists of them) as
    /// they are; real numbers as {"float": x} or {"floats": [...]}, so that 1.0 stays a real.
    public enum AttributeValue: Codable, Sendable, Equatable {
        case int(Int64)
        case float(Double)
        case string(String)
        case ints([Int64])
        case floats([Double])
        case strings([String])

        private enum Keys: String, CodingKey { case float, floats }

        /// The attribute as the kernels take it.
        public var graphAttribute: GraphAttribute {
            switch self {
            case let .int(v): return .int(v)
            case let .float(v): return .float(Float(v))
            case let .string(v): return .string(v)
            case let .ints(v): return .ints(v)
            case let .floats(v): return .floats(v.map { Float($0) })
            case let .strings(v): return .strings(v)
            }
        }

        public init(from decoder: Decoder) throws {
            if let c = try? decoder.singleValueContainer() {
                if let v = try? c.decode(Int64.self) { self = .int(v); return }
                if let v = try? c.decode(String.self) { self = .string(v); return }
                if let v = try? c.decode([Int64].self) { self = .ints(v); return }
                if let v = try? c.decode([String].self) { self = .strings(v); return }
            }
            let k = try decoder.container(keyedBy: Keys.self)
            if let v = try k.decodeIfPresent(Double.self, forKey: .float) { self = .float(v); return }
            self = .floats(try k.decode([Double].self, forKey: .floats))
        }

        public func encode(to encoder: Encoder) throws {
            switch self {
            case let .float(v):
                var k = encoder.container(keyedBy: Keys.self)
                try k.encode(v, forKey: .float)
            case let .floats(v):
                var k = encoder.container(keyedBy: Keys.self)
                try k.encode(v, forKey: .floats)
            case let .int(v):
                var c = encoder.singleValueContainer()
                try c.encode(v)
            case let .string(v):
                var c = encoder.singleValueContainer()
                try c.encode(v)
            case let .ints(v):
                var c = encoder.singleValueContainer()
                try c.encode(v)
            case let .strings(v):
                var c = encoder.singleValueContainer()
                try c.encode(v)
            }
        }
    }
}
