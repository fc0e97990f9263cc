import Foundation

/// TensorFlow Lite Micro's audio front end, as microWakeWord's models are trained on it and as
/// pymicro-features runs it, in integer arithmetic that gives its values bit for bit: a 30 ms
/// window (480 samples at 16 kHz) every 10 ms, a 512-point fixed-point FFT (kissfft's int16
/// radix-4 transform and real split), 40 filterbank channels over 125-7500 Hz with a rounded
/// square root, noise reduction (a smoothed estimate per channel, even and odd channels at
/// their own rates), PCAN gain control and a fixed-point log. A frame's values are 16-bit
/// integers; `featureScale` gives the features microWakeWord's models take.
///
/// The only state between frames is the noise estimate of each channel (`noise`); the caller
/// keeps the samples (each frame reads the latest 480, 160 new).
public enum MicroFrontend {
    public static let sampleRate = 16000
    public static let windowSamples = 480
    public static let stepSamples = 160
    public static let channels = 40
    /// A frame's 16-bit value times this is the feature value pymicro-features gives.
    public static let featureScale: Float = 0.0390625

    /// Computes one frame from 480 samples (int16), updating the noise estimates (40 values).
    public static func frame(_ samples: UnsafePointer<Int16>, noise: UnsafeMutablePointer<UInt32>, into out: UnsafeMutablePointer<UInt16>) {
        withUnsafeTemporaryAllocation(of: Int16.self, capacity: 2 * 257 + 512) { work in
            let fft = work.baseAddress!
            // Window (Q12) and the shift that brings the largest value up to 15 bits.
            var largest: Int16 = 0
            MicroFrontendTables.window.withUnsafeBufferPointer { coef in
                for i in 0..<windowSamples {
                    let w = Int16(truncatingIfNeeded: (Int32(samples[i]) &* Int32(coef[i])) >> 12)
                    fft[i] = w
                    let a = w < 0 ? Int16(truncatingIfNeeded: -Int32(w)) : w
                    if a > largest { largest = a }
                }
            }
            let shift = 15 - (32 - UInt32(UInt16(bitPattern: largest)).leadingZeroBitCount)
            for i in 0..<windowSamples { fft[i] = Int16(truncatingIfNeeded: Int32(UInt16(bitPattern: fft[i])) << shift) }
            for i in windowSamples..<512 { fft[i] = 0 }
            let spectrum = fft + 512  // 257 bins, real and imaginary interleaved
            realFFT(fft, into: spectrum)
            filterbank(spectrum, shift: shift, noise: noise, into: out)
        }
    }

    // MARK: The fixed-point FFT

    private struct C: Sendable {
        var r: Int16
        var i: Int16
    }

    @inline(__always) private static func s16(_ v: Int32) -> Int16 { Int16(truncatingIfNeeded: v) }
    @inline(__always) private static func round15(_ v: Int32) -> Int32 { (v &+ 16384) >> 15 }
    @inline(__always) private static func mul(_ a: C, _ b: C) -> C {
        C(r: s16(round15(Int32(a.r) &* Int32(b.r) &- Int32(a.i) &* Int32(b.i))),
          i: s16(round15(Int32(a.r) &* Int32(b.i) &+ Int32(a.i) &* Int32(b.r))))
    }
    /// kissfft's C_FIXDIV: a multiply by 32767 / k (not a shift), rounded.
    @inline(__always) private static func divide(_ a: C, by k: Int32) -> C {
        let f = 32767 / k
        return C(r: s16(round15(Int32(a.r) &* f)), i: s16(round15(Int32(a.i) &* f)))
    }
    @inline(__always) private static func add(_ a: C, _ b: C) -> C { C(r: s16(Int32(a.r) + Int32(b.r)), i: s16(Int32(a.i) + Int32(b.i))) }
    @inline(__always) private static func sub(_ a: C, _ b: C) -> C { C(r: s16(Int32(a.r) - Int32(b.r)), i: s16(Int32(a.i) - Int32(b.i))) }

    private static func twiddle(_ phase: Double) -> C {
        C(r: Int16((0.5 + 32767 * cos(phase)).rounded(.down)), i: Int16((0.5 + 32767 * sin(phase)).rounded(.down)))
    }

    /// The 256-point complex transform's twiddles, and the real split's.
    private static let twiddles: [C] = (0..<256).map { twiddle(-2 * Double.pi * Double($0) / 256) }
    private static let splitTwiddles: [C] = (0..<128).map { twiddle(-Double.pi * (Double($0 + 1) / 256 + 0.5)) }
    /// Base-4 digit reversal of 0..<256.
    private static let order: [Int] = (0..<256).map { n in (n >> 6) | ((n >> 4) & 3) << 2 | ((n >> 2) & 3) << 4 | (n & 3) << 6 }

    /// 512 real samples to bins 0...256 (`out`: real, imaginary pairs).
    private static func realFFT(_ x: UnsafePointer<Int16>, into out: UnsafeMutablePointer<Int16>) {
        withUnsafeTemporaryAllocation(of: C.self, capacity: 256) { buffer in
            let z = buffer.baseAddress!
            for n in 0..<256 {
                let m = order[n]
                z[n] = C(r: x[2 * m], i: x[2 * m + 1])
            }
            twiddles.withUnsafeBufferPointer { tw in
                var m = 1
                while m < 256 {
                    let fs = 64 / m
                    for base in stride(from: 0, to: 256, by: 4 * m) {
                        for k in 0..<m {
                            let i0 = base + k, i1 = i0 + m, i2 = i0 + 2 * m, i3 = i0 + 3 * m
                            let a0 = divide(z[i0], by: 4), a1 = divide(z[i1], by: 4), a2 = divide(z[i2], by: 4), a3 = divide(z[i3], by: 4)
                            let s0 = mul(a1, tw[k * fs]), s1 = mul(a2, tw[2 * k * fs]), s2 = mul(a3, tw[3 * k * fs])
                            let s5 = sub(a0, s1), t0 = add(a0, s1), s3 = add(s0, s2), s4 = sub(s0, s2)
                            z[i2] = sub(t0, s3)
                            z[i0] = add(t0, s3)
                            z[i1] = C(r: s16(Int32(s5.r) + Int32(s4.i)), i: s16(Int32(s5.i) - Int32(s4.r)))
                            z[i3] = C(r: s16(Int32(s5.r) - Int32(s4.i)), i: s16(Int32(s5.i) + Int32(s4.r)))
                        }
                    }
                    m *= 4
                }
            }
            // The real split (kiss_fftr): halves of the bins from the complex transform.
            let d = divide(z[0], by: 2)
            out[0] = s16(Int32(d.r) + Int32(d.i)); out[1] = 0
            out[512] = s16(Int32(d.r) - Int32(d.i)); out[513] = 0
            splitTwiddles.withUnsafeBufferPointer { stw in
                for k in 1...128 {
                    let p = divide(z[k], by: 2)
                    let q = divide(C(r: z[256 - k].r, i: s16(-Int32(z[256 - k].i))), by: 2)
                    let f1 = add(p, q), f2 = sub(p, q)
                    let t = mul(f2, stw[k - 1])
                    out[2 * k] = s16((Int32(f1.r) + Int32(t.r)) >> 1)
                    out[2 * k + 1] = s16((Int32(f1.i) + Int32(t.i)) >> 1)
                    out[2 * (256 - k)] = s16((Int32(f1.r) - Int32(t.r)) >> 1)
                    out[2 * (256 - k) + 1] = s16((Int32(t.i) - Int32(f1.i)) >> 1)
                }
            }
        }
    }

    // MARK: Filterbank, noise reduction, PCAN, log

    /// The first bin of each of the 41 bands (the last entry ends the last band).
    private static let bandStarts = [5, 6, 8, 9, 11, 13, 15, 17, 19, 22, 24, 27, 30, 33, 36, 39, 43, 47, 50, 55, 59, 64, 69, 74, 79, 85, 91,
                                     98, 105, 112, 120, 128, 137, 146, 155, 166, 176, 188, 200, 213, 226, 241]

    /// floor(sqrt(n)) rounded to the nearest, as the front end's integer square root: below
    /// 2^32 it never passes 0xFFFF.
    static func roundedSquareRoot(_ n: UInt64) -> UInt64 {
        var r = UInt64(Double(n).squareRoot())
        while r > 0, r.multipliedReportingOverflow(by: r).overflow || r * r > n { r -= 1 }
        while true {
            let (sq, over) = (r + 1).multipliedReportingOverflow(by: r + 1)
            if over || sq > n { break }
            r += 1
        }
        let cap: UInt64 = n < 1 << 32 ? 0xFFFF : 0xFFFF_FFFF
        if n - r * r > r && r != cap { r += 1 }
        return r
    }

    private static func filterbank(_ spectrum: UnsafePointer<Int16>, shift: Int, noise: UnsafeMutablePointer<UInt32>,
                                   into out: UnsafeMutablePointer<UInt16>) {
        MicroFrontendTables.weights.withUnsafeBufferPointer { weights in
            for c in 0..<channels {
                var acc: UInt64 = 0
                for f in bandStarts[c]..<bandStarts[c + 1] {  // this channel's rising side: the unweights
                    acc &+= UInt64(4096 - weights[f - 5]) &* energy(spectrum, f)
                }
                for f in bandStarts[c + 1]..<bandStarts[c + 2] {  // the next band's weights
                    acc &+= UInt64(weights[f - 5]) &* energy(spectrum, f)
                }
                let signal = UInt32(truncatingIfNeeded: roundedSquareRoot(acc) >> UInt64(shift))
                out[c] = shape(signal, channel: c, noise: noise)
            }
        }
    }

    @inline(__always) private static func energy(_ s: UnsafePointer<Int16>, _ f: Int) -> UInt64 {
        let re = Int32(s[2 * f]), im = Int32(s[2 * f + 1])
        return UInt64(UInt32(bitPattern: re &* re &+ im &* im))
    }

    /// Noise reduction, PCAN gain control and the log of one channel's signal.
    @inline(__always) private static func shape(_ signal: UInt32, channel c: Int, noise: UnsafeMutablePointer<UInt32>) -> UInt16 {
        let smoothing: UInt64 = c % 2 == 0 ? 409 : 983
        let up = signal << 10
        noise[c] = UInt32(truncatingIfNeeded: (UInt64(up) &* smoothing &+ UInt64(noise[c]) &* (16384 - smoothing)) >> 14)
        let estimate = min(noise[c], up)
        let floor = UInt32(truncatingIfNeeded: (UInt64(signal) &* 819) >> 14)
        var v = max((up &- estimate) >> 10, floor)
        // PCAN: the gain for this estimate, then the shrink.
        let gain = UInt32(bitPattern: Int32(gainFor(noise[c])))
        let snr = UInt32(truncatingIfNeeded: (UInt64(v) &* UInt64(gain)) >> 6)
        v = snr < 8192 ? (snr &* snr) >> 20 : (snr >> 6) &- 64
        return log(v)
    }

    /// The PCAN gain of a noise estimate: the gain table's interpolation (WideDynamicFunction).
    private static func gainFor(_ x: UInt32) -> Int16 {
        MicroFrontendTables.gain.withUnsafeBufferPointer { l in
            if x <= 2 { return l[Int(x)] }
            let interval = 32 - x.leadingZeroBitCount
            let base = 4 * interval - 6
            let frac = Int32(bitPattern: (interval < 11 ? x << UInt32(11 - interval) : x >> UInt32(interval - 11)) & 0x3FF)
            var r = (Int32(l[base + 2]) &* frac) >> 5
            r = r &+ Int32(l[base + 1]) &* 32
            r = r &* frac
            r = (r &+ 16384) >> 15
            return Int16(truncatingIfNeeded: r &+ Int32(l[base]))
        }
    }

    /// The front end's fixed-point log: log2 by table interpolation, times ln 2, scaled.
    private static func log(_ v: UInt32) -> UInt16 {
        let u = v << 3
        guard u > 1 else { return 0 }
        let i = 31 - u.leadingZeroBitCount
        var fr = Int32(bitPattern: u &- (1 << UInt32(i)))
        fr = i < 16 ? fr << Int32(16 - i) : fr >> Int32(i - 16)
        let seg = Int(fr >> 9)
        let (c0, c1) = MicroFrontendTables.log.withUnsafeBufferPointer { ($0[seg], $0[seg + 1]) }
        fr = fr &+ c0 &+ (((c1 &- c0) &* (fr &- 512 &* Int32(seg))) >> 16)
        let log2 = (UInt32(i) << 16) &+ UInt32(bitPattern: fr)
        let scaled = UInt32(truncatingIfNeeded: (45426 &* UInt64(log2) &+ 32768) >> 16)
        return UInt16(min((scaled << 6 &+ 32768) >> 16, 65535))
    }
}
