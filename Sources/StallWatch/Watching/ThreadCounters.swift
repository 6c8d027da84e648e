// ThreadCounters: what /proc counts for one thread (switches, calls, bytes, CPU ticks), and their moves between looks.

/// The counters of one thread at one look, read without stopping it: voluntary context switches (`status`),
/// read and write calls and their bytes (`io`: `syscr`, `syscw`, `rchar`, `wchar`, and `read_bytes`,
/// `write_bytes` — the bytes the thread brought in from storage and the file pages it dirtied), and its user and
/// system CPU time (`stat`, clock ticks). `io` needs ptrace-read rights; without them those fields are nil.
package struct ThreadCounters: Sendable, Equatable {
    package var voluntarySwitches: UInt64
    package var readCalls: UInt64?
    package var writeCalls: UInt64?
    /// `rchar`, `wchar`: bytes the read and write calls moved, whatever the descriptor.
    package var readBytes: UInt64?
    package var writtenBytes: UInt64?
    /// `read_bytes`: bytes fetched from storage for the thread (a read of a file that was not cached).
    package var fetchedBytes: UInt64?
    /// `write_bytes`: bytes of file pages the thread dirtied (a write into a file's page cache; not a socket's,
    /// a pipe's or tmpfs's).
    package var dirtiedBytes: UInt64?
    /// `stat` fields 14 and 15, clock ticks.
    package var userTicks: UInt64?
    package var systemTicks: UInt64?
    /// The size of the process's JIT symbol map (``PerfMap``), when it writes one, read before and after the
    /// other counters (so the growth between two looks covers every write those counters saw): a runtime appends a
    /// line to it for each piece of code it compiles, from whichever thread finishes the code — the loop's own
    /// among them.
    package var jitMapBytesBefore: UInt64?
    package var jitMapBytes: UInt64?

    package init(
        voluntarySwitches: UInt64, readCalls: UInt64? = nil, writeCalls: UInt64? = nil, readBytes: UInt64? = nil,
        writtenBytes: UInt64? = nil, fetchedBytes: UInt64? = nil, dirtiedBytes: UInt64? = nil,
        userTicks: UInt64? = nil, systemTicks: UInt64? = nil
    ) {
        self.voluntarySwitches = voluntarySwitches
        self.readCalls = readCalls
        self.writeCalls = writeCalls
        self.readBytes = readBytes
        self.writtenBytes = writtenBytes
        self.fetchedBytes = fetchedBytes
        self.dirtiedBytes = dirtiedBytes
        self.userTicks = userTicks
        self.systemTicks = systemTicks
    }

    /// Reads the thread's `io` (its `status` and `stat` are already read).
    package static func read(_ directory: ProcDirectory, status: ProcFields, stat: ProcStat?) -> ThreadCounters {
        var counters = ThreadCounters(voluntarySwitches: status.voluntarySwitches ?? 0)
        counters.jitMapBytesBefore = PerfMap.size(processID: directory.processID)
        if let io = directory.io() {
            counters.readCalls = io.readCalls ?? 0
            counters.writeCalls = io.writeCalls ?? 0
            counters.readBytes = io.number("rchar")
            counters.writtenBytes = io.number("wchar")
            counters.fetchedBytes = io.number("read_bytes")
            counters.dirtiedBytes = io.number("write_bytes")
        }
        if let stat {
            counters.userTicks = stat.userTicks
            counters.systemTicks = stat.systemTicks
        }
        counters.jitMapBytes = PerfMap.size(processID: directory.processID)
        return counters
    }
}

/// What our own ptrace captures may have added to a thread's counters since the last look: each stop and the
/// sleep after it are two voluntary switches, and a read or write the thread was blocked in is counted again when
/// the kernel restarts it.
package struct CaptureAllowance: Sendable, Equatable {
    package var switches: UInt64 = 0
    package var readCalls: UInt64 = 0
    package var writeCalls: UInt64 = 0

    package init(switches: UInt64 = 0, readCalls: UInt64 = 0, writeCalls: UInt64 = 0) {
        self.switches = switches
        self.readCalls = readCalls
        self.writeCalls = writeCalls
    }
}

/// How a thread's counters moved between two looks, beyond what captures explain.
package struct CounterMoves: Sendable, Equatable {
    /// A counter went down, or a field became readable or unreadable: not the same thread's story.
    package var inconsistent = false
    package var switches: UInt64 = 0
    package var readCalls: UInt64 = 0
    package var writeCalls: UInt64 = 0
    package var readBytes: UInt64 = 0
    package var writtenBytes: UInt64 = 0
    package var fetchedBytes: UInt64 = 0
    package var dirtiedBytes: UInt64 = 0
    package var userTicks: UInt64 = 0
    package var systemTicks: UInt64 = 0
    /// The byte counters (`io`) and the CPU ticks (`stat`) could be read at both looks.
    package var bytesKnown = false
    package var ticksKnown = false

    package init() {}

    /// How far the JIT symbol map's size may lag the bytes its writer's counters show.
    static let jitMapLagBytes: UInt64 = 512

    package init(from old: ThreadCounters, to new: ThreadCounters, allowance: CaptureAllowance = .init()) {
        func move(_ a: UInt64?, _ b: UInt64?, beyond extra: UInt64 = 0) -> UInt64 {
            guard let a, let b, b >= a else {
                if (a == nil) != (b == nil) || (a ?? 0) > (b ?? 0) { inconsistent = true }
                return 0
            }
            return b - a > extra ? b - a - extra : 0
        }
        switches = move(old.voluntarySwitches, new.voluntarySwitches, beyond: allowance.switches)
        readCalls = move(old.readCalls, new.readCalls, beyond: allowance.readCalls)
        writeCalls = move(old.writeCalls, new.writeCalls, beyond: allowance.writeCalls)
        readBytes = move(old.readBytes, new.readBytes)
        writtenBytes = move(old.writtenBytes, new.writtenBytes)
        fetchedBytes = move(old.fetchedBytes, new.fetchedBytes)
        dirtiedBytes = move(old.dirtiedBytes, new.dirtiedBytes)
        userTicks = move(old.userTicks, new.userTicks)
        systemTicks = move(old.systemTicks, new.systemTicks)
        // Appending to the JIT symbol map is the runtime's bookkeeping while it compiles, not the loop's work (a
        // callback that compiles code as it runs — a template engine's `new Function` — writes a line per function):
        // writes whose bytes the map's growth covers are taken for it, with the pages they dirtied. The map's size,
        // read with `stat`, was seen to lag the thread's written bytes by up to about 170 bytes (a few lines) while
        // the runtime writes: 512 bytes more than the growth are let pass.
        let mapGrowth: UInt64 =
            switch (old.jitMapBytesBefore, new.jitMapBytes) {
            case (let before?, let after?) where after >= before: after - before
            case (nil, let after?): after
            default: 0
            }
        if mapGrowth > 0, writtenBytes > 0, writtenBytes <= mapGrowth + Self.jitMapLagBytes {
            writeCalls = 0
            writtenBytes = 0
            let pages = (mapGrowth + 4095) / 4096 + 1
            dirtiedBytes = dirtiedBytes > pages * 4096 ? dirtiedBytes - pages * 4096 : 0
        }
        bytesKnown =
            old.writtenBytes != nil && new.writtenBytes != nil && old.dirtiedBytes != nil
            && new.dirtiedBytes != nil
        ticksKnown = old.userTicks != nil && new.userTicks != nil
    }

    /// Read or write calls were completed between the looks.
    package var madeCalls: Bool { readCalls > 0 || writeCalls > 0 }
}
