// Where reports and heartbeat segments go: the one place an empty directory setting becomes a path.
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension StallWatchConfiguration {
    /// Heartbeat segments when `heartbeatDirectory` is empty: tmpfs, so the words never reach a disk.
    static let defaultHeartbeatDirectory = "/dev/shm"

    /// Reports when `reportDirectory` is empty: `$STALLWATCH_REPORT_DIRECTORY` when set and not empty in
    /// `environment`, else `/var/tmp/stallwatch-<uid>`.
    package static func defaultReportDirectory(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String {
        if let configured = StallWatchEnvironmentVariable.reportDirectory.value(in: environment), !configured.isEmpty {
            return configured
        }
        return "/var/tmp/stallwatch-\(geteuid())"
    }

    /// The directory reports are written to: `reportDirectory`, or ``defaultReportDirectory(environment:)``
    /// when it is empty.
    package var reportDirectoryPath: String {
        reportDirectory.isEmpty ? Self.defaultReportDirectory() : reportDirectory
    }

    /// The directory heartbeat segments are created in: `heartbeatDirectory`, or
    /// ``defaultHeartbeatDirectory`` when it is empty.
    package var heartbeatDirectoryPath: String {
        heartbeatDirectory.isEmpty ? Self.defaultHeartbeatDirectory : heartbeatDirectory
    }
}
