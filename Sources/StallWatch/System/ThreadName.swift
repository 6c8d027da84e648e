// Naming threads, so reports (thread snapshots, blocking-thread evidence) say who is who.
import CStallWatchCore

/// Names the calling thread as the kernel shows it (`/proc/<pid>/task/<tid>/comm`, `ps -L`, reports).
///
/// Foundation's `Thread.name` is not always passed to the kernel on Linux; call this at the start of a thread's
/// body. The kernel keeps the first 15 bytes.
package func setCurrentThreadName(_ name: String) {
    sw_set_thread_name(name)
}
