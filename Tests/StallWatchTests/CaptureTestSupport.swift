// Fixtures shared by the capture tests: threads to sample, a spinning call chain, child processes.
import CStallWatchFixtures
import Dispatch
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// The parent of every capture suite: serialized because the suites share one signal handler and compare
/// timings, and bounded in time because a capture bug shows up as a hang.
@Suite(.offPool, .serialized, .timeLimit(.minutes(2))) struct CaptureTests {}

/// A pthread running a closure; `join()` waits for it.
final class CaptureTestThread: @unchecked Sendable {
    private var thread = pthread_t()
    private var joined = false

    init(_ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        let result = pthread_create(
            &thread, nil,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                box.body()
                return nil
            }, box)
        precondition(result == 0, "pthread_create failed: \(result)")
    }

    func join() {
        guard !joined else { return }
        joined = true
        pthread_join(thread, nil)
    }

    private final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
}

/// A thread parked (busy-spinning) at the bottom of a C call chain of known depth, with the ground-truth
/// backtrace the thread took of itself there.
final class SpinningChain: @unchecked Sendable {
    let chain: UnsafeMutablePointer<sw_test_chain>
    private(set) var sampled = SampledThread(threadID: 0, stackLow: 0, stackHigh: 0)
    private var thread: CaptureTestThread?
    let depth: Int

    init(depth: Int) {
        self.depth = depth
        chain = .allocate(capacity: 1)
        chain.initialize(to: sw_test_chain())
        chain.pointee.depth = Int32(depth)
        nonisolated(unsafe) let chain = self.chain
        thread = CaptureTestThread { [unowned self] in
            // Test threads inherit the blocked signals of Swift Testing's Dispatch worker threads.
            self.sampled = try! SignalSampler.shared().registerCurrentThread()
            sw_test_chain_run(chain)
        }
        // sw_test_chain_state's acquire load pairs with the release store the target makes at the bottom,
        // after it set `sampled`.
        while sw_test_chain_state(chain) != 1 { sched_yield() }
    }

    /// The target's own backtrace taken at the bottom: [0] inside the bottom function, then its callers.
    var truth: [UInt64] {
        withUnsafeBytes(of: &chain.pointee.truth) {
            Array($0.bindMemory(to: UInt64.self).prefix(chain.pointee.truth_count))
        }
    }

    func stop() {
        sw_test_chain_release(chain)
        thread?.join()
        thread = nil
    }

    deinit {
        stop()
        chain.deallocate()
    }
}

/// A child process started with posix_spawn (not Foundation's Process, whose SIGCHLD monitor would reap
/// ptrace stop notifications of its children). Killed and reaped by `terminate()` or deinit.
final class ChildProcess {
    let pid: pid_t
    private var reaped = false

    init(_ path: String, _ arguments: [String]) throws {
        var pid = pid_t()
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let result = posix_spawn(&pid, path, nil, nil, argv, environ)
        guard result == 0 else { throw StallWatchError(.systemCall, "posix_spawn \(path): \(result)") }
        self.pid = pid
    }

    func terminate() {
        guard !reaped else { return }
        reaped = true
        kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    }

    deinit { terminate() }

    /// The `Name:\tvalue` field of /proc/PID/status.
    func statusField(_ name: String) -> String? {
        guard let text = readProcFile("/proc/\(pid)/status") else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
            return line.dropFirst(name.count + 1).trimmingCharacters()
        }
        return nil
    }
}

/// A /proc file's text, or nil.
func readProcFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n <= 0 { break }
        bytes += chunk[..<n]
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// The path of the file mapped at `address` in /proc/PID/maps ("" for anonymous), or nil if unmapped.
func mappedPath(pid: pid_t, address: UInt64) -> String? {
    guard let maps = readProcFile("/proc/\(pid)/maps") else { return nil }
    for line in maps.split(separator: "\n") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        let bounds = fields[0].split(separator: "-")
        guard bounds.count == 2, let low = UInt64(bounds[0], radix: 16), let high = UInt64(bounds[1], radix: 16)
        else { continue }
        if address >= low && address < high { return fields.count >= 6 ? String(fields[5]) : "" }
    }
    return nil
}

extension Substring {
    func trimmingCharacters() -> String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}

/// Percentile of already sorted values.
func percentile(_ sorted: [UInt64], _ p: Double) -> UInt64 {
    sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}
