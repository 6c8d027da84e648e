// Suggestion: "did you mean" for a mistyped command or option.

/// The closest known word to a mistyped one, by edit distance.
enum Suggestion {
    /// The candidate closest to `word`, when it is within a third of the word's length (at least 2, at most 3
    /// edits away); nil when nothing is that close.
    static func closest(to word: String, in candidates: some Sequence<String>) -> String? {
        let limit = min(3, max(2, word.count / 3))
        var best: (String, Int)?
        for candidate in candidates {
            let distance = editDistance(word, candidate)
            if distance <= limit, distance < (best?.1 ?? Int.max) { best = (candidate, distance) }
        }
        return best?.0
    }

    /// ` (did you mean X?)` for the closest candidate, else an empty string.
    static func hint(for word: String, in candidates: some Sequence<String>) -> String {
        closest(to: word, in: candidates).map { " (did you mean \($0)?)" } ?? ""
    }

    /// Levenshtein distance (insertions, deletions, substitutions).
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in stride(from: 1, through: b.count, by: 1) {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            }
            previous = current
        }
        return previous[b.count]
    }
}
