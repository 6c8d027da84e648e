// ProcFields: a /proc file of `Key: value` lines (status, io), parsed once, with the few fields StallWatch reads.

/// The lines of a `status` or `io` file, `Key:<whitespace>value` each, looked up by key.
package struct ProcFields: Sendable, Equatable {
    private var values: [Substring: Substring] = [:]

    /// Parses `text`; lines without a `:` are ignored.
    init(parsing text: String) {
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            var value = line[line.index(after: colon)...].drop { $0 == " " || $0 == "\t" }
            while let last = value.last, last == " " || last == "\t" { value = value.dropLast() }
            values[line[..<colon]] = Substring(value)
        }
    }

    /// The value of `key`, trimmed (`State` → `S (sleeping)`).
    package subscript(key: String) -> String? { values[Substring(key)].map(String.init) }

    /// The value of `key` as a decimal number (`voluntary_ctxt_switches`, `syscr`).
    func number(_ key: String) -> UInt64? { values[Substring(key)].flatMap { UInt64($0) } }

    // MARK: status

    /// `State`'s letter.
    package var state: Character? { values["State"]?.first }
    package var voluntarySwitches: UInt64? { number("voluntary_ctxt_switches") }
    var involuntarySwitches: UInt64? { number("nonvoluntary_ctxt_switches") }
    /// `TracerPid`: the tracing process (a debugger), 0 when none.
    package var tracerProcessID: Int32? { values["TracerPid"].flatMap { Int32($0) } }
    /// `SigBlk`: the thread's blocked signals, bit `n - 1` for signal `n`.
    var blockedSignals: UInt64? { values["SigBlk"].flatMap { UInt64($0, radix: 16) } }

    // MARK: io

    /// `syscr`/`syscw`: read and write system calls made.
    var readCalls: UInt64? { number("syscr") }
    var writeCalls: UInt64? { number("syscw") }
}
