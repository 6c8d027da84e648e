// NamedThreadBenchmarks: how soon the thread watchdog reports a stall of a thread it watches by name.
import CStallWatchCore
import Dispatch
import Foundation
import StallWatch
import Synchronization

enum NamedThreadBenchmarks {
    /// A thread named `bench-named` idles in `poll` on a pipe (a 1 s timeout, as a loop's timer) and, for each
    /// byte, stalls 3× the threshold on a CPU (byte 1) or in a sleep (byte 2), noting its own wall clock as the
    /// stall begins. The figure is the report's detection time minus that start plus the threshold: how late,
    /// by the thread's own clock, the watchdog saw the threshold crossed. The stalls begin at varied points of
    /// the watchdog's idle poll (half the threshold apart).
    static func detectionLatency(stallsOfEachKind: Int = 24) {
        let thresholdMs = 100
        var config = StallWatchConfiguration()
        config.thresholdMs = thresholdMs
        config.sampleIntervalMs = 20
        config.reportDirectory = NSTemporaryDirectory() + "stallwatch-bench-named"
        config.maxReports = 1000
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return }
        defer {
            close(fds[0])
            close(fds[1])
        }
        let starts = Mutex<[Double]>([])
        let detected = Mutex<[Double]>([])
        let ended = DispatchSemaphore(value: 0)
        let named = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let readEnd = fds[0]
        Thread {
            sw_set_thread_name("bench-named")
            named.signal()
            var byte: UInt8 = 0
            while true {
                var ready = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, 1000) > 0 else { continue }
                guard read(readEnd, &byte, 1) == 1, byte != 0 else { break }
                starts.withLock { $0.append(Date().timeIntervalSince1970) }
                if byte == 1 {
                    LoopBenchmarks.busyWait(milliseconds: 3 * thresholdMs)
                } else {
                    usleep(UInt32(3 * thresholdMs * 1000))
                }
            }
            done.signal()
        }.start()
        named.wait()
        let watchdog: ThreadWatchdog
        do {
            watchdog = try ThreadWatchdog.start(threadsNamed: "bench-named", configuration: config) { event in
                switch event {
                case .began(let report):
                    detected.withLock { $0.append(report.detection.detectedAt.timeIntervalSince1970) }
                case .ended: ended.signal()
                default: break
                }
            }
        } catch {
            print("| named-thread detection | failed: \(error) | |")
            return
        }
        for index in 0..<(2 * stallsOfEachKind) {
            var byte: UInt8 = index % 2 == 0 ? 1 : 2
            _ = write(fds[1], &byte, 1)
            _ = ended.wait(timeout: .now() + 5)
            // Varied phases against the watchdog's idle poll.
            usleep(UInt32(((index * 37) % thresholdMs + 30) * 1000))
        }
        var stop: UInt8 = 0
        _ = write(fds[1], &stop, 1)
        done.wait()
        watchdog.stop()
        try? FileManager.default.removeItem(atPath: config.reportDirectory)
        let started = starts.withLock { $0 }
        let seen = detected.withLock { $0 }
        guard started.count == seen.count else {
            Table.row(["named-thread detection", "\(seen.count) reports for \(started.count) stalls", "unmatched"])
            return
        }
        let late = zip(started, seen).map { ($1 - $0) * 1000 - Double(thresholdMs) }
        for (kind, parity) in [("on a CPU", 0), ("in a sleep", 1)] {
            let sorted = late.enumerated().filter { $0.offset % 2 == parity }.map(\.element).sorted()
            Table.row([
                "named-thread detection after the threshold, stall \(kind) (\(sorted.count) stalls, "
                    + "threshold \(thresholdMs) ms, idle poll \(thresholdMs / 2) ms)",
                "p50 \(fmt(pct(sorted, 50))) ms", "p99 \(fmt(pct(sorted, 99))) ms (bar ≤ 20 ms)",
            ])
        }
    }
}
