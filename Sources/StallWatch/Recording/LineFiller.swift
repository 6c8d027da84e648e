// LineFiller: loads line tables during a stall and fills in the file:line a final report was written without.
import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The background half of a final report's symbolication, on a serial queue of its own.
///
/// A final report is written the moment the stall ends, with function names (the symbol tables are cheap) and the
/// file:line of every image whose line tables are already loaded. An image's first line lookup loads its DWARF,
/// and libdw decompresses every debug section of the file first (libc's separate debug file: ~150 ms, two thirds
/// of it `.debug_info`), far past the 20 ms a final report has. So the report says `symbolication.lines`
/// `pending`, and ``fill(_:evidence:maxThreadFrames:writer:emit:)`` looks the lines up here, waiting for the
/// tables, and rewrites the file atomically (``ReportWriter``: a reader sees the old file or the new one, both
/// complete) with `lines` `complete`.
///
/// ``prefetch(_:)`` loads the line tables of a stall's first stacks here while the stall goes on, so the final
/// report of a stall that lasts long enough (and of every later stall of those images) has its lines at once.
/// Both run on the one queue, so a fill finds the tables a prefetch was loading. The filled report is also kept
/// for the ``StallPublisher``, whose in-memory copy of a recent report must not fold a later stall into the
/// version without lines (``takeCompleted()``, ``isOutstanding(_:)``, ``waitForFills()``).
final class LineFiller: Sendable {
    private let queue = DispatchQueue(label: "stallwatch.line-fill")
    /// Full names and lines; used on `queue` alone.
    private let symbols: QueueSymbolicator
    private let state = Mutex(State())

    private struct State {
        /// Reports whose fill has not finished, by id.
        var outstanding: Set<String> = []
        /// Filled reports the publisher has not taken yet.
        var completed: [StallReport] = []
    }

    /// A filler for the reports of `processID`.
    init(processID: Int32) {
        symbols = QueueSymbolicator(Symbolicator(processID: processID, mode: .full))
    }

    /// Loads the line tables of `stacks`' images into the shared symbol cache, in the background.
    func prefetch(_ stacks: [[UnwoundFrame]]) {
        let symbols = symbols
        queue.async { for stack in stacks { _ = symbols.symbolicator.symbolicate(stack) } }
    }

    /// Looks up the file:line of every frame of `report` (written from `evidence` with some lines pending), in
    /// the background, and rewrites its file if it is still there.
    func fill(
        _ report: StallReport, evidence: StallEvidence, maxThreadFrames: Int, writer: ReportWriter,
        emit: @escaping @Sendable (StallEvent) -> Void
    ) {
        let id = report.id
        state.withLock { _ = $0.outstanding.insert(id) }
        let symbols = symbols
        queue.async { [self] in
            let filled = Self.filled(report, evidence: evidence, maxThreadFrames: maxThreadFrames, with: symbols)
            do throws(StallWatchError) {
                try writer.rewrite(filled)
            } catch {
                emit(.reportFailed(error))
            }
            state.withLock { state in
                state.outstanding.remove(id)
                state.completed.append(filled)
            }
        }
    }

    /// Whether the fill of report `id` has not finished.
    func isOutstanding(_ id: String) -> Bool { state.withLock { $0.outstanding.contains(id) } }

    /// Waits for every fill and prefetch queued so far.
    func waitForFills() { queue.sync {} }

    /// The reports filled since the last call.
    func takeCompleted() -> [StallReport] {
        state.withLock { state in
            defer { state.completed.removeAll() }
            return state.completed
        }
    }

    /// `report` with the frames of its samples and thread snapshot symbolicated again from `evidence`'s
    /// addresses, waiting for line tables, and the same frames replaced in the point stack and call tree.
    private static func filled(
        _ report: StallReport, evidence: StallEvidence, maxThreadFrames: Int, with symbols: QueueSymbolicator
    ) -> StallReport {
        var report = report
        var replacements: [StackFrame: StackFrame] = [:]
        func refill(_ old: [StackFrame], _ new: [StackFrame]) -> [StackFrame] {
            // The same addresses give the same frames but for file:line; anything else is left as it was.
            guard old.count == new.count else { return old }
            for (before, after) in zip(old, new) where before != after && before.address == after.address {
                replacements[before] = after
            }
            return zip(old, new).map { $0.address == $1.address ? $1 : $0 }
        }
        for (index, raw) in evidence.samples.enumerated() where report.samples.indices.contains(index) {
            let frames = symbols.symbolicator.symbolicate(raw.frames)
            report.samples[index].frames = refill(report.samples[index].frames, frames)
        }
        if var threads = report.threads {
            for (index, raw) in evidence.threads.enumerated() where threads.indices.contains(index) {
                let frames = symbols.symbolicator.symbolicate(Array(raw.frames.prefix(maxThreadFrames)))
                threads[index].frames = refill(threads[index].frames, frames)
            }
            report.threads = threads
        }
        let threads = report.threads
        report.replaceFrames(replacements)
        report.threads = threads
        report.symbolication = .init(lines: .complete)
        return report
    }
}

/// A symbolicator that only the filler's queue uses (a ``Symbolicator`` is not thread-safe).
private final class QueueSymbolicator: @unchecked Sendable {
    // @unchecked Sendable: used on LineFiller's serial queue alone.
    let symbolicator: Symbolicator
    init(_ symbolicator: Symbolicator) { self.symbolicator = symbolicator }
}
