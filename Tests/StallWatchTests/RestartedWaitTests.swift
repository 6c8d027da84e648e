// A wait a stop interrupted, continued by restart_syscall: read as the call it continues, so a loop found idling in
// a restarted poll is idle from the first look.
import CStallWatchCore
import Foundation
import StallWatchTestSupport
import Synchronization
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.offPool, .serialized) struct RestartedWaitTests {
    static func restart(_ arguments: String) -> ThreadWait {
        ThreadWait(line: "219 \(arguments) 0x7ffe1000 0x7f12ab40\n")!
    }

    @Test func aRestartIsReadAsTheCallTheKernelFunctionItSleepsInNames() {
        let poll = Self.restart("0x7f36edba4730 0x1 0xea60 0x0 0x0 0x0").continuing(
            wchan: "poll_schedule_timeout.constprop.0")
        #expect(poll.number == 7 && poll.isRestart && poll.kind == .idleWait)
        #expect(poll.target == [0x7f36_edba_4730, 1])
        let futex = Self.restart("0x55a0 0x80 0x0 0x7f00 0x0 0xffffffff").continuing(wchan: "futex_wait_queue")
        #expect(futex.number == 202 && futex.isRestart && futex.kind == .lock)
        // glibc's nanosleep is clock_nanosleep(CLOCK_REALTIME, 0, …); a raw nanosleep's first argument is a pointer.
        let clockSleep = Self.restart("0x0 0x0 0x7ffe2000 0x7ffe2000 0x0 0x0").continuing(wchan: "do_nanosleep")
        #expect(clockSleep.number == 230 && clockSleep.kind == .sleep)
        let rawSleep = Self.restart("0x7ffe2000 0x7ffe2010 0x0 0x0 0x0 0x0").continuing(wchan: "hrtimer_nanosleep")
        #expect(rawSleep.number == 35 && rawSleep.kind == .sleep)
        let unknown = Self.restart("0x1 0x2 0x3 0x4 0x5 0x6").continuing(wchan: "some_other_wait")
        #expect(unknown.number == 219 && unknown.isRestart)
        // Only a restart is read anew.
        let read = ThreadWait(line: "0 0x3 0x7ffe 0x1 0x0 0x0 0x0 0x7ffe1000 0x7f12ab40\n")!
        #expect(read.continuing(wchan: "poll_schedule_timeout") == read)
    }

    @Test(.timeLimit(.minutes(1)))
    func aLoopWhosePollAStopRestartedIsIdleFromTheFirstLook() throws {
        // A thread idling in a timed `poll` on a pipe, as a C service's loop does.
        let loop = try ProcProbeDatingTests.PipeLoop()
        defer { loop.stop() }
        let pid = getpid()
        let tid = ProcProbeDatingTests.threadInPoll(loop)
        let directory = ProcDirectory(processID: pid, threadID: tid)
        // A capture stops the thread in its poll; the kernel continues the poll with restart_syscall.
        let helper = try ThreadCaptureHelper.shared()
        _ = try helper.capture(threadID: tid, maxStackBytes: 4096, timeout: .seconds(2)).get()
        #expect(
            pollUntil {
                let raw = (try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/syscall", encoding: .utf8)) ?? ""
                return raw.hasPrefix("219 ") && directory.wchan() != nil
            }, "the poll was not restarted")
        let wait = try #require(directory.syscall())
        #expect(wait.number == 7 && wait.isRestart, "\(wait)")
        // A watch that starts now sees the loop idle in it, look after look.
        var probe = ProcProgressProbe(processID: pid, threadID: tid, now: sw_monotonic_ns())
        for _ in 0..<3 {
            let seen = probe.observe(now: sw_monotonic_ns())
            #expect(seen?.isBusy == false, "\(String(describing: directory.syscall()))")
            usleep(20_000)
        }
    }
}
