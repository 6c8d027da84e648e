// LeadUpStackMode: how the lead-up gets the loop thread's stacks (the `leadUpStacks` setting).

/// How the lead-up records the loop thread's stacks, so that each long item of a report's `leadUp` shows where it
/// spent its time.
public enum LeadUpStackMode: String, Codable, Sendable, CaseIterable {
    /// A ring the kernel keeps (perf's software task clock, user stacks by frame pointers, read-only: no signal,
    /// no stop, no interrupted call) where `perf_event_open` is allowed; otherwise ``sampler``.
    case auto
    /// StallWatch's own sampler (the capture a stall uses) about once a bucket while the loop is busy.
    case sampler
    /// No stacks in the lead-up.
    case off
}
