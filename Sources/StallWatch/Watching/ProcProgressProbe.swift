// ProcProgressProbe: zero-instrumentation progress evidence for a thread nobody instrumented, from /proc.
import CStallWatchCore
import Dispatch

#if canImport(Glibc)
    import Glibc
#endif

/// Turns what the kernel says about one thread into the ``LoopSnapshot`` a ``StallDetector`` expects, so a loop
/// that publishes nothing is judged by the same state machine.
///
/// Evidence, read from `/proc/<pid>/task/<tid>/` without stopping the thread:
/// - the thread sits in its own idle wait (learned by ``IdleWaitLearner`` from `syscall`: the call, what it
///   waits on, its stack pointer and program counter) — reported as the idle phase `beforeWaiting`. Any other
///   wait, even an `epoll_wait` or `poll` inside a callback or a futex, is busy; a wait for a lock whose owner is
///   recorded (``LockOwner``) is busy from the first look;
/// - progress is leaving a system call (or the idle wait), or, for a thread in user space, making system calls
///   (its voluntary switches or the `io` counters `syscr`/`syscw` moved). Counters that move while the thread
///   stays inside one call (writeback sleeps inside a long `fsync`, a timed re-check inside a monitor wait) are
///   not progress, except a completed read or write followed by an identical one (`syscr`/`syscw`), and a
///   voluntary switch in a futex wait only another thread can end (``ThreadWait/isWakeOnlyFutexWait``: no
///   timeout, not a mutex): the thread was woken and slept again, in a wait it came back to (a runtime that
///   reuses the word of the lock it parks on shows the very same call each time). Nor is going from one call on
///   a descriptor straight into another kind of call on the same descriptor with no other read or write in
///   between (a socket's last send, then its shutdown).
/// - **one piece of work on one file is one stall**, whatever /proc shows between its calls (``FileWork``): a
///   write copied into the page cache reads "running", and between a write, its `fsync` and the `close` the
///   thread is briefly in user space. Not progress, from one look to the next: writes that all went into file
///   pages (`write_bytes` grew with `wchar`, which no socket, pipe or tmpfs write does), reads that all came
///   from storage (`read_bytes` with `rchar`), sleeps where file calls sleep, with no more CPU in user space than
///   in the kernel; and leaving a call on a file (a regular file or a block device, seen through
///   `/proc/<pid>/fd`) for the kernel, user space or another call on it with nothing else done. So the tick of
///   `syscw` a write makes as it completes, just before its `fsync`, is not progress, nor the next blocked write
///   of a series. The work ends when the thread does anything
///   else (another descriptor, a read of a socket, user-space work, its idle wait) or its descriptor no longer
///   names the file after the close.
/// - every counter move a ptrace capture causes is discounted: 2 voluntary switches, and 1 `syscr` or `syscw`
///   for a thread blocked in `read()`/`write()` on a pipe or file (the kernel counts the restarted call).
///
/// With no progress for the threshold, the detector reports a stall. The phase start is the poll that saw
/// the last evidence, so a stall's duration is under-estimated by at most one poll interval: a sidecar errs
/// toward silence. A look that comes late (two intervals or more after the last) and finds the thread blocked
/// dates the phase from when the thread last ran instead (``blockedSinceLateLook``): a watcher kept from a CPU
/// does not cut the stall short by its own delay. A thread found blocked in a busy wait at the very first look (a watch started mid-incident)
/// has its phase start at the last time it ran (`se.exec_start` in `sched`, against the reader's own), a lower
/// bound of the stall that the detector marks as begun before watching. A thread seen leaving its idle wait is
/// dated from its CPU time and run-queue wait since the last idle look, and the time since it last ran
/// (``busySinceIdleLook``), so a long poll
/// interval while the loop idles does not delay detection. The wait found at the first look stays provisional
/// (``provenIdle(_:progress:now:)``): a loop that comes straight back to it after work proves it its idle wait,
/// which is then learned, and the stall being followed is withdrawn (``withdrawal``). A stopped or traced thread (state T/t) is treated as not running: nothing to blame.
///
/// Used by the sidecar for another process's threads and by ``ThreadWatchdog`` for threads of this process.
///
/// Blind spot: a loop stuck in a busy sequence of reads served from the page cache, or of writes into tmpfs or
/// over already-dirty pages, looks like progress here (nothing tells those calls from a socket's); the
/// heartbeat sees it.
package struct ProcProgressProbe: Sendable {
    package let processID: Int32
    package let threadID: Int32
    /// How the follower waits between looks.
    package var polling = PollingWait(intervalNanos: 50_000_000, wakeup: DispatchSemaphore(value: 0))
    private var sequence: UInt64 = 1
    private(set) var phaseStart: UInt64
    private var idle = false
    /// A look was taken: the next one is not the first.
    private var looked = false
    /// The last look that saw the thread in its idle wait: when, its schedule and its voluntary switches.
    private(set) var idleLook: (at: UInt64, schedule: ThreadSchedule, voluntarySwitches: UInt64)?
    private var counters: ThreadCounters?
    private var lastWait: ThreadWait?
    /// The lock wait the first look found the thread asleep in and took as its idle wait (no owner, cycle or holder
    /// recorded), and how long the thread had not run then (nil: unreadable): a watch that starts mid-incident
    /// says what it took as idle, for the user to judge.
    package private(set) var lockWaitTakenAsIdle: (call: String, blockedNanos: UInt64?)?
    /// The piece of file work the thread may be in the middle of since the last progress.
    private var work = FileWork()
    /// The thread is judged only once it has been seen in an idle wait of its own (one the learner took for the
    /// loop's): until then every look reads idle. For a thread that may be no loop at all — one whose name is an
    /// older thread's, as a thread gets its creator's name on Linux until it sets its own.
    package var judgedOnceSeenIdle = false
    /// The thread's own idle wait, learned as it idles.
    private(set) var idleWaits = IdleWaitLearner()
    /// When the last look was taken (CLOCK_MONOTONIC).
    private var lastLookAt: UInt64?
    /// The thread's schedule at `phaseStart`.
    package private(set) var phaseStartSchedule: ThreadSchedule?
    /// Counter moves our own ptrace captures may have caused since the last look.
    private var captureAllowance = CaptureAllowance()
    /// When a capture found the busy thread back in its idle wait (CLOCK_MONOTONIC), until a reading reports it
    /// as the stall's end.
    var idleSeenAt: UInt64?
    /// The wait the thread was found blocked in at the first look and judged busy from what it is alone, with
    /// nothing learned yet; `leftAt`: the look that saw the thread leave it for user space, and `leftCPU` its CPU
    /// time then. Until the thread is seen in another wait, it may still prove this wait its idle one
    /// (``provenIdle(_:progress:now:_:)``).
    private var provisional: (wait: ThreadWait, leftAt: UInt64?, leftCPU: UInt64?)?
    /// Why the stall being followed is withdrawn, set by the look that proved its wait the loop's idle wait.
    package private(set) var withdrawal: String?
    /// What the look that ended the stall being followed saw, when it was progress short of the idle wait.
    package internal(set) var endedBy: String?
    /// A stall is being followed (between ``stallBegan()`` and ``stallEnded()``).
    var followingStall = false
    /// The thread's CPU time when a capture found it in its idle wait: until it has run since, the call it is
    /// restarting after the stop is that wait.
    private var restartAfterCapture: UInt64?
    /// The captures of the thread finished at the last look (``CaptureLedger``), and those this probe was told of
    /// since (``noteCapture()``): the rest are other watchers'.
    private var ledgerFinished: UInt64?
    private var ownCapturesSinceLook: UInt64 = 0
    /// What the last look made of the thread, kept by a look that comes while another watcher's capture stops it.
    private var lastActivity: LoopActivity = []
    /// The read or write a capture stopped the thread in: until the thread is seen in a call again or its counters
    /// move, what reads "running" is that call's restart — runnable, waiting for a CPU, maybe preempted on its way
    /// back in (on a loaded machine, for many looks).
    private var restarting: ThreadWait?
    /// The moment rule's state (``judgedUnderMomentRule(_:from:to:moves:_:now:)``): the look held, the thread's
    /// schedule at the last busy look of a followed stall, and the sleeps held inside the stall so far.
    var heldMoment: HeldMoment?
    var busySchedule: ThreadSchedule?
    var momentsInside: [UInt64] = []

    package init(processID: Int32, threadID: Int32, now: UInt64) {
        self.processID = processID
        self.threadID = threadID
        phaseStart = now
        phaseStartSchedule = ProcDirectory(processID: processID, threadID: threadID).schedstat(now: now)
    }

    /// A probe whose follower waits with `polling`.
    package init(processID: Int32, threadID: Int32, now: UInt64, polling: PollingWait) {
        self.init(processID: processID, threadID: threadID, now: now)
        self.polling = polling
    }

    /// What the thread looks like now; nil when it is gone.
    ///
    /// The thread may be stopped by another watcher's capture in this process (``CaptureLedger``): a look while that
    /// capture is under way keeps the last verdict, the counter moves of the captures finished since the look before
    /// are discounted like the probe's own (``noteCapture()``), and no capture of the thread begins until this look
    /// is done — or, when a capture went ahead after waiting its bound for a look kept from a CPU, the look is
    /// discarded whole (its reads may straddle the stop) as if it had not been taken.
    package mutating func observe(now: UInt64) -> LoopSnapshot? {
        guard let entry = CaptureLedger.beginLook(processID: processID, threadID: threadID) else {
            return LoopSnapshot(sequence: sequence, activity: lastActivity, phaseStartNanos: phaseStart)
        }
        let before = self
        if let seen = ledgerFinished, entry.finished > seen, entry.finished - seen > ownCapturesSinceLook {
            noteOthersCaptures(entry.finished - seen - ownCapturesSinceLook)
        }
        ledgerFinished = entry.finished
        ownCapturesSinceLook = 0
        let sequenceBefore = sequence
        let snapshot = look(now: now)
        if followingStall, sequence != sequenceBefore, let note = momentsInsideNote {
            endedBy = endedBy.map { $0 + "; " + note } ?? note
        }
        if CaptureLedger.endLook(processID: processID, threadID: threadID, begun: entry) {
            self = before
            return LoopSnapshot(sequence: sequence, activity: lastActivity, phaseStartNanos: phaseStart)
        }
        lastActivity = snapshot?.activity ?? []
        return snapshot
    }

    /// `count` captures of the thread by other watchers, finished since the last look. In its idle wait at that look,
    /// the thread restarts that wait after the stop ("running" until it has a CPU again: no work of the loop's);
    /// otherwise each capture's counter moves are allowed for, as for the probe's own.
    private mutating func noteOthersCaptures(_ count: UInt64) {
        if idle {
            if restartAfterCapture == nil { restartAfterCapture = idleLook?.schedule.cpuNanos }
            return
        }
        for _ in 0..<count { allowForCapture() }
    }

    /// One look at the thread (``observe(now:)`` without the other watchers' captures).
    private mutating func look(now: UInt64) -> LoopSnapshot? {
        let directory = ProcDirectory(processID: processID, threadID: threadID)
        guard let status = directory.status() else { return nil }
        let state = status.state ?? "?"
        let stat = directory.stat()
        // A thread that is exiting has ended its work (a process exiting frees its memory in the kernel, which
        // takes a while for a large one): gone, not stuck.
        if state == "Z" || state == "X" || stat?.isExiting == true { return nil }
        let firstLook = !looked
        looked = true
        let previousLookAt = lastLookAt
        lastLookAt = now
        if state == "T" || state == "t" {
            counters = nil
            return LoopSnapshot(sequence: sequence, activity: [], phaseStartNanos: phaseStart)
        }
        var wait = directory.syscall()
        // Read here only while a capture's restart may be under way; an idle look reads no counters.
        var countersNow: ThreadCounters?
        if let call = restarting {
            let read = ThreadCounters.read(directory, status: status, stat: stat)
            countersNow = read
            let moves = counters.map { CounterMoves(from: $0, to: read, allowance: captureAllowance) }
            if !(wait?.inSyscall ?? false), let moves, !moves.inconsistent, moves.switches == 0, !moves.madeCalls {
                wait = call
            } else {
                restarting = nil
            }
        }
        withdrawal = nil
        endedBy = nil
        let lockOwned = waitsForOwnedLock(wait, directory)
        // Found in a wait for a lock that records no owner in its word, opposite the one other thread in such a wait
        // (half of a likely deadlock), or whose own structure records another thread as its holder (a runtime's
        // reentrant lock): never an idle wait (a watch may start mid-incident; only the first look can see it so).
        let inLockCycle = firstLook && !lockOwned && (waitsInLikelyLockCycle(wait) || waitsForRecordedHolder(wait))
        let inIdleWait =
            wait == nil
            ? inIdleWaitByWchan(directory)
            : idleWaits.isIdle(
                wait, cameBack: cameBack(to: wait, status: status), lockOwned: lockOwned || inLockCycle)
        if firstLook, inIdleWait, state == "S", let wait, wait.inSyscall, wait.kind == .lock, let number = wait.number {
            lockWaitTakenAsIdle = (SyscallTable.name(number), ThreadSchedule.notRun(directory)?.nanos)
        }
        if inIdleWait {
            provisional = nil
            restartAfterCapture = nil
            return idleLook(wait, now: now, directory, status)
        }
        // Stopped in its idle wait by a capture and not run since: what reads "running" is the restart of that wait,
        // queued for a CPU, not work of the loop's.
        if idle, let cpuAtCapture = restartAfterCapture, !(wait?.inSyscall ?? false),
            let cpu = directory.schedstat(now: now)?.cpuNanos, cpu <= cpuAtCapture
        {
            return LoopSnapshot(sequence: sequence, activity: .beforeWaiting, phaseStartNanos: phaseStart)
        }
        restartAfterCapture = nil
        let current = countersNow ?? ThreadCounters.read(directory, status: status, stat: stat)
        let allowance = captureAllowance
        captureAllowance = CaptureAllowance()
        var progress =
            idle || counters == nil || !continues(from: lastWait, to: wait, counters: counters!, current, allowance)
        if !idle, provisional == nil {
            let moves = counters.map { CounterMoves(from: $0, to: current, allowance: allowance) }
            progress = judgedUnderMomentRule(progress, from: lastWait, to: wait, moves: moves, directory, now: now)
        }
        if !firstLook, provisional != nil {
            switch provenIdle(wait, progress: progress, now: now, directory) {
            case .idle:
                return idleLook(wait, now: now, directory, status)
            case .held:
                counters = current
                lastWait = wait
                return LoopSnapshot(sequence: sequence, activity: .afterWaiting, phaseStartNanos: phaseStart)
            case .busy(let leftAt):
                if let leftAt {
                    progress = true
                    idleSeenAt = leftAt
                }
            }
        }
        if progress {
            // Left the idle wait, first look, left a system call, or made system calls: progress.
            sequence += 1
            phaseStart = now
            // Found blocked in a busy wait at the very first look: it has been in it at least since it last ran
            // (the kernel's own figure), which is the latest its stuck phase can have begun.
            let blocked = wait?.inSyscall == true && (state == "S" || state == "D")
            let schedule = directory.schedstat(now: now)
            // The figures are the kernel's at their reads, after `now`: dated from the time of each read (taken right
            // after it), so the start errs late by no more than the read itself, never early.
            let scheduleReadAt = sw_monotonic_ns()
            if firstLook, blocked, let wait, !lockOwned { provisional = (wait, nil, nil) }
            if firstLook, blocked, let notRun = ThreadSchedule.notRun(directory) {
                if notRun.nanos < notRun.at { phaseStart = min(now, notRun.at - notRun.nanos) }
            } else if idle,
                let since = busySinceIdleLook(
                    now: now, schedule, readAt: scheduleReadAt, status, blocked: blocked, directory)
            {
                phaseStart = since
            } else if blocked, let previousLookAt, let since = blockedSinceLateLook(previousLookAt, now, directory) {
                phaseStart = since
            }
            phaseStartSchedule = schedule
            // Whether it then ran or waited for a CPU without sleeping, a rule of the stall's run-queue figure.
            phaseStartSchedule?.runnable = state == "R"
            phaseStartSchedule?.voluntarySwitches = status.voluntarySwitches
            idle = false
            // A new piece of work, maybe on the file of the call the thread is in now; the bytes of a call still
            // under way carry over to the look where it completes.
            var next = FileWork(carryingCreditOf: work)
            if let wait, FileWork.isFileCall(wait), let descriptor = wait.descriptor {
                next.descriptor = descriptor
                next.file = FileIdentity.of(pid: processID, descriptor: descriptor)
            } else if let wait, FileWork.isOpenCall(wait) {
                // Opening a file (truncating it, waiting for its writeback) and then working on it is one piece of
                // work: the descriptor its next calls use must name the file the path named.
                next.openPath = FileIdentity.openedPath(by: wait, pid: processID)
                next.file = next.openPath.flatMap(FileIdentity.at)
                next.beganWithOpen = next.file != nil
            }
            work = next
        }
        counters = current
        // Right after a capture a thread blocked in a call may be seen on its way back into it (the kernel
        // restarts the call from user space): keep the call it was in until a look without a capture.
        let capturedOutOfCall =
            allowance.switches > 0 && !(wait?.inSyscall ?? false) && (lastWait?.inSyscall ?? false)
        if !capturedOutOfCall { lastWait = wait }
        return LoopSnapshot(sequence: sequence, activity: .afterWaiting, phaseStartNanos: phaseStart)
    }

    /// A look that found the thread in its idle wait: a turn of the loop, dated for ``busySinceIdleLook``.
    private mutating func idleLook(
        _ wait: ThreadWait?, now: UInt64, _ directory: ProcDirectory, _ status: ProcFields
    ) -> LoopSnapshot {
        if !idle, followingStall, idleSeenAt == nil, let entered = enteredWaitAt(now: now, directory) {
            idleSeenAt = entered
        }
        enterIdleWait(wait)
        if let schedule = directory.schedstat(now: now), let switches = status.voluntarySwitches {
            idleLook = (now, schedule, switches)
        }
        return LoopSnapshot(sequence: sequence, activity: .beforeWaiting, phaseStartNanos: phaseStart)
    }

    /// What became of the ``provisional`` wait at this look.
    private enum Provisional {
        /// The thread came back to it after work: it is the loop's idle wait, now learned, and a stall being
        /// followed is withdrawn.
        case idle
        /// The thread left it for user space at this look: one more look tells whether it comes back.
        case held
        /// Still in it, or gone on to other work: the judgement stands. `leftAt`: when a held look saw it leave.
        case busy(leftAt: UInt64?)
    }

    /// Whether the loop proved its ``provisional`` wait to be its idle wait: back in that same wait (same place,
    /// same call on the same thing) after work — the counters moved in between, or a look since the thread left
    /// it for user space saw it there. A loop stuck in a busy wait goes on, once the wait ends, to other work and
    /// to its own idle wait elsewhere; a loop whose idle wait this is comes straight back to it. "Straight back"
    /// is the thread's own CPU time, not the clock: it stays in user space, in no other call, and runs less than
    /// one poll interval of CPU before it is back — on a machine whose CPUs other work keeps busy, the few
    /// milliseconds of a turn may take many looks of waiting for a CPU. The first other wait seen, or more CPU
    /// than that, settles it as busy; an unended wait stays provisional.
    private mutating func provenIdle(
        _ wait: ThreadWait?, progress: Bool, now: UInt64, _ directory: ProcDirectory
    ) -> Provisional {
        guard let held = provisional?.wait, let entry = provisional else { return .busy(leftAt: nil) }
        let leftAt = entry.leftAt
        let same = wait.map { $0.inSyscall && IdleWaitLearner.matches($0, learned: held) } ?? false
        if same, progress || leftAt != nil {
            provisional = nil
            idleWaits.learnIdle(held)
            let name = held.number.map(SyscallTable.name) ?? "?"
            withdrawal =
                "withdrawn: watching started while the loop was in \(name), judged busy from what the wait is; the "
                + "loop then came back to that same wait after doing work, so it is the loop's idle wait, not a stall"
            if let leftAt { idleSeenAt = leftAt }
            return .idle
        }
        let inUserSpace = !(wait?.inSyscall ?? false)
        if leftAt == nil, progress, inUserSpace {
            provisional = (held, now, directory.schedstat(now: now)?.cpuNanos)
            return .held
        }
        if leftAt != nil, inUserSpace, let leftCPU = entry.leftCPU,
            let cpu = directory.schedstat(now: now)?.cpuNanos, cpu &- leftCPU < polling.intervalNanos
        {
            return .held
        }
        if leftAt != nil || progress { provisional = nil }
        return .busy(leftAt: leftAt)
    }

    /// Whether the thread made no progress from the last look to this one: the rules of ``isProgress(from:to:moves:afterCapture:work:)``,
    /// with the piece of file work it may be in (what this look sees of it is learned first).
    private mutating func continues(
        from before: ThreadWait?, to after: ThreadWait?, counters old: ThreadCounters, _ new: ThreadCounters,
        _ allowance: CaptureAllowance
    ) -> Bool {
        var work = self.work
        var anotherFile = false
        // Out of an open whose file did not exist yet when a look saw the call: the work begins with it now.
        if let before, !(after.map { $0.isSameCall(as: before) } ?? false) {
            work.resolveOpen(before, pid: processID)
        }
        // Into an open: its path, while the call runs and its memory still holds it.
        work.noteOpen(after, pid: processID)
        if let after, FileWork.isFileCall(after), let descriptor = after.descriptor {
            // A call on another file, or on the same descriptor naming another file now, is another piece of work
            // (a close is let be: its descriptor is gone from the table while the call runs).
            let file =
                after.number == 3 && descriptor == work.descriptor
                ? work.file : FileIdentity.of(pid: processID, descriptor: descriptor)
            if let known = work.descriptor {
                anotherFile = known != descriptor || (file != nil && work.file != nil && file != work.file)
            } else if let opened = work.file {
                // The work began with the call that opened its file: its descriptor is the first one naming it.
                anotherFile = file != opened
                if !anotherFile { work.descriptor = descriptor }
            } else {
                work.descriptor = descriptor
                work.file = file
            }
        }
        let moves = CounterMoves(from: old, to: new, allowance: allowance)
        defer {
            work.account(moves)
            self.work = work
        }
        let continued =
            !anotherFile
            && !Self.isProgress(from: before, to: after, moves: moves, afterCapture: allowance.switches > 0, work: work)
        if !continued, followingStall {
            endedBy = Self.progressSeen(from: before, to: after, moves: moves, work: work, anotherFile: anotherFile)
        }
        return continued
    }

    /// Whether `wait` is for a lock whose recorded owner is another live thread of the process (``LockOwner``):
    /// busy whatever the learner saw before, so a loop found already waiting for a held lock is judged stuck.
    private func waitsForOwnedLock(_ wait: ThreadWait?, _ directory: ProcDirectory) -> Bool {
        guard let wait, wait.inSyscall, wait.number == 202 || wait.number == 219 else { return false }
        let threads = Set(ProcDirectory(processID: processID).threadIDs())
        guard let found = LockOwner.owner(pid: processID, wait: wait, threads: threads) else { return false }
        return found.threadID != threadID
    }

    /// Whether `wait` is for a lock that records no owner while the one other thread in such a wait waits for
    /// another (``LockOwner/likelyCyclePartner(pid:threadID:wait:threads:)``): half of a likely deadlock.
    private func waitsInLikelyLockCycle(_ wait: ThreadWait?) -> Bool {
        guard let wait, wait.inSyscall, wait.number == 202 else { return false }
        let threads = Set(ProcDirectory(processID: processID).threadIDs())
        return LockOwner.likelyCyclePartner(pid: processID, threadID: threadID, wait: wait, threads: threads) != nil
    }

    /// Whether `wait` is for a lock whose word records no owner but whose own structure records another live thread
    /// of the process as its holder (``RecordedHolder``): a lock held by that thread, not an idle wait.
    private func waitsForRecordedHolder(_ wait: ThreadWait?) -> Bool {
        guard let wait, wait.inSyscall, wait.number == 202 else { return false }
        let threads = Set(ProcDirectory(processID: processID).threadIDs())
        return RecordedHolder.find(pid: processID, waiter: threadID, wait: wait, threads: threads) != nil
    }

    /// Whether the thread, seen in the same wake-only futex wait as at the last look, slept again in between
    /// (more voluntary switches than captures explain): it was woken and came back to the wait.
    private func cameBack(to wait: ThreadWait?, status: ProcFields) -> Bool {
        guard let wait, wait.isWakeOnlyFutexWait, let lastWait, lastWait.isSameCall(as: wait),
            let before = counters?.voluntarySwitches, let now = status.voluntarySwitches
        else { return false }
        return now > before && now - before > captureAllowance.switches
    }

    /// Call after each ptrace capture of the thread: its stop and its going back to sleep after the detach are
    /// two voluntary context switches, and a read or write it was blocked in is counted again when restarted.
    package mutating func noteCapture() {
        ownCapturesSinceLook += 1
        allowForCapture()
    }

    /// The counter moves one capture of the thread causes, allowed for at the next look.
    private mutating func allowForCapture() {
        captureAllowance.switches += 2
        // Only a read or write the thread was blocked in is counted again; a busy thread's own reads are progress.
        guard let lastWait, let number = lastWait.number, SyscallTable.kind(number) == .io else { return }
        // Only a read or write is followed through its restart: it cannot end without a counter moving (its return
        // counts a call), where a timed wait's timeout moves none.
        if lastWait.inSyscall, !lastWait.isRestart { restarting = lastWait }
        captureAllowance.readCalls += 1
        captureAllowance.writeCalls += 1
    }

    /// Call after each capture with the wait the thread was in just before it and when the capture was taken
    /// (CLOCK_MONOTONIC). Captured in its own idle wait, the thread was back in it: the stall is over although no
    /// look saw it — it ended before `capturedAt`, which the next reading gives as the stall's end (so that sample,
    /// of the idle loop, is not counted as the stall's) — and the restart of the wait the capture causes ("running"
    /// until the thread has a CPU again) is no work of the loop's.
    package mutating func noteCapture(waitBefore wait: ThreadWait?, capturedAt: UInt64?) {
        guard let wait, isLearnedIdleWait(wait) else {
            noteCapture()
            return
        }
        ownCapturesSinceLook += 1
        if !idle, let capturedAt { idleSeenAt = capturedAt }
        enterIdleWait(wait)
        restartAfterCapture = ProcDirectory(processID: processID, threadID: threadID).schedstat(now: 0)?.cpuNanos
    }

    /// Whether `wait` is one of the thread's learned idle waits.
    private func isLearnedIdleWait(_ wait: ThreadWait) -> Bool {
        idleWaits.learned.contains { IdleWaitLearner.matches(wait, learned: $0) }
    }

    /// False once the thread is back in its learned idle wait, or gone: one read of its `syscall` (or, without
    /// the rights for that, its `wchan`), without changing what the probe has learned. Asked between the threads
    /// of a stall's all-thread snapshot, which then stops sampling a loop that has gone back to idling.
    package func isStillStuck(after sequence: UInt64) -> Bool {
        let directory = ProcDirectory(processID: processID, threadID: threadID)
        guard let state = directory.status()?.state, state != "Z", state != "X" else { return false }
        guard let wait = directory.syscall() else { return !inIdleWaitByWchan(directory) }
        return !isLearnedIdleWait(wait)
    }

    /// The thread is in its idle wait: a turn of the loop if it was busy before, and the counters start over.
    private mutating func enterIdleWait(_ wait: ThreadWait?) {
        if !idle {
            sequence += 1
            idle = true
        }
        counters = nil
        lastWait = wait
        captureAllowance = CaptureAllowance()
        work = FileWork()
        heldMoment = nil
        busySchedule = nil
    }

    /// Without `syscall` (it needs ptrace-attach rights; wchan only read rights): an event wait by its kernel
    /// function, which cannot tell a nested wait from the loop's own.
    private func inIdleWaitByWchan(_ directory: ProcDirectory) -> Bool {
        guard let wchan = directory.wchan() else { return false }
        return ["do_epoll_wait", "ep_poll", "do_sys_poll", "do_select", "core_sys_select", "io_cqring_wait"]
            .contains(where: { wchan.hasPrefix($0) })
    }
}

extension ProcProgressProbe: ProgressSource {
    package var sampledThread: SampledThread? { SampledThread(threadID: threadID, stackLow: 0, stackHigh: 0) }

    package mutating func read(now: UInt64) -> ProgressReading {
        guard let snapshot = observe(now: now) else { return .ended(reason: "the watched thread \(threadID) exited") }
        defer { idleSeenAt = nil }
        if judgedOnceSeenIdle, idleWaits.learned.isEmpty {
            return .progress(
                LoopSnapshot(
                    sequence: snapshot.sequence, activity: .beforeWaiting, phaseStartNanos: snapshot.phaseStartNanos),
                stallEndNanos: 0)
        }
        return .progress(snapshot, stallEndNanos: idleSeenAt ?? 0)
    }

    package func wait(for wait: StallDetector.Wait, nextSampleAt: UInt64?) -> Bool {
        polling.wait(for: wait, nextSampleAt: nextSampleAt)
    }

    package mutating func stallBegan() {
        followingStall = true
        momentsInside = []
    }

    package mutating func stallEnded() {
        followingStall = false
        heldMoment = nil
        busySchedule = nil
        momentsInside = []
    }
}
