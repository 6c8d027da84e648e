// ExitCode: the stallwatch CLI's exit statuses and the one mapping from errors to them.
import StallWatch
import StallWatchInspector
import StallWatchSidecar

/// How `stallwatch` exits. The numbers are part of the CLI's contract: scripts test them.
public enum ExitCode: Int32, Sendable, CaseIterable {
    case ok = 0
    /// No report matched, or the directory holds no reports.
    case notFound = 1
    /// The command line or the configuration was wrong (unknown command or option, missing argument, ambiguous
    /// id prefix, a configuration value out of range).
    case usage = 2
    /// A file or directory the user named could not be read or parsed.
    case failure = 3
    /// watch/run/dump: the target process or thread does not exist.
    case noSuchProcess = 4
    /// watch/run/daemon/dump: not permitted to read or trace the target (ptrace rights).
    case permissionDenied = 5
    /// dump: the target cannot be traced now (a zombie, a kernel thread, or another tracer is attached).
    case notTraceable = 6
    /// snapshot: the process publishes no StallWatch heartbeat, or its watchdog did not answer in time.
    case noAnswer = 7
    /// run: the command could not be started (not found, not executable).
    case commandNotStarted = 127

    /// What each code means, as `stallwatch --help` prints it.
    public var meaning: String {
        switch self {
        case .ok: "success"
        case .notFound: "no matching report, or no reports at all"
        case .usage:
            "usage or configuration error (unknown command or option, missing or ambiguous argument, bad value)"
        case .failure: "I/O or parse error of a file or directory you named"
        case .noSuchProcess: "no such process (or thread) to watch or dump"
        case .permissionDenied:
            "permission denied: cannot trace the target (same user, CAP_SYS_PTRACE, Yama ptrace_scope)"
        case .notTraceable: "dump: the target cannot be traced now (zombie, kernel thread, or a debugger attached)"
        case .noAnswer: "snapshot: no StallWatch heartbeat in the process, or no answer in time"
        case .commandNotStarted: "run: the command could not be started"
        }
    }

    /// The one place errors become exit codes: ``CommandError`` carries its own, the sidecar's name the target's
    /// fate; everything else (`StallWatchError`, which the inspector throws too, …) is a failure.
    public init(for error: any Error) {
        switch error {
        case let error as CommandError: self = error.exitCode
        case let error as SidecarError:
            switch error.code {
            case .noSuchProcess: self = .noSuchProcess
            case .permissionDenied: self = .permissionDenied
            case .notTraceable: self = .notTraceable
            case .spawnFailed: self = .commandNotStarted
            case .noAnswer: self = .noAnswer
            default: self = .failure
            }
        case let error as StallWatchError where error.code == .invalidConfiguration: self = .usage
        default: self = .failure
        }
    }
}

/// The command line's one error type: a one-line message and the exit code it maps to, or (`stallwatch run`) the
/// command's own exit status, which is none of ``ExitCode``'s.
public struct CommandError: Error, Sendable, Equatable, CustomStringConvertible {
    public var exitCode: ExitCode
    public var message: String
    /// `run`: the command's exit status, or 128 + the signal that killed it, which `stallwatch` exits with; nil
    /// for every other error.
    public var commandStatus: Int32?
    public var description: String { message }

    package init(_ exitCode: ExitCode, _ message: String) {
        self.exitCode = exitCode
        self.message = message
    }

    /// `run`'s command ended with `status` (not 0): `stallwatch` exits with it and prints nothing more.
    static func commandExited(status: Int32) -> CommandError {
        var error = CommandError(.failure, "the command exited with status \(status)")
        error.commandStatus = status
        return error
    }

    package static func usage(_ message: String) -> CommandError { CommandError(.usage, message) }
    package static func notFound(_ message: String) -> CommandError { CommandError(.notFound, message) }
}

extension ExitCode {
    /// The line for `error` that the CLI prints on standard error, prefixed with the tool's name.
    public static func message(for error: any Error) -> String {
        switch error {
        case let error as CommandError: "stallwatch: \(error.message)"
        case let error as StallWatchError: "stallwatch: \(error.message)"
        case let error as SidecarError: "stallwatch: \(error.message)"
        default: "stallwatch: \(error)"
        }
    }
}
