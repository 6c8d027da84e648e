// Who this process is, as reports describe it.
import Foundation

package enum ProcessIdentity {
    /// pid, executable path, its build-id and the host name; computed once.
    package static let current: StallReport.ProcessDescription = {
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments
            .first ?? "?"
        var names = utsname()
        uname(&names)
        let host = withUnsafeBytes(of: &names.nodename) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        return StallReport.ProcessDescription(
            pid: getpid(), executable: executable, buildId: BuildID.ofFile(atPath: executable),
            host: host)
    }()

    /// Another process's identity, from `/proc/<pid>/exe` (nil executable path when it cannot be read).
    package static func of(pid: Int32) -> StallReport.ProcessDescription {
        if pid == getpid() { return current }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) ?? "?"
        return StallReport.ProcessDescription(
            pid: pid, executable: executable, buildId: BuildID.ofFile(atPath: executable), host: current.host)
    }
}
