// Tests of out-of-process capture (PtraceSampler) against real child processes.
import CStallWatchCore
import CStallWatchFixtures
import Foundation
import StallWatchSidecar
import StallWatchTestSupport
import Testing

@testable import StallWatch

#if canImport(Glibc)
    import Glibc
#endif

extension CaptureTests {
    @Suite(.offPool) struct PtraceSamplerTests {
        /// Starts `/bin/sleep 30` and waits until it sits in its sleep syscall.
        private func sleepingChild() throws -> ChildProcess {
            let child = try ChildProcess("/bin/sleep", ["30"])
            let asleep = pollUntil {
                // /proc/PID/syscall starts with the syscall number: 230 clock_nanosleep, 35 nanosleep.
                guard let text = readProcFile("/proc/\(child.pid)/syscall") else { return false }
                return text.hasPrefix("230 ") || text.hasPrefix("35 ")
            }
            try #require(asleep, "child \(child.pid) never reached its sleep syscall")
            return child
        }

        @Test func aSleepingChildIsCapturedUnwoundAndLeftRunning() throws {
            let child = try sleepingChild()
            defer { child.terminate() }
            let sampler = PtraceSampler(processID: child.pid)
            let unwinder = try StackUnwinder(processID: child.pid)
            for round in 0..<20 {
                let capture = try sampler.capture(threadID: child.pid, maxStackBytes: 256 << 10).get()
                #expect(capture.threadID == child.pid)
                #expect(!capture.stack.isEmpty)
                #expect(capture.pauseNanoseconds > 0)
                #expect(capture.stackLow <= capture.stackPointer && capture.stackPointer < capture.stackHigh)
                #expect(capture.notes.isEmpty, "\(capture.notes)")

                let stack = unwinder.unwind(capture, maxFrames: 64)
                #expect(
                    stack.addresses.count >= 4, "round \(round): \(stack.addresses.count) frames, \(stack.error ?? "")")
                let images = stack.addresses.map { mappedPath(pid: child.pid, address: $0) ?? "?" }
                // Innermost in libc's sleep syscall wrapper, outermost in sleep's own code or libc's start-up.
                #expect(images.first?.contains("libc.so") == true, "\(images)")
                #expect(images.contains { $0.hasSuffix("/sleep") }, "\(images)")
                #expect(images.filter { $0.contains("libc.so") }.count >= 2, "\(images)")  // … and __libc_start_*
            }
            // Left running, not traced: SEIZE + INTERRUPT + DETACH leave no stop behind.
            let state = try #require(child.statusField("State"))
            #expect(!state.hasPrefix("T") && !state.hasPrefix("t"), "State: \(state)")
            #expect(child.statusField("TracerPid") == "0")
            // The interrupted sleep resumes through restart_syscall (219) with the remaining time; just after the
            // detach the child may still be on its way back in ("running").
            let stillSleeping = readProcFile("/proc/\(child.pid)/syscall") ?? ""
            #expect(
                ["230 ", "35 ", "219 ", "running"].contains { stillSleeping.hasPrefix($0) }, "\(stillSleeping)")
        }

        /// The call a capture stopped a thread in reads as `/proc/…/syscall` shows it — number, arguments, stack
        /// pointer and program counter — so that it can be matched against a loop's learned idle wait.
        @Test func theCallTheStopFoundIsTheWaitProcShowsWithItsArgumentsAndPlace() throws {
            let child = try sleepingChild()
            defer { child.terminate() }
            let sampler = PtraceSampler(processID: child.pid)
            for _ in 0..<3 {
                // Before each capture: a stop restarts the sleep as restart_syscall (219), which the next shows.
                let before = try #require(ThreadWait.read(pid: child.pid, tid: child.pid))
                let capture = try sampler.capture(threadID: child.pid, maxStackBytes: 64 << 10).get()
                let stopped = try #require(
                    capture.stopWait, "no call at the stop (stopSyscall \(capture.stopSyscall ?? -1))")
                #expect(stopped == before, "stop \(stopped) vs /proc \(before)")
                _ = pollUntil { ThreadWait.read(pid: child.pid, tid: child.pid)?.number != nil }
            }
        }

        @Test func aBusyChildIsCapturedAndResumes() throws {
            let child = try ChildProcess("/bin/sh", ["-c", "while :; do :; done"])
            defer { child.terminate() }
            let utime: () -> Int = {
                Int(
                    readProcFile("/proc/\(child.pid)/stat")?.split(separator: ")").last?
                        .split(separator: " ")[11] ?? "") ?? -1
            }
            // Past exec and the dynamic loader: the shell has spent CPU time in its loop.
            try #require(pollUntil { utime() >= 2 })
            let unwinder = try StackUnwinder(processID: child.pid)
            let capture = try PtraceSampler(processID: child.pid).capture(threadID: child.pid, maxStackBytes: 64 << 10)
                .get()
            let stack = unwinder.unwind(capture, maxFrames: 64)
            #expect(
                stack.addresses.count >= 2,
                "\(stack.error ?? "") \(stack.addresses.map { mappedPath(pid: child.pid, address: $0) ?? "?" })")
            #expect(child.statusField("TracerPid") == "0")
            let before = utime()
            #expect(pollUntil { utime() > before }, "the child stopped accumulating CPU time")
        }

        @Test func aThreadInUninterruptibleSleepIsLeftAloneAtOnce() throws {
            // Blocked in vfork (state D) for 1.5 s: PTRACE_INTERRUPT cannot take effect before that.
            let pid = sw_test_spawn_vfork_blocked(1500)
            try #require(pid > 0)
            defer {
                kill(pid, SIGKILL)
                var status: Int32 = 0
                waitpid(pid, &status, 0)
            }
            try #require(pollUntil { ProcDirectory(processID: pid, threadID: pid).stat()?.state == "D" })

            let result = PtraceSampler(processID: pid, timeout: .seconds(5)).capture(
                threadID: pid, maxStackBytes: 4096)
            guard case .failure(let error) = result else {
                Issue.record("captured a thread blocked in vfork")
                return
            }
            // Not held until the vfork ends, nor until the timeout: the capture is over while the thread still
            // sleeps, and it was never seized (no tracer, no stop waiting for it when the vfork ends).
            #expect(ProcDirectory(processID: pid, threadID: pid).stat()?.state == "D")
            #expect(error.code == .captureTimedOut)
            #expect(error.context["unstopped"] == "uninterruptible", "\(error)")
            #expect(error.message.contains("uninterruptible sleep (state D)"), "\(error)")
            let status = readProcFile("/proc/\(pid)/status") ?? ""
            #expect(status.contains("TracerPid:\t0\n"), "\(status)")
            // Once the vfork ends the process runs on into pause(), never into a ptrace stop.
            #expect(pollUntil { (readProcFile("/proc/\(pid)/syscall") ?? "").hasPrefix("34 ") })  // pause
            let after = readProcFile("/proc/\(pid)/status") ?? ""
            #expect(!after.contains("State:\tt") && !after.contains("State:\tT"), "\(after)")
        }

        @Test func aThreadWorkingInsideOneLongWriteIsReleasedAtOnceAndItsWriteGoesOn() throws {
            var events: Int32 = -1
            let pid = sw_test_spawn_long_write(1 << 30, &events)
            try #require(pid > 0)
            defer {
                kill(pid, SIGKILL)
                var status: Int32 = 0
                waitpid(pid, &status, 0)
                close(events)
            }
            var byte: UInt8 = 0
            try #require(read(events, &byte, 1) == 1 && byte == UInt8(ascii: "S"), "the child did not start its write")
            // 'S' comes just before the write: a child preempted in between would be stopped in user space. Its
            // file has grown once the write is under way (tmpfs sets the size page by page).
            try #require(
                pollUntil { Self.writtenBytes(byChild: pid) > 0 }, "the child's file did not grow within 10 s")
            let result = PtraceSampler(processID: pid, timeout: .seconds(30)).capture(
                threadID: pid, maxStackBytes: 4096)
            // The capture is over while the write goes on: no 'E' yet from the child.
            var pending = pollfd(fd: events, events: Int16(POLLIN), revents: 0)
            #expect(poll(&pending, 1, 0) == 0, "the capture waited for the write to end")
            guard case .failure(let error) = result else {
                Issue.record("a thread inside one long write stopped: \(result)")
                return
            }
            #expect(error.code == .captureTimedOut)
            #expect(
                ["workingInKernel", "uninterruptible"].contains(error.context["unstopped"] ?? ""),
                "released at the timeout, not at once: \(error)")
            #expect(readProcFile("/proc/\(pid)/status")?.contains("TracerPid:\t0\n") == true)
            // The write completes whole, with no stop after it.
            #expect(read(events, &byte, 1) == 1 && byte == UInt8(ascii: "E"), "the write failed or was cut short")
            let status = readProcFile("/proc/\(pid)/status") ?? ""
            #expect(!status.contains("State:\tt") && !status.contains("State:\tT"), "\(status)")
        }

        /// The size of the file `sw_test_spawn_long_write`'s child writes (found among its descriptors), 0 until
        /// it has one.
        static func writtenBytes(byChild pid: Int32) -> Int {
            let directory = "/proc/\(pid)/fd"
            for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
                let path = directory + "/" + name
                guard
                    let target = try? FileManager.default.destinationOfSymbolicLink(atPath: path),
                    target.hasPrefix("/dev/shm/stallwatch-long-write-")
                else { continue }
                var info = stat()
                return stat(path, &info) == 0 ? Int(info.st_size) : 0
            }
            return 0
        }

        @Test func aNonexistentProcessIsNoSuchProcess() {
            let result = PtraceSampler(processID: 2_000_000_000).capture(threadID: 2_000_000_000, maxStackBytes: 4096)
            guard case .failure(let error) = result else {
                Issue.record("captured a nonexistent process")
                return
            }
            #expect(error.code == .noSuchProcess)
            #expect(error.errno == ESRCH)
            #expect(error.message.contains("no such process"))
        }

        @Test func tracingOurOwnThreadIsPermissionDeniedWithReasons() {
            nonisolated(unsafe) var tid: Int32 = 0
            let thread = CaptureTestThread { tid = sw_gettid() }
            thread.join()
            // A live thread of ours: this test's own.
            let result = PtraceSampler(processID: getpid()).capture(threadID: sw_gettid(), maxStackBytes: 4096)
            guard case .failure(let error) = result else {
                Issue.record("ptrace of our own thread succeeded")
                return
            }
            #expect(tid != 0)
            #expect(error.code == .permissionDenied)
            #expect(error.errno == EPERM)
            #expect(error.message.contains("CAP_SYS_PTRACE"))
        }
    }
}
