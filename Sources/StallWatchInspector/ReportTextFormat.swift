// ReportTextFormat: the small text conventions shared by `reports list` and `reports show`.
import Foundation
import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

/// Time, duration and table formatting for the human-readable report views.
public struct ReportTextFormat: Sendable {
    /// The zone local times are shown in (the system's by default; tests pin UTC).
    public var timeZone: TimeZone

    public init(timeZone: TimeZone = .current) {
        self.timeZone = timeZone
    }

    /// `2026-11-30 23:15:00` in ``timeZone``; with `milliseconds`, `2026-11-30 23:15:00.123`.
    func localTime(_ date: Date, milliseconds: Bool = false) -> String {
        let shifted = date.addingTimeInterval(TimeInterval(timeZone.secondsFromGMT(for: date)))
        // 2026-11-30T23:15:00.123Z → 2026-11-30 23:15:00[.123], on bytes: a listing formats thousands of these.
        var bytes = Array(ReportDate.string(from: shifted).utf8)
        for index in bytes.indices where bytes[index] == UInt8(ascii: "T") { bytes[index] = UInt8(ascii: " ") }
        bytes.removeLast(min(bytes.count, milliseconds ? 1 : 5))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `312 ms`, `5.20 s`, `2m 05s`; `ongoing`/`unrecovered` durations are lower bounds and get a `+`; a stall
    /// that began before watching did (`beganBefore`) has a start that is only a bound, and gets a leading `>=`.
    package static func duration(
        _ milliseconds: Double, status: StallReport.Status = .ended, beganBefore: Bool = false
    ) -> String {
        guard !beganBefore else { return ">=" + duration(milliseconds, status: status) }
        let text: String
        if !milliseconds.isFinite {
            text = "\(milliseconds) ms"
        } else if milliseconds < 1000 {
            text = "\(Int(saturating: milliseconds.rounded())) ms"
        } else if milliseconds < 60_000 {
            text = String(format: "%.2f s", milliseconds / 1000)
        } else {
            let seconds = Int(saturating: (milliseconds / 1000).rounded(.down))
            text = "\(seconds / 60)m \(seconds % 60 < 10 ? "0" : "")\(seconds % 60)s"
        }
        return status == .ended || status == .withdrawn || status == .snapshot ? text : text + "+"
    }

    /// The sentence that says a report is no stall (``StallReport/Status/withdrawn``), or nil for any other.
    package static func withdrawnNote(_ report: StallReport) -> String? {
        guard report.status == .withdrawn else { return nil }
        return "not a stall: the loop came back to this wait after doing work, so it is its idle wait "
            + "(watching had started during it, with nothing to tell it from a stuck one)"
    }

    /// The sentence that says a report is a snapshot on demand (``StallReport/Status/snapshot``) and why it was
    /// taken, or nil for any other.
    package static func snapshotNote(_ report: StallReport) -> String? {
        guard report.status == .snapshot else { return nil }
        return "not a stall: the loop's lead-up written on demand ("
            + (report.snapshotReason.map { "reason: \($0)" } ?? "no reason given") + ")"
    }

    /// The sentence that says a report's start is only a bound, or nil when the stall began under watch.
    package static func beganBeforeNote(_ report: StallReport) -> String? {
        guard report.startedBeforeAttach == true else { return nil }
        return "began before watching started: the start shown is the latest it can have been "
            + "(from the thread's own kernel figures, or the first look), the duration a lower bound"
    }

    /// A number without a needless fraction: `250`, `1.5`, `0.25`.
    package static func number(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int(value)) }
        return String(format: "%.3f", value).replacingOccurrences(of: "0+$", with: "", options: .regularExpression)
    }

    /// Left-aligned columns separated by two spaces; the last column is not padded. `style` may decorate a
    /// padded cell (colour) without disturbing the alignment. Cells are escaped (``TerminalText/escape(_:)``)
    /// before they are measured, so report content cannot drive the terminal.
    package static func table(
        _ rows: [[String]], style: (_ row: Int, _ column: Int, _ cell: String) -> String = { $2 }
    ) -> [String] {
        let rows = rows.map { $0.map(TerminalText.escape) }
        guard let columns = rows.map(\.count).max() else { return [] }
        var widths = [Int](repeating: 0, count: columns)
        for row in rows {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], width(of: cell)) }
        }
        return rows.enumerated().map { rowIndex, row in
            row.enumerated().map { index, cell in
                let padded = index == row.count - 1 ? cell : pad(cell, to: widths[index])
                return style(rowIndex, index, padded)
            }.joined(separator: "  ")
        }
    }

    /// Characters in `cell`; counted as bytes when it is ASCII (most cells), without grapheme breaking.
    private static func width(of cell: String) -> Int {
        cell.utf8.allSatisfy { $0 < 0x80 } ? cell.utf8.count : cell.count
    }

    /// `cell` padded with spaces to `width` characters, as `padding(toLength:withPad:startingAt:)` pads it.
    private static func pad(_ cell: String, to width: Int) -> String {
        guard cell.utf8.allSatisfy({ $0 < 0x80 }) else {
            return cell.padding(toLength: width, withPad: " ", startingAt: 0)
        }
        let count = cell.utf8.count
        return count >= width ? cell : cell + String(repeating: " ", count: width - count)
    }
}
