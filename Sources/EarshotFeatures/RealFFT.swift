import CFFTW

/// How FFTW chooses a transform's algorithm. `measure` times candidates and keeps the fastest
/// (about 1.6x faster here), so two processes may pick different algorithms and differ in the
/// last bits; `estimate` picks by a fixed rule: the same bits in every run (training uses it so
/// that a seed reproduces a model).
public enum FFTPlanning: String, Sendable {
    case measure, estimate
}

/// FFTW plans for real-to-complex transforms, one per size, made once and shared by every
/// transform of that size for the life of the process. FFTW's planner is not thread-safe, so
/// every planner call goes through one lock; executing a plan on new arrays
/// (`fftwf_execute_dft_r2c`) is thread-safe.
enum FFTPlanCache {
    /// Plans are immutable once made; the pointer values are only read after creation.
    private struct Plan: @unchecked Sendable { let pointer: OpaquePointer }
    private struct Key: Hashable { let size: Int, planning: FFTPlanning }
    private static let plans = Locked<[Key: Plan]>([:])

    static func plan(size: Int, planning: FFTPlanning) throws(FeatureError) -> OpaquePointer {
        let key = Key(size: size, planning: planning)
        let result: Result<OpaquePointer, FeatureError> = plans.withLock { plans in
            if let plan = plans[key] { return .success(plan.pointer) }
            // Plan with scratch arrays: FFTW_MEASURE overwrites them while it times candidates.
            guard let input = fftwf_alloc_real(size), let output = fftwf_alloc_complex(size / 2 + 1) else {
                return .failure(.fftPlanFailed(size: size))
            }
            defer { fftwf_free(input); fftwf_free(output) }
            // The planner reuses what earlier measured plans of this size learnt ("wisdom"), so
            // an estimated plan would inherit a measurement; forget it first. Plans already made
            // keep working.
            if planning == .estimate { fftwf_forget_wisdom() }
            let flags = planning == .measure ? FFTW_MEASURE : FFTW_ESTIMATE
            guard let plan = fftwf_plan_dft_r2c_1d(Int32(size), input, output, UInt32(flags)) else {
                return .failure(.fftPlanFailed(size: size))
            }
            plans[key] = Plan(pointer: plan)
            return .success(plan)
        }
        return try result.get()
    }
}

/// One real FFT of a fixed size with its own aligned input and output arrays.
/// ref: FFTW 3 manual, "New-array Execute Functions"
final class RealFFT {
    let size: Int
    let binCount: Int
    private let plan: OpaquePointer
    /// [size] real input, aligned by fftwf_malloc as the plan expects.
    let input: UnsafeMutablePointer<Float>
    /// [size / 2 + 1] complex output as (re, im) pairs.
    let output: UnsafeMutablePointer<fftwf_complex>

    init(size: Int, planning: FFTPlanning = .measure) throws(FeatureError) {
        guard size >= 2 else { throw .invalidParameter(name: "nFFT", value: "\(size)", expected: ">= 2") }
        self.size = size
        self.binCount = size / 2 + 1
        self.plan = try FFTPlanCache.plan(size: size, planning: planning)
        (input, output) = Self.allocateArrays(size: size)
    }

    /// Another transform of the same size on the same plan, with arrays of its own.
    init(sameAs other: RealFFT) {
        size = other.size
        binCount = other.binCount
        plan = other.plan
        (input, output) = Self.allocateArrays(size: size)
    }

    private static func allocateArrays(
        size: Int
    ) -> (UnsafeMutablePointer<Float>, UnsafeMutablePointer<fftwf_complex>) {
        // Aligned as the plan's arrays were (fftwf_malloc); allocation failure is out of memory,
        // which Swift treats as fatal for every allocation.
        let input = UnsafeMutablePointer<Float>(OpaquePointer(fftwf_malloc(size * MemoryLayout<Float>.stride)))!
        let output = UnsafeMutablePointer<fftwf_complex>(
            OpaquePointer(fftwf_malloc((size / 2 + 1) * MemoryLayout<fftwf_complex>.stride)))!
        input.initialize(repeating: 0, count: size)
        return (input, output)
    }

    deinit {
        fftwf_free(input)
        fftwf_free(output)
    }

    /// Transforms `input` into `output`.
    func execute() {
        fftwf_execute_dft_r2c(plan, input, output)
    }
}

/// A real FFT of one size for callers that keep their own buffers, which must start on 64-byte
/// boundaries (planned on FFTW's own aligned arrays, so its SIMD codelets serve; planned by
/// estimate: the same bits in every process). Sendable: the plan is immutable once made, and
/// FFTW's new-array execute is thread-safe.
package struct AlignedRealFFT: @unchecked Sendable {
    package let size: Int
    private let plan: OpaquePointer
    private static let plans = Locked<[Int: AlignedRealFFT]>([:])
    /// The alignment, in floats, the arrays given to `execute` must have.
    package static let alignment = 16

    private init(size: Int, plan: OpaquePointer) {
        self.size = size
        self.plan = plan
    }

    /// The transform of `size` points (made once per size, under the planner's lock).
    package static func make(size: Int) -> AlignedRealFFT? {
        guard size >= 2, size <= 1 << 24 else { return nil }
        return plans.withLock { plans -> AlignedRealFFT? in
            if let fft = plans[size] { return fft }
            guard let input = fftwf_alloc_real(size), let output = fftwf_alloc_complex(size / 2 + 1) else { return nil }
            defer { fftwf_free(input); fftwf_free(output) }
            // As FFTPlanCache: an estimated plan must not inherit measured wisdom.
            fftwf_forget_wisdom()
            guard let plan = fftwf_plan_dft_r2c_1d(Int32(size), input, output, UInt32(FFTW_ESTIMATE)) else { return nil }
            let fft = AlignedRealFFT(size: size, plan: plan)
            plans[size] = fft
            return fft
        }
    }

    /// `input` [size] to `output` [size / 2 + 1] complex values as (re, im) pairs, both 64-byte
    /// aligned; `input` is kept (an out-of-place real-to-complex transform preserves its input).
    package func execute(_ input: UnsafeMutablePointer<Float>, _ output: UnsafeMutablePointer<Float>) {
        output.withMemoryRebound(to: fftwf_complex.self, capacity: size / 2 + 1) { fftwf_execute_dft_r2c(plan, input, $0) }
    }
}
