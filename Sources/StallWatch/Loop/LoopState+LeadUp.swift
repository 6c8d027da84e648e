// The loop's side of the lead-up recorder: items begin and end into the rings LoopState points at.
import CStallWatchCore

extension LoopState {
    /// The rings the loop records into now, for the loop's per-item path (one relaxed load); nil when off.
    @inline(__always)
    var leadUpRecorder: UnsafeMutablePointer<sw_leadup>? { leadUpPointer.load(ordering: .relaxed) }

    /// The rings recorded into now, for the watching side.
    package var leadUp: LeadUpRing? { leadUpRings.withLock { $0.current } }

    /// Starts (or keeps) recording the loop's lead-up with `settings`, and returns the rings; nil when they cannot
    /// be allocated. Rings of other settings are retired, not freed: the loop may be writing into them.
    @discardableResult
    package func startLeadUp(_ settings: LeadUpSettings) -> LeadUpRing? {
        leadUpRings.withLock { rings in
            if let current = rings.current, current.settings == settings {
                leadUpPointer.store(current.pointer, ordering: .releasing)
                return current
            }
            guard let ring = LeadUpRing(settings: settings) else { return nil }
            if let old = rings.current { rings.retired.append(old) }
            rings.current = ring
            leadUpPointer.store(ring.pointer, ordering: .releasing)
            return ring
        }
    }

    /// Stops recording; the rings stay (a later start with the same settings goes on with their history).
    package func stopLeadUp() {
        leadUpPointer.store(nil, ordering: .releasing)
    }
}

/// An item of loop work timed for the lead-up: its start, label and queue delay, kept by the loop between the
/// item's start and end.
struct LeadUpItemTimer {
    let rings: UnsafeMutablePointer<sw_leadup>?
    private(set) var begin: UInt64 = 0

    /// Starts timing with the rings the loop records into now (nothing when off).
    @inline(__always)
    init(_ state: LoopState) { rings = state.leadUpRecorder }

    /// Times nothing.
    init() { rings = nil }

    var isOn: Bool { rings != nil }

    /// The label the item began with.
    private(set) var label: UInt32 = 0

    /// An item begins at `now` (a CLOCK_MONOTONIC reading the caller took).
    @inline(__always)
    mutating func begin(at now: UInt64, label: UInt32) {
        guard let rings else { return }
        begin = now
        self.label = label
        sw_leadup_begin(rings, now, label)
    }

    /// The item begun last ended at `now`.
    @inline(__always)
    func end(at now: UInt64, label: UInt32, delay: UInt64) {
        guard let rings else { return }
        sw_leadup_end(rings, begin, now, label, delay)
    }
}
