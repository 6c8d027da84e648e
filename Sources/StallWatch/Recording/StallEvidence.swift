// StallEvidence: everything recorded about one stall while it lasts, as a plain value a report is built from.

/// What was recorded about one stall: the detector's verdict, the samples of the stuck thread with their /proc
/// probes, the other threads at the first sample, and the notes and errors met along the way.
///
/// Addresses stay raw here; symbolication happens when a report is built (``StallReportBuilder``), so the same
/// evidence can be rendered quickly for the provisional report and in full for the final one.
struct StallEvidence: Sendable {
    /// One stack sample of the stuck thread and the thread's kernel-side state at that moment.
    struct Sample: Sendable, Equatable {
        /// Since the stall's start (the moment the loop entered the stuck phase) to the capture (to the request when
        /// the capture's time is unknown).
        var offsetNanos: UInt64
        /// Innermost first; empty when the capture failed.
        var frames: [UnwoundFrame]
        var pauseNanos: UInt64?
        var unwindNanos: UInt64?
        var error: String?
        var probe: ThreadProbe?
        /// The thread holding the lock the stuck thread waits for, when the probe shows a futex wait.
        var lockOwner: Int32?
        /// Where the lock recorded `lockOwner`.
        var lockOwnerSource: LockOwner.Source?
        /// The thread the lock's own structure records, when the futex word names no owner (``RecordedHolder``).
        var recordedHolder: RecordedHolder.Finding?
        /// The holders recorded from `recordedHolder` on lead back to the stuck thread: that cycle, from it on.
        var recordedCycle: [Int32]?
        /// The process holding the file lock the stuck thread waits for (`/proc/locks`), when it waits for one.
        var fileLockHolder: FileLockHolder.Holder?
        /// Another process behind the stuck thread's wait (a semaphore's last operator, a pipe's or socket's other
        /// end), or why none could be named.
        var otherProcess: OtherProcessWait?
        /// The wait is a sleep on the process's own wake-up descriptors (``OwnWakeups``): the evidence sentence.
        var ownWakeupSleep: String?
        /// The process-shared lock the stuck thread waits on, and the processes that may hold it (``SharedLock``).
        var sharedLock: SharedLock.Finding?
        /// Why the capture did not stop the thread (nil: it did, or failed otherwise).
        var unstopped: UnstoppedThread?
        /// The capture did not stop the thread: it was inside the kernel, or waiting for a CPU.
        var captureTimedOut: Bool { unstopped != nil }
        /// The probe's system call was read from the thread's kernel stack after the capture timed out.
        var kernelStackCall = false
        /// The probe said "running" and the call is the one the capture stopped the thread at the boundary of.
        var stopCall = false
        /// How long the thread took to stop for the capture; part of `pauseNanos`.
        var stopWaitNanos: UInt64?
        /// The call the thread was in when the capture stopped it, from its registers (ptrace captures only).
        var stopWait: ThreadWait?
        /// When the captured state was the thread's (CLOCK_MONOTONIC, see ``StackCapture/capturedAtNanoseconds``);
        /// nil when unknown (a failed capture).
        var capturedAtNanos: UInt64?
        /// When the probe's reading was over (CLOCK_MONOTONIC): the thread was in the state it shows at or before.
        var probedAtNanos: UInt64?
    }

    /// A thread of the all-thread snapshot with its stack still as raw addresses.
    struct Thread: Sendable {
        var snapshot: StallReport.ThreadSnapshot
        /// Innermost first; empty when the stack was not taken.
        var frames: [UnwoundFrame] = []
    }

    var stall: StallDetector.Stall
    /// The stuck thread; nil when the loop's thread was not known.
    var threadID: Int32?
    var annotations: [String: String] = [:]
    var reportID: String
    /// CLOCK_REALTIME and CLOCK_MONOTONIC read together at detection: the pair that turns monotonic times into
    /// dates.
    var wallAtBegin: UInt64
    var monoAtBegin: UInt64
    var samples: [Sample] = []
    /// The interval samples are taken at (longer for a signature seen recently).
    var intervalNanos: UInt64
    var threads: [Thread] = []
    /// The stuck thread's state at detection, the base of the CPU and run-queue deltas.
    var firstProbe: ThreadProbe?
    /// The thread's schedule when the stuck phase began, when the progress source read it (the sidecar's /proc
    /// probe): CPU and run-queue figures then cover the whole stall.
    var stallStartSchedule: ThreadSchedule?
    /// The stuck thread's state when the final report was built, and when (CLOCK_MONOTONIC): the end of the CPU
    /// and run-queue deltas of a stall too short for a second sample.
    var lastProbe: (probe: ThreadProbe, monoNanos: UInt64)?
    /// CPU and scheduling context over the stall; filled in when the final report is built.
    var context: StallReport.SystemContext?
    var notes: [String] = []
    /// How late the watcher woke during the stall, in all (the detector's late wake-up guard).
    var lateWakeupNanos: UInt64 = 0
    var captureErrors: [String] = []
    /// Samples left out because they were captured after the stall ended.
    var samplesAfterEnd = 0
    /// The /proc reading of the first sample left out as captured after the stall ended, when the reading itself
    /// was over before the end: the thread's state inside the stall, without a stack.
    var probeBeforeEnd: ThreadProbe?
    /// Problems met when the watching was set up, repeated in every report.
    var setupErrors: [String] = []
    /// The Concurrency pool's sections, for a stall of a pool worker or of the whole pool.
    var task: StallReport.TaskDescription?
    var pool: StallReport.PoolDescription?
    /// The loop's lead-up, copied when the stall was detected.
    var leadUp: LeadUpCapture?
    /// The stack of the other process's thread behind the wait, captured once (``StallRecorder/Target/peerSampler``).
    var peerStack: PeerStack?
    /// `threadID` held nothing during the stall: it is the thread that took the loop up and ended it
    /// (``EvidenceCollector/adoptThreadThatTookUp(_:scheduleAtStart:)``).
    var tookUpAtEnd = false

    init(
        stall: StallDetector.Stall, threadID: Int32?, reportID: String, wallAtBegin: UInt64, monoAtBegin: UInt64,
        intervalNanos: UInt64
    ) {
        self.stall = stall
        self.threadID = threadID
        self.reportID = reportID
        self.wallAtBegin = wallAtBegin
        self.monoAtBegin = monoAtBegin
        self.intervalNanos = intervalNanos
        notes = stall.notes
    }
}

/// A thread of another process that a stall's loop waited on, and its stack as captured then.
package struct PeerStack: Sendable {
    package var processID: Int32
    package var threadID: Int32
    /// Symbolicated at the capture, names only: the process may be gone by the time the report is written.
    package var frames: [StackFrame]
}
