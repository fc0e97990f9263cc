import CEarshotKernels

/// The arithmetic of a compiled graph's products (MatMul, Gemm, Conv, an LSTM's input and
/// recurrent products). `fp32`: as the model was written. `bf16`: each weight stored as bf16 at
/// load (rounded to nearest, ties to even), each product's activations rounded to bf16 as it
/// reads them, every sum in fp32; everything else (element-wise ops, the LSTM cell, FFTs, states)
/// stays fp32. A product whose rounding a log of a large gain magnifies (Silero VAD v4's STFT
/// Conv: `amplifiedByLog`), the nodes a plan is told to keep (`GraphPlan.init`'s `fp32Nodes`) and
/// Winograd's transformed products stay fp32.
public enum Precision: String, CaseIterable, Sendable, Codable {
    case fp32, bf16

    /// The instruction paths bf16 products run on, chosen once per process by CPUID: AMX tiles
    /// where the CPU has them and the kernel grants the tile state, else AVX-512 BF16, else the
    /// portable path (fp32 multiply-adds of the bf16 values, giving the AVX-512 BF16 path's values
    /// bit for bit). The tiles sum in their own order: their values differ from the others' by
    /// the order of the sums only.
    public enum Path: Int32, CaseIterable, Sendable {
        case portable = 0, avx512BF16, amx

        /// The names `EARSHOT_BF16_PATH` takes.
        public var name: String {
            switch self {
            case .portable: "portable"
            case .avx512BF16: "avx512"
            case .amx: "amx"
            }
        }

        public init?(name: String) {
            guard let path = Self.allCases.first(where: { $0.name == name }) else { return nil }
            self = path
        }
    }

    /// The bf16 paths this CPU has, the best last (the one used unless another is chosen).
    public static var paths: [Path] { Array(Path.allCases.prefix(Int(earshot_bf16_paths()))) }

    /// The bf16 path in use.
    public static var path: Path { Path(rawValue: earshot_bf16_path_chosen()) ?? .portable }

    /// Runs the bf16 products of every plan in the process on `path` (nil: the best there is) and
    /// returns the path now used (the best there is when `path` is not available here).
    @discardableResult
    public static func use(_ path: Path?) -> Path { Path(rawValue: earshot_bf16_path(path?.rawValue ?? -1)) ?? .portable }

    /// x rounded to bf16, as a float (what a bf16 product multiplies).
    public static func bf16(_ x: Float) -> Float { Float(bitPattern: UInt32(earshot_bf16(x)) << 16) }
}
