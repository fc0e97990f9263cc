import Earshot
import Foundation

// Voice activity segments of each file named, with the bundled Silero VAD.
let model = try Model.bundled("silero-vad")
let labeler = FileLabeler(model: model)
for path in CommandLine.arguments.dropFirst() {
    let result = try await labeler.label(path: path)
    for case let .ended(segment) in result.events {
        print(String(format: "%@  %.3f  %.3f  %@  %.2f", path, segment.startSeconds, segment.endSeconds, segment.label, segment.confidence))
    }
}
