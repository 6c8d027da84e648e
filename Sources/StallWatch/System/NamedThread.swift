// A joinable POSIX thread with a kernel-visible name (Foundation's Thread cannot be joined).
import CStallWatchCore

#if canImport(Glibc)
    import Glibc
#endif

/// A named thread running one closure; ``join()`` waits for it to return.
///
/// `package`: the sidecar's threads are named the same way.
package final class NamedThread: @unchecked Sendable {
    // @unchecked Sendable: `handle`/`joined` are used by the one owner that joins (owners keep it behind a Mutex).
    private final class Box {
        let name: String
        let body: () -> Void
        init(name: String, body: @escaping () -> Void) {
            self.name = name
            self.body = body
        }
    }

    private var handle: pthread_t
    private var joined = false

    /// Starts `body` on a new thread named `name` (at most 15 bytes are kept by the kernel).
    package init(name: String, _ body: @escaping @Sendable () -> Void) throws(StallWatchError) {
        let box = Unmanaged.passRetained(Box(name: name, body: body))
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                sw_set_thread_name(box.name)
                box.body()
                return nil
            }, box.toOpaque())
        guard rc == 0 else {
            box.release()
            throw Syscall.error("pthread_create", errno: rc)
        }
        handle = thread
    }

    /// Waits for the thread to finish. Call once, not from the thread itself.
    package func join() {
        guard !joined else { return }
        joined = true
        pthread_join(handle, nil)
    }

    deinit {
        if !joined { pthread_detach(handle) }
    }
}
