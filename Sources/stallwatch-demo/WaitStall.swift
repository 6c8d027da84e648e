// The `wait` stall kind: one poll(2) on a pipe nobody writes, which a sampler that signals the loop would cut short.
import CStallWatchCore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension Stalls {
    /// Blocks the loop once in `poll(2)` on a pipe nobody writes, with a timeout of `durationMs`, without
    /// retrying, then prints `{"event":"waited","call":"poll","ms":<elapsed>,"errno":<errno or 0>,
    /// "runQueueMs":<ms>}` on stdout (before the stall ends, so the line precedes the stall's `ended` line). A
    /// capture that interrupted the loop would show as `"errno":4` (EINTR) and a short `ms`. `runQueueMs` is the
    /// time the thread waited for a CPU meanwhile (its schedstat; -1 when unreadable): once its timeout expires, a
    /// loaded machine holds the thread up that long before the call returns.
    @inline(never)
    static func stallInWait(durationMs: Int) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { fail("pipe: \(String(cString: strerror(errno)))", code: 1) }
        defer {
            close(fds[0])
            close(fds[1])
        }
        var entry = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
        let tid = sw_gettid()
        let waitBefore = runQueueWaitNanos(thread: tid)
        let start = DispatchTime.now().uptimeNanoseconds
        let result = poll(&entry, 1, Int32(clamping: durationMs))
        let failure = result < 0 ? errno : 0
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
        var runQueueMs = -1
        if let before = waitBefore, let after = runQueueWaitNanos(thread: tid), after >= before {
            runQueueMs = Int((Double(after - before) / 1e6).rounded(.up))
        }
        let line =
            #"{"event":"waited","call":"poll","ms":\#(Int(elapsed.rounded())),"errno":\#(failure),"#
            + #""runQueueMs":\#(runQueueMs)}"# + "\n"
        FileHandle.standardOutput.write(Data(line.utf8))
    }

}
