// systemd's notification protocol (sd_notify): READY, STATUS, and WATCHDOG pings only while the loop is healthy.
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Tells systemd about the service over `$NOTIFY_SOCKET` (sd_notify(3)), and keeps systemd's watchdog fed
/// only while the watched loop is healthy, so `WatchdogSec=` restarts a service whose loop is stuck.
///
/// The protocol is one datagram of newline-separated `KEY=value` assignments to the unix socket named by
/// `NOTIFY_SOCKET` (a path, or `@name` for an abstract socket). With `WATCHDOG_USEC` set (and `WATCHDOG_PID`
/// unset or equal to this process), ``startWatchdogPings(for:)`` sends `WATCHDOG=1` every half period from its
/// own thread (`stallwatch-sd`) — skipping every ping while ``Watchdog/isHealthy`` is false. Without
/// `NOTIFY_SOCKET` (not started by systemd, or `Type=simple`) every call does nothing.
///
/// ```swift
/// let notifier = try SystemdNotifier()
/// try watchdog.start()
/// try notifier.startWatchdogPings(for: watchdog)
/// try notifier.ready(status: "serving on :8080")
/// ```
public final class SystemdNotifier: Sendable {
    /// `NOTIFY_SOCKET` as given, or nil when absent.
    let socketAddress: String?
    /// systemd's watchdog period for this process (`WATCHDOG_USEC`), or nil when it has none.
    let watchdogPeriod: Duration?
    private let fd: Int32
    private let address: sockaddr_un
    private let addressLength: socklen_t
    private let pinger = Mutex<(control: PingControl, thread: NamedThread)?>(nil)
    private let pingsSent = Atomic<Int>(0)

    private final class PingControl: Sendable {
        let stop = Atomic<Bool>(false)
        let wake = DispatchSemaphore(value: 0)
    }

    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` from `environment`.
    ///
    /// - Throws: `.invalidConfiguration` for a `NOTIFY_SOCKET` that is not a path or `@name` (systemd's
    ///   `vsock:` addresses are not supported) or is too long; `.systemCall` if the socket cannot be created.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) throws(StallWatchError) {
        socketAddress = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        watchdogPeriod = Self.watchdogPeriod(environment: environment, pid: getpid())
        guard let socketAddress else {
            fd = -1
            address = sockaddr_un()
            addressLength = 0
            return
        }
        (address, addressLength) = try Self.makeAddress(socketAddress)
        fd = try Syscall.retrying("socket") {
            socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
    }

    deinit {
        stopWatchdogPings()
        if fd >= 0 { close(fd) }
    }

    /// True when systemd asked for notifications (`NOTIFY_SOCKET` set).
    package var isEnabled: Bool { fd >= 0 }

    /// `WATCHDOG=1` datagrams sent so far.
    var watchdogPingsSent: Int { pingsSent.load(ordering: .relaxed) }

    // MARK: Notifications

    /// Sends `text` (newline-separated `KEY=value` assignments) as one datagram. Does nothing when disabled.
    ///
    /// Never blocks: a listener whose queue is full (a wedged systemd, a test that stopped reading) makes the
    /// call fail with `EAGAIN` instead of hanging the caller — or the pinging thread, and so
    /// ``stopWatchdogPings()``. A dropped ping is retried half a period later anyway.
    ///
    /// - Throws: `.systemCall` naming `sendto` (`ECONNREFUSED` when nobody listens any more, `EAGAIN`).
    func notify(_ text: String) throws(StallWatchError) {
        guard fd >= 0 else { return }
        var address = self.address
        let length = addressLength
        let bytes = Array(text.utf8)
        let fd = self.fd
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                Result { () throws(StallWatchError) -> Int in
                    try Syscall.retrying("sendto") {
                        sendto(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT), raw, length)
                    }
                }
            }
        }
        _ = try sent.get()
    }

    /// `READY=1` (and `STATUS=`): startup is finished. Send it once the loop is about to serve.
    public func ready(status: String? = nil) throws(StallWatchError) {
        try notify("READY=1" + (status.map { "\nSTATUS=" + Self.oneLine($0) } ?? ""))
    }

    /// `STATUS=`: a one-line status that `systemctl status` shows.
    public func status(_ text: String) throws(StallWatchError) { try notify("STATUS=" + Self.oneLine(text)) }

    /// `STOPPING=1`: shutdown has begun.
    public func stopping() throws(StallWatchError) { try notify("STOPPING=1") }

    /// `WATCHDOG=1`: one keep-alive ping. ``startWatchdogPings(for:)`` sends these for you.
    func watchdogPing() throws(StallWatchError) {
        try notify("WATCHDOG=1")
        pingsSent.add(1, ordering: .relaxed)
    }

    // MARK: Keep-alive

    /// Pings systemd's watchdog every half `WATCHDOG_USEC` while `watchdog` reports its loop healthy
    /// (``Watchdog/isHealthy``). Does nothing without a socket or a watchdog period, or when already pinging.
    ///
    /// - Throws: `.systemCall` if the thread cannot start.
    public func startWatchdogPings(for watchdog: Watchdog) throws(StallWatchError) {
        try startWatchdogPings { watchdog.isHealthy }
    }

    /// Pings systemd's watchdog every half `WATCHDOG_USEC` while `isHealthy` returns true (asked right before
    /// each ping, on the pinging thread).
    package func startWatchdogPings(while isHealthy: @escaping @Sendable () -> Bool) throws(StallWatchError) {
        guard fd >= 0, let period = watchdogPeriod else { return }
        let half = Int(clamping: period.nanoseconds / 2)
        try pinger.withLock { (pinger: inout (control: PingControl, thread: NamedThread)?) throws(StallWatchError) in
            guard pinger == nil else { return }
            let control = PingControl()
            let thread = try NamedThread(name: "stallwatch-sd") { [self] in
                while !control.stop.load(ordering: .acquiring) {
                    if isHealthy() { try? watchdogPing() }
                    _ = control.wake.wait(timeout: .now() + .nanoseconds(half))
                }
            }
            pinger = (control, thread)
        }
    }

    /// Stops the pinging thread and joins it. Without pings systemd restarts the service after `WatchdogSec=`,
    /// unless it is stopping (send ``stopping()``).
    public func stopWatchdogPings() {
        pinger.withLock { pinger in
            guard let running = pinger else { return }
            running.control.stop.store(true, ordering: .releasing)
            running.control.wake.signal()
            running.thread.join()
            pinger = nil
        }
    }

    // MARK: Environment

    /// `WATCHDOG_USEC` as a duration when it applies to process `pid` (`WATCHDOG_PID` unset or equal).
    static func watchdogPeriod(environment: [String: String], pid: Int32) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let usec = UInt64(text), usec > 0 else { return nil }
        if let owner = environment["WATCHDOG_PID"], !owner.isEmpty, Int32(owner) != pid { return nil }
        return .microseconds(usec)
    }

    /// A `sockaddr_un` for a path, or for `@name` (an abstract socket: a leading NUL, no terminator).
    static func makeAddress(_ text: String) throws(StallWatchError) -> (sockaddr_un, socklen_t) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(text.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        guard abstract || bytes.first == UInt8(ascii: "/") else {
            throw StallWatchError(
                .invalidConfiguration, "NOTIFY_SOCKET=\(text): expected an absolute path or @name",
                context: ["variable": "NOTIFY_SOCKET"])
        }
        if abstract { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count + (abstract ? 0 : 1) <= capacity else {
            throw StallWatchError(
                .invalidConfiguration, "NOTIFY_SOCKET=\(text): longer than \(capacity - 1) bytes",
                context: ["variable": "NOTIFY_SOCKET"])
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let offset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        return (address, socklen_t(offset + bytes.count + (abstract ? 0 : 1)))
    }

    static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }
}
