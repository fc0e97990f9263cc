import CEarshotKernels
import Foundation

/// Logarithmic compression of (mel) spectra:
/// `value = multiplier * log_base(max(x + offset, floor)) - multiplier * log_base(max(reference, floor))`.
/// ref: librosa.power_to_db (reference = ref, floor = amin, topDB = top_db)
public struct LogScale: Codable, Sendable, Equatable, Hashable {
    /// Natural log or decibels.
    public enum Kind: String, Codable, Sendable {
        /// ln(x)
        case natural
        /// log10(x)
        case log10
        /// 10 * log10(x): decibels of a power spectrum
        case decibels
    }

    /// The log's kind.
    public var kind: Kind
    /// Added before the logarithm (e.g. 1e-6 for log(x + 1e-6)).
    public var offset: Float
    /// Smallest value passed to the logarithm (librosa's `amin`).
    public var floor: Float
    /// Value that maps to 0 (librosa's `ref`); only used with decibels.
    public var reference: Float
    /// Decibels only: clip values more than topDB below the loudest value seen so far in the
    /// stream. Offline, librosa clips below the loudest value of the whole signal; applying
    /// `LogScale.clip(_:topDB:)` to the whole output gives exactly that.
    public var topDB: Float?

    /// A log scale.
    public init(kind: Kind, offset: Float = 0, floor: Float = 1e-10, reference: Float = 1, topDB: Float? = nil) {
        self.kind = kind
        self.offset = offset
        self.floor = floor
        self.reference = reference
        self.topDB = topDB
    }

    /// Decibels as librosa's power_to_db computes them.
    public static func decibels(reference: Float = 1, floor: Float = 1e-10, topDB: Float? = nil) -> LogScale {
        LogScale(kind: .decibels, floor: floor, reference: reference, topDB: topDB)
    }

    func validate() throws(FeatureError) {
        guard floor > 0 else { throw .invalidParameter(name: "log.floor", value: "\(floor)", expected: "> 0") }
        guard reference > 0 else {
            throw .invalidParameter(name: "log.reference", value: "\(reference)", expected: "> 0")
        }
        if let topDB, !(topDB >= 0) {
            throw .invalidParameter(name: "log.topDB", value: "\(topDB)", expected: ">= 0")
        }
    }

    /// Applies the logarithm in place; returns the largest output value of the frame.
    @discardableResult
    func apply(_ values: UnsafeMutableBufferPointer<Float>) -> Float {
        let ln10 = Float(2.302_585_093)
        // Subnormal floors would leave the range the vector logarithm handles.
        let f = Swift.max(floor, Float.leastNormalMagnitude)
        let (scale, shift): (Float, Float)
        switch kind {
        case .natural: (scale, shift) = (1, 0)
        case .log10: (scale, shift) = (1 / ln10, 0)
        case .decibels: (scale, shift) = (10 / ln10, 10 * Foundation.log10(Swift.max(reference, floor)))
        }
        return earshot_scaled_log(values.baseAddress, values.count, offset, f, scale, shift)
    }

    /// librosa's whole-signal top_db: every value below (max - topDB) becomes (max - topDB).
    public static func clip(_ values: inout [Float], topDB: Float) {
        guard let peak = values.max() else { return }
        let low = peak - topDB
        for i in values.indices where values[i] < low { values[i] = low }
    }
}
