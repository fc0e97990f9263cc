/// An optional array (a broadcast map, a bias) as a buffer pointer, for the loops that read it.
extension Optional {
    @inline(__always)
    func withUnsafeBufferPointerOrNil<Element, R>(_ body: (UnsafeBufferPointer<Element>?) -> R) -> R where Wrapped == [Element] {
        switch self {
        case let .some(array): return array.withUnsafeBufferPointer { body($0) }
        case .none: return body(nil)
        }
    }
}
