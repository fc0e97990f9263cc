import Earshot
import Foundation

// Each channel of the file is a stream of one session: one model, a state per channel, every
// step of all channels batched.
guard CommandLine.arguments.count == 2 else {
    print("usage: MultiChannel FILE")
    exit(64)
}
let model = try Model.bundled("silero-vad")
let file = try AudioFile(path: CommandLine.arguments[1])
let session = try Session(model: model, channelCount: file.channelCount, sourceSampleRate: file.sampleRate)
let channels = try file.readChannels(maxFrames: file.frameCount ?? 0)
var events: [ClassifierEvent] = []
let chunk = file.sampleRate / 10
for start in stride(from: 0, to: channels[0].count, by: chunk) {
    events += await session.process(channels.map { Array($0[start..<min(start + chunk, $0.count)]) })
}
events += await session.finish()
for case let .ended(s) in events {
    print(String(format: "channel %d  %.3f  %.3f  %@", s.channel, s.startSeconds, s.endSeconds, s.label))
}
