// A unix datagram socket that plays systemd's notification listener in tests.
import CStallWatchCore
import Foundation
import Synchronization

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// Binds a unix datagram socket (a path, or `@name` for an abstract one) and receives messages with a bound
/// wait; each message carries the monotonic time it was received.
final class DatagramListener: @unchecked Sendable {
    struct Message {
        var text: String
        var receivedNanos: UInt64
    }

    let address: String
    private let fd: Int32

    init(address: String) throws {
        self.address = address
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno)!) }
        let (sun, length) = try SystemdNotifier.makeAddress(address)
        var copy = sun
        let rc = withUnsafePointer(to: &copy) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard rc == 0 else {
            close(fd)
            throw POSIXError(.init(rawValue: errno)!)
        }
    }

    deinit {
        close(fd)
        if address.hasPrefix("/") { unlink(address) }
    }

    /// The next message, or nil if none arrives within `timeout`.
    func receive(timeout: Duration) -> Message? {
        let deadline = sw_monotonic_ns() + timeout.nanoseconds
        while true {
            let now = sw_monotonic_ns()
            guard now < deadline else { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, Int32(max(1, (deadline - now) / 1_000_000)))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n >= 0 else { continue }
            return Message(text: String(decoding: buffer[0..<n], as: UTF8.self), receivedNanos: sw_monotonic_ns())
        }
    }

    // MARK: Collecting on a thread

    private let collected = Mutex<[Message]>([])
    private let arrived = DispatchSemaphore(value: 0)
    private let collecting = Atomic<Bool>(false)
    private var collector: Thread?

    /// Receives on a background thread from now on, timestamping each message as it arrives.
    func startCollecting() {
        collecting.store(true, ordering: .releasing)
        let thread = Thread { [self] in
            while collecting.load(ordering: .acquiring) {
                guard let message = receive(timeout: .milliseconds(50)) else { continue }
                collected.withLock { $0.append(message) }
                arrived.signal()
            }
        }
        thread.name = "test-notify-listener"
        thread.start()
        collector = thread
    }

    func stopCollecting() { collecting.store(false, ordering: .releasing) }

    var messages: [Message] { collected.withLock { $0 } }

    /// Waits (woken by each arriving message) until `condition` holds for the messages so far; false on timeout.
    func wait(timeout: Duration, until condition: ([Message]) -> Bool) -> Bool {
        let deadline = DispatchTime.now() + .nanoseconds(Int(timeout.nanoseconds))
        while !condition(messages) {
            if arrived.wait(timeout: deadline) == .timedOut { return condition(messages) }
        }
        return true
    }
}
