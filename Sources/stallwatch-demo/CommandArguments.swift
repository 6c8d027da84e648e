// CommandArguments: the demo commands' small argument reader; bad input exits 2 naming the flag and value.
import Foundation
import StallWatch

/// Command-line flags and their values, failing with the usage on a bad one.
struct CommandArguments {
    private var rest: ArraySlice<String>
    private let usage: String

    init(_ arguments: [String], usage: String) {
        rest = arguments[...]
        self.usage = usage
    }

    mutating func next() -> String? { rest.popFirst() }

    mutating func value(_ flag: String) -> String {
        guard let v = rest.popFirst() else { fail("\(flag) needs a value\n\(usage)") }
        return v
    }

    mutating func number(_ flag: String, _ range: ClosedRange<Int>) -> Int {
        let text = value(flag)
        guard let n = Int(text), range.contains(n) else {
            fail("\(flag) \(text): expected an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }

    /// The next value overriding the setting `key` of `configuration` (``StallWatchConfiguration/override(_:with:flag:)``).
    mutating func override(_ configuration: inout StallWatchConfiguration, _ key: String, flag: String) {
        let text = value(flag)
        do {
            try configuration.override(key, with: text, flag: flag)
        } catch {
            fail(error.message)
        }
    }

    /// One of `choices`' raw values.
    mutating func choice<T: RawRepresentable & CaseIterable>(_ flag: String, _ type: T.Type) -> T
    where T.RawValue == String {
        let text = value(flag)
        guard let chosen = T(rawValue: text) else {
            fail("\(flag) \(text): expected one of \(T.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return chosen
    }

    /// The values that follow `flag` up to the next flag.
    mutating func values(_ flag: String) -> [String] {
        var values: [String] = []
        while let v = rest.first, !v.hasPrefix("--") {
            values.append(v)
            rest.removeFirst()
        }
        if values.isEmpty { fail("\(flag) needs a value\n\(usage)") }
        return values
    }
}

/// The configuration from `STALLWATCH_<KEY>` variables; an invalid one ends the command (exit 2) naming it.
func loadConfiguration() -> StallWatchConfiguration {
    do {
        return try StallWatchConfiguration.load()
    } catch {
        fail(error.message)
    }
}

/// Writes `block` and fsyncs, again and again until `end` (DispatchTime uptime ns), truncating the file
/// whenever `cap` bytes were written: synchronous disk I/O that keeps the calling thread in write/fsync.
func writeAndSync(fd: Int32, block: [UInt8], until end: UInt64, cap: Int) {
    var written = 0
    repeat {
        written += block.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        fsync(fd)
        if written > cap {
            ftruncate(fd, 0)
            lseek(fd, 0, SEEK_SET)
            written = 0
        }
    } while DispatchTime.now().uptimeNanoseconds < end
}
