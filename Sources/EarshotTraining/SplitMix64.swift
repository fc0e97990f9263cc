import Foundation

/// A small seeded generator (SplitMix64): the same seed gives the same training run.
/// ref: Steele, Lea, Flood, "Fast splittable pseudorandom number generators" (2014)
package struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    package init(seed: UInt64) { state = seed }

    /// A generator for one item of one epoch: independent of the order work is done in.
    init(seed: UInt64, _ a: Int, _ b: Int) {
        var mixer = SplitMix64(seed: seed ^ (UInt64(truncatingIfNeeded: a) &* 0x9E37_79B9_7F4A_7C15))
        state = mixer.next() ^ UInt64(truncatingIfNeeded: b) &* 0xBF58_476D_1CE4_E5B9
    }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [-bound, bound).
    mutating func uniform(count: Int, bound: Float) -> [Float] {
        (0..<count).map { _ in Float.random(in: -bound..<bound, using: &self) }
    }

    /// Standard normal (Box-Muller).
    mutating func normal() -> Float {
        let u = Float.random(in: Float.ulpOfOne..<1, using: &self), v = Float.random(in: 0..<1, using: &self)
        return (-2 * log(u)).squareRoot() * cos(2 * .pi * v)
    }
}
