import EarshotModel
import Foundation

extension SplitMix64 {
    /// A generator for one item of one epoch: independent of the order work is done in.
    init(seed: UInt64, _ a: Int, _ b: Int) {
        var mixer = SplitMix64(seed: seed ^ (UInt64(truncatingIfNeeded: a) &* 0x9E37_79B9_7F4A_7C15))
        self.init(seed: mixer.next() ^ UInt64(truncatingIfNeeded: b) &* 0xBF58_476D_1CE4_E5B9)
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
