/// An optional broadcast map as a buffer pointer, for the loops that read it.
extension Optional where Wrapped == [Int32] {
    @inline(__always)
    func withUnsafeBufferPointerOrNil<R>(_ body: (UnsafeBufferPointer<Int32>?) -> R) -> R {
        switch self {
        case let .some(array): return array.withUnsafeBufferPointer { body($0) }
        case .none: return body(nil)
        }
    }
}
