// The public API of each library target, read from the compiler's symbol graph, against the checked-in lists.
import Foundation
import StallWatch
import StallWatchTestSupport
import Testing

/// A public declaration changes only on purpose: each library's public symbols (from `swift-symbolgraph-extract`
/// over the modules this build made) must equal `Tests/PublicAPI/<Module>.txt`. One module at a time: the
/// extractions share the build's Clang module cache and would only wait for each other. After a deliberate change,
/// `scripts/update-public-api.sh` writes the lists again, and the diff shows the change for review.
@Suite(.offPool, .serialized) struct PublicAPITests {
    static let libraries = [
        "StallWatch", "StallWatchSidecar", "StallWatchInspector", "StallWatchCommands", "StallWatchRemedies",
    ]

    @Test(.timeLimit(.minutes(3)), arguments: libraries)
    func thePublicSymbolsAreTheCheckedInList(module: String) async throws {
        let listed = try await PublicAPI.symbols(of: module)
        let file = PublicAPI.listDirectory.appendingPathComponent("\(module).txt")
        if StallWatchEnvironmentVariable.updatePublicAPI.value == "1" {
            try PublicAPI.write(listed, of: module, to: file)
        }
        let checkedIn = try PublicAPI.read(file)
        let added = listed.filter { !checkedIn.contains($0) }
        let removed = checkedIn.filter { !listed.contains($0) }
        #expect(
            added.isEmpty && removed.isEmpty,
            """
            The public API of \(module) differs from \(file.path):
            \((added.map { "+ " + $0 } + removed.map { "- " + $0 }).joined(separator: "\n"))
            If the change is deliberate, run scripts/update-public-api.sh and commit the list with it; otherwise give \
            the declaration `package` (used by the package's other targets) or no modifier (internal).
            """)
        #expect(listed.count > 5, "only \(listed.count) public symbols read for \(module)")
    }

    @Test(.timeLimit(.minutes(3)))
    func everyPublicTypeOfStallWatchIsInTheEmbeddingGuide() async throws {
        let guide = try String(
            contentsOf: PublicAPI.packageRoot.appendingPathComponent("docs/embedding.md"), encoding: .utf8)
        let types = try await PublicAPI.symbols(of: "StallWatch").compactMap(PublicAPI.typeName(ofLine:))
        #expect(types.count > 20, "read \(types.count) public types")
        for type in types where !guide.contains("`\(type)") {
            Issue.record("the public type \(type) is not described in docs/embedding.md")
        }
    }
}

/// Reading public symbols with the toolchain's `swift-symbolgraph-extract`.
enum PublicAPI {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let listDirectory = packageRoot.appendingPathComponent("Tests/PublicAPI")
    /// The build's products directory: the test bundle's own.
    static let productsDirectory: URL = {
        let exe =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: exe).deletingLastPathComponent()
    }()

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// `module`'s public declarations, one sorted line each: kind, path, declaration.
    static func symbols(of module: String) async throws -> [String] {
        let tool = try extractor()
        let modules = productsDirectory.appendingPathComponent("Modules")
        guard FileManager.default.fileExists(atPath: modules.appendingPathComponent("\(module).swiftmodule").path)
        else {
            throw Failure(description: "no \(module).swiftmodule in \(modules.path): build the package first")
        }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent(
            "stallwatch-api-\(module)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: output) }
        var arguments = [
            "-module-name", module, "-target", "x86_64-unknown-linux-gnu", "-I", modules.path,
            "-minimum-access-level", "public", "-skip-synthesized-members", "-output-dir", output.path,
            "-module-cache-path", productsDirectory.appendingPathComponent("ModuleCache").path,
        ]
        arguments += cModuleArguments()
        let errors = output.appendingPathComponent("errors.txt")
        let status = try await run(tool, arguments, errors: errors)
        guard status == 0 else {
            let message = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
            throw Failure(description: "\(tool) failed for \(module) (status \(status)): \(message)")
        }
        var lines: [String] = []
        for file in try FileManager.default.contentsOfDirectory(atPath: output.path).sorted()
        where file.hasSuffix(".json") {
            lines += try symbolLines(URL(fileURLWithPath: output.appendingPathComponent(file).path))
        }
        return Array(Set(lines)).sorted()
    }

    /// Runs `tool` to its end without holding a thread of the test pool (the extraction can take seconds on a
    /// loaded machine, and the suite's tests share one pool thread per core); its standard error goes to `errors`.
    static func run(_ tool: String, _ arguments: [String], errors: URL) async throws -> Int32 {
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        let errorHandle = try FileHandle(forWritingTo: errors)
        defer { try? errorHandle.close() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        process.standardError = errorHandle
        process.standardOutput = FileHandle.nullDevice
        return try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
    }

    /// `swift-symbolgraph-extract` beside `swift` on the PATH; a missing tool fails the test, saying why.
    static func extractor() throws -> String {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in path.split(separator: ":") {
            let candidate = "\(directory)/swift-symbolgraph-extract"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw Failure(
            description: "swift-symbolgraph-extract is not on the PATH (\(path)); it ships with the Swift toolchain "
                + "in the same directory as `swift`: put that directory on the PATH")
    }

    /// The C modules the libraries import: their module maps, as SwiftPM passes them to the compiler.
    static func cModuleArguments() -> [String] {
        let sources = packageRoot.appendingPathComponent("Sources")
        let targets = (try? FileManager.default.contentsOfDirectory(atPath: sources.path)) ?? []
        var arguments: [String] = []
        for target in targets.sorted() where target.hasPrefix("C") {
            let own = sources.appendingPathComponent("\(target)/module.modulemap").path
            let generated = productsDirectory.appendingPathComponent("\(target).build/module.modulemap").path
            if FileManager.default.fileExists(atPath: own) {
                arguments += ["-Xcc", "-fmodule-map-file=\(own)"]
            } else if FileManager.default.fileExists(atPath: generated) {
                let include = sources.appendingPathComponent("\(target)/include").path
                arguments += ["-Xcc", "-fmodule-map-file=\(generated)", "-Xcc", "-I", "-Xcc", include]
            }
        }
        return arguments
    }

    /// One line per symbol of a symbol graph file: `kind path: declaration`.
    static func symbolLines(_ file: URL) throws -> [String] {
        let data = try Data(contentsOf: file)
        guard let graph = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let symbols = graph["symbols"] as? [[String: Any]]
        else { throw Failure(description: "\(file.path) is not a symbol graph") }
        return symbols.compactMap { symbol in
            guard let kind = (symbol["kind"] as? [String: Any])?["identifier"] as? String,
                let path = symbol["pathComponents"] as? [String],
                let fragments = symbol["declarationFragments"] as? [[String: Any]]
            else { return nil }
            let declaration = fragments.compactMap { $0["spelling"] as? String }.joined()
                .split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.joined(
                    separator: " ")
            let shortKind = kind.hasPrefix("swift.") ? String(kind.dropFirst(6)) : kind
            return "\(shortKind) \(path.joined(separator: ".")): \(declaration)"
        }
    }

    /// The type a line declares (`class`, `struct`, `enum`, `protocol`, `typealias`), with its enclosing types
    /// (`StallReport.Cause`), or nil.
    static func typeName(ofLine line: String) -> String? {
        let kinds = ["class ", "struct ", "enum ", "protocol ", "typealias "]
        guard let kind = kinds.first(where: line.hasPrefix) else { return nil }
        return String(line.dropFirst(kind.count).prefix { $0 != ":" })
    }

    static func read(_ file: URL) throws -> [String] {
        guard let text = try? String(contentsOf: file, encoding: .utf8) else {
            throw Failure(description: "no list at \(file.path): run scripts/update-public-api.sh to write it")
        }
        return text.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
    }

    static func write(_ lines: [String], of module: String, to file: URL) throws {
        try FileManager.default.createDirectory(at: listDirectory, withIntermediateDirectories: true)
        let header = [
            "# The public API of \(module): one line per public declaration (kind, path: declaration), from the "
                + "compiler's symbol graph.",
            "# Checked by PublicAPITests; after a deliberate change, regenerate with scripts/update-public-api.sh.",
        ]
        try (header + lines).joined(separator: "\n").appending("\n").write(to: file, atomically: true, encoding: .utf8)
    }
}
