// A final report is on disk at once with names; its file:line follow in an atomic rewrite readers never see half of.
import Dispatch
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@inline(never) func finalReportLinesTestsCaptureHere() -> [UInt64] {
    Thread.callStackReturnAddresses.map { UInt64($0.uintValue) }
}

@Suite(.offPool, .serialized) struct FinalReportLinesTests {
    @Test func symbolicatorThatDoesNotWaitGivesNamesAndCountsLinesPendingUntilTheTablesAreLoaded() throws {
        let cache = SymbolCache()
        let stack = finalReportLinesTestsCaptureHere()
        let quick = Symbolicator(processID: getpid(), mode: .full, cache: cache)
        quick.waitsForLines = false
        let first = quick.symbolicate(stack)
        // Nothing has loaded this cache's line tables: names, no file:line, every frame of an image counted.
        #expect(first.contains { $0.symbol?.contains("finalReportLinesTestsCaptureHere") == true })
        #expect(first.allSatisfy { $0.file == nil })
        #expect(quick.pendingLineLookups > 0)

        let waiting = Symbolicator(processID: getpid(), mode: .full, cache: cache)
        let full = waiting.symbolicate(stack)
        #expect(waiting.pendingLineLookups == 0)
        let here = try #require(full.first { $0.symbol?.contains("finalReportLinesTestsCaptureHere") == true })
        #expect(here.file?.hasSuffix("FinalReportLinesTests.swift") == true && (here.line ?? 0) > 0)

        // Loaded now: the same symbolicator, which cached nothing pending, gives the lines without waiting.
        let pendingBefore = quick.pendingLineLookups
        let again = quick.symbolicate(stack)
        #expect(quick.pendingLineLookups == pendingBefore)
        #expect(again == full)
    }

    @Test(.timeLimit(.minutes(3)))
    func coldFirstStallWritesItsFinalReportAtOnceAndItsLinesFollowInARewrite() throws {
        let directory = Fixtures.temporaryDirectory("lines-cold")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try Self.stall(directory: directory, reader: false)
        // Written at the stall's end without waiting for DWARF (the bound only guards against a hang: a loaded
        // machine's fsync alone can take hundreds of ms).
        #expect(run.endToDiskMs < 5_000, "\(run.endToDiskMs) ms")
        let first = try #require(run.first)
        #expect(first.status == .ended)
        // On failure, what the samples were and what the capture met.
        let sampled =
            "\(first.samples.count) samples (\(first.samples.map { "\($0.frames.count) frames \($0.error ?? "")" })), "
            + "\(first.durationMs) ms; errors \(first.capture.errors); notes \(first.notes)"
        #expect(first.samples.flatMap(\.frames).contains { $0.symbol?.contains("blockUntilEnd") == true }, "\(sampled)")
        let state = try #require(first.symbolication?.lines)
        #expect(state == .pending || state == .complete)

        // Filled in by the time the watchdog has stopped: lines complete, this file's line, valid as ever.
        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1)
        #expect(reports[0].symbolication?.lines == .complete)
        #expect(reports[0].id == first.id)
        let frames = reports[0].samples.flatMap(\.frames) + (reports[0].pointStack?.frames ?? [])
        let blocking = frames.filter { $0.symbol?.contains("blockUntilEnd") == true }
        #expect(!blocking.isEmpty)
        #expect(blocking.allSatisfy { $0.file?.hasSuffix("FinalReportLinesTests.swift") == true && ($0.line ?? 0) > 0 })
        // Nothing but lines changed.
        #expect(reports[0].samples.count == first.samples.count)
        #expect(reports[0].signature == first.signature)
        #expect(reports[0].samples.map { $0.frames.map(\.symbol) } == first.samples.map { $0.frames.map(\.symbol) })
        try Fixtures.expectReportsValidate(in: directory)
    }

    @Test(.timeLimit(.minutes(3)))
    func readersNeverSeeAHalfWrittenReportWhileItsLinesAreFilledIn() throws {
        let directory = Fixtures.temporaryDirectory("lines-readers")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try Self.stall(directory: directory, reader: true)
        #expect(run.readFailures.isEmpty, "\(run.readFailures.prefix(3))")
        #expect(run.reads > 0)
        let reports = try Fixtures.reports(in: directory)
        try #require(reports.count == 1)
        #expect(reports[0].symbolication?.lines == .complete)
        try Fixtures.expectReportsValidate(in: directory)
    }

    // MARK: - One stall

    struct Run {
        /// The final report as it was on disk when the watchdog announced it.
        var first: StallReport?
        var endToDiskMs: Double = .nan
        var reads = 0
        var readFailures: [String] = []
    }

    /// One 400 ms stall of a new watchdog with `full` symbolication, its line tables made cold just before the
    /// stall ends (the shared cache emptied), so the final report is written before they load unless another
    /// test loads them in that moment. With `reader`, a thread decodes the report file in a loop from the moment
    /// it exists until the watchdog has stopped (which waits for the lines to be filled in).
    static func stall(directory: String, reader: Bool) throws -> Run {
        var config = StallWatchConfiguration()
        config.thresholdMs = 100
        config.reportDirectory = directory
        config.symbolication = .full
        let loop = try EventLoop(name: "lines", mainQueue: .disabled)
        let run = Mutex(Run())
        let stallEnd = Atomic<UInt64>(0)
        let stopReading = Atomic<Bool>(false)
        let readerDone = DispatchSemaphore(value: 0)
        let ended = DispatchSemaphore(value: 0)
        let watchdog = Watchdog(loop: loop, configuration: config) { event in
            guard case .ended(let report) = event else { return }
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds &- stallEnd.load(ordering: .acquiring)) / 1e6
            let path = directory + "/" + ReportWriter.fileName(forReportID: report.id)
            let onDisk = try? ReportStore.load(path: path)
            run.withLock {
                $0.first = onDisk
                $0.endToDiskMs = elapsed
            }
            if reader {
                let thread = Thread {
                    while !stopReading.load(ordering: .acquiring) {
                        do {
                            _ = try ReportStore.load(path: path)
                            run.withLock { $0.reads += 1 }
                        } catch {
                            run.withLock { $0.readFailures.append("\(error)") }
                        }
                    }
                    readerDone.signal()
                }
                thread.name = "lines-reader"
                thread.start()
            }
            ended.signal()
        }
        try watchdog.start()
        _ = startLoopThread(loop)
        loop.perform {
            blockUntilEnd(milliseconds: 400)
            SymbolCache.shared.removeAll()
            stallEnd.store(DispatchTime.now().uptimeNanoseconds, ordering: .releasing)
        }
        ended.wait()
        loop.stop()
        watchdog.stop()
        if reader {
            stopReading.store(true, ordering: .releasing)
            readerDone.wait()
        }
        return run.withLock { $0 }
    }
}

@inline(never) private func blockUntilEnd(milliseconds: Int) {
    let end = DispatchTime.now().uptimeNanoseconds + UInt64(milliseconds) * 1_000_000
    while DispatchTime.now().uptimeNanoseconds < end { usleep(1000) }
}
