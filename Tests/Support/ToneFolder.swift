import Foundation

/// Labelled tones written to a fresh folder: "low" (300-500 Hz) and "high" (1500-2500 Hz),
/// 0.4 s at 8 kHz with a little noise, one speaker-like group per file pair.
public func toneFolder(files: Int = 8, seed: UInt64 = 11) throws -> String {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-tones-\(UUID().uuidString)").path
    var random = SeededRandom(seed: seed)
    for (label, band) in [("high", 1500.0...2500.0), ("low", 300.0...500.0)] {
        let folder = root + "/" + label
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for i in 0..<files {
            let tone = sine(frequency: Double.random(in: band, using: &random), sampleRate: 8000, count: 3200, amplitude: 0.3)
            let noisy = tone.map { $0 + Float.random(in: -0.02...0.02, using: &random) }
            try writeAudio("\(folder)/s\(i / 2)_\(label)_\(i).wav", samples: noisy, channels: 1, sampleRate: 8000)
        }
    }
    return root
}

