// SidecarError: the StallWatchSidecar module's one public error type.
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// An error from the sidecar: a stable code, a message a user can act on, and its context.
public struct SidecarError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong; a struct so codes can be added without breaking callers.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let raw: String
        public var description: String { raw }

        /// The target process or thread does not exist (any more).
        public static let noSuchProcess = Code(raw: "noSuchProcess")
        /// The system refused access to the target (/proc files, ptrace).
        public static let permissionDenied = Code(raw: "permissionDenied")
        /// The target exists and may be read, but cannot be traced now (a zombie, a kernel thread, this process,
        /// or another tracer — a debugger — is attached).
        public static let notTraceable = Code(raw: "notTraceable")
        /// A heartbeat segment failed validation; `context["field"]` names the field.
        public static let invalidHeartbeat = Code(raw: "invalidHeartbeat")
        /// A published task table failed validation, or the process publishes none; `context["field"]` names the
        /// field.
        public static let invalidTaskTable = Code(raw: "invalidTaskTable")
        /// A command to run could not be started.
        public static let spawnFailed = Code(raw: "spawnFailed")
        /// A system call failed; `context["call"]` names it.
        public static let systemCall = Code(raw: "systemCall")
        /// A value given to the sidecar (a thread rule) is malformed.
        public static let invalidArgument = Code(raw: "invalidArgument")
        /// A snapshot was asked of a process that publishes no StallWatch heartbeat, or whose watchdog did not
        /// answer in time.
        public static let noAnswer = Code(raw: "noAnswer")
        /// The process answered a snapshot request with why it wrote none; the message says why.
        public static let snapshotRefused = Code(raw: "snapshotRefused")
    }

    public var code: Code
    public var message: String
    public var context: [String: String]

    package init(_ code: Code, _ message: String, context: [String: String] = [:]) {
        self.code = code
        self.message = message
        self.context = context
    }

    public var description: String { message }

    /// What to check when the target cannot be traced or read.
    static let permissionAdvice =
        "watching another process needs ptrace rights over it: run as the same user as the target (and the target "
        + "must not have gained privileges, e.g. setuid), or as root / with CAP_SYS_PTRACE; with Yama "
        + "(/proc/sys/kernel/yama/ptrace_scope) at 1 only a parent may trace — use `stallwatch run -- CMD`, "
        + "or CAP_SYS_PTRACE; at 2 only CAP_SYS_PTRACE, at 3 nobody; in a container add --cap-add SYS_PTRACE and "
        + "allow ptrace/process_vm_readv in the seccomp profile"

    static func noSuchProcess(pid: Int32, tid: Int32? = nil) -> SidecarError {
        let what = tid.map { $0 == pid ? "process \(pid)" : "thread \($0) of process \(pid)" } ?? "process \(pid)"
        return SidecarError(
            .noSuchProcess, "no such process: \(what) does not exist (or has exited)",
            context: ["pid": String(pid)])
    }

    static func permissionDenied(pid: Int32, doing: String) -> SidecarError {
        SidecarError(
            .permissionDenied, "permission denied \(doing) of pid \(pid): " + permissionAdvice,
            context: [
                "pid": String(pid), "yamaPtraceScope": ProcSystem.ptraceScope() ?? "absent",
            ])
    }

    static func from(_ error: StallWatchError, pid: Int32) -> SidecarError {
        switch error.code.description {
        case "noSuchProcess": return SidecarError(.noSuchProcess, error.message, context: error.context)
        case "permissionDenied": return SidecarError(.permissionDenied, error.message, context: error.context)
        default: return SidecarError(.systemCall, error.message, context: error.context)
        }
    }
}
