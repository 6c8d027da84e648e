// ProcStat: one reading of /proc/<pid>/stat (or a thread's): state, name, CPU time, start time.

#if canImport(Glibc)
    import Glibc
#endif

/// The fields of a `stat` file StallWatch uses (proc(5)): the name may hold spaces and parentheses, so the fields
/// are counted from the last `)`.
package struct ProcStat: Sendable, Equatable {
    /// `comm`, as the parentheses hold it.
    var name: String
    /// The state letter: R running, S sleeping, D disk sleep, T stopped, t tracing stop, Z zombie, X dead, I idle.
    package var state: Character
    /// Field 4: the parent's pid.
    var parentProcessID: Int32
    /// Field 9: the kernel's flags for the task (`PF_*`).
    var flags: UInt64
    /// Fields 14 and 15: user and system CPU time, in clock ticks.
    var userTicks: UInt64
    var systemTicks: UInt64
    /// Field 22: when the process (or thread) started, in clock ticks after boot; tells a reused pid apart.
    var startTimeTicks: UInt64
    /// Field 39: the CPU the thread last ran on (nil when the line is too short to say).
    var processor: Int32?
    /// Field 41: its scheduling policy (`SCHED_FIFO` 1 and `SCHED_RR` 2 are real-time; nil when not said).
    var policy: Int32?

    /// A real-time policy: the thread keeps its CPU from every normal thread while it runs.
    var isRealTime: Bool { policy == 1 || policy == 2 }

    /// Parses the file's one line; nil when it is not a `stat` line.
    init?(parsing text: String) {
        guard let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")"), open < close else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state), so field n is fields[n - 3].
        guard fields.count > 19, let state = fields[0].first, let parent = Int32(fields[1]),
            let flags = UInt64(fields[6]), let user = UInt64(fields[11]), let system = UInt64(fields[12]),
            let start = UInt64(fields[19])
        else { return nil }
        self.flags = flags
        name = String(text[text.index(after: open)..<close])
        self.state = state
        parentProcessID = parent
        userTicks = user
        systemTicks = system
        startTimeTicks = start
        processor = fields.count > 36 ? Int32(fields[36]) : nil
        policy = fields.count > 38 ? Int32(fields[38]) : nil
    }

    /// The thread is exiting (`PF_EXITING`): its code has ended, and the kernel is tearing it down (for a process,
    /// freeing its memory, which takes a while for a large one). Not a thread stuck in its work.
    var isExiting: Bool { flags & 0x4 != 0 }

    /// User + system CPU time in nanoseconds (clock-tick resolution: 10 ms).
    var cpuNanos: UInt64 { (userTicks + systemTicks) * 1_000_000_000 / Self.ticksPerSecond }

    /// `sysconf(_SC_CLK_TCK)`, read once.
    static let ticksPerSecond = UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))

    /// "S (sleeping)" for a state letter, as proc(5) names them; "unknown (thread gone?)" for nil.
    package static func describe(state: Character?) -> String {
        guard let state else { return "unknown (thread gone?)" }
        return "\(state) (\(name(ofState: state) ?? "unknown"))"
    }

    /// The meaning of a state letter (`running`, `disk sleep` …), nil for a letter proc(5) does not list.
    static func name(ofState state: Character) -> String? {
        switch state {
        case "R": "running"
        case "S": "sleeping"
        case "D": "disk sleep"
        case "T": "stopped"
        case "t": "tracing stop"
        case "Z": "zombie"
        case "X": "dead"
        case "I": "idle"
        case "P": "parked"
        case "W": "waking"
        case "K": "wakekill"
        default: nil
        }
    }
}
