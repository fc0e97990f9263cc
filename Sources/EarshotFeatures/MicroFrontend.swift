import CEarshotKernels

/// TensorFlow Lite Micro's audio front end, as microWakeWord's models are trained on it and as
/// pymicro-features runs it, in integer arithmetic that gives its values bit for bit: a 30 ms
/// window (480 samples at 16 kHz, a Q12 Hann-like window, then scaled up to use 15 bits) every
/// 10 ms, a 512-point fixed-point FFT (kissfft's int16 radix-4 transform of 256 points, each
/// stage dividing by 4 as a rounded multiply, then the real split), the energy of bins 5...240,
/// 40 filterbank channels over 125-7500 Hz (Q12 triangular weights, a rounded integer square
/// root, scaled back down), noise reduction (a smoothed estimate per channel, even and odd
/// channels at their own rates, at least 5% of the signal kept), PCAN gain control (a gain
/// interpolated from a table by the estimate, then a shrink) and a fixed-point log2 scaled by
/// ln 2. The front end's tables depend on the C library's float functions where it builds them,
/// so they are kept as numbers (`microfrontend_tables.h`); the arithmetic is in C
/// (`microfrontend.c`).
///
/// A frame's values are 16-bit integers; `featureScale` gives the features microWakeWord's
/// models take. The only state between frames is the noise estimate of each channel (`noise`);
/// the caller keeps the samples (each frame reads the latest 480, 160 of them new).
public enum MicroFrontend {
    /// The rate it takes (Hz).
    public static let sampleRate = Int(EARSHOT_MF_SAMPLE_RATE)
    /// Samples per window (30 ms).
    public static let windowSamples = Int(EARSHOT_MF_WINDOW_SAMPLES)
    /// Samples between windows (10 ms).
    public static let stepSamples = Int(EARSHOT_MF_STEP_SAMPLES)
    /// Steps of context that start a model step's samples (the window less one step): its
    /// first frames are the last of the previous step's group.
    public static let contextFrames = Int(EARSHOT_MF_CONTEXT_FRAMES)
    /// Filterbank channels per frame.
    public static let channels = Int(EARSHOT_MF_CHANNELS)
    /// A frame's 16-bit value times this is the feature value pymicro-features gives.
    public static let featureScale: Float = 0.0390625

    /// Computes one frame from 480 samples (int16), updating the noise estimates (40 values).
    @inline(__always)
    public static func frame(_ samples: UnsafePointer<Int16>, noise: UnsafeMutablePointer<UInt32>, into out: UnsafeMutablePointer<UInt16>) {
        earshot_microfrontend_frame(samples, noise, out)
    }

    /// Streams whose frames `frames(lanes:)` computes together.
    public static let lanes = Int(EARSHOT_MF_LANES)
    /// Bytes of scratch `frames(lanes:)` needs (64-byte aligned).
    public static var lanesScratchBytes: Int { earshot_microfrontend_lanes_scratch() }

    /// One frame of each of `lanes` streams at once, each value what `frame` gives that stream
    /// alone: `samples[l]` is stream l's 480 samples; its noise estimate of channel c is
    /// `noise[lanes * c + l]`, and its frame's channel c goes to `out[lanes * c + l]`.
    @inline(__always)
    public static func frames(lanes samples: UnsafePointer<UnsafePointer<Int16>?>, noise: UnsafeMutablePointer<UInt32>,
                              into out: UnsafeMutablePointer<UInt16>, scratch: UnsafeMutableRawPointer) {
        earshot_microfrontend_lanes(samples, noise, out, scratch)
    }

    /// How `frame` and `frames(lanes:)` can run: portable vectorized C, or with AVX-512 (the
    /// transform in 16-bit pairs, 16 butterflies or 16 streams a vector); each gives the same
    /// values. They take the best there is.
    public enum Path: Int32, CaseIterable, Sendable {
        case portable = 0, avx512 = 1
    }

    /// The paths this CPU has.
    public static var paths: [Path] { Array(Path.allCases.prefix(Int(earshot_microfrontend_paths()))) }

    /// `frame` on `path` (one this CPU has: `paths`).
    public static func frame(_ samples: UnsafePointer<Int16>, noise: UnsafeMutablePointer<UInt32>, into out: UnsafeMutablePointer<UInt16>,
                             path: Path) {
        earshot_microfrontend_frame_on(path.rawValue, samples, noise, out)
    }

    /// `frames(lanes:)` on `path` (one this CPU has: `paths`).
    public static func frames(lanes samples: UnsafePointer<UnsafePointer<Int16>?>, noise: UnsafeMutablePointer<UInt32>,
                              into out: UnsafeMutablePointer<UInt16>, scratch: UnsafeMutableRawPointer, path: Path) {
        earshot_microfrontend_lanes_on(path.rawValue, samples, noise, out, scratch)
    }
}
