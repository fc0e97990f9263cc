/// Errors of the feature module: each case names what was expected and what was given.
public enum FeatureError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A parameter is out of its range, e.g. `.invalidParameter(name: "hopLength", value: "0", expected: "> 0")`.
    case invalidParameter(name: String, value: String, expected: String)
    /// FFTW could not make a plan for this transform size.
    case fftPlanFailed(size: Int)
    /// The input holds a NaN or an infinity at this sample index (counted from the stream's start).
    case nonFiniteInput(sampleIndex: Int)

    public var description: String {
        switch self {
        case let .invalidParameter(name, value, expected):
            return "invalid feature parameter \(name) = \(value): expected \(expected)"
        case let .fftPlanFailed(size):
            return "FFTW could not plan a real FFT of size \(size)"
        case let .nonFiniteInput(index):
            return "audio sample \(index) is NaN or infinite"
        }
    }
}
