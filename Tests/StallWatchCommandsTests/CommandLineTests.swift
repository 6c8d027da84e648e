import StallWatchTestSupport
// The command line's own parts: argument parsing, the command table and the one error → exit code mapping.
import Testing

@testable import StallWatch
@testable import StallWatchCommands
@testable import StallWatchInspector
@testable import StallWatchSidecar

@Suite(.offPool) struct CommandLineTests {
    @Test func optionsTakeTheirValueEitherWayAndDoubleDashEndsThem() throws {
        let parsed = try Arguments.parse(
            ["--pid=42", "--threshold-ms", "150", "--proc", "--", "--not-an-option"], flags: ["--proc"],
            options: ["--pid", "--threshold-ms"], positionals: 0...1, command: "watch")
        #expect(parsed.options == ["--pid": "42", "--threshold-ms": "150"])
        #expect(parsed.has("--proc"))
        #expect(parsed.positionals == ["--not-an-option"])
    }

    @Test func usageErrorsNameTheCommandAndTheArgument() {
        #expect(throws: CommandError.usage("watch: unknown option --bogus")) {
            try Arguments.parse(["--bogus"], flags: [], options: [], positionals: 0...0, command: "watch")
        }
        #expect(throws: CommandError.usage("watch: --pid needs a value")) {
            try Arguments.parse(["--pid"], flags: [], options: ["--pid"], positionals: 0...0, command: "watch")
        }
        #expect(throws: CommandError.usage("reports show: missing argument")) {
            try Arguments.parse([], flags: [], options: [], positionals: 1...1, command: "reports show")
        }
    }

    @Test func everyErrorMapsToOneExitCodeAndAPrefixedLine() {
        #expect(ExitCode(for: CommandError.notFound("x")) == .notFound)
        #expect(ExitCode(for: SidecarError(.noSuchProcess, "gone")) == .noSuchProcess)
        #expect(ExitCode(for: SidecarError(.permissionDenied, "no")) == .permissionDenied)
        #expect(ExitCode(for: SidecarError(.spawnFailed, "cannot run x")) == .commandNotStarted)
        let mismatch = InspectorError(.buildIDMismatch, "refusing /bin/x: a different build")
        #expect(ExitCode(for: mismatch) == .failure)
        #expect(ExitCode.message(for: mismatch) == "stallwatch: refusing /bin/x: a different build")
        #expect(ExitCode(for: StallWatchError(.report, "bad report")) == .failure)
    }

    @Test func theCommandTableHasTheCommandsUsersKnow() {
        let names = StallWatchCLI.subcommands.map { $0.words.joined(separator: " ") }
        for name in ["reports list", "reports show", "watch", "run", "daemon"] { #expect(names.contains(name)) }
        #expect(StallWatchCLI.help.contains("128+N"))
    }
}
