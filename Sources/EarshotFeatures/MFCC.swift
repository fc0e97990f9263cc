import CEarshotKernels
import Foundation

/// Cepstral coefficients from log-mel frames: the orthonormal DCT-II of each frame, first
/// `coefficientCount` coefficients.
/// ref: scipy.fft.dct(type=2, norm='ortho'), as librosa.feature.mfcc uses it
public struct MFCCConfig: Codable, Sendable, Equatable, Hashable {
    /// Coefficients per frame.
    public var coefficientCount: Int
    /// MFCCs with this many coefficients.
    public init(coefficientCount: Int) { self.coefficientCount = coefficientCount }
}

/// The orthonormal DCT-II (as scipy's `dct(norm="ortho")`).
public struct DCT: Sendable, Equatable {
    /// Values in.
    public let inputCount: Int
    /// Coefficients out.
    public let outputCount: Int
    /// [outputCount][inputCount] row-major basis.
    let basis: [Float]

    /// A DCT of `inputCount` values keeping `outputCount` coefficients.
    public init(inputCount: Int, outputCount: Int) throws(FeatureError) {
        guard inputCount >= 1 else {
            throw .invalidParameter(name: "melCount", value: "\(inputCount)", expected: ">= 1 for MFCC")
        }
        guard (1...inputCount).contains(outputCount) else {
            throw .invalidParameter(name: "mfcc.coefficientCount", value: "\(outputCount)",
                                    expected: "1...\(inputCount) (the mel count)")
        }
        self.inputCount = inputCount
        self.outputCount = outputCount
        let n = Double(inputCount)
        var basis = [Float](repeating: 0, count: outputCount * inputCount)
        for k in 0..<outputCount {
            let scale = k == 0 ? (1 / n).squareRoot() : (2 / n).squareRoot()
            for i in 0..<inputCount {
                basis[k * inputCount + i] = Float(scale * cos(Double.pi * Double(k) * (2 * Double(i) + 1) / (2 * n)))
            }
        }
        self.basis = basis
    }

    /// Transforms one frame.
    public func apply(_ input: UnsafeBufferPointer<Float>, into output: UnsafeMutableBufferPointer<Float>) {
        basis.withUnsafeBufferPointer { b in
            for k in 0..<outputCount {
                output[k] = earshot_dot(b.baseAddress! + k * inputCount, input.baseAddress!, inputCount)
            }
        }
    }
}
