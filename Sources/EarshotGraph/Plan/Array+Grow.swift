extension Array where Element == Float {
    /// At least n elements (new ones zero); more are kept.
    package mutating func grow(to n: Int) {
        if count < n { append(contentsOf: repeatElement(0, count: n - count)) }
    }

    /// Grows (with zeros) or shrinks to `n` values, keeping the storage.
    package mutating func setCount(_ n: Int) {
        if count > n {
            removeLast(count - n)
        } else if count < n {
            append(contentsOf: repeatElement(0, count: n - count))
        }
    }
}
