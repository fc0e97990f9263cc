import EarshotCommandTestSupport
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

@Suite("Manifest fields with fixed values")
struct ManifestChoiceTests {
    @Test("An activation, reduceTime or front-end type outside its choices is refused naming the field and the choices")
    func choices() throws {
        let folder = try Repo.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let source = Repo.root.appendingPathComponent("Models/silero-vad")
        for (field, value, choices) in [("\"activation\" : \"none\"", "\"activation\" : \"relu\"", "'outputs.activation': 'relu': expected one of none, sigmoid, softmax"),
                                        ("\"type\" : \"samples\"", "\"type\" : \"wavelet\"", "'frontEnd.type': 'wavelet': expected one of stft, samples, features")] {
            let target = folder.appendingPathComponent(UUID().uuidString)
            try FileManager.default.copyItem(at: source, to: target)
            let manifest = target.appendingPathComponent("model.json")
            let text = try String(contentsOf: manifest, encoding: .utf8)
            #expect(text.contains(field))
            try text.replacingOccurrences(of: field, with: value).write(to: manifest, atomically: true, encoding: .utf8)
            #expect(throws: ModelError.self) { try Model(contentsOf: target) }
            do { _ = try Model(contentsOf: target) } catch {
                #expect("\(error)".contains(choices), "\(error)")
            }
        }
    }
}
