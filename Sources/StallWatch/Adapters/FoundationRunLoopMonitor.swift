// Watches a Foundation RunLoop: CFRunLoopObservers publish its activities into a LoopState for a Watchdog.
import CStallWatchCore
import CoreFoundation
import Foundation
import Synchronization

/// Makes a Foundation `RunLoop` (or a `CFRunLoop`) watchable by a ``Watchdog``, with the same detector and
/// reports as the StallWatch ``EventLoop``.
///
/// Two `CFRunLoopObserver`s (swift-corelibs-foundation ships CoreFoundation on Linux) publish the run loop's
/// activities into ``state``: one ordered first for the activities that start busy phases (`entry`,
/// `beforeTimers`, `beforeSources`, `afterWaiting`), one ordered last for `beforeWaiting` and `exit`, so the
/// work other observers do around the idle wait counts as busy. Both are added in the common modes. A nested
/// run (a callout that runs the loop again) is followed: when it exits, the outer callout's phase resumes with
/// a fresh start time, since the loop was turning meanwhile. With the watchdog's `leadUp` on, what the run loop
/// runs between two activities until it waits is one lead-up item, labelled by its phase (one precise clock read
/// more per activity).
///
/// ```swift
/// let monitor = FoundationRunLoopMonitor(runLoop: .main, name: "main")
/// let watchdog = Watchdog(loop: monitor, configuration: try .load())
/// monitor.start()
/// try watchdog.start()
/// RunLoop.main.run()
/// ```
///
/// The thread to sample is learned from the first observer callout, on the run loop's thread (which also
/// unblocks the sampling signal there).
public final class FoundationRunLoopMonitor: WatchedLoop, SampledLoop, @unchecked Sendable {
    // @unchecked Sendable: All lets; `runLoop` (CFRunLoop, thread-safe to wake and observe) is not marked Sendable.
    public let name: String
    public var state: LoopState { publisher.state }
    private let runLoop: CFRunLoop
    private let publisher: RunLoopActivityPublisher
    private let annotationStore = LoopAnnotations()
    private let observers = Mutex<[CFRunLoopObserver]>([])

    /// - Parameters:
    ///   - runLoop: The run loop to watch: `RunLoop.main`, or `RunLoop.current` on the thread that will run it.
    ///     (swift-corelibs-foundation keeps `getCFRunLoop()` internal, so another thread's `RunLoop` cannot be
    ///     mapped to its CFRunLoop; use ``init(cfRunLoop:name:)`` with `CFRunLoopGetCurrent()` from that thread.)
    ///   - name: Appears in reports (`loop.name`).
    public convenience init(runLoop: RunLoop = .main, name: String = StallWatchConfiguration.defaultLoopName) {
        let cf: CFRunLoop
        if runLoop === RunLoop.main {
            cf = CFRunLoopGetMain()
        } else if runLoop === RunLoop.current {
            cf = CFRunLoopGetCurrent()
        } else {
            preconditionFailure("FoundationRunLoopMonitor: pass RunLoop.main or RunLoop.current")
        }
        self.init(cfRunLoop: cf, name: name)
    }

    /// - Parameters:
    ///   - cfRunLoop: The CoreFoundation run loop to watch.
    ///   - name: Appears in reports (`loop.name`).
    public init(cfRunLoop: CFRunLoop, name: String = StallWatchConfiguration.defaultLoopName) {
        self.name = name
        self.runLoop = cfRunLoop
        self.publisher = RunLoopActivityPublisher(state: LoopState(), annotations: annotationStore)
    }

    deinit { stop() }

    /// Adds the observers. Safe from any thread (CFRunLoopAddObserver locks the run loop); does nothing when
    /// already started.
    public func start() {
        observers.withLock { list in
            guard list.isEmpty else { return }
            let publisher = self.publisher
            let busy: CFRunLoopActivity = [.entry, .beforeTimers, .beforeSources, .afterWaiting]
            let idle: CFRunLoopActivity = [.beforeWaiting, .exit]
            for (activities, order) in [(busy, CFIndex.min), (idle, CFIndex.max)] {
                let observer = CFRunLoopObserverCreateWithHandler(kCFAllocatorDefault, activities.rawValue, true, order)
                { _, activity in
                    publisher.publish(LoopActivity(rawValue: UInt32(truncatingIfNeeded: activity.rawValue)))
                }!
                CFRunLoopAddObserver(runLoop, observer, kCFRunLoopCommonModes)
                list.append(observer)
            }
        }
    }

    /// Removes the observers. Stop the watchdog first: the state keeps its last phase, and a busy one would
    /// read as a stall.
    public func stop() {
        let removed = observers.withLock { list -> [CFRunLoopObserver] in
            defer { list.removeAll() }
            return list
        }
        for observer in removed { CFRunLoopObserverInvalidate(observer) }
    }

    package var sampledThread: SampledThread? { publisher.thread.withLock { $0 } }

    /// Run-loop iterations (`beforeTimers` activities) seen since the monitor was created.
    package var iterations: UInt64? { publisher.iterations.load(ordering: .relaxed) }

    /// Attaches key/values to the work the run loop is doing now; they appear in the report of a stall that
    /// happens before ``clearAnnotations()``. Safe from any thread.
    public func annotate(_ key: String, _ value: String) { annotationStore.set(key, value) }

    /// Removes the annotations set with ``annotate(_:_:)``.
    public func clearAnnotations() { annotationStore.removeAll() }

    package var annotations: [String: String] { annotationStore.values }

    /// The run loop's busy spans are timed for the lead-up, by phase.
    var timesItems: Bool { true }
}

/// The run-loop-thread side of ``FoundationRunLoopMonitor``: turns CF activities into ``LoopState`` transitions.
/// Captured by the observers' handlers (not the monitor), so dropping the monitor invalidates them cleanly.
final class RunLoopActivityPublisher: @unchecked Sendable {  // The `var`s are touched on the run loop's thread only.
    let state: LoopState
    let thread = Mutex<SampledThread?>(nil)
    let iterations = Atomic<UInt64>(0)
    private let threadKnown = Atomic<Bool>(false)
    private let annotations: LoopAnnotations
    /// The busy span being timed for the lead-up (from one activity to the next, until the loop waits), and the
    /// annotations' mark at its start.
    private var item = LeadUpItemTimer()
    private var itemMark: UInt64 = 0

    private var sequence: UInt64 = 0
    private var iterationCount: UInt64 = 0
    private var current: LoopActivity = []
    /// The phases of outer runs, while a callout runs the loop again (nested runs).
    private var outerPhases: [LoopActivity] = []
    private var depth = 0

    init(state: LoopState, annotations: LoopAnnotations) {
        self.state = state
        self.annotations = annotations
    }

    /// Called by the observers on the run loop's thread.
    /// - Warning: Runs on the run loop's thread for every activity; keep it allocation- and syscall-free
    ///   (the first call learns the thread, once).
    func publish(_ activity: LoopActivity) {
        if !threadKnown.load(ordering: .relaxed) { learnThread() }
        switch activity {
        case .entry:
            depth += 1
            if depth > 1 { outerPhases.append(current) }
            record(.entry, busyEdge: true)
        case .exit:
            depth = max(0, depth - 1)
            if depth > 0, let outer = outerPhases.popLast() {
                // Back in the outer run's callout: the loop turned meanwhile, so its phase starts afresh.
                record(outer, busyEdge: true)
            } else {
                record(.exit, busyEdge: false)
            }
        case .beforeTimers:
            iterationCount &+= 1
            iterations.store(iterationCount, ordering: .relaxed)
            record(.beforeTimers, busyEdge: false)
        case .afterWaiting:
            record(.afterWaiting, busyEdge: true)
        default:
            record(activity, busyEdge: false)
        }
    }

    @inline(__always)
    private func record(_ activity: LoopActivity, busyEdge: Bool) {
        sequence &+= 1
        current = activity
        // Other observers and sources ran since the last callout: always take a (coarse) timestamp.
        state.record(activity, sequence: sequence, busyEdge: busyEdge, timeMoved: true)
        timeItem(after: activity)
    }

    /// The lead-up's items of a run loop: what it ran between two activities, one item per span, until it waits
    /// or exits. What ran after `afterWaiting` is its timers, port sources and the main queue; after
    /// `beforeSources`, its blocks and version-0 sources; the spans after `entry` and `beforeTimers` hold other
    /// observers only. Each is labelled by the annotations set while it ran, else those in force as it began, else
    /// by that phase.
    @inline(__always)
    private func timeItem(after activity: LoopActivity) {
        let rings = state.leadUpRecorder
        guard rings != nil || item.isOn else { return }
        let now = sw_monotonic_ns()
        if item.isOn {
            let set = annotations.label(since: itemMark, explicit: 0)
            item.end(at: now, label: set != 0 ? set : item.label, delay: 0)
            item = LeadUpItemTimer()
        }
        guard rings != nil, let phase = Self.phaseLabel(after: activity) else { return }
        item = LeadUpItemTimer(state)
        itemMark = annotations.mark
        let inForce = annotations.label(since: itemMark, explicit: 0)
        item.begin(at: now, label: inForce != 0 ? inForce : phase)
    }

    private static let afterWakeUp = LeadUpLabels.shared.id(for: "timers, ports and main queue")
    private static let sources = LeadUpLabels.shared.id(for: "blocks and sources")
    private static let observers = LeadUpLabels.shared.id(for: "run loop observers")

    /// The label of the span that follows `activity`; nil when the loop is about to wait or has exited.
    @inline(__always)
    private static func phaseLabel(after activity: LoopActivity) -> UInt32? {
        switch activity {
        case .afterWaiting: afterWakeUp
        case .beforeSources: sources
        case .beforeWaiting, .exit: nil
        default: observers
        }
    }

    @inline(never)
    private func learnThread() {
        // A thread started from a libdispatch worker inherits its mask, which blocks the sampling signal.
        let me = (try? SignalSampler.shared())?.registerCurrentThread() ?? SampledThread.current()
        thread.withLock { $0 = me }
        threadKnown.store(true, ordering: .relaxed)
    }
}
