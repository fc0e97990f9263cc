import EarshotTestSupport
import Foundation
import Testing

@testable import Earshot

@Suite("Bundled models by name")
struct BundledModelTests {
    @Test("Model.bundled loads the packages that come with Earshot, the same as from their folders; an unknown name lists them")
    func bundled() throws {
        #expect(Set(["silero-vad", "okay-nabu", "hey-jarvis", "alexa", "hey-mycroft"]).isSubset(of: Set(Model.bundledNames)))
        let vad = try Model.bundled("silero-vad")
        let direct = try Model(contentsOf: Repo.root.appendingPathComponent("Models/silero-vad"))
        #expect(vad.contentHash == direct.contentHash && vad.name == "silero-vad")
        var state = vad.makeState()
        let (samples, _) = try Fixtures.audio("speech-noise-16k.wav")
        var again = direct.makeState()
        let block = Array(samples[0..<512])
        #expect(try vad.prediction(from: block, using: &state) == direct.prediction(from: block, using: &again))
        #expect(throws: ModelError.cannotRead(path: "../silero-vad", reason: "no bundled model of that name (bundled: \(Model.bundledNames.joined(separator: ", ")))")) {
            try Model.bundled("../silero-vad")
        }
    }
}
