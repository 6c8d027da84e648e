// ProcProgressProbe's dating: when a stuck phase began and ended, from the kernel's figures for a thread that
// turned or blocked between two looks.
import CStallWatchCore

extension ProcProgressProbe {
    /// When a thread found back in its idle wait, at the look that ends a followed stall, went into it: it has
    /// been blocked since it last ran (the kernel's figure), so the stall ended then — or later, if it turned
    /// unseen since and blocked again; never earlier. A look that comes late (the watcher busy sampling, or
    /// waiting for a CPU) then neither lengthens the stall nor counts the samples it took of the idle loop. Nil
    /// when the figure is unreadable or the thread ran after `now`.
    func enteredWaitAt(now: UInt64, _ directory: ProcDirectory) -> UInt64? {
        guard let state = directory.status()?.state, state == "S" || state == "D",
            let notRun = ThreadSchedule.notRun(directory), notRun.nanos <= notRun.at
        else { return nil }
        let entered = notRun.at - notRun.nanos
        return entered > phaseStart && entered <= now ? entered : nil
    }

    /// When a thread seen in its idle wait at the last idle look, busy now, left that wait, from the kernel's
    /// own figures: it woke once and has been running or waiting for a CPU since (no voluntary switch), or it
    /// then blocked once, in the wait it is in now, and has not run since. Its CPU time and run-queue wait since
    /// the idle look, and the time since it last ran, then add up to how long it has been busy; a loop that
    /// turned in between (more switches) gives nil, and the look that saw it busy stays the phase start. Never
    /// earlier than the idle look: a poll interval while the loop idles delays neither detection nor the
    /// duration, and the figure errs late (toward silence), never early.
    func busySinceIdleLook(
        now: UInt64, _ schedule: ThreadSchedule?, readAt scheduleReadAt: UInt64, _ status: ProcFields, blocked: Bool,
        _ directory: ProcDirectory
    ) -> UInt64? {
        guard let idleLook, let schedule, let switches = status.voluntarySwitches,
            switches >= idleLook.voluntarySwitches, schedule.cpuNanos >= idleLook.schedule.cpuNanos,
            schedule.runQueueWaitNanos >= idleLook.schedule.runQueueWaitNanos
        else { return nil }
        var busy =
            (schedule.cpuNanos - idleLook.schedule.cpuNanos)
            + (schedule.runQueueWaitNanos - idleLook.schedule.runQueueWaitNanos)
        // The figures run up to their reads, after `now`: dated from the time of the last one, so the start errs
        // late by no more than that read.
        var readAt = scheduleReadAt
        switch (switches - idleLook.voluntarySwitches, blocked) {
        case (0, false):
            // Runnable since it woke: its figures stop at its last switch or tick, and the time since — waiting
            // for a CPU now (a loaded machine: tens of ms), or running — is the time since it last ran. Only once
            // it has run since the idle look (woken and not yet run, it last ran before it slept); read on its CPU,
            // which a real-time thread would not give up to the reader: not for those.
            if schedule.cpuNanos > idleLook.schedule.cpuNanos, directory.stat()?.isRealTime == false,
                let notRun = ThreadSchedule.notRun(directory)
            {
                busy += notRun.nanos
                readAt = notRun.at
                // The figures and that reading may be milliseconds apart on a busy machine (the reader kept from
                // the thread's CPU), and a run of the thread between them would be in neither: the figures read
                // again between two readings that agree on when it last started running are its figures of that
                // moment, and replace the first ones.
                if let again = directory.schedstat(now: now), let confirm = ThreadSchedule.notRun(directory),
                    let pair = Self.agreeing(notRun, confirm), again.cpuNanos >= idleLook.schedule.cpuNanos,
                    again.runQueueWaitNanos >= idleLook.schedule.runQueueWaitNanos
                {
                    busy =
                        (again.cpuNanos - idleLook.schedule.cpuNanos)
                        + (again.runQueueWaitNanos - idleLook.schedule.runQueueWaitNanos) + pair.nanos
                    readAt = pair.at
                }
            }
        case (1, true):
            // Blocked since it last ran: its CPU time and run-queue wait no longer change.
            guard let notRun = ThreadSchedule.notRun(directory) else { return nil }
            busy += notRun.nanos
            readAt = notRun.at
        default: return nil
        }
        readAt = max(now, readAt)
        guard busy > 0, busy < readAt else { return nil }
        return min(now, max(idleLook.at, readAt - busy))
    }

    /// `later` when it dates the thread's last start as `earlier` does (within 100 µs: the two are translated from
    /// the reader's own clock readings): the thread has not started running in between.
    static func agreeing(
        _ earlier: (nanos: UInt64, at: UInt64), _ later: (nanos: UInt64, at: UInt64)
    ) -> (nanos: UInt64, at: UInt64)? {
        let first = earlier.at &- earlier.nanos, second = later.at &- later.nanos
        let gap = first > second ? first - second : second - first
        return gap <= 100_000 ? later : nil
    }

    /// When a thread that made progress since a late look (the watcher kept from a CPU, or busy sampling) and is
    /// blocked now stopped running: its progress was its own running, so its stuck phase began when it last ran
    /// (the kernel's figure), not when this look came — never before the last look, never after this one. Looks on
    /// time leave the phase start at the look (late by at most one interval) and read nothing more.
    func blockedSinceLateLook(_ previousLookAt: UInt64, _ now: UInt64, _ directory: ProcDirectory) -> UInt64? {
        guard now > previousLookAt, now - previousLookAt > 2 * polling.intervalNanos,
            let notRun = ThreadSchedule.notRun(directory), notRun.nanos <= notRun.at
        else { return nil }
        return min(now, max(previousLookAt, notRun.at - notRun.nanos))
    }
}
