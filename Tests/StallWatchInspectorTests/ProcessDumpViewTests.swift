// The text and JSON of `stallwatch dump`: short names, the lock owner named, hostile names escaped, a round trip.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchCommands
@testable import StallWatchInspector

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool) struct ProcessDumpViewTests {
    static let hostile = "\u{1B}]0;owned\u{07}\u{1B}[2J\u{202E}x"

    static func dump(threadName: String = "lock-holder") -> ProcessDump {
        let swiftFrame = StackFrame(
            address: 0x5555_0000_1234, image: "/usr/bin/service", offset: 0x1234,
            symbol:
                "function signature specialization <Arg[1] = Dead> of static M.Stalls.sleepFor(ms: Swift.Int) -> ()",
            symbolOffset: 12, file: "Sources/M/Stalls.swift", line: 40,
            shortSymbol: "specialized static Stalls.sleepFor(ms:)")
        let lockFrame = StackFrame(
            address: 0x7f00_0000_2000, image: "/usr/lib/x86_64-linux-gnu/libc.so.6", offset: 0x2000,
            symbol: "__lll_lock_wait", symbolOffset: 43)
        var main = StallReport.ThreadSnapshot(
            threadId: 4242, name: "service", state: "S", wchan: "futex_wait_queue", syscall: "futex",
            waitAddress: 0x5555_0000_9000, waitingForThreadId: 4243, frames: [lockFrame, swiftFrame])
        main.error = nil
        let owner = StallReport.ThreadSnapshot(
            threadId: 4243, name: threadName, state: "S", wchan: "hrtimer_nanosleep", syscall: "clock_nanosleep",
            frames: [StackFrame(address: 0x7f00_0000_3000, symbol: "clock_nanosleep" + hostile)])
        return ProcessDump(
            takenAt: Date(timeIntervalSince1970: 1_796_000_000),
            process: .init(
                pid: 4242, executable: "/usr/bin/service", buildId: "abcd", host: "host"),
            threadCount: 5, loopThreadIds: [4242],
            threads: [
                .init(
                    snapshot: main, role: .loop, stateDescription: "sleeping", waitTarget: "word 0x555500009000",
                    pauseMicros: 41.5),
                .init(snapshot: owner, role: .lockOwner, stateDescription: "sleeping", pauseMicros: 30),
            ],
            images: [ImageInfo(path: "/usr/bin/service", buildId: "abcd", base: 0x5555_0000_0000, size: 0x10000)],
            errors: ["thread 4244: " + hostile])
    }

    @Test func theTextNamesTheLoopItsWaitAndTheLocksOwnerInShortNames() {
        let text = ProcessDumpView(format: ReportTextFormat(timeZone: TimeZone(identifier: "UTC")!)).lines(Self.dump())
            .joined(separator: "\n")
        #expect(text.contains("Process 4242 /usr/bin/service"))
        #expect(text.contains("; 5 thread(s)"))
        #expect(
            text.contains(
                "thread 4242 service (loop): S sleeping in futex (word 0x555500009000) [futex_wait_queue], paused 41.5 µs"
            ),
            "\(text)")
        #expect(text.contains("waits for a lock held by thread 4243 lock-holder"))
        #expect(text.contains("thread 4243 lock-holder (lock owner)"))
        #expect(text.contains("holds a lock thread(s) 4242 service wait for"))
        #expect(text.contains("specialized static Stalls.sleepFor(ms:) + 12 (service) Sources/M/Stalls.swift:40"))
        #expect(!text.contains("function signature specialization"))
    }

    @Test func guessedLoopsAreMarkedAsGuessesAndTheGuessIsExplained() throws {
        var dump = Self.dump()
        dump.loopThreadsGuessed = true
        let text = ProcessDumpView().lines(dump).joined(separator: "\n")
        #expect(text.contains("thread 4242 service (loop, guessed): S sleeping in futex"), "\(text)")
        #expect(text.contains("loops guessed (nothing names them: --tid, --threads, a heartbeat)"), "\(text)")
        let named = ProcessDumpView().lines(Self.dump()).joined(separator: "\n")
        #expect(!named.contains("guessed"), "\(named)")
        let json = String(decoding: try dump.encodedJSON(), as: UTF8.self)
        #expect(json.contains(#""loopThreadsGuessed" : true"#), "\(json)")
    }

    @Test func aDeadlockIsNamedFirstBlockedTimesAreShownAndIdleThreadsFoldedByTheirWait() {
        var dump = Self.dump()
        dump.deadlockThreadIds = [4242, 4243]
        dump.threads[0].activity = .blocked
        dump.threads[0].blockedForAtLeastMs = 12_400
        for tid in Int32(4250)...4252 {
            dump.threads.append(
                .init(
                    snapshot: .init(threadId: tid, name: "worker", state: "S", wchan: "ep_poll", syscall: "epoll_wait"),
                    role: .other, stateDescription: "sleeping", activity: .idle, blockedForAtLeastMs: 800))
        }
        dump.threads.append(
            .init(
                snapshot: .init(threadId: 4260, name: "spin", state: "R"), role: .other, stateDescription: "running",
                activity: .onCPU, onCPUForAtLeastMs: 212))
        dump.threads.append(
            .init(
                snapshot: .init(threadId: 4261, name: "spin2", state: "R"), role: .other, stateDescription: "running",
                activity: .onCPU))
        let view = ProcessDumpView(format: ReportTextFormat(timeZone: TimeZone(identifier: "UTC")!))
        let text = view.lines(dump).joined(separator: "\n")
        let deadlock =
            "deadlock: each waits for a lock the next one holds: 4242 service → 4243 lock-holder → 4242 service"
        #expect(text.contains(deadlock), "\(text)")
        #expect(text.contains("thread 4242 service (loop): S sleeping, blocked ≥ 12.4 s in futex"), "\(text)")
        #expect(text.contains("thread 4260 spin: R running, on CPU ≥ 212 ms without a wait"), "\(text)")
        #expect(text.contains("thread 4261 spin2: R running, on CPU (user space)"), "\(text)")
        #expect(text.contains("3 × epoll_wait [ep_poll], idle ≥ 800 ms: 4250 worker, 4251 worker, 4252 worker"))
        #expect(!text.contains("thread 4250"), "folded")
        let unfolded = ProcessDumpView(foldIdle: false).lines(dump).joined(separator: "\n")
        #expect(unfolded.contains("thread 4250 worker: S sleeping, idle ≥ 800 ms in epoll_wait"), "\(unfolded)")
    }

    @Test func aThreadBlockedOnAnotherProcessNamesItEscapedAndTheJSONKeepsIt() throws {
        var dump = Self.dump()
        dump.threads.append(
            .init(
                snapshot: .init(threadId: 4270, name: "locker", state: "S", wchan: "locks_lock", syscall: "flock"),
                role: .other, stateDescription: "sleeping", activity: .blocked,
                blockingProcess: .init(
                    processId: 5151, name: "holder" + Self.hostile, reason: "holds the FLOCK WRITE lock",
                    threadId: 5151,
                    state: "sleeping, in clock_nanosleep")))
        let lines = ProcessDumpView(foldIdle: false).lines(dump)
        let text = lines.joined(separator: "\n")
        #expect(
            text.contains(
                "  waits on process 5151 holder\\x1B]0;owned\\x07\\x1B[2J\\u{202E}x, thread 5151 (sleeping, in "
                    + "clock_nanosleep): holds the FLOCK WRITE lock"), "\(text)")
        for line in lines { #expect(!line.unicodeScalars.contains(where: TerminalText.isDangerous), "\(line)") }
        let decoded = try ProcessDump.decode(try dump.encodedJSON())
        #expect(decoded.threads.last?.blockingProcess?.processId == 5151)
    }

    @Test func aHolderRecordedByTheLocksStructureIsNamedAsLikelyWithItsEvidenceEscapedAndTheJSONKeepsIt() throws {
        var dump = Self.dump()
        dump.threads.append(
            .init(
                snapshot: .init(
                    threadId: 4280, name: "logger", state: "S", wchan: "futex_wait_queue", syscall: "futex",
                    waitAddress: 0x7f00_0000_4000),
                role: .other, stateDescription: "sleeping", activity: .blocked, candidateHolderIds: [4243, 4242],
                recordedHolderId: 4243, recordedHolderEvidence: "the object at 0x7f0000005000 holds" + Self.hostile))
        let lines = ProcessDumpView(foldIdle: false).lines(dump)
        let text = lines.joined(separator: "\n")
        #expect(
            text.contains(
                "  waits for a lock whose own structure records thread 4243 lock-holder as its holder (likely, not "
                    + "certain): the object at 0x7f0000005000 holds\\x1B]0;owned"), "\(text)")
        #expect(text.contains("  other candidate holders: 4242 service"), "\(text)")
        for line in lines { #expect(!line.unicodeScalars.contains(where: TerminalText.isDangerous), "\(line)") }
        let decoded = try ProcessDump.decode(try dump.encodedJSON())
        #expect(decoded.threads.last?.recordedHolderId == 4243)
        #expect(decoded.threads.last?.recordedHolderEvidence?.hasSuffix(Self.hostile) == true)
    }

    @Test func everyStringFromTheTargetIsEscaped() {
        let lines = ProcessDumpView(useColor: true).lines(Self.dump(threadName: "evil" + Self.hostile))
        // StallWatch's own colour is the only escape sequence: SGR, nothing else.
        let withoutColour = lines.map {
            $0.replacingOccurrences(of: "\u{1B}\\[[0-9;]*m", with: "", options: .regularExpression)
        }
        for line in withoutColour {
            #expect(!line.unicodeScalars.contains(where: TerminalText.isDangerous), "\(line)")
        }
        #expect(withoutColour.contains { $0.contains("evil\\x1B]0;owned\\x07") })
    }

    @Test func theJSONRoundTripsAndKeepsTheReportsFrameShape() throws {
        let dump = Self.dump()
        let data = try dump.encodedJSON()
        #expect(try ProcessDump.decode(data) == dump)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let thread = try #require((object["threads"] as? [[String: Any]])?.first)
        #expect(thread["threadId"] as? Int == 4242 && thread["role"] as? String == "loop")
        #expect(thread["waitAddress"] as? String == "0x555500009000" && thread["waitingForThreadId"] as? Int == 4243)
        let frame = try #require((thread["frames"] as? [[String: Any]])?.last)
        #expect(frame["address"] as? String == "0x555500001234" && frame["offset"] as? String == "0x1234")
        #expect(frame["shortSymbol"] as? String == "specialized static Stalls.sleepFor(ms:)")
        #expect(object["takenAt"] as? String == "2026-11-30T00:53:20.000Z")
    }

    @Test func theCommandRefusesItsOwnProcessAndSuggestsMistypedOptions() {
        let (code, output) = CapturedConsole.run(["dump", "-p", "\(getpid())"])
        #expect(code == .notTraceable)
        #expect(output.standardError.contains("a process cannot trace itself"))
        let (typo, mistyped) = CapturedConsole.run(["dump", "-p", "1", "--all-thread"])
        #expect(typo == .usage)
        #expect(mistyped.standardError.contains("did you mean --all-threads?"), "\(mistyped.standardError)")
        let (command, misnamed) = CapturedConsole.run(["dmup", "-p", "1"])
        #expect(command == .usage)
        #expect(misnamed.standardError.contains("did you mean dump?"))
    }
}
