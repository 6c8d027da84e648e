// Console: where CLI output goes, and whether it may be coloured.
import Foundation
import StallWatchInspector

#if canImport(Glibc)
    import Glibc
#endif

/// Standard output and error for a command, injectable so tests can capture both.
public struct Console: Sendable {
    /// Writes text to standard output as is (callers add newlines).
    package var output: @Sendable (String) -> Void
    /// Writes text to standard error as is.
    package var errorOutput: @Sendable (String) -> Void
    /// ANSI colour on standard output; only on a terminal and never with `NO_COLOR` set.
    package var useColor: Bool

    /// Writes bytes to standard output as is (binary exports such as pprof).
    package var dataOutput: @Sendable (Data) -> Void
    /// Whether standard output is a terminal (binary output is refused there).
    var outputIsTerminal: Bool
    /// Whether standard error is a terminal (`run`'s event lines are human-readable there).
    var errorOutputIsTerminal: Bool

    /// - Parameter dataOutput: where bytes go; by default they are passed to `output` decoded as UTF-8.
    package init(
        output: @escaping @Sendable (String) -> Void, errorOutput: @escaping @Sendable (String) -> Void,
        useColor: Bool, dataOutput: (@Sendable (Data) -> Void)? = nil, outputIsTerminal: Bool = false,
        errorOutputIsTerminal: Bool = false
    ) {
        self.output = output
        self.errorOutput = errorOutput
        self.useColor = useColor
        self.dataOutput = dataOutput ?? { data in output(String(decoding: data, as: UTF8.self)) }
        self.outputIsTerminal = outputIsTerminal
        self.errorOutputIsTerminal = errorOutputIsTerminal
    }

    /// The process's stdout and stderr; colour when stdout is a terminal, `NO_COLOR` is unset or empty and `TERM`
    /// is not `dumb`.
    public static func standard(environment: [String: String]) -> Console {
        let noColor = !(environment["NO_COLOR"] ?? "").isEmpty || environment["TERM"] == "dumb"
        let terminal = isatty(STDOUT_FILENO) == 1
        return Console(
            output: { text in writeAll(STDOUT_FILENO, Array(text.utf8)) },
            errorOutput: { text in writeAll(STDERR_FILENO, Array(text.utf8)) },
            useColor: !noColor && terminal, dataOutput: { data in writeAll(STDOUT_FILENO, [UInt8](data)) },
            outputIsTerminal: terminal, errorOutputIsTerminal: isatty(STDERR_FILENO) == 1)
    }

    /// Unbuffered, so that standard output and error interleave in the order written.
    private static func writeAll(_ fd: Int32, _ text: [UInt8]) {
        var bytes = text[...]
        while !bytes.isEmpty {
            let count = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            if count <= 0 { return }
            bytes = bytes.dropFirst(count)
        }
    }

    /// Writes `line` and a newline to standard output.
    package func print(_ line: String = "") { output(line + "\n") }

    /// Writes `line` and a newline to standard error.
    package func printError(_ line: String) { errorOutput(line + "\n") }

    /// `text` wrapped in an SGR sequence (`"1"` bold, `"31"` red, …) when colour is on.
    func styled(_ text: String, _ code: String) -> String {
        TextStyle(useColor: useColor).styled(text, code)
    }
}
