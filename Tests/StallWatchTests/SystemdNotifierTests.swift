// sd_notify against a unix datagram listener playing systemd: READY, STATUS, and watchdog pings that stop
// while the loop is stalled.
import CStallWatchCore
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct SystemdNotifierTests {
    @Test func theWatchdogPeriodAppliesOnlyToTheProcessSystemdNamed() {
        #expect(SystemdNotifier.watchdogPeriod(environment: ["WATCHDOG_USEC": "3000000"], pid: 42) == .seconds(3))
        #expect(
            SystemdNotifier.watchdogPeriod(environment: ["WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "42"], pid: 42)
                == .seconds(3))
        #expect(
            SystemdNotifier.watchdogPeriod(environment: ["WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "7"], pid: 42)
                == nil)
        #expect(SystemdNotifier.watchdogPeriod(environment: ["WATCHDOG_USEC": "0"], pid: 42) == nil)
        #expect(SystemdNotifier.watchdogPeriod(environment: ["WATCHDOG_USEC": "soon"], pid: 42) == nil)
        #expect(SystemdNotifier.watchdogPeriod(environment: [:], pid: 42) == nil)
    }

    @Test func addressesThatAreNeitherPathsNorAbstractAreRejected() {
        #expect(throws: StallWatchError.self) { try SystemdNotifier(environment: ["NOTIFY_SOCKET": "vsock:2:1234"]) }
        #expect(throws: StallWatchError.self) {
            try SystemdNotifier(environment: ["NOTIFY_SOCKET": "/" + String(repeating: "x", count: 200)])
        }
    }

    @Test func withoutANotifySocketEveryCallDoesNothing() throws {
        let notifier = try SystemdNotifier(environment: ["WATCHDOG_USEC": "100000"])
        #expect(!notifier.isEnabled)
        try notifier.ready(status: "up")
        try notifier.startWatchdogPings { true }
        notifier.stopWatchdogPings()
        #expect(notifier.watchdogPingsSent == 0)
    }

    @Test(.timeLimit(.minutes(3)))
    func readyAndStatusReachAnAbstractSocketAsOneDatagram() throws {
        let name = "@stallwatch-test-\(getpid())-\(UUID().uuidString.prefix(8))"
        let listener = try DatagramListener(address: name)
        let notifier = try SystemdNotifier(environment: ["NOTIFY_SOCKET": name])
        try notifier.ready(status: "serving\non :8080")
        let message = try #require(listener.receive(timeout: .seconds(10)))
        #expect(message.text == "READY=1\nSTATUS=serving on :8080")
        try notifier.stopping()
        #expect(listener.receive(timeout: .seconds(10))?.text == "STOPPING=1")
    }

    @Test(.timeLimit(.minutes(3)))
    func watchdogPingsStopWhileTheLoopIsStalledAndResumeWhenItRecovers() throws {
        let directory = Fixtures.temporaryDirectory("sd-notify")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socketPath = directory + "/notify.sock"
        let listener = try DatagramListener(address: socketPath)
        listener.startCollecting()
        defer { listener.stopCollecting() }
        // WatchdogSec=200ms: a ping every 100 ms.
        let notifier = try SystemdNotifier(environment: [
            "NOTIFY_SOCKET": socketPath, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": "\(getpid())",
        ])
        #expect(notifier.watchdogPeriod == .milliseconds(200))

        var config = StallWatchConfiguration()
        config.thresholdMs = 100
        config.reportDirectory = directory + "/reports"
        let loop = try EventLoop(name: "sd", mainQueue: .disabled)
        let began = Atomic<UInt64>(0)
        let ended = Atomic<UInt64>(0)
        let endedSignal = DispatchSemaphore(value: 0)
        let watchdog = Watchdog(loop: loop, configuration: config) { event in
            switch event {
            case .began: began.store(sw_monotonic_ns(), ordering: .releasing)
            case .ended:
                ended.store(sw_monotonic_ns(), ordering: .releasing)
                endedSignal.signal()
            default: break
            }
        }
        try watchdog.start()
        _ = startLoopThread(loop, name: "sd-loop")
        try notifier.startWatchdogPings(for: watchdog)
        try notifier.ready(status: "serving")
        defer {
            notifier.stopWatchdogPings()
            loop.stop()
            watchdog.stop()
        }

        func pings(_ messages: [DatagramListener.Message]) -> [UInt64] {
            messages.filter { $0.text == "WATCHDOG=1" }.map(\.receivedNanos)
        }
        #expect(listener.wait(timeout: .seconds(10)) { $0.contains { $0.text == "READY=1\nSTATUS=serving" } })
        #expect(listener.wait(timeout: .seconds(10)) { pings($0).count >= 3 }, "regular pings while healthy")

        // The stall ends when the block returns; the `ended` event comes later, once the final report is built
        // off the watching thread, and pings may rightly resume before it.
        let blockReturned = Atomic<UInt64>(0)
        loop.perform {
            WatchdogTests.blockLoopThread(milliseconds: 900)
            blockReturned.store(sw_monotonic_ns(), ordering: .releasing)
        }
        #expect(endedSignal.wait(timeout: .now() + 20) == .success)
        let endedAt = ended.load(ordering: .acquiring)
        #expect(
            listener.wait(timeout: .seconds(10)) { pings($0).filter { $0 > endedAt }.count >= 2 },
            "pings resume after the loop recovers")

        let beganAt = began.load(ordering: .acquiring)
        #expect(beganAt > 0 && endedAt > beganAt)
        // A ping sent just before the threshold was crossed may be read a little after `began`.
        let stallEnd = min(endedAt, blockReturned.load(ordering: .acquiring))
        let duringStall = pings(listener.messages).filter { $0 > beganAt + 30_000_000 && $0 < stallEnd }
        #expect(duringStall.isEmpty, "\(duringStall.count) WATCHDOG=1 while the loop was stalled")
        let before = pings(listener.messages).filter { $0 < beganAt }
        #expect(before.count >= 3)
        // The counter moves after each send: stop the pinger, then every ping received was counted.
        notifier.stopWatchdogPings()
        #expect(notifier.watchdogPingsSent >= pings(listener.messages).count)
    }
}
