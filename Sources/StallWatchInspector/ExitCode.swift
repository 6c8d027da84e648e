// ExitCode: the stallwatch CLI's exit statuses and the one mapping from errors to them.
import StallWatch

/// How `stallwatch` exits. The numbers are part of the CLI's contract: scripts test them.
public enum ExitCode: Int32, Sendable, CaseIterable {
    case ok = 0
    /// No report matched, or the directory holds no reports.
    case notFound = 1
    /// The command line was wrong (unknown command or option, missing argument, ambiguous id prefix).
    case usage = 2
    /// A file or directory the user named could not be read or parsed.
    case failure = 3

    /// What each code means, as `stallwatch --help` prints it.
    public var meaning: String {
        switch self {
        case .ok: "success"
        case .notFound: "no matching report, or no reports at all"
        case .usage: "usage error (unknown command or option, missing or ambiguous argument)"
        case .failure: "I/O or parse error of a file or directory you named"
        }
    }

    /// The one place errors become exit codes: ``CommandError`` carries its own, everything else is a failure.
    public init(for error: any Error) {
        switch error {
        case let error as CommandError: self = error.exitCode
        default: self = .failure
        }
    }
}

/// An error the CLI reports to the user: a one-line message and the exit code it maps to.
public struct CommandError: Error, Sendable, Equatable, CustomStringConvertible {
    public var exitCode: ExitCode
    public var message: String
    public var description: String { message }

    public init(_ exitCode: ExitCode, _ message: String) {
        self.exitCode = exitCode
        self.message = message
    }

    public static func usage(_ message: String) -> CommandError { CommandError(.usage, message) }
    public static func notFound(_ message: String) -> CommandError { CommandError(.notFound, message) }
}

extension ExitCode {
    /// The line for `error` that the CLI prints on standard error, prefixed with the tool's name.
    public static func message(for error: any Error) -> String {
        switch error {
        case let error as CommandError: "stallwatch: \(error.message)"
        case let error as StallWatchError: "stallwatch: \(error.message)"
        default: "stallwatch: \(error)"
        }
    }
}
