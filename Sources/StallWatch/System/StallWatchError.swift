// The StallWatch module's one public error type.

/// An error from StallWatch: a stable code to match on, a message for people and the context it happened in.
///
/// A struct with a nested `Code` (not an enum) so that new codes can be added without breaking callers.
public struct StallWatchError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, in a form callers can match on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate let raw: String
        public var description: String { raw }

        /// A system call failed; `context["call"]` names it and `errno` holds the error number.
        public static let systemCall = Code(raw: "systemCall")
        /// A configuration value was out of range or of the wrong type.
        public static let invalidConfiguration = Code(raw: "invalidConfiguration")
        /// The real-time signal for sampling could not be installed (none free, or owned by someone else).
        public static let signalUnavailable = Code(raw: "signalUnavailable")
        /// A stack could not be captured from a thread.
        static let captureFailed = Code(raw: "captureFailed")
        /// A capture's deadline passed before the thread could be sampled (signal blocked, uninterruptible
        /// sleep, not scheduled); `context["threadState"]` holds its /proc state letter when known.
        package static let captureTimedOut = Code(raw: "captureTimedOut")
        /// The process or thread does not exist (any more); `errno` is ESRCH.
        package static let noSuchProcess = Code(raw: "noSuchProcess")
        /// The system refused access (ptrace: different user, missing CAP_SYS_PTRACE, Yama, already traced).
        public static let permissionDenied = Code(raw: "permissionDenied")
        /// A report file could not be read, parsed or written.
        public static let report = Code(raw: "report")
        /// The operation is not valid in the object's current state (for example, running a loop twice).
        public static let invalidState = Code(raw: "invalidState")
        /// A binary at a report image's path is a different build from the one the report names (its build-id
        /// differs) and no debug file with the report's build-id exists; `context` holds `path`, `expected` and
        /// `found`.
        package static let buildIDMismatch = Code(raw: "buildIDMismatch")
        /// A needed facility is unavailable on this system (for example, libdispatch's main-queue hooks).
        public static let unsupported = Code(raw: "unsupported")
    }

    public var code: Code
    public var message: String
    /// Extra facts: a file path, a configuration key, a syscall name.
    public var context: [String: String]
    /// The errno value for `systemCall` errors.
    public var errno: Int32?

    @usableFromInline package init(
        _ code: Code, _ message: String, context: [String: String] = [:], errno: Int32? = nil
    ) {
        self.code = code
        self.message = message
        self.context = context
        self.errno = errno
    }

    public var description: String { message }
}
