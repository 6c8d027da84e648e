// Every field of a report mutated to what a hostile or broken writer could put there, read by the real CLI.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchInspector

#if canImport(Glibc)
    import Glibc
#endif

/// Builds a directory of mutated copies of a fully populated report (every numeric and every string member,
/// one at a time, at the first and the last place it occurs) and runs every `stallwatch reports` command over it as a subprocess.
@Suite(.offPool, .serialized) struct HostileReportFuzzTests {
    /// Replacement JSON text for a number, and for a string; `INVALID_UTF8` is replaced by raw bytes.
    static let numberMutations = ["1e300", "-1e300", "1e20", "-1", "\"NaN\"", "9223372036854775808"]
    static let stringMutations = [
        "\"\\u001b]0;owned\\u0007\\u001b[2J\\ncause lock\\u009b31m\\u202e\"", "\"INVALID_UTF8\"", "\"\"",
    ]

    @Test(.timeLimit(.minutes(3)))
    func noCommandCrashesEachBadFileIsNamedOnceAndEveryGoodOneIsListed() throws {
        let directory = HostileFiles.temporaryDirectory("fuzz")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let names = try HostileFiles.writeMutations(
            of: ReportFixtures.directory.appendingPathComponent("diagnosed/lock-diagnosed.json"), into: directory,
            numbers: Self.numberMutations, strings: Self.stringMutations)
        #expect(names.count > 500, "every leaf mutated: \(names.count) files")
        var good: Set<String> = []
        var bad: Set<String> = []
        for name in names {
            let data = try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
            // `list` reads what a listing needs (not threads, images, call tree): judge as it does.
            if case .success = ReportStore.decode(data, listing: true) { good.insert(name) } else { bad.insert(name) }
        }
        #expect(!good.isEmpty && !bad.isEmpty)

        let list = try HostileFiles.run(["reports", "list", directory, "--json"])
        #expect(list.status == 0, "\(list.stderr.prefix(2000))")
        let listed = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]] ?? []
        let listedNames = Set(listed.compactMap { ($0["path"] as? String).map { ($0 as NSString).lastPathComponent } })
        #expect(listedNames == good, "missing: \(good.subtracting(listedNames).sorted().prefix(5))")
        for name in bad {
            let mentions = list.stderr.components(separatedBy: "\n").filter { $0.contains(name) }.count
            #expect(mentions == 1, "\(name) named \(mentions) times")
        }

        let commands: [[String]] = [
            ["reports", "list", directory], ["reports", "list", directory, "--sort", "duration"],
            ["reports", "summary", directory], ["reports", "summary", directory, "--by", "frame"],
            ["reports", "summary", directory, "--by", "cause", "--json"],
            ["reports", "html", directory, "-o", directory + "/out.html"],
            ["reports", "export", directory, "--format", "folded", "-o", directory + "/out.folded"],
            ["reports", "export", directory, "--format", "speedscope", "-o", directory + "/out.speedscope"],
            ["reports", "export", directory, "--format", "pprof", "-o", directory + "/out.pprof"],
        ]
        for command in commands {
            let result = try HostileFiles.run(command)
            #expect(
                result.status == 0, "\(command.joined(separator: " ")): \(result.status) \(result.stderr.suffix(500))")
            #expect(!HostileFiles.hasRawControl(result.stdout), "\(command.joined(separator: " ")) printed a control")
            #expect(!HostileFiles.hasRawControl(result.stderr), "\(command.joined(separator: " ")) warned a control")
        }
        // Every file through `show` in process (a trap would end the test run), and every tenth through the
        // single-report commands as processes, one at a time (other suites measure time meanwhile): any death
        // by signal is a crash.
        for name in names {
            if case .success(let report) = ReportStore.decode(
                try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)))
            {
                let text = ReportDetailView().lines(report, path: name, allThreads: true).joined(separator: "\n")
                #expect(!HostileFiles.hasRawControl(text), "show \(name) has a raw control character")
            }
        }
        let script = """
            cd "$1"; shift
            ls fuzz-*.json | awk 'NR % 10 == 0' | xargs -P 1 -I{} sh -c '
              "$0" reports show {} --all-threads >/dev/null 2>&1; s=$?; [ $s -ge 128 ] && echo "show {} $s"
              "$0" reports symbolicate {} -o /dev/null >/dev/null 2>&1; s=$?; [ $s -ge 128 ] && echo "sym {} $s"
              true' "$@"
            """
        let each = try HostileFiles.shell(script, [directory, HostileFiles.stallwatch])
        #expect(each.status == 0 && each.stdout.isEmpty, "crashed: \(each.stdout.prefix(2000)) \(each.stderr)")
    }

    @Test func theSkipWarningNamesTheFieldAndTheValue() throws {
        let directory = HostileFiles.temporaryDirectory("named")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let base = try Data(contentsOf: ReportFixtures.reportsDirectory.appendingPathComponent("stall-ended.json"))
        let cases: [(file: String, from: String, to: String, expected: [String])] = [
            ("huge.json", "\"durationMs\" : 312.5", "\"durationMs\" : 1e300", ["durationMs", "1e+300"]),
            ("future.json", "\"2026-11-30T22:15:00.123Z\"", "\"9999-01-01T00:00:00Z\"", ["startedAt", "9999-01-01"]),
            ("negative.json", "\"samplesTaken\" : 2", "\"samplesTaken\" : -5", ["capture.samplesTaken", "-5"]),
            (
                "tid.json", "\"threadId\" : 4242", "\"threadId\" : 100000000000000000000",
                ["loop.threadId", "100000000000000000000"]
            ),
        ]
        for item in cases {
            let text = String(decoding: base, as: UTF8.self)
            #expect(text.contains(item.from), "fixture has \(item.from)")
            try Data(text.replacingOccurrences(of: item.from, with: item.to).utf8)
                .write(to: URL(fileURLWithPath: directory + "/" + item.file))
        }
        let result = try HostileFiles.run(["reports", "list", directory])
        let lines = result.stderr.split(separator: "\n")
        for item in cases {
            let line = lines.first { $0.contains(item.file) } ?? ""
            for word in item.expected { #expect(line.contains(word), "\(item.file): \(line)") }
            #expect(!line.contains("invalid JSON"), "\(line)")
        }
    }
}

/// Mutated report files, and the CLI run over them.
enum HostileFiles {
    static let stallwatch = Fixtures.executable("stallwatch")

    static func temporaryDirectory(_ label: String) -> String { Fixtures.temporaryDirectory("hostile-" + label) }

    /// One file per (leaf, mutation): `fuzz-NNNN.json`, each with an id of its own unless the id is mutated.
    static func writeMutations(of fixture: URL, into directory: String, numbers: [String], strings: [String]) throws
        -> [String]
    {
        let root = try JSONSerialization.jsonObject(with: Data(contentsOf: fixture))
        var all: [(path: [Any], isNumber: Bool)] = []
        collect(root, path: [], into: &all)
        // Every field, at the first and the last place it occurs: the same member of the tenth sample or frame is
        // read by the same code as that of the second (only the first and the last are read apart, as the stall's
        // start and its latest state).
        let shapes = all.map { leaf in leaf.path.map { $0 is Int ? "[]" : "\($0)" }.joined(separator: ".") }
        let leaves = all.indices.filter {
            shapes.firstIndex(of: shapes[$0]) == $0 || shapes.lastIndex(of: shapes[$0]) == $0
        }
        .map { all[$0] }
        var names: [String] = []
        for (path, isNumber) in leaves {
            for mutation in isNumber ? numbers : strings {
                let index = names.count
                var copy = root
                if !(path.count == 1 && (path[0] as? String) == "id") {
                    copy = replacing(copy, at: ["id"], with: "fuzz-\(index)")
                }
                copy = replacing(copy, at: path, with: "@@MUTATION@@")
                var text = String(
                    decoding: try JSONSerialization.data(withJSONObject: copy, options: [.sortedKeys]), as: UTF8.self)
                text = text.replacingOccurrences(of: "\"@@MUTATION@@\"", with: mutation)
                var data = Data(text.utf8)
                if let range = data.range(of: Data("INVALID_UTF8".utf8)) {
                    data.replaceSubrange(range, with: [0xFF, 0xFE, 0xC0, 0x80, 0xED, 0xA0, 0x80])
                }
                let name = String(format: "fuzz-%04d.json", index)
                try data.write(to: URL(fileURLWithPath: directory + "/" + name))
                names.append(name)
            }
        }
        return names
    }

    private static func collect(_ value: Any, path: [Any], into leaves: inout [(path: [Any], isNumber: Bool)]) {
        switch value {
        case let object as [String: Any]:
            for key in object.keys.sorted() { collect(object[key]!, path: path + [key], into: &leaves) }
        case let array as [Any]:
            for (index, element) in array.enumerated() { collect(element, path: path + [index], into: &leaves) }
        case is NSNumber:  // the fixture has no booleans
            leaves.append((path, true))
        case is String:
            leaves.append((path, false))
        default:
            break
        }
    }

    private static func replacing(_ value: Any, at path: [Any], with replacement: Any) -> Any {
        guard let head = path.first else { return replacement }
        let rest = Array(path.dropFirst())
        if let key = head as? String, var object = value as? [String: Any], let child = object[key] {
            object[key] = replacing(child, at: rest, with: replacement)
            return object
        }
        if let index = head as? Int, var array = value as? [Any], array.indices.contains(index) {
            array[index] = replacing(array[index], at: rest, with: replacement)
            return array
        }
        return value
    }

    /// Any C0 control but newline and tab, DEL, or a C1 control (UTF-8 `C2 80`…`C2 9F`), or a bidi override.
    static func hasRawControl(_ text: String) -> Bool {
        text.unicodeScalars.contains { scalar in
            scalar != "\n" && scalar != "\t" && TerminalText.isDangerous(scalar)
        }
    }

    static func run(_ arguments: [String]) throws -> Fixtures.Output {
        try Fixtures.run(
            stallwatch, arguments, environment: ["NO_COLOR": "1", "TZ": "UTC"], timeout: .seconds(600))
    }

    static func shell(_ script: String, _ arguments: [String]) throws -> Fixtures.Output {
        try Fixtures.run(
            "/bin/sh", ["-c", script, "sh"] + arguments, environment: ["NO_COLOR": "1"], timeout: .seconds(600))
    }
}
