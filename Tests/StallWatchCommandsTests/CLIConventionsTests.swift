// The command line's conventions: --version, help TOPIC, CMD --help (golden), short flags, "did you mean",
// exit code 2 for usage and configuration errors, unknown STALLWATCH_* variables, readable event lines.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchCommands
@testable import StallWatchInspector

@Suite(.offPool) struct CLIConventionsTests {
    /// `help-reports-list.txt` for `reports list`.
    static func goldenName(_ words: [String]) -> String { "help-" + words.joined(separator: "-") + ".txt" }

    @Test(arguments: StallWatchCLI.subcommands.map(\.words) + [["reports"]])
    func everyCommandsHelpMatchesItsGoldenText(words: [String]) throws {
        let (code, output) = CapturedConsole.run(words + ["--help"])
        #expect(code == .ok)
        #expect(output.standardError == "")
        try ReportsCLITests().expectGolden(output.standardOutput, Self.goldenName(words))
        let (topicCode, topic) = CapturedConsole.run(["help"] + words)
        #expect(topicCode == .ok)
        #expect(topic.standardOutput == output.standardOutput, "help TOPIC is CMD --help")
    }

    @Test func everyOptionOfEveryCommandHasADescribedLine() {
        for command in StallWatchCLI.subcommands {
            let text = CommandHelp.text(for: command)
            for option in command.flags.union(command.options) where option != "-o" {
                let line = text.split(separator: "\n").first { $0.contains(" \(option)") }
                #expect(
                    line.map { $0.split(separator: " ", omittingEmptySubsequences: true).count > 2 } == true,
                    "\(command.words) \(option)")
            }
        }
    }

    @Test func versionIsPrinted() {
        for flag in ["--version", "-V", "version"] {
            let (code, output) = CapturedConsole.run([flag])
            #expect(code == .ok)
            #expect(output.standardOutput == "stallwatch \(CommandHelp.version)\n")
        }
    }

    @Test func mistypedCommandsAndOptionsGetASuggestionAndExit2() {
        let (code, output) = CapturedConsole.run(["wacth", "--pid", "1"])
        #expect(code == .usage)
        #expect(output.standardError.contains("did you mean watch?"))
        let (listCode, list) = CapturedConsole.run(["reports", "lsit"])
        #expect(listCode == .usage)
        #expect(list.standardError.contains("did you mean reports list?"))
        let (optionCode, option) = CapturedConsole.run(["reports", "list", "--jsno"])
        #expect(optionCode == .usage)
        #expect(option.standardError.contains("did you mean --json?"))
        #expect(Suggestion.closest(to: "xyzzy", in: ["watch", "run", "daemon"]) == nil)
    }

    @Test func shortFlagsStandForTheirLongOptions() throws {
        let parsed = try Arguments.parse(
            ["-p", "42"], flags: [], options: ["--pid"], positionals: 0...0, command: "watch")
        #expect(parsed.options == ["--pid": "42"])
        #expect(throws: CommandError.self) {
            try Arguments.parse(["-p", "42"], flags: [], options: [], positionals: 0...0, command: "reports list")
        }
    }

    @Test func aBadConfigurationValueIsAUsageError() {
        let environment = ["TZ": "UTC", "STALLWATCH_THRESHOLD_MS": "-5"]
        let (code, output) = CapturedConsole.run(["watch", "-p", "\(getpid())"], environment: environment)
        #expect(code == .usage)
        #expect(output.standardError.contains("STALLWATCH_THRESHOLD_MS"))
    }

    @Test func anUnknownStallWatchVariableIsWarnedAbout() {
        let environment = ["TZ": "UTC", "STALLWATCH_TRESHOLD_MS": "100"]
        let (_, output) = CapturedConsole.run(["reports", "list", "/nonexistent"], environment: environment)
        #expect(
            output.standardError.contains(
                "unknown environment variable STALLWATCH_TRESHOLD_MS is ignored (did you mean STALLWATCH_THRESHOLD_MS?)"
            ))
        #expect(StallWatchConfiguration.unknownEnvironmentVariables(in: ["STALLWATCH_THRESHOLD_MS": "1"]).isEmpty)
    }

    /// The library reads its variables through one list, which the command line's check uses: none of them is
    /// called unknown (`STALLWATCH_NO_PTRACE_HELPER` once was, while the library obeyed it).
    @Test(arguments: StallWatchEnvironmentVariable.all)
    func aVariableTheLibraryReadsIsNotCalledUnknown(_ variable: StallWatchEnvironmentVariable) {
        let environment = ["TZ": "UTC", variable.name: "1"]
        let (_, output) = CapturedConsole.run(["reports", "list", "/nonexistent"], environment: environment)
        #expect(!output.standardError.contains("unknown environment variable"), "\(output.standardError)")
    }

    /// No source file names a `STALLWATCH_…` variable but the list itself (and the prefix the configuration keys'
    /// names are made from): a variable read anywhere else would be unknown to the command line.
    @Test func noVariableIsReadOutsideTheList() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        let list = "StallWatchConfiguration+Environment.swift"
        let enumerator = try #require(FileManager.default.enumerator(at: sources, includingPropertiesForKeys: nil))
        var offenders: [String] = []
        var scanned = 0
        for case let url as URL in enumerator where url.pathExtension == "swift" || url.pathExtension == "c" {
            scanned += 1
            guard url.lastPathComponent != list else { continue }
            let text = try String(contentsOf: url, encoding: .utf8)
            for line in text.split(separator: "\n") where line.contains("\"STALLWATCH_") {
                if line.contains("\"STALLWATCH_\"") { continue }  // the configuration keys' prefix
                offenders.append("\(url.lastPathComponent): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        #expect(scanned > 100, "scanned only \(scanned) files under \(sources.path)")
        #expect(offenders.isEmpty, "variables named outside \(list): \(offenders)")
    }

    @Test func dumbTerminalsAndNoColorGetNoColour() {
        #expect(Console.standard(environment: ["TERM": "dumb"]).useColor == false)
        #expect(Console.standard(environment: ["NO_COLOR": "1"]).useColor == false)
    }
}
