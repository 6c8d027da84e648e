// Waiting for a state that only polling can observe (/proc, files another process writes), against a deadline.
import Foundation

/// Waits for `condition` by polling it every `every` (for states only /proc or a file can tell), up to `timeout`;
/// the condition's last answer decides.
package func pollUntil(
    timeout: Duration = .seconds(10), every interval: Duration = .milliseconds(1), _ condition: () -> Bool
) -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while clock.now < deadline {
        if condition() { return true }
        Thread.sleep(
            forTimeInterval: Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18)
    }
    return condition()
}
