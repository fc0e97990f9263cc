/// Near misses of a word among known ones, for "did you mean": a mistyped model, label,
/// command or option.
public enum Spelling {
    /// Levenshtein distance: the fewest insertions, deletions and substitutions of characters
    /// that make `a` into `b`.
    public static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// Whether `distance` edits from a word of `length` characters can still be a typo of it:
    /// up to 2, or a third of the word up to 3, and fewer than the word has.
    static func isTypo(distance: Int, length: Int) -> Bool {
        distance <= max(2, min(3, length / 3)) && distance < length
    }

    /// The closest of `candidates` to `word`, if it is close enough to be a typo.
    public static func closest(_ word: String, in candidates: [String]) -> String? {
        near(word, in: candidates).first
    }

    /// The candidates close enough to `word` to be typos of it, the closest first (ties in the
    /// candidates' order).
    public static func near(_ word: String, in candidates: [String]) -> [String] {
        candidates.enumerated().map { ($0.element, distance(word, $0.element), $0.offset) }
            .filter { isTypo(distance: $0.1, length: word.count) }
            .sorted { ($0.1, $0.2) < ($1.1, $1.2) }
            .map(\.0)
    }
}
