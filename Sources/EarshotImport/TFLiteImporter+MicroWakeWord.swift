import EarshotJSON
import Foundation

extension TFLiteImporter {
    /// What a microWakeWord JSON config (NAME.json beside NAME.tflite) says of its model.
    public struct MicroWakeWordConfig: Sendable, Equatable {
        /// The wake phrase.
        public var wakeWord: String
        /// The mean probability a detection needs.
        public var probabilityCutoff: Double
        /// How many of the latest outputs are averaged before the cutoff.
        public var slidingWindowSize: Int
        /// The model's author.
        public var author: String?
        /// The author's page.
        public var website: String?
        /// The languages it was trained on.
        public var languages: [String]

        /// Reads NAME.json beside `path` (NAME.tflite); nil when there is none or it is not a
        /// microWakeWord config.
        public init?(beside path: String) {
            let json = URL(fileURLWithPath: path).deletingPathExtension().appendingPathExtension("json")
            guard let data = FileManager.default.contents(atPath: json.path), let object = try? JSONValue.parse([UInt8](data)),
                  let micro = object["micro"], let word = object["wake_word"]?.string,
                  let cutoff = micro["probability_cutoff"]?.number, (0...1).contains(cutoff),
                  let window = micro["sliding_window_size"]?.integer, (1...1000).contains(window) else { return nil }
            wakeWord = word
            probabilityCutoff = cutoff
            slidingWindowSize = window
            author = object["author"]?.string
            website = object["website"]?.string
            let trained = object["trained_languages"]?.array ?? []
            languages = trained.allSatisfy { $0.string != nil } ? trained.compactMap(\.string) : []
        }
    }
}
