import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot

@Suite("File to features")
struct FileFeaturesTests {
    @Test("A 44.1 kHz file streamed through resampler and extractor equals the whole file resampled at once")
    func resampledFile() throws {
        let path = Repo.path("AudioSamples/speech-44k.wav")
        let config = FeatureConfig.logMel(sampleRate: 16000, nFFT: 512, hopLength: 160, melCount: 64)
        var random = SeededRandom.fromEnvironment()
        var streamed = FeatureMatrix(featureCount: 64)
        let job = FileFeatures(config: config, chunkFrames: Int.random(in: 100...20000, using: &random))
        let summary = try job.run(path: path) { streamed.append($0) }

        let (samples, rate) = try AudioFile.readMono(path: path)
        #expect(rate == 44100)
        let resampler = try Resampler(inputRate: 44100, outputRate: 16000)
        let whole = try FeatureExtractor.features(of: resampler.process(samples) + resampler.finish(), config: config)
        #expect(summary.featureFrames == whole.frameCount)
        #expect(summary.frameCount == samples.count)
        // Resampling in chunks equals resampling whole to float rounding (ResamplerTests), so the
        // log-mel values agree to rounding as well: held at 1e-3 dB.
        #expect(maxAbsDifference(streamed.values, whole.values) <= 1e-3, "seed \(random.seed), chunk \(job.chunkFrames)")
    }

    @Test("Channel k of the stereo sample equals that channel read alone")
    func channelOfStereo() throws {
        let path = Repo.path("AudioSamples/stereo-16k.wav")
        let config = FeatureConfig.logMel(sampleRate: 16000, nFFT: 512, hopLength: 160, melCount: 40)
        let file = try AudioFile(path: path)
        let channels = try file.readChannels(maxFrames: file.frameCount ?? 0)
        for k in 0..<2 {
            var got = FeatureMatrix(featureCount: 40)
            try FileFeatures(config: config, channels: .channel(k)).run(path: path) { got.append($0) }
            #expect(got == (try FeatureExtractor.features(of: channels[k], config: config)))
        }
        // The two channels hold different content, so their features differ.
        #expect(channels[0] != channels[1])
        #expect(throws: AudioError.channelOutOfRange(path: path, channel: 2, channelCount: 2)) {
            try FileFeatures(config: config, channels: .channel(2)).run(path: path)
        }
    }
}
