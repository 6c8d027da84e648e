// SemaphoreHolder: the process that last operated the SysV semaphore a thread waits on — its likely holder.
import CStallWatchCore

#if canImport(Glibc)
    import Glibc
#endif

/// Finds the likely holder of a SysV semaphore a thread waits on in `semop`/`semtimedop`: the kernel keeps, per
/// semaphore, the last process to operate on it (`semctl GETPID`). When that is another process than the waiter,
/// it most likely took the semaphore the waiter now waits for — likely, not certain (it may have released it since
/// and someone else taken it without an operation of its own being recorded last).
enum SemaphoreHolder {
    /// x86_64 `semop` and `semtimedop`.
    static let calls: Set<Int> = [65, 220]

    /// The semaphore `wait` waits on in process `pid` and its last operator; nil for any other call. A finding
    /// with no process says why none was named (another IPC namespace, access refused, the waiter itself).
    static func holder(pid: Int32, wait: ThreadWait) -> OtherProcessWait? {
        guard let number = wait.number, calls.contains(number), wait.arguments.count == 6 else { return nil }
        let semid = Int32(truncatingIfNeeded: wait.arguments[0])
        let count = Int(min(wait.arguments[2], 16))
        // struct sembuf { unsigned short sem_num; short sem_op; short sem_flg; }: the waited-for semaphore is one
        // whose operation cannot proceed: a decrement (sem_op < 0) or a wait for zero (sem_op == 0).
        guard count > 0, let bytes = WaitDescriptors.memory(pid, wait.arguments[1], count * 6) else { return nil }
        func half(_ offset: Int) -> UInt16 { UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8 }
        let operations = (0..<count).map { i -> (number: UInt16, op: Int16) in
            (half(i * 6), Int16(bitPattern: half(i * 6 + 2)))
        }
        let semnum = (operations.first { $0.op <= 0 } ?? operations[0]).number
        let what = "semaphore \(semnum) of SysV set \(semid)"
        var found = OtherProcessWait(object: .semaphore, evidence: "")
        let mine = ProcDirectory(processID: getpid()).namespace("ipc")
        guard let mine, mine == ProcDirectory(processID: pid).namespace("ipc") else {
            found.evidence =
                "waiting on \(what), in another IPC namespace than the watcher's: its last operator "
                + "could not be read"
            return found
        }
        var waiters = -1
        let last = sw_sem_last_pid(semid, Int32(semnum), &waiters)
        guard last > 0 else {
            found.evidence =
                "waiting on \(what); its last operator could not be read"
                + (last < 0 ? " (semctl: \(String(cString: strerror(Int32(-last)))))" : " (none recorded)")
            return found
        }
        guard last != pid else {
            found.evidence = "waiting on \(what), last operated by this process itself: no other process to name"
            return found
        }
        found.describe(pid: Int32(last), fd: nil)
        let queue = waiters > 0 ? "; \(waiters) process\(waiters == 1 ? "" : "es") wait for it" : ""
        found.reason = "the last process to operate on the \(what) the loop waits on (semctl GETPID): likely its holder"
        found.evidence =
            "waiting on \(what), last operated by \(found.processPhrase) (semctl GETPID): likely the holder\(queue)"
        return found
    }
}
