// Spawning targets (the demo, a loopback echo loop) and the stallwatch CLI for sidecar tests; always killed.
import Foundation
import StallWatch
import Testing

#if canImport(Glibc)
    import Glibc
#endif

package enum SidecarFixtures {
    package static var productsDirectory: URL { Fixtures.productsDirectory }

    /// Tests/StallWatchSidecarTests/Fixtures: the corpus programs and the echo loop.
    package static let fixturesDirectory = Fixtures.packageRoot.appendingPathComponent("Tests/StallWatchSidecarTests")
        .appendingPathComponent("Fixtures")

    package static func executable(_ name: String) -> String { Fixtures.executable(name) }

    package static func temporaryDirectory(_ label: String) -> String {
        Fixtures.temporaryDirectory("sidecar-" + label)
    }

    /// `Fixtures/<source>` built with the system C compiler (`cc -O1 -g -pthread`, symbols kept) into a temporary
    /// directory; the executable's path, or nil when it did not build.
    package static func builtC(_ source: String) -> String? {
        let out = temporaryDirectory(source) + "/" + (source as NSString).deletingPathExtension
        let path = fixturesDirectory.appendingPathComponent(source).path
        let build = Process()
        build.executableURL = URL(fileURLWithPath: "/bin/sh")
        build.arguments = ["-c", "cc -O1 -g -pthread -o '\(out)' '\(path)'"]
        guard (try? build.run()) != nil else { return nil }
        build.waitUntilExit()
        return build.terminationStatus == 0 ? out : nil
    }

    /// The CPU thread `tid` of `pid` last ran on (`stat` field 39); nil when unreadable.
    package static func processor(pid: Int32, tid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        return fields.count > 36 ? Int(fields[36]) : nil
    }

    /// Each CPU's time in interrupts and stolen by the hypervisor so far, in ms (`/proc/stat`'s `irq`, `softirq`
    /// and `steal`, in 10 ms ticks): what its task clock does not count.
    package static func taskClockLossMs() -> [Int: Double] {
        let text = (try? String(contentsOfFile: "/proc/stat", encoding: .utf8)) ?? ""
        var loss: [Int: Double] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("cpu") && !line.hasPrefix("cpu ") {
            let fields = line.split(separator: " ")
            guard fields.count > 8, let cpu = Int(fields[0].dropFirst(3)) else { continue }
            let ticks = [6, 7, 8].compactMap { Double(fields[$0]) }.reduce(0, +)
            loss[cpu] = ticks * 1000 / Double(sysconf(Int32(_SC_CLK_TCK)))
        }
        return loss
    }

    /// Every report in `directory` that the reader accepts.
    package static func reports(in directory: String) -> [StallReport] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted().compactMap {
            do {
                return try ReportStore.load(path: directory + "/" + $0)
            } catch {
                // A report the reader rejects is a failure of its own, not a missing report.
                Issue.record("cannot read report \($0): \(error)")
                return nil
            }
        }
    }

    /// /proc/<pid>/status State letter and TracerPid.
    package static func traceState(pid: Int32) -> (state: String, tracer: String)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        var state = "?", tracer = "?"
        for line in text.split(separator: "\n") {
            if line.hasPrefix("State:") {
                state = String(line.dropFirst(6).trimmingCharacters(in: .whitespaces).prefix(1))
            }
            if line.hasPrefix("TracerPid:") { tracer = line.dropFirst(10).trimmingCharacters(in: .whitespaces) }
        }
        return (state, tracer)
    }
}

/// A spawned process with its output collected; killed (SIGKILL) and reaped on deinit.
package final class Spawned: @unchecked Sendable {
    package let process = Process()
    private let outPipe = Pipe()
    private let errPipe = Pipe()
    private let lock = NSLock()
    private var outData = Data()
    private var errData = Data()
    /// Entered for each pipe, left by its reader thread at its end of file: every byte the process wrote is read.
    private let drained = DispatchGroup()

    package init(_ path: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        process.environment = env
        process.standardOutput = outPipe
        process.standardError = errPipe
        // One thread a pipe, blocking reads until end of file (a readability handler's `availableData` was seen
        // to stop short of the end under load, leaving a dump's JSON cut at 8 or 16 KiB).
        read(outPipe.fileHandleForReading.fileDescriptor) { [weak self] bytes in
            self?.lock.withLock { self?.outData.append(contentsOf: bytes) }
        }
        read(errPipe.fileHandleForReading.fileDescriptor) { [weak self] bytes in
            self?.lock.withLock { self?.errData.append(contentsOf: bytes) }
        }
        try process.run()
    }

    /// Reads `fd` on a thread of its own until end of file, passing each chunk to `append`. The thread reads a
    /// duplicate of its own, closed at the end: the pipe's handle may be closed (this object gone) before a
    /// process that inherited the write end lets go of it.
    private func read(_ fd: Int32, _ append: @escaping @Sendable (ArraySlice<UInt8>) -> Void) {
        let drained = drained
        let own = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        guard own >= 0 else { return }
        drained.enter()
        Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { Glibc.read(own, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                if count <= 0 { break }
                append(buffer[..<count])
            }
            close(own)
            drained.leave()
        }.start()
    }

    package var pid: Int32 { process.processIdentifier }
    package var stdout: String { lock.withLock { String(decoding: outData, as: UTF8.self) } }
    package var stderr: String { lock.withLock { String(decoding: errData, as: UTF8.self) } }

    /// Waits for exit up to `timeout`, then for both pipes' end of file (all the output read: a process that
    /// leaves a child holding them keeps them open, so this too is bounded by `timeout`); returns the termination
    /// status (or nil on timeout).
    @discardableResult
    package func wait(timeout: Duration = .seconds(30)) -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning && ContinuousClock.now < deadline { usleep(10_000) }
        if process.isRunning { return nil }
        let left = max(.zero, deadline - ContinuousClock.now)
        let nanos = left.components.seconds * 1_000_000_000 + left.components.attoseconds / 1_000_000_000
        _ = drained.wait(timeout: .now() + .nanoseconds(Int(nanos)))
        return process.terminationStatus
    }

    /// Waits until `text` appears in a whole line of stdout (or stderr): one its writer has ended with a newline.
    /// A line may arrive in parts (an unbuffered Python `print` writes each argument on its own), and what follows
    /// the text is often what the caller reads next.
    package func waitFor(_ text: String, timeout: Duration = .seconds(20)) -> Bool {
        let deadline = ContinuousClock.now + timeout
        let inWholeLines = { (output: String) in
            output.lastIndex(of: "\n").map { output[...$0].contains(text) } ?? false
        }
        while ContinuousClock.now < deadline {
            if inWholeLines(stdout) || inWholeLines(stderr) { return true }
            usleep(10_000)
        }
        return false
    }

    deinit {
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
        }
    }
}

/// A value behind a lock, shareable with callbacks on other threads.
package final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    package init(_ value: Value) { self.value = value }
    package func withLock<R>(_ body: (inout Value) -> R) -> R { lock.withLock { body(&value) } }
}
