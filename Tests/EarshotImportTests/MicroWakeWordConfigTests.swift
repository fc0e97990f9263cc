import EarshotImport
import Foundation
import Testing

/// The JSON config microWakeWord ships beside a model (NAME.json beside NAME.tflite).
@Suite("microWakeWord configs")
struct MicroWakeWordConfigTests {
    /// The config read from `json` written beside a (missing) model file.
    static func config(_ json: String) throws -> TFLiteImporter.MicroWakeWordConfig? {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("earshot-mww-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data(json.utf8).write(to: folder.appendingPathComponent("model.json"))
        return TFLiteImporter.MicroWakeWordConfig(beside: folder.appendingPathComponent("model.tflite").path)
    }

    @Test("A config's phrase, cutoff, window, author, page and languages are read; whole numbers may be written either way")
    func reads() throws {
        let config = try #require(try Self.config("""
            {"type": "micro", "wake_word": "Okay Nabu", "author": "Kevin Ahrendt", "website": "https://www.kevinahrendt.com/",
             "trained_languages": ["en"], "version": 2, "micro": {"probability_cutoff": 0.85, "sliding_window_size": 5, "feature_step_size": 10}}
            """))
        #expect(config.wakeWord == "Okay Nabu" && config.probabilityCutoff == 0.85 && config.slidingWindowSize == 5)
        #expect(config.author == "Kevin Ahrendt" && config.website == "https://www.kevinahrendt.com/" && config.languages == ["en"])
        let written = try #require(try Self.config(#"{"wake_word": "W", "micro": {"probability_cutoff": 1, "sliding_window_size": 5.0}}"#))
        #expect(written.wakeWord == "W" && written.probabilityCutoff == 1 && written.slidingWindowSize == 5)
        #expect(written.author == nil && written.website == nil && written.languages.isEmpty)
        // Languages that are not all strings are none.
        #expect(try Self.config(#"{"wake_word": "W", "trained_languages": ["en", 3], "micro": {"probability_cutoff": 0.5, "sliding_window_size": 3}}"#)?.languages == [])
    }

    @Test("A config without a phrase, with a cutoff outside 0...1 or a window that is not a whole number in 1...1000, or no JSON object, is none")
    func refused() throws {
        for json in [#"{"micro": {"probability_cutoff": 0.5, "sliding_window_size": 5}}"#,
                     #"{"wake_word": "W", "micro": {"probability_cutoff": 1.5, "sliding_window_size": 5}}"#,
                     #"{"wake_word": "W", "micro": {"probability_cutoff": 0.5, "sliding_window_size": 5.5}}"#,
                     #"{"wake_word": "W", "micro": {"probability_cutoff": 0.5, "sliding_window_size": 0}}"#,
                     #"{"wake_word": "W", "micro": [0.5, 5]}"#, #"["W"]"#, "{"] {
            #expect(try Self.config(json) == nil, "\(json)")
        }
    }
}
