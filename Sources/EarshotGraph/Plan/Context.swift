/// The pointers of one run.
struct Context {
    let arena: UnsafeMutablePointer<Float>
    let stride: Int
    let shared: UnsafePointer<Float>
    let scratch: UnsafeMutablePointer<Float>
    let streams: Int

    @inline(__always) func read(_ ref: GraphPlan.Ref, _ stream: Int) -> UnsafePointer<Float> {
        ref.shared ? shared + ref.offset : UnsafePointer(arena + stream * stride + ref.offset)
    }

    @inline(__always) func write(_ ref: GraphPlan.Ref, _ stream: Int) -> UnsafeMutablePointer<Float> {
        arena + stream * stride + ref.offset
    }

    /// A tensor's first byte, as floats or as codes (`ref.coded`).
    @inline(__always) func bytes(_ ref: GraphPlan.Ref, _ stream: Int) -> UnsafeMutableRawPointer {
        (ref.shared ? UnsafeMutableRawPointer(mutating: shared) : UnsafeMutableRawPointer(arena + stream * stride)) + ref.bytes.lowerBound
    }
}
