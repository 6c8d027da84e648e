// IdleWaitLearner: learns a loop thread's own idle wait from /proc looks, so a nested wait reads as busy.

/// Tells a thread's own idle wait from every other wait, for a loop nobody instrumented.
///
/// A loop idles in one way: the same system call, from the same libc wrapper, waiting on the same thing (the same
/// epoll descriptor, poll array or select sets — ``ThreadWait/target``); for a futex, from the same stack pointer
/// with the same operation (the word may be fresh each time). A
/// wait inside a callback — an HTTP client's `poll`, a subprocess runner's own epoll loop, a lock taken with
/// `ppoll` — differs in at least one of these, even when it comes from the same native call site.
///
/// Learning, from successive looks:
/// - while nothing is learned, the first event wait seen (epoll/poll/select/io_uring/signal wait on
///   descriptors) is the idle wait;
/// - the first futex wait the thread is seen in is the idle wait (a loop that parks on a condition variable, a
///   runtime whose main thread only waits) when it comes within the first ``startLooks`` looks and no other
///   wait (futex, event wait, sleep) came before it: watching starts on a running service, not in a stall, and
///   the thread may be finishing a piece of work at the first look;
/// - a futex wait the thread comes back to `futexEpisodes` times, with progress in between, is the idle wait
///   when no event wait was learned (a thread that idles in an event wait does not also idle on a futex). It
///   came back when a look in between saw it elsewhere or on another word, or when it slept again in a wait only
///   another thread can end (`cameBack`): a runtime may park on a reused word, the very same call each time.
///
/// A file lock waited for (`flock`, `fcntl` `F_SETLKW`) and a lock wait whose lock records its owner
/// (``LockOwner``: a glibc mutex's `__owner`, a priority-inheritance futex word) are never an idle wait, whenever
/// seen: no loop idles by queueing for a lock another thread
/// holds, so a watch that starts while the loop waits for one (held forever, or a deadlock) judges it busy at
/// once, with no history. So is a wait, seen at the first look, for a lock that records no owner while the one
/// other thread in such a wait waits for another (two `threading.Lock`s taken in opposite orders): a likely
/// deadlock — and if the loop then comes straight back to that wait after work, the probe learns it after all.
///
/// A wait the thread was found blocked in at the first look and judged busy (a blocking read, a sleep) is learned
/// when the thread comes straight back to it after work (``learnIdle(_:)``, decided by ``ProcProgressProbe``): a
/// loop whose event source is a pipe it reads, or that sleeps between polls, idles there.
///
/// A wait that matches a learned one is idle; every other wait is busy, with the cause its call implies. Blind
/// spot: a thread that idles on a futex hides a lock wait at the very same place and operation. The
/// rules are the same for every program: nothing here knows a runtime. Shared by the sidecar's /proc probe and
/// in-process watching of threads by name.
struct IdleWaitLearner: Sendable {
    /// The learned idle waits (at most ``capacity``).
    private(set) var learned: [ThreadWait] = []
    /// How many separate times a futex wait must recur before it is learned.
    var futexEpisodes = 5
    let capacity = 4
    /// The looks within which the first futex wait seen is taken as the idle wait (a threshold's worth at the
    /// sidecar's default poll interval of a fifth of it).
    var startLooks = 5
    private var looks = 0
    /// A futex wait, event wait or sleep was seen at some look.
    private var sawWait = false
    private var previous: ThreadWait?
    private var futexCounts: [ThreadWait: Int] = [:]

    init() {}

    /// Judges one look (nil: the file could not be read) and learns from it. True when the thread sits in its
    /// own idle wait.
    ///
    /// - Parameters:
    ///   - cameBack: The thread is known to have left the previous look's wait and come back to it (it slept
    ///     again in a wait only another thread ends).
    ///   - lockOwned: The wait is for a lock that records its owner, another live thread (``LockOwner``), or
    ///     half of a likely deadlock over locks that record none (``LockOwner/likelyCyclePartner(pid:threadID:wait:threads:)``).
    mutating func isIdle(_ wait: ThreadWait?, cameBack: Bool = false, lockOwned: Bool = false) -> Bool {
        looks += 1
        let waitedBefore = sawWait
        defer { previous = wait }
        guard let wait, wait.inSyscall else { return false }
        if let kind = wait.kind, kind == .lock || kind == .idleWait || kind == .sleep { sawWait = true }
        // A wait for a file lock is a queue for what another holder has (`/proc/locks` names it), never a loop's
        // way of idling, whenever it is seen; nor is one for a lock whose owner is recorded.
        if lockOwned || wait.number == 72 || wait.number == 73 { return false }
        if learned.contains(where: { Self.matches(wait, learned: $0) }) { return true }
        let kind = wait.kind
        if kind == .idleWait, !learned.contains(where: { $0.kind == .idleWait }) {
            learn(wait)
            return true
        }
        if kind == .lock, !waitedBefore, looks <= startLooks {
            learn(wait)
            return true
        }
        if kind == .lock, !wait.isRestart, !learned.contains(where: { $0.kind == .idleWait }) {
            let key = Self.key(wait)
            // A new episode: the previous look was not in a wait at this place, or waited on another word (a
            // condition that parks on a fresh word each time was woken and parked again between the looks).
            let newEpisode =
                cameBack
                || (previous.map { !Self.matches($0, learned: key) || $0.arguments.first != wait.arguments.first }
                    ?? true)
            if newEpisode { futexCounts[key, default: 0] += 1 }
            if futexCounts[key, default: 0] >= futexEpisodes {
                futexCounts[key] = nil
                learn(key)
                return true
            }
        }
        return false
    }

    /// Whether `wait` is the learned idle wait `learned`: same place, same call waiting on the same thing, or
    /// the `restart_syscall` that continues it after a stop.
    static func matches(_ wait: ThreadWait, learned: ThreadWait) -> Bool {
        guard wait.inSyscall, ThreadWait.sameWrapper(wait.programCounter, learned.programCounter) else { return false }
        if wait.isRestart || learned.number == 202 {
            // A futex word says little (it may be fresh each time): the place must match too.
            guard wait.stackPointer == learned.stackPointer else { return false }
            if wait.isRestart { return true }
        }
        // An event wait on the loop's own descriptors is its idle wait from whatever depth: an interpreter's
        // call path to it changes as it warms up (CPython's specialising interpreter), its epoll fd does not.
        return wait.number == learned.number && identity(wait) == identity(learned)
    }

    /// What must match besides the place: what an event wait waits on; for a futex only the operation, since a
    /// runtime's condition wait parks on a fresh word each time (CPython's `Condition` allocates a lock per wait).
    static func identity(_ wait: ThreadWait) -> [UInt64] {
        guard wait.number == 202, wait.arguments.count == 6 else { return wait.target }
        return [wait.arguments[1] & 0x7f]
    }

    /// A description of the learned idle waits, for notes.
    var summary: String {
        learned.map { wait in
            let name = wait.number.map(SyscallTable.name) ?? "?"
            let target = wait.target.map { "0x" + String($0, radix: 16) }.joined(separator: ",")
            return "\(name)(\(target)) at pc 0x\(String(wait.programCounter, radix: 16)) "
                + "sp 0x\(String(wait.stackPointer, radix: 16))"
        }.joined(separator: "; ")
    }

    /// Learns `wait` as an idle wait, proven so by the loop coming back to it after work (a wait a watch that
    /// started during it judged busy from what it is).
    mutating func learnIdle(_ wait: ThreadWait) {
        guard !learned.contains(where: { Self.matches(wait, learned: $0) }) else { return }
        learn(wait)
    }

    private mutating func learn(_ wait: ThreadWait) {
        guard learned.count < capacity else { return }
        learned.append(Self.key(wait))
    }

    /// The part of a wait that identifies it (not the timeout, which changes every iteration).
    private static func key(_ wait: ThreadWait) -> ThreadWait {
        var args = Array(repeating: UInt64(0), count: wait.arguments.count)
        if wait.number == 202, args.count == 6 {
            args[1] = wait.arguments[1]
        } else {
            for (index, value) in wait.target.enumerated() where index < args.count { args[index] = value }
        }
        return ThreadWait(
            number: wait.number, arguments: args, stackPointer: wait.stackPointer,
            programCounter: wait.programCounter)
    }
}
