import EarshotAudio
import EarshotModel
import Foundation

/// The audio of a wake phrase's data set: 16 kHz mono clips, generated noise and music, and
/// the 16-bit WAV files they are written as.
public enum WakeAudio {
    /// The data set's rate (Hz): openWakeWord's and microWakeWord's.
    public static let rate = 16000

    /// `samples` at `rate` made a clip: resampled to 16 kHz (libsoxr), trimmed to where it is
    /// within 50 dB of its peak (10 ms frames), its peak at -3 dBFS, 0.1 s of silence each side.
    /// Empty when there is no sound.
    public static func prepared(_ samples: [Float], rate given: Int) -> [Float] {
        var x = samples
        if given != rate, let r = try? Resampler(inputRate: Double(given), outputRate: Double(rate)), let y = try? r.process(samples) + r.finish() {
            x = y
        }
        let peak = x.reduce(Float(0)) { max($0, abs($1)) }
        guard peak > 1e-6 else { return [] }
        let frame = rate / 100, floor = peak * pow(10, -50 / 20)
        let frames = x.count / frame
        let loud = (0..<frames).filter { f in x[(f * frame)..<((f + 1) * frame)].contains { abs($0) > floor } }
        guard let first = loud.first, let last = loud.last else { return [] }
        let gain = pow(10, Float(-3) / 20) / peak
        let pad = [Float](repeating: 0, count: rate / 10)
        return pad + x[(first * frame)..<((last + 1) * frame)].map { $0 * gain } + pad
    }

    /// Noise of `seconds`: white, pink (Voss-McCartney, 16 rows) or brown (integrated white), at
    /// an RMS of `level`, from `seed`.
    public static func noise(_ color: Int, seconds: Double, level: Float, seed: UInt64) -> [Float] {
        var random = SplitMix64(seed: seed)
        let n = Int(seconds * Double(rate))
        var x = [Float](repeating: 0, count: n)
        switch color % 3 {
        case 0: for i in 0..<n { x[i] = random.normal() }
        case 1:
            var rows = [Float](repeating: 0, count: 16), sum: Float = 0
            for i in 0..<n {
                // The row of the lowest set bit of i changes at each sample.
                let k = min(15, (i + 1).trailingZeroBitCount)
                sum -= rows[k]
                rows[k] = random.normal()
                sum += rows[k]
                x[i] = sum + random.normal()
            }
        default:
            var y: Float = 0
            for i in 0..<n { y = 0.995 * y + random.normal(); x[i] = y }
        }
        return scaled(x, rms: level)
    }

    /// Music of `seconds`: a chord progression of harmonic tones (a fundamental and 5 overtones
    /// falling off as 1/k), a new chord every 0.25-0.75 s with an attack and decay, a bass note
    /// an octave below, at an RMS of `level`, from `seed`. A stand-in for recorded music.
    public static func music(seconds: Double, level: Float, seed: UInt64) -> [Float] {
        var random = SplitMix64(seed: seed)
        let n = Int(seconds * Double(rate))
        var x = [Float](repeating: 0, count: n)
        let scale = [0, 2, 4, 5, 7, 9, 11]
        let root = Int.random(in: 45...57, using: &random)  // MIDI A2-A3
        var start = 0
        while start < n {
            let length = min(n - start, Int(Double.random(in: 0.25...0.75, using: &random) * Double(rate)))
            let degree = Int.random(in: 0..<7, using: &random)
            let notes = [0, 2, 4].map { root + 12 + scale[(degree + $0) % 7] + ((degree + $0) / 7) * 12 } + [root + scale[degree] - 12]
            for note in notes {
                let f = 440 * pow(2, Double(note - 69) / 12)
                for k in 1...6 where f * Double(k) < Double(rate) / 2 {
                    let w = 2 * Double.pi * f * Double(k) / Double(rate), a = Float(1 / Double(k))
                    for i in 0..<length {
                        let t = Float(i) / Float(rate)
                        let envelope = min(1, t / 0.01) * exp(-3 * t)
                        x[start + i] += a * envelope * Float(sin(w * Double(i)))
                    }
                }
            }
            start += length
        }
        return scaled(x, rms: level)
    }

    static func scaled(_ x: [Float], rms: Float) -> [Float] {
        let power = x.reduce(Float(0)) { $0 + $1 * $1 } / Float(max(1, x.count))
        guard power > 0 else { return x }
        let g = rms / power.squareRoot()
        return x.map { max(-1, min(1, $0 * g)) }
    }

    /// Writes `samples` (16 kHz, clipped to [-1, 1 - 2^-15]) as a 16-bit PCM WAV file, atomically (a
    /// temporary file in the same folder, then renamed).
    public static func write(_ samples: [Float], to path: String) throws(WakeDataError) {
        var data = Data(capacity: 44 + samples.count * 2)
        func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
        func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { data.append(contentsOf: $0) } }
        data.append(contentsOf: Array("RIFF".utf8)); u32(UInt32(36 + samples.count * 2))
        data.append(contentsOf: Array("WAVEfmt ".utf8)); u32(16); u16(1); u16(1); u32(UInt32(rate)); u32(UInt32(rate * 2)); u16(2); u16(16)
        data.append(contentsOf: Array("data".utf8)); u32(UInt32(samples.count * 2))
        for s in samples { u16(UInt16(bitPattern: s.isFinite ? Int16(max(-32768, min(32767, (s * 32768).rounded()))) : 0)) }  // libsndfile reads s / 32768
        let temporary = path + ".partial"
        do {
            try data.write(to: URL(fileURLWithPath: temporary))
            if FileManager.default.fileExists(atPath: path) { try FileManager.default.removeItem(atPath: path) }
            try FileManager.default.moveItem(atPath: temporary, toPath: path)
        } catch {
            try? FileManager.default.removeItem(atPath: temporary)
            throw .cannotWrite(path: path, reason: error.localizedDescription)
        }
    }
}
