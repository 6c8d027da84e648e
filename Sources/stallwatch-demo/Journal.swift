// The service's message journal on disk: written synchronously on the loop, or group-committed off it.
import Foundation
import StallWatch
import StallWatchRemedies

#if canImport(Glibc)
    import Glibc
#endif

/// An append-only file of messages, made durable with fsync.
///
/// The unremedied service calls ``appendSynchronously(_:)`` on the loop: one write and one fsync per message,
/// and the loop waits for the disk each time. The remedied one calls ``append(_:completion:)``: lines collect
/// on the loop while a ``BackgroundWorker`` writes and syncs the previous batch (group commit), and each
/// message's completion runs on the loop once its batch is durable.
final class Journal: @unchecked Sendable {  // batch state: loop thread only
    let path: String
    let fd: Int32
    private let worker: BackgroundWorker
    private var batch: [String] = []
    private var waiting: [@Sendable () -> Void] = []
    private var flushing = false
    private(set) var batchesWritten = 0

    init(directory: String, loop: EventLoop) throws {
        path = directory + "/journal.log"
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw DemoError("open \(path): \(String(cString: strerror(errno)))") }
        worker = BackgroundWorker(scheduler: loop, label: "demo.journal")
    }

    /// Writes `line` and waits for the disk, on the calling thread.
    @inline(never)
    func appendSynchronously(_ line: String) {
        Self.writeAll(fd, line + "\n")
        fsync(fd)
    }

    /// Queues `line`; `completion` runs on the loop once it is on disk. Loop thread.
    func append(_ line: String, completion: @escaping @Sendable () -> Void) {
        batch.append(line)
        waiting.append(completion)
        if !flushing { flush() }
    }

    /// Runs `work` on the journal's background queue, `completion` on the loop afterwards.
    func offload(_ work: @escaping @Sendable () -> Void, completion: @escaping @Sendable () -> Void) {
        worker.submit({ work() }) { _ in completion() }
    }

    private func flush() {
        let text = batch.joined(separator: "\n") + "\n"
        let completions = waiting
        batch.removeAll(keepingCapacity: true)
        waiting.removeAll(keepingCapacity: true)
        flushing = true
        let fd = fd
        worker.submit({
            Self.writeAll(fd, text)
            fsync(fd)
        }) { [self] _ in
            batchesWritten += 1
            for completion in completions { completion() }
            flushing = false
            if !batch.isEmpty { flush() }
        }
    }

    private static func writeAll(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            bytes = bytes.dropFirst(n)
        }
    }

    deinit { close(fd) }
}
