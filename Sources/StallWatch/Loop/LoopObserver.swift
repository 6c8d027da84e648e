// Observer registrations of an EventLoop: mask, order, repeats.
import Synchronization

/// A registered observer of loop activities. Keep it to remove the observer later.
public final class LoopObserver: Sendable {
    let activities: LoopActivity
    /// Lower orders are called first, as with CFRunLoopObserver.
    let order: Int
    /// A one-shot observer is removed after its first call.
    let repeats: Bool
    let callback: @Sendable (LoopActivity) -> Void
    private let valid = Atomic<Bool>(true)
    let serial: UInt64

    init(
        activities: LoopActivity, order: Int, repeats: Bool, serial: UInt64,
        callback: @escaping @Sendable (LoopActivity) -> Void
    ) {
        self.activities = activities
        self.order = order
        self.repeats = repeats
        self.serial = serial
        self.callback = callback
    }

    /// False once removed (or after a one-shot observer has fired).
    package var isValid: Bool { valid.load(ordering: .acquiring) }

    /// Returns true if this call invalidated it.
    @discardableResult
    func invalidate() -> Bool { valid.exchange(false, ordering: .acquiringAndReleasing) }

}
