// SourceFolderGraph: which folders of a Swift target use declarations of which others, read from the sources.
import Foundation

/// The dependency graph between the folders (rooms) of one target: folder A depends on folder B when a file of A
/// names a declaration made in B.
///
/// Declarations counted: top-level types, type aliases, functions and globals that are not private, and the
/// members of top-level extensions (an extension of another room's type, or of a standard type, adds to the room
/// it sits in). References counted: any identifier naming a top-level declaration; `.name` naming an extension
/// member, and `Type(label:` naming an extension initializer, when no other declaration in the target has that
/// name (a name declared twice cannot be told apart without the compiler, so it is left out). Comments and
/// string literals are skipped, string interpolations read. Within one module the folders do not import each
/// other, so imports add nothing.
struct SourceFolderGraph {
    /// One use of a declaration of another folder.
    struct Reference: Hashable, Comparable {
        var file: String
        var name: String
        static func < (a: Reference, b: Reference) -> Bool { (a.name, a.file) < (b.name, b.file) }
    }

    /// Folder → folder it depends on → the references that make the edge.
    private(set) var edges: [String: [String: Set<Reference>]] = [:]
    private(set) var folders: Set<String> = []

    /// Reads every `.swift` file under `root` (a target's source directory); a file's folder is the first path
    /// component below `root` (files directly in `root` form the folder "").
    init(root: URL) throws {
        let files = try Self.swiftFiles(under: root)
        var sources: [(folder: String, file: String, text: [UInt8])] = []
        for file in files {
            let relative = String(file.path.dropFirst(root.path.count + 1))
            let folder = relative.split(separator: "/").count > 1 ? String(relative.split(separator: "/")[0]) : ""
            let text = try String(contentsOf: file, encoding: .utf8)
            sources.append((folder, relative, Self.code(of: Array(text.utf8))))
            folders.insert(folder)
        }
        var topLevel: [String: Set<String>] = [:]
        var extensionMembers: [String: Set<String>] = [:]
        var extensionInits: [String: Set<String>] = [:]
        var declarationCount: [String: Int] = [:]
        for source in sources {
            Self.declarations(in: source.text) { kind, name in
                switch kind {
                case .topLevel: topLevel[name, default: []].insert(source.folder)
                case .extensionMember: extensionMembers[name, default: []].insert(source.folder)
                case .extensionInit: extensionInits[name, default: []].insert(source.folder)
                case .any: declarationCount[name, default: 0] += 1
                }
            }
        }
        for source in sources {
            Self.references(in: source.text) { use, name in
                var targets: Set<String> = []
                switch use {
                case .plain: targets = topLevel[name] ?? []
                case .member where declarationCount[name] == 1: targets = extensionMembers[name] ?? []
                case .initLabel where declarationCount["init(" + name] == 1: targets = extensionInits[name] ?? []
                default: break
                }
                for target in targets where target != source.folder {
                    edges[source.folder, default: [:]][target, default: []].insert(
                        Reference(file: source.file, name: name))
                }
            }
        }
    }

    /// Pairs of folders that depend on each other, each pair once (alphabetical order inside the pair).
    var twoWayTies: [(String, String)] {
        var ties: [(String, String)] = []
        for (from, targets) in edges {
            for to in targets.keys where from < to && edges[to]?[from] != nil { ties.append((from, to)) }
        }
        return ties.sorted { ($0.0, $0.1) < ($1.0, $1.1) }
    }

    /// Groups of two or more folders that reach each other through their dependencies (strongly connected
    /// components, Tarjan's algorithm), each sorted.
    var cycles: [[String]] {
        var index = 0
        var indices: [String: Int] = [:]
        var lowLinks: [String: Int] = [:]
        var stack: [String] = []
        var onStack: Set<String> = []
        var groups: [[String]] = []
        func connect(_ folder: String) {
            indices[folder] = index
            lowLinks[folder] = index
            index += 1
            stack.append(folder)
            onStack.insert(folder)
            for next in (edges[folder] ?? [:]).keys.sorted() {
                if indices[next] == nil {
                    connect(next)
                    lowLinks[folder] = min(lowLinks[folder]!, lowLinks[next]!)
                } else if onStack.contains(next) {
                    lowLinks[folder] = min(lowLinks[folder]!, indices[next]!)
                }
            }
            guard lowLinks[folder] == indices[folder] else { return }
            var group: [String] = []
            while let top = stack.popLast() {
                onStack.remove(top)
                group.append(top)
                if top == folder { break }
            }
            if group.count > 1 { groups.append(group.sorted()) }
        }
        for folder in folders.sorted() where indices[folder] == nil { connect(folder) }
        return groups.sorted { $0.lexicographicallyPrecedes($1) }
    }

    /// `from`'s uses of `to`, for messages: `Name (File.swift)`, at most `limit`.
    func uses(_ from: String, of to: String, limit: Int = 6) -> String {
        let all = (edges[from]?[to] ?? []).sorted()
        let shown = all.prefix(limit).map { "\($0.name) (\($0.file))" }
        return shown.joined(separator: ", ") + (all.count > limit ? ", … \(all.count - limit) more" : "")
    }

    /// One line per folder: the folders it depends on.
    var description: String {
        folders.sorted().map { folder in
            let targets = (edges[folder] ?? [:]).keys.sorted()
            return "\(folder.isEmpty ? "(top)" : folder) -> "
                + (targets.isEmpty ? "nothing" : targets.joined(separator: ", "))
        }.joined(separator: "\n")
    }

    // MARK: Reading the sources

    private static func swiftFiles(under root: URL) throws -> [URL] {
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else {
            throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: root.path])
        }
        return walker.compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }.sorted { $0.path < $1.path }
    }

    /// The code of a Swift file without its comments and the text of its string literals (an interpolation's
    /// code is kept), so that only code is read for names.
    static func code(of source: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(source.count)
        var i = 0
        func at(_ offset: Int, _ text: String) -> Bool {
            let bytes = Array(text.utf8)
            return offset + bytes.count <= source.count && Array(source[offset..<offset + bytes.count]) == bytes
        }
        /// Copies code from `i` until end of file or, with `closing`, the `)` that ends an interpolation.
        func code(closing: Bool) {
            var depth = 0
            while i < source.count {
                let c = source[i]
                if at(i, "//") {
                    while i < source.count && source[i] != UInt8(ascii: "\n") { i += 1 }
                } else if at(i, "/*") {
                    var nesting = 0
                    repeat {
                        if at(i, "/*") {
                            nesting += 1
                            i += 2
                        } else if at(i, "*/") {
                            nesting -= 1
                            i += 2
                        } else {
                            i += 1
                        }
                    } while nesting > 0 && i < source.count
                } else if c == UInt8(ascii: "\"") || (c == UInt8(ascii: "#") && isRawStringStart(i)) {
                    string()
                    out.append(contentsOf: Array(" \"\" ".utf8))
                } else {
                    if closing && c == UInt8(ascii: "(") { depth += 1 }
                    if closing && c == UInt8(ascii: ")") {
                        if depth == 0 {
                            i += 1
                            return
                        }
                        depth -= 1
                    }
                    out.append(c)
                    i += 1
                }
            }
        }
        func isRawStringStart(_ offset: Int) -> Bool {
            var j = offset
            while j < source.count && source[j] == UInt8(ascii: "#") { j += 1 }
            return j < source.count && source[j] == UInt8(ascii: "\"")
        }
        /// Skips a string literal starting at `i` (raw, multi-line or plain), reading its interpolations as code.
        func string() {
            var hashes = 0
            while source[i] == UInt8(ascii: "#") {
                hashes += 1
                i += 1
            }
            let quotes = at(i, "\"\"\"") ? "\"\"\"" : "\""
            i += quotes.count
            let terminator = quotes + String(repeating: "#", count: hashes)
            let escape = "\\" + String(repeating: "#", count: hashes)
            while i < source.count {
                if at(i, escape + "(") {
                    i += escape.utf8.count + 1
                    out.append(UInt8(ascii: " "))
                    code(closing: true)
                    out.append(UInt8(ascii: " "))
                } else if at(i, escape) {
                    i += escape.utf8.count + 1
                } else if at(i, terminator) {
                    i += terminator.utf8.count
                    return
                } else {
                    i += 1
                }
            }
        }
        code(closing: false)
        return out
    }

    enum Declaration { case topLevel, extensionMember, extensionInit, any }

    private static let modifiers: Set<String> = [
        "public", "package", "internal", "private", "fileprivate", "final", "open", "indirect", "nonisolated",
        "static", "class", "mutating", "nonmutating", "override", "convenience", "required", "lazy", "weak",
        "unowned", "dynamic", "consuming", "borrowing",
    ]
    private static let introducers: Set<String> = [
        "class", "struct", "enum", "protocol", "actor", "typealias", "func", "let", "var",
    ]

    /// Calls `found` for every declaration: top-level ones, members of top-level extensions, and (as `.any`)
    /// every name any declaration introduces (`init(` + label for initializers), for the uniqueness rule.
    static func declarations(in code: [UInt8], _ found: (Declaration, String) -> Void) {
        var depth = 0
        var inExtension = false
        for line in code.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            let words = tokens(line)
            for (index, word) in words.enumerated() where index + 1 < words.count {
                if introducers.contains(word) || word == "case", isIdentifier(words[index + 1]) {
                    found(.any, words[index + 1])
                }
            }
            // The declaration's head: attributes and modifiers, then the introducer.
            var head = words[...]
            var isPrivate = false
            while let first = head.first, first.hasPrefix("@") || isModifier(first, before: head.dropFirst().first) {
                if first == "private" || first == "fileprivate" { isPrivate = true }
                head = head.dropFirst()
                if first.hasPrefix("@"), head.first == "(" {
                    while let skipped = head.first, skipped != ")" { head = head.dropFirst() }
                    head = head.dropFirst()
                }
            }
            if depth == 0 { inExtension = head.first == "extension" }
            if let first = head.first, first == "init", head.dropFirst().first == "(",
                let label = head.dropFirst(2).first, isIdentifier(label)
            {
                found(.any, "init(" + label)
                if depth == 1, inExtension, !isPrivate { found(.extensionInit, label) }
            }
            if let first = head.first, introducers.contains(first), let name = head.dropFirst().first,
                isIdentifier(name), !isPrivate
            {
                if depth == 0 { found(.topLevel, name) }
                if depth == 1, inExtension { found(.extensionMember, name) }
            }
            for byte in line {
                if byte == UInt8(ascii: "{") { depth += 1 }
                if byte == UInt8(ascii: "}") { depth -= 1 }
            }
        }
    }

    /// `class` is a modifier only before another modifier or an introducer (`class func`), else it introduces.
    private static func isModifier(_ word: String, before next: String?) -> Bool {
        guard modifiers.contains(word), let next else { return false }
        return word != "class" || modifiers.contains(next) || introducers.contains(next) || next == "init"
    }

    enum Use { case plain, member, initLabel }

    /// Calls `found` for every identifier: after a `.` (a member), as the first label after `(` (`Type(label:`),
    /// or anywhere else.
    static func references(in code: [UInt8], _ found: (Use, String) -> Void) {
        var i = 0
        while i < code.count {
            guard isIdentifierStart(code[i]) else {
                i += 1
                continue
            }
            let start = i
            while i < code.count && isIdentifierPart(code[i]) { i += 1 }
            let name = String(decoding: code[start..<i], as: UTF8.self)
            let before = start > 0 ? code[start - 1] : 0
            if before == UInt8(ascii: ".") {
                found(.member, name)
            } else if before == UInt8(ascii: "("), i < code.count, code[i] == UInt8(ascii: ":") {
                found(.initLabel, name)
            } else if !isIdentifierPart(before) {
                found(.plain, name)
            }
        }
    }

    /// Words (identifiers, `@attributes`) and the punctuation `(`, `)`, `:`, `{` of one line.
    private static func tokens(_ line: ArraySlice<UInt8>) -> [String] {
        var words: [String] = []
        var i = line.startIndex
        while i < line.endIndex {
            let c = line[i]
            if isIdentifierStart(c) || c == UInt8(ascii: "@") {
                let start = i
                i += 1
                while i < line.endIndex && isIdentifierPart(line[i]) { i += 1 }
                words.append(String(decoding: line[start..<i], as: UTF8.self))
            } else {
                if c == UInt8(ascii: "(") || c == UInt8(ascii: ")") || c == UInt8(ascii: ":") || c == UInt8(ascii: "{")
                {
                    words.append(String(UnicodeScalar(c)))
                }
                i += 1
            }
        }
        return words
    }

    private static func isIdentifier(_ word: String) -> Bool { word.utf8.first.map(isIdentifierStart) ?? false }
    private static func isIdentifierStart(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
            || c == UInt8(ascii: "_")
    }
    private static func isIdentifierPart(_ c: UInt8) -> Bool {
        isIdentifierStart(c) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
    }
}
