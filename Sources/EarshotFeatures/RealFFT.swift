import CFFTW

/// How FFTW chooses a transform's algorithm. `estimate` (the default) picks by a fixed rule: the
/// same bits in every process on a CPU, so `label`, a worker, a server and a state restored in
/// another process all compute the same values. `measure` times candidates and keeps the fastest
/// (up to about 1.6x faster for the transform alone), so two processes may pick different
/// algorithms and differ in the last bits; it is for callers that never compare across processes.
public enum FFTPlanning: String, Sendable {
    case measure, estimate
}

/// FFTW plans for real-to-complex transforms, one per size and planning, made once and shared by
/// every transform for the life of the process. FFTW's planner is not thread-safe, so every
/// planner call in the process goes through this one lock (each transform type planning under a
/// lock of its own once let a measured plan run beside an estimated one and hand it its wisdom:
/// a process whose estimated plan differed from every other process's); executing a plan on new
/// arrays (`fftwf_execute_dft_r2c`) is thread-safe.
enum FFTPlanCache {
    /// Plans are immutable once made; the pointer values are only read after creation.
    private struct Plan: @unchecked Sendable { let pointer: OpaquePointer }
    private struct Key: Hashable { let size: Int, planning: FFTPlanning, double: Bool }
    private static let plans = Locked<[Key: Plan]>([:])

    /// The plan of `size` points, planned on FFTW's own aligned arrays (so its SIMD codelets
    /// serve, and arrays given to it must be aligned as fftwf_malloc aligns), or nil when FFTW
    /// cannot plan it.
    static func plan(size: Int, planning: FFTPlanning) -> OpaquePointer? {
        plans.withLock { plans -> OpaquePointer? in
            let key = Key(size: size, planning: planning, double: false)
            if let plan = plans[key] { return plan.pointer }
            // Plan with scratch arrays: FFTW_MEASURE overwrites them while it times candidates.
            guard let input = fftwf_alloc_real(size), let output = fftwf_alloc_complex(size / 2 + 1) else { return nil }
            defer { fftwf_free(input); fftwf_free(output) }
            // The planner reuses what earlier measured plans of this size learnt ("wisdom"), so
            // an estimated plan would inherit a measurement; forget it first. Plans already made
            // keep working.
            if planning == .estimate { fftwf_forget_wisdom() }
            let flags = planning == .measure ? FFTW_MEASURE : FFTW_ESTIMATE
            guard let plan = fftwf_plan_dft_r2c_1d(Int32(size), input, output, UInt32(flags)) else { return nil }
            plans[key] = Plan(pointer: plan)
            return plan
        }
    }
}

extension FFTPlanCache {
    /// The double-precision plan of `size` points, estimated (FFTW's double library has a planner
    /// of its own, called under the same lock), on FFTW's aligned arrays as `plan(size:planning:)`.
    static func doublePlan(size: Int) -> OpaquePointer? {
        plans.withLock { plans -> OpaquePointer? in
            let key = Key(size: size, planning: .estimate, double: true)
            if let plan = plans[key] { return plan.pointer }
            guard let input = fftw_alloc_real(size), let output = fftw_alloc_complex(size / 2 + 1) else { return nil }
            defer { fftw_free(input); fftw_free(output) }
            fftw_forget_wisdom()
            guard let plan = fftw_plan_dft_r2c_1d(Int32(size), input, output, UInt32(FFTW_ESTIMATE)) else { return nil }
            plans[key] = Plan(pointer: plan)
            return plan
        }
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

    init(size: Int, planning: FFTPlanning = .estimate) throws(FeatureError) {
        guard size >= 2 else { throw .invalidParameter(name: "nFFT", value: "\(size)", expected: ">= 2") }
        guard let plan = FFTPlanCache.plan(size: size, planning: planning) else { throw .fftPlanFailed(size: size) }
        self.size = size
        self.binCount = size / 2 + 1
        self.plan = plan
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

/// The precisions FFTW transforms in: its single (`fftwf_*`) and double (`fftw_*`) libraries,
/// each with a planner of its own, both called under `FFTPlanCache`'s one lock.
package protocol FFTScalar: BinaryFloatingPoint {
    /// The estimated plan of a real-to-complex transform of `size` points, planned on FFTW's own
    /// aligned arrays, or nil when FFTW cannot plan it. Called under the planner's lock.
    static func estimatedPlan(size: Int) -> OpaquePointer?
    /// Executes `plan` on new arrays: `input` [size] to `output` [size / 2 + 1] (re, im) pairs.
    static func execute(_ plan: OpaquePointer, _ input: UnsafeMutablePointer<Self>, _ output: UnsafeMutablePointer<Self>, bins: Int)
}

extension Float: FFTScalar {
    package static func estimatedPlan(size: Int) -> OpaquePointer? { FFTPlanCache.plan(size: size, planning: .estimate) }
    package static func execute(_ plan: OpaquePointer, _ input: UnsafeMutablePointer<Float>, _ output: UnsafeMutablePointer<Float>, bins: Int) {
        output.withMemoryRebound(to: fftwf_complex.self, capacity: bins) { fftwf_execute_dft_r2c(plan, input, $0) }
    }
}

extension Double: FFTScalar {
    package static func estimatedPlan(size: Int) -> OpaquePointer? { FFTPlanCache.doublePlan(size: size) }
    package static func execute(_ plan: OpaquePointer, _ input: UnsafeMutablePointer<Double>, _ output: UnsafeMutablePointer<Double>, bins: Int) {
        output.withMemoryRebound(to: fftw_complex.self, capacity: bins) { fftw_execute_dft_r2c(plan, input, $0) }
    }
}

/// A real FFT of one size, in float or double precision, for callers that keep their own
/// buffers, which must start on 64-byte boundaries (the estimated plan of `FFTPlanCache`: the
/// same bits in every process). Sendable: the plan is immutable once made, and FFTW's new-array
/// execute is thread-safe.
package struct AlignedRealFFT<Scalar: FFTScalar>: @unchecked Sendable {
    package let size: Int
    private let plan: OpaquePointer

    /// The transform of `size` points (planned once per size, under the planner's lock).
    package static func make(size: Int) -> AlignedRealFFT? {
        guard size >= 2, size <= 1 << 24, let plan = Scalar.estimatedPlan(size: size) else { return nil }
        return AlignedRealFFT(size: size, plan: plan)
    }

    private init(size: Int, plan: OpaquePointer) {
        self.size = size
        self.plan = plan
    }

    /// `input` [size] to `output` [size / 2 + 1] complex values as (re, im) pairs, both 64-byte
    /// aligned; `input` is kept (an out-of-place real-to-complex transform preserves its input).
    package func execute(_ input: UnsafeMutablePointer<Scalar>, _ output: UnsafeMutablePointer<Scalar>) {
        Scalar.execute(plan, input, output, bins: size / 2 + 1)
    }
}

/// The alignment, in floats, of the arrays an `AlignedRealFFT` is given (64 bytes).
package let fftAlignment = 16
