import EarshotFeatures
import EarshotModel
import Foundation

/// The features a classifier sees, computed by the runtime itself so that training and running
/// agree: STFT power frames (25 ms Hann window, 10 ms hop, one frame per model step), a mel
/// filterbank as a linear layer, log (ln(x + 1e-6)), and a batch norm holding the training
/// data's mean and variance.
struct FeatureRecipe: Sendable, Equatable {
    let sampleRate: Int
    let melCount: Int

    var hop: Int { sampleRate / 100 }
    var windowLength: Int { sampleRate * 25 / 1000 }
    var nFFT: Int {
        var n = 1
        while n < windowLength { n *= 2 }
        return n
    }
    var bins: Int { nFFT / 2 + 1 }

    /// "log-mel:40" (the count may be left out).
    static func parse(_ text: String, sampleRate: Int) throws(TrainingError) -> FeatureRecipe {
        let parts = text.split(separator: ":")
        guard parts.first == "log-mel", parts.count <= 2 else {
            throw .option(name: "features", value: text, expected: "log-mel or log-mel:COUNT")
        }
        let count = parts.count == 2 ? Int(parts[1]) : 40
        guard let count, (4...256).contains(count) else { throw .option(name: "features", value: text, expected: "log-mel:4...256") }
        guard sampleRate >= 4000 else { throw .option(name: "sample-rate", value: "\(sampleRate)", expected: ">= 4000") }
        return FeatureRecipe(sampleRate: sampleRate, melCount: count)
    }

    var audio: ModelManifest.Audio {
        ModelManifest.Audio(sampleRate: sampleRate, chunkSamples: hop, contextSamples: nFFT - hop)
    }

    var frontEnd: ModelManifest.FrontEnd {
        ModelManifest.FrontEnd(type: .stft, nFFT: nFFT, hopLength: hop, winLength: windowLength, window: .hann, periodic: true,
                               padLeft: 0, padRight: 0, padMode: nil, spectrum: .power)
    }

    /// The feature layers of a model's network and their tensors; without statistics, no batch norm.
    func layers(mean: [Float]?, variance: [Float]?) throws(TrainingError) -> ([LayerSpec], [String: Tensor]) {
        let mel: MelFilterbank
        do { mel = try MelFilterbank(config: MelConfig(melCount: melCount), sampleRate: sampleRate, nFFT: nFFT) } catch {
            throw .option(name: "features", value: "log-mel:\(melCount)", expected: "a mel filterbank for \(sampleRate) Hz (\(error))")
        }
        var specs = [LayerSpec(type: "linear", name: "mel", inFeatures: bins, outFeatures: melCount, weight: "mel.weight", bias: "mel.bias"),
                     LayerSpec(type: "log", name: "log")]
        var tensors = ["mel.weight": Tensor(shape: [melCount, bins], values: mel.matrix.flatMap { $0 }),
                       "mel.bias": Tensor(shape: [melCount], values: [Float](repeating: 0, count: melCount))]
        if let mean, let variance {
            specs.append(LayerSpec(type: "batchNorm", name: "norm", numFeatures: melCount, eps: Self.normEpsilon,
                                   runningMean: "norm.running_mean", runningVar: "norm.running_var"))
            tensors["norm.running_mean"] = Tensor(shape: [melCount], values: mean)
            tensors["norm.running_var"] = Tensor(shape: [melCount], values: variance)
        }
        return (specs, tensors)
    }

    static let normEpsilon = 1e-5

    /// A model that outputs the features themselves, one frame per step. Its FFT is planned by
    /// estimate, so that the features, and so a seed's model, are the same in every run.
    func model(mean: [Float]?, variance: [Float]?) throws(TrainingError) -> Model {
        let (specs, tensors) = try layers(mean: mean, variance: variance)
        let manifest = ModelManifest(format: ModelManifest.format, formatVersion: ModelManifest.formatVersion, name: "features",
                                     audio: audio, frontEnd: frontEnd, network: specs,
                                     outputs: .init(activation: .none, reduceTime: .last, labels: (0..<melCount).map { "mel\($0)" }))
        do { return try Model(manifest: manifest, tensors: tensors) } catch {
            throw .model(reason: "features: \(error)")
        }
    }

    /// A clip's features [frames][mels] as the runtime computes them from stream start;
    /// `audio` holds a whole number of hops.
    static func frames(of audio: [Float], model: Model) throws(TrainingError) -> [Float] {
        let n = model.chunkSamples
        let blocks = stride(from: 0, to: audio.count - n + 1, by: n).map { Array(audio[$0..<($0 + n)]) }
        var state = model.makeState()
        do { return try model.predictions(forConsecutive: blocks, using: &state).flatMap { $0 } } catch {
            throw .model(reason: "features: \(error)")
        }
    }
}

extension LayerSpec {
    init(type: String, name: String? = nil, inFeatures: Int? = nil, outFeatures: Int? = nil, weight: String? = nil, bias: String? = nil,
         numFeatures: Int? = nil, eps: Double? = nil, runningMean: String? = nil, runningVar: String? = nil) {
        self.init(type: type)
        self.name = name
        self.inFeatures = inFeatures
        self.outFeatures = outFeatures
        self.weight = weight
        self.bias = bias
        self.numFeatures = numFeatures
        self.eps = eps
        self.runningMean = runningMean
        self.runningVar = runningVar
    }
}
