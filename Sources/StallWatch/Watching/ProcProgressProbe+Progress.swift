// ProcProgressProbe's progress rules: when what a busy thread did between two looks is progress, and what the look
// that saw progress saw.

extension ProcProgressProbe {
    /// Whether the thread made progress between two looks, seen in `before` and then `after` (nil: unreadable),
    /// its counters having moved by `moves` beyond what captures explain; `afterCapture`: a capture came in
    /// between; `work`: the piece of file work the thread may be in (``FileWork``).
    static func isProgress(
        from before: ThreadWait?, to after: ThreadWait?, moves: CounterMoves, afterCapture: Bool = false,
        work: FileWork = FileWork()
    ) -> Bool {
        if moves.inconsistent { return true }
        let fileWorkOnly = work.explains(moves)
        if let before, before.inSyscall {
            // Still inside the same call: only a completed read/write and an identical new one is progress (unless
            // both were the file work's own), or a wait only another thread can end that the thread slept in
            // again (it was woken and came back).
            if let after, before.isSameCall(as: after) {
                if moves.madeCalls { return !fileWorkOnly }
                return after.isWakeOnlyFutexWait && moves.switches > 0
            }
            // Seen outside the call just after a capture: the restart of the interrupted call, not progress.
            if afterCapture, !(after?.inSyscall ?? false) { return false }
            // From one call on a descriptor straight into another kind of call on the same one (a socket's send,
            // then its shutdown), with no other read or write in between than the one just completed: the same
            // piece of work goes on; a loop that turned in between would have waited or worked on other
            // descriptors. (A read followed by another read is a new read, as above.)
            if let after, after.number != before.number, let descriptor = before.descriptor,
                after.descriptor == descriptor,
                (moves.readCalls <= 1 && moves.writeCalls <= 1) || fileWorkOnly
            {
                return false
            }
            // Out of a call on a file the thread works on, into the kernel ("running") or user space, having done
            // nothing but that work: between its calls (a write's end, then its fsync).
            if !(after?.inSyscall ?? false), work.isOn(before), fileWorkOnly { return false }
            // From the call that opened the work's file straight into a call on the descriptor it gave, or from one
            // call on the work's file into another on it — the next write of a series, each seen blocked (writeback
            // throttling on a busy disk): the registers /proc shows past a call's own arguments hold whatever was
            // left in them, so two writes of one buffer need not read as one call — having done nothing but that
            // work.
            if let after, work.isOn(before), work.isOn(after), fileWorkOnly { return false }
            // Left the call (into user space or another call).
            return true
        }
        // Was in user space: system calls made since (a blocking call adds a voluntary switch) are progress, unless
        // they were the file work's own (a write that completed into the page cache before its fsync); entering
        // the call it now sits in is not, by itself.
        if let after, after.inSyscall {
            // One write into file pages completed, then straight (no user-space work between) into a call on the
            // work's file — its sync, its close, its next write: one piece of work, whatever share of the write's
            // pages the looks saw it dirty (it may have begun before the first of them, and the kernel counts
            // pages when first dirtied).
            if FileWork.isFileCall(after), work.isOn(after), moves.writeCalls == 1, moves.readCalls == 0,
                moves.dirtiedBytes > 0 || work.touchedFilePages,
                !moves.ticksKnown || moves.userTicks <= moves.systemTicks + 1
            {
                return false
            }
            return moves.madeCalls && !fileWorkOnly
        }
        return (moves.switches > 0 || moves.madeCalls) && !fileWorkOnly
    }

    /// What the look that found progress saw (its calls, the counters' moves since the look before, the file work),
    /// for the report of the stall it ended: a stall that ends short of the loop's idle wait says why, so one piece
    /// of work split in two can be told from two.
    static func progressSeen(
        from before: ThreadWait?, to after: ThreadWait?, moves: CounterMoves, work: FileWork, anotherFile: Bool
    ) -> String {
        func call(_ wait: ThreadWait?) -> String {
            guard let wait else { return "an unreadable state" }
            guard wait.inSyscall, let number = wait.number else { return "user space or the kernel (running)" }
            if wait.isRestart { return "a call resumed after a capture's stop (restart_syscall)" }
            return SyscallTable.name(number) + (wait.descriptor.map { " on descriptor \($0)" } ?? "")
        }
        var seen = [
            "\(moves.switches) voluntary switches", "\(moves.readCalls) reads and \(moves.writeCalls) writes completed",
        ]
        if moves.bytesKnown {
            seen.append(
                "\(moves.readBytes) bytes read (\(moves.fetchedBytes) from storage), \(moves.writtenBytes) written "
                    + "(\(moves.dirtiedBytes) into file pages)")
        }
        if moves.ticksKnown { seen.append("CPU \(moves.userTicks) user and \(moves.systemTicks) system ticks") }
        if moves.inconsistent { seen.append("counters that went back or became unreadable") }
        var file = "no file work known"
        if let descriptor = work.descriptor {
            file = "file work on descriptor \(descriptor)"
        } else if work.file != nil {
            file = "file work on the file the call opened"
        }
        if anotherFile { file += ", left for another file" }
        // What the work carried into this look: file pages dirtied (or bytes fetched) by calls that had not completed.
        file +=
            "; carried \(work.dirtiedCredit) bytes dirtied and \(work.fetchedCredit) fetched by calls under way"
            + (work.touchedFilePages ? ", file pages touched" : "")
        return
            "ended where a look saw the thread go on: from \(call(before)) to \(call(after)); since the look before, "
            + seen.joined(separator: ", ") + "; \(file)"
    }
}
