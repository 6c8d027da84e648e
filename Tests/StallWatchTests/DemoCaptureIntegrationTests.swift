// The demo's embedded watchdog captures every kind of loop thread and survives what an application does to it.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch

@Suite(.offPool, .serialized) struct DemoCaptureIntegrationTests {
    static let demo = Fixtures.executable("stallwatch-demo")

    /// The `ended` event lines of a demo run.
    static func endedLines(_ output: Fixtures.Output) -> [Substring] {
        output.stdout.split(separator: "\n").filter { $0.contains(#""event":"ended""#) }
    }

    @Test(.timeLimit(.minutes(5)), arguments: [("cpu", ["stallOnCPU"]), ("sleep", ["stallInSleep", "sleepFor"])])
    func underDispatchMainTwentyStallsInARowNameTheStalledFunction(kind: String, functions: [String]) throws {
        let directory = Fixtures.temporaryDirectory("dispatch-main-20-\(kind)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try Fixtures.run(
            Self.demo,
            [
                "stall", "--loop", "dispatch-main", "--kind", kind, "--repeat", "20", "--duration-ms", "300",
                "--threshold-ms", "100", "--delay-ms", "500", "--probe-interval-ms", "50", "--report-dir", directory,
            ],
            // On a loaded machine the watchdog thread can wake 100 ms late; the late-wake-up guard then withholds
            // judgement for up to 100 ms more, and a 300 ms stall may end meanwhile, unreported (by design: that
            // guard is tested in StallDetectorTests). This test is about capture under dispatchMain. Every stall
            // gets a file of its own (no folding of repeats into the first), to set beside the demo's own clock.
            environment: ["STALLWATCH_LATE_WAKEUP_TOLERANCE_MS": "1000", "STALLWATCH_DEDUP_WINDOW_MS": "0"],
            timeout: .seconds(90))
        #expect(result.status == 0, "demo failed: \(result.stderr)")
        let ended = Self.endedLines(result)
        let events = result.stdout.split(separator: "\n").filter { !$0.contains(#""event":"sampled""#) }
        // The probe reads the draining pool thread from the main queue's drain lock, and the first sample is
        // taken at detection, before anything else: every stall names the function. A loaded machine may hold the
        // queue up elsewhere too — the loop starved of a CPU, or no pool thread taking the queue up for a while —
        // and such a stall must say so (`starved`, or no thread held the queue), blaming no code; it is not one of
        // the twenty.
        let named = ended.filter { line in functions.contains { line.contains("Stalls.\($0)") } }
        #expect(named.count == 20, "\(events.joined(separator: "\n"))")
        let reports = try Fixtures.reports(in: directory)
        // Each of the 20 stalls is reported on its own: every report naming the function spans exactly one of the
        // stalls the demo ran, by the demo's own clock, and no two span the same one. (The watchdog thread builds no
        // final report itself: when it did, the first one — cold DWARF line tables, 700–900 ms on a loaded machine —
        // kept it from looking at the loop while the second stall came and went, or began that stall from a look
        // taken before the report and followed it into the third: one report lasting two stalls.) A report may
        // last longer than the stall's 300 ms: the queue is held up until a pool thread answers the next ping,
        // and a loaded machine can keep that thread off a CPU for hundreds of milliseconds.
        let injected = Fixtures.demoStallIntervals(result.stderr)
        #expect(injected.count == 20, "the demo said when \(injected.count) stalls ran: \(result.stderr)")
        var spanned = Set<Int>()
        for line in named {
            let report = try #require(reports.first { line.contains(#""id":"\#($0.id)""#) }, "no report for \(line)")
            let span = report.startedAt...(report.endedAt ?? report.startedAt)
            let stalls = injected.indices.filter { injected[$0].overlaps(span) }
            #expect(stalls.count == 1, "\(report.id) (\(span), \(report.durationMs) ms) spans stalls \(stalls)")
            spanned.formUnion(stalls)
        }
        #expect(spanned.count == 20, "the reports span stalls \(spanned.sorted())")
        for line in ended where !named.contains(line) {
            let report = reports.first { line.contains(#""id":"\#($0.id)""#) }
            let heldByNone = report?.cause?.evidence.contains { $0.hasPrefix("no thread held the loop") } == true
            let samples = report?.samples.map { "\($0.offsetMs) ms: \($0.frames.prefix(8).compactMap(\.symbol))" } ?? []
            let explained =
                "\(line) \(report?.cause?.evidence ?? []) \(report?.notes ?? []); thread "
                + "\(report?.loop.threadId ?? 0), samples \(samples); all events:\n\(events.joined(separator: "\n"))"
            #expect(line.contains(#""cause":"starved""#) || heldByNone, "\(explained)")
        }
    }

    @Test(.timeLimit(.minutes(3)), arguments: ["cpu", "sleep"])
    func aLoopThreadThatBlocksEverySignalIsSampledWithStacks(kind: String) throws {
        let directory = Fixtures.temporaryDirectory("blocked-\(kind)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try Fixtures.run(
            Self.demo,
            [
                "stall", "--kind", kind, "--block-signals", "--duration-ms", "600", "--threshold-ms", "150",
                "--delay-ms", "200", "--report-dir", directory,
            ])
        #expect(result.status == 0, "demo failed: \(result.stderr)")
        let report = try #require(try Fixtures.reports(in: directory).first)
        #expect(report.capture.method == ThreadCaptureHelper.captureMethod)
        // Sampled again and again, not once: the first sample at detection and at least two while the 600 ms stall
        // lasts (every 50 ms on a quiet machine; a loaded machine may keep the watching thread off its CPU for most
        // of the stall, and how often it samples then is not what this test is about).
        let offsets = report.samples.map(\.offsetMs)
        #expect(report.samples.count >= 3, "samples at \(offsets) ms in \(report.durationMs) ms")
        // Every sample has a stack; a few may stop early on a loaded machine (caught where unwinding is short).
        #expect(report.samples.allSatisfy { $0.error == nil && !$0.frames.isEmpty }, "\(report.samples.map(\.error))")
        // Three quarters deep. A sample at the `ret` of libswiftSwiftOnoneSupport's `IndexingIterator.next()`
        // (the CPU loop's range iteration in a debug build) used to stop two frames in: that function's CFI still
        // reads the caller's RBP at CFA-16, the word just popped, below SP — the capture now copies the red zone.
        let deep = report.samples.filter { $0.frames.count > 3 }.count
        #expect(deep * 4 >= report.samples.count * 3, "frames per sample: \(report.samples.map(\.frames.count))")
        let symbols = report.samples.flatMap(\.frames).compactMap(\.symbol)
        #expect(symbols.contains { $0.contains("Stalls.") })
    }

    @Test(.timeLimit(.minutes(3)), arguments: ["default", "ignore", "handler"])
    func anApplicationThatTakesTheSamplingSignalBackSurvivesAndStallsAreStillCaptured(disposition: String) throws {
        let directory = Fixtures.temporaryDirectory("disposition-\(disposition)")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let arguments = [
            "stall", "--kind", "cpu", "--sampling-signal", disposition, "--duration-ms", "500", "--threshold-ms",
            "100", "--delay-ms", "200", "--report-dir", directory,
        ]
        let result = try Fixtures.run(Self.demo, arguments)
        #expect(result.status == 0, "demo failed (\(result.status)): \(result.stderr)")
        #expect(result.stdout.contains(#""disposition":"\#(disposition)""#))
        let report = try #require(try Fixtures.reports(in: directory).first)
        #expect(report.capture.method == ThreadCaptureHelper.captureMethod)
        // Every sample but the first and the last names the call: those two can land on either side of it on a
        // loaded machine (the stall's detection before the call was entered, its last sample after it returned).
        func named(_ sample: StallReport.Sample) -> Bool {
            sample.frames.contains { $0.symbol?.contains("stallOnCPU") == true }
        }
        let inside = report.samples.dropFirst().dropLast()
        #expect(
            report.samples.contains(where: named) && inside.allSatisfy(named),
            "samples naming stallOnCPU: \(report.samples.map(named))")

        // Where ptrace is refused, the signal path checks the disposition first: no signal, and the report says so.
        let fallbackDirectory = directory + "-fallback"
        defer { try? FileManager.default.removeItem(atPath: fallbackDirectory) }
        var fallbackArguments = arguments
        fallbackArguments[fallbackArguments.count - 1] = fallbackDirectory
        let fallback = try Fixtures.run(
            Self.demo, fallbackArguments, environment: ["STALLWATCH_NO_PTRACE_HELPER": "1"])
        #expect(fallback.status == 0, "demo failed (\(fallback.status)): \(fallback.stderr)")
        let noted = try #require(try Fixtures.reports(in: fallbackDirectory).first)
        #expect(noted.capture.method == "signal")
        let expected = ["default": "SIG_DFL", "ignore": "SIG_IGN", "handler": "own handler"][disposition]!
        #expect(noted.capture.errors.contains { $0.contains(expected) && $0.contains("not sent") }, "\(noted.capture)")
    }

    @Test(.timeLimit(.minutes(3)))
    func aWaitStallPrintsAFullUninterruptedPoll() throws {
        for environment in [[:], ["STALLWATCH_NO_PTRACE_HELPER": "1"]] {
            let directory = Fixtures.temporaryDirectory("wait-kind")
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let result = try Fixtures.run(
                Self.demo,
                [
                    "stall", "--kind", "wait", "--duration-ms", "900", "--threshold-ms", "100", "--delay-ms", "200",
                    "--report-dir", directory,
                ], environment: environment)
            #expect(result.status == 0, "demo failed: \(result.stderr)")
            let lines = result.stdout.split(separator: "\n")
            let waited = try #require(lines.firstIndex { $0.contains(#""event":"waited""#) })
            let endedAt = try #require(lines.firstIndex { $0.contains(#""event":"ended""#) })
            #expect(waited < endedAt, "the waited line comes before the stall ends")
            let line = String(lines[waited])
            #expect(line.contains(#""call":"poll""#) && line.contains(#""errno":0,"#), "\(environment): \(line)")
            func field(_ key: String) -> Int? {
                line.split(separator: ",").first { $0.hasPrefix("\"\(key)\":") }.flatMap {
                    Int($0.dropFirst(key.count + 3).prefix { $0 == "-" || $0.isNumber })
                }
            }
            let ms = try #require(field("ms"))
            // Not restarted: a poll cut short at the first capture (the threshold, 100 ms in) and restarted with its
            // full timeout would last 1000 ms or more. Up to 90 ms late, plus the time the thread then waited for
            // a CPU (its own figure: a loaded machine holds a woken thread up).
            let runQueueMs = try #require(field("runQueueMs"))
            #expect(runQueueMs >= 0, "\(line)")
            #expect(
                ms >= 890 && ms <= 990 + runQueueMs, "poll lasted \(ms) ms, \(runQueueMs) ms of it waiting for a CPU")
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func aProcessKilledThreeSecondsIntoAHangLeavesItsSamplesOnDisk() throws {
        let directory = Fixtures.temporaryDirectory("killed-hang")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let child = try ChildProcess(
            Self.demo,
            [
                "stall", "--kind", "cpu", "--duration-ms", "30000", "--threshold-ms", "250", "--delay-ms", "200",
                "--report-dir", directory,
            ])
        defer { child.terminate() }
        let reportFile = {
            (try? FileManager.default.contentsOfDirectory(atPath: directory))?.first { $0.hasSuffix(".json") }
        }
        #expect(pollUntil(timeout: .seconds(20)) { reportFile() != nil }, "no provisional report")
        let provisional = try ReportStore.load(path: directory + "/" + (try #require(reportFile())))
        // The scenario itself: the process lives 3 s into its stall, then is killed without warning.
        Thread.sleep(forTimeInterval: 3)
        child.terminate()
        let name = try #require(reportFile())
        let report = try ReportStore.load(path: directory + "/" + name)
        #expect(report.status == .ongoing)
        // Rewritten with the samples taken since (every 500 ms, each rewrite fsynced: on a loaded disk a rewrite
        // can lag), well into the 3 s the process lived.
        #expect(
            report.samples.count > provisional.samples.count,
            "\(report.samples.count) samples on disk, \(provisional.samples.count) in the provisional report")
        #expect((report.samples.last?.offsetMs ?? 0) >= 1500, "last sample at \(report.samples.last?.offsetMs ?? 0) ms")
        // The latest samples on disk are the stall's: each names the spinning function, or says why its capture
        // failed (on a loaded machine the thread may not reach its stop in time).
        let latest = report.samples.suffix(10)
        let named = latest.filter { $0.frames.contains { $0.symbol?.contains("stallOnCPU") == true } }
        let described = latest.map { "\($0.offsetMs) ms: \($0.frames.count) frames, \($0.error ?? "no error")" }
        #expect(latest.allSatisfy { sample in named.contains(sample) || sample.error != nil }, "\(described)")
        #expect(!named.isEmpty, "\(described)")
    }
}
