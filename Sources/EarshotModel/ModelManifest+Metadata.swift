extension ModelManifest {
    /// What a package says of itself beside what it computes: its name, version, labels and
    /// default decision, and who made it, under which licence, from what. A field that is nil is
    /// not said (an importer fills it: the name "imported", version "1", labels from the scores).
    /// `earshot import --manifest FILE.json` reads one.
    public struct Metadata: Codable, Sendable, Equatable {
        /// The package's name (`name`).
        public var name: String?
        /// The model's own version (`version`).
        public var version: String?
        /// One line on what it does (`description`).
        public var description: String?
        /// Who made the model (`author`).
        public var author: String?
        /// The model's licence (`license`).
        public var license: String?
        /// Where it came from (`source`).
        public var source: String?
        /// Its author's page (`url`).
        public var url: String?
        /// A wake word's phrase (`phrase`).
        public var phrase: String?
        /// The languages it was trained on (`languages`).
        public var languages: [String]?
        /// The scores' labels (`outputs.labels`); not said when empty.
        public var labels: [String]?
        /// The default label rules (`decision`).
        public var decision: Decision?

        /// Its keys in JSON (`earshot import --manifest` refuses others).
        public enum CodingKeys: String, CodingKey, CaseIterable {
            case name, version, description, author, license, source, url, phrase, languages, labels, decision
        }

        /// Metadata saying the given fields.
        public init(name: String? = nil, version: String? = nil, description: String? = nil, author: String? = nil, license: String? = nil,
                    source: String? = nil, url: String? = nil, phrase: String? = nil, languages: [String]? = nil, labels: [String]? = nil,
                    decision: Decision? = nil) {
            self.name = name
            self.version = version
            self.description = description
            self.author = author
            self.license = license
            self.source = source
            self.url = url
            self.phrase = phrase
            self.languages = languages
            self.labels = labels
            self.decision = decision
        }
    }
}
