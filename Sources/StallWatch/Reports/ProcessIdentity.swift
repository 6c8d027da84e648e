// Who this process is, as reports describe it.
import Foundation

enum ProcessIdentity {
    /// pid, executable path, its build-id and the host name; computed once.
    static let current: StallReport.ProcessDescription = {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments.first ?? "?"
        var names = utsname()
        uname(&names)
        let host = withUnsafeBytes(of: &names.nodename) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        return StallReport.ProcessDescription(
            pid: getpid(), executable: executable, buildId: BuildID.ofFile(atPath: executable),
            host: host)
    }()
}
