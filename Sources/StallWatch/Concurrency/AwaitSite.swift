// AwaitSite: where a suspended task waits, named from its async backtrace, and whether that wait is exempt.
import Foundation

/// The await site of a suspended task, from its symbolicated async backtrace (innermost first).
///
/// The backtrace starts where the task will resume: the runtime's resume adapters (`task_future_wait_resume_adapter`
/// and the like) are left out, so the innermost frame is the function that awaited (`withCheckedContinuation`,
/// `Task.value`, `TaskGroup.next`), and the first frame of the application's own code (``ApplicationFrame``) is the
/// function that called it.
package struct AwaitSite: Sendable, Equatable {
    /// The backtrace without the runtime's adapters.
    package var frames: [StackFrame]
    /// The innermost frame's readable name: what the task awaits in.
    package var innermost: String?
    /// The first frame of application code: the function that awaits.
    package var awaitingFunction: String?

    package init(frames: [StackFrame]) {
        var kept = frames
        while let first = kept.first, kept.count > 1, Self.isRuntimeAdapter(first) { kept.removeFirst() }
        self.frames = kept
        innermost = kept.first.flatMap { $0.readableName }
        awaitingFunction = ApplicationFrame(frames: kept)?.function
    }

    /// A resume adapter of the Concurrency runtime: where a task waiting on another task or a group resumes first.
    static func isRuntimeAdapter(_ frame: StackFrame) -> Bool {
        guard let symbol = frame.symbol, let image = frame.image, image.contains("libswift_Concurrency") else {
            return false
        }
        return symbol.contains("resume_adapter") || symbol.hasSuffix("_adapter")
    }
}

/// Patterns of await sites that are never hung awaits (`hungAwaitExemptions`).
///
/// A pattern matches a frame whose readable name, with generic argument clauses removed (`Task<>._sleep<A>(…)` is
/// matched as `Task._sleep(…)`), contains it; `*` in a pattern matches any text. A task is exempt when any frame of
/// its async backtrace matches: the default patterns name operations that only wait (a sleep, a stream's next
/// element), so every frame inside them is part of that wait. A pattern naming a function that calls others
/// (a whole request handler) exempts every wait beneath it.
package struct AwaitExemptions: Sendable, Equatable {
    package let patterns: [String]

    /// Parses `hungAwaitExemptions`: comma-separated, blanks trimmed, `default` expanded.
    package init(setting: String) {
        var out: [String] = []
        for part in setting.split(separator: ",") {
            let pattern = part.trimmingCharacters(in: .whitespaces)
            if pattern.isEmpty { continue }
            if pattern == "default" {
                out += StallWatchConfiguration.defaultHungAwaitExemptions
            } else {
                out.append(pattern)
            }
        }
        patterns = out
    }

    /// The first pattern some frame of `frames` matches, nil when none does.
    package func match(_ frames: [StackFrame]) -> String? {
        for frame in frames {
            guard let name = frame.readableName ?? frame.symbol else { continue }
            let plain = Self.withoutGenericArguments(name)
            if let pattern = patterns.first(where: { Self.matches(plain, pattern: $0) }) { return pattern }
        }
        return nil
    }

    /// `Task<>._sleep<A>(until:)` → `Task._sleep(until:)`.
    static func withoutGenericArguments(_ name: String) -> String {
        var out = ""
        var depth = 0
        for character in name {
            if character == "<" {
                depth += 1
            } else if character == ">", depth > 0 {
                depth -= 1
            } else if depth == 0 {
                out.append(character)
            }
        }
        return out
    }

    /// Whether `text` contains a match of `pattern` (`*` any text).
    static func matches(_ text: String, pattern: String) -> Bool {
        let parts = pattern.split(separator: "*", omittingEmptySubsequences: false).map(String.init)
        var rest = Substring(text)
        for part in parts where !part.isEmpty {
            guard let found = rest.range(of: part) else { return false }
            rest = rest[found.upperBound...]
        }
        return true
    }
}
