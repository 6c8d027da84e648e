// ReportFixtures: the reports behind the golden files in Tests/StallWatchInspectorTests/Fixtures, built in code so
// both directions are tested.
import Foundation
import StallWatch

package enum ReportFixtures {
    /// Fixtures/reports/<name>.json for each fixture, in this order.
    package static let all: [(name: String, report: StallReport)] = [
        ("stall-ended", endedStall), ("hang-unrecovered", unrecoveredHang), ("stall-ongoing", ongoingStall),
    ]

    /// Fixtures/diagnosed/<name>.json: reports with the diagnosis fields (cause, threads, context, repeats), kept
    /// apart so the list and summary goldens above stay small.
    package static let diagnosed: [(name: String, report: StallReport)] = [
        ("lock-diagnosed", diagnosedLock), ("deadlock-likely", likelyDeadlock),
        ("lock-other-process", semaphoreHeldByProcess), ("stall-withdrawn", withdrawnStall),
    ]

    /// Tests/StallWatchInspectorTests/Fixtures in the source tree: the golden reports, views and help texts the
    /// inspector's and the command line's tests compare with.
    package static var directory: URL { sourceDirectory }
    package static var reportsDirectory: URL { directory.appendingPathComponent("reports") }
    /// The source tree's fixtures, where `STALLWATCH_UPDATE_GOLDEN=1` rewrites the files.
    package static var sourceDirectory: URL {
        Fixtures.packageRoot.appendingPathComponent("Tests/StallWatchInspectorTests/Fixtures")
    }
    package static var repositoryRoot: URL { Fixtures.packageRoot }
    /// `STALLWATCH_UPDATE_GOLDEN=1`: the golden tests write what they produce instead of comparing.
    package static let updating = StallWatchEnvironmentVariable.updateGolden.value == "1"

    package static func date(_ text: String) -> Date { ReportDate.date(from: text)! }

    package static let demo = "/usr/local/bin/chat-demo"
    package static let libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
    package static let dispatch = "/usr/lib/swift/linux/libdispatch.so"

    package static let images = [
        ImageInfo(
            path: demo, buildId: "3f9a1c0e5b7d2468ace013579bdf2468ace01357", base: 0x55d0a0000000, size: 0xa000),
        ImageInfo(
            path: libc, buildId: "93ac61ec5a8eb1396f9fbd350e3169a558528a40", base: 0x7f3a12200000, size: 0x1e1000),
        ImageInfo(path: dispatch, buildId: nil, base: 0x7f3a11e00000, size: 0x64000),
    ]

    package static let endedStall = StallReport(
        id: "20261130T221500.123Z-4242-3", status: .ended, severity: .stall,
        startedAt: date("2026-11-30T22:15:00.123Z"), endedAt: date("2026-11-30T22:15:00.435Z"), durationMs: 312.5,
        detection: .init(
            source: "in-process", strategy: .deadline, thresholdMs: 250, hangThresholdMs: 5000,
            detectedAt: date("2026-11-30T22:15:00.374Z"), latencyMs: 1.25),
        process: .init(pid: 4242, executable: demo, buildId: "3f9a1c0e5b7d2468ace013579bdf2468ace01357", host: "web-1"),
        loop: .init(name: "main", threadId: 4242, phase: "beforeSources", iteration: 18231),
        samples: [
            .init(
                offsetMs: 251.5,
                frames: [
                    StackFrame(
                        address: 0x7f3a1229e3c8, image: libc, offset: 0x9e3c8,
                        symbol: "__memmove_avx_unaligned_erms",
                        symbolOffset: 120),
                    StackFrame(
                        address: 0x55d0a0003456, image: demo, offset: 0x3456,
                        symbol: "ChatDemo.SessionList.sortAndFilter() -> ()", symbolOffset: 86,
                        file: "/src/chat-demo/Sources/ChatDemo/SessionList.swift", line: 42),
                    StackFrame(
                        address: 0x55d0a0002f10, image: demo, offset: 0x2f10,
                        symbol: "closure #1 () -> () in ChatDemo.Server.handle(request: ChatDemo.Request) -> ()",
                        symbolOffset: 212, file: "/src/chat-demo/Sources/ChatDemo/Server.swift", line: 118),
                    StackFrame(address: 0x7f3a11e1b2c0, image: dispatch, offset: 0x1b2c0),
                ],
                pauseMicros: 18.5),
            .init(
                offsetMs: 301.75,
                frames: [
                    StackFrame(
                        address: 0x55d0a0003460, image: demo, offset: 0x3460,
                        symbol: "ChatDemo.SessionList.sortAndFilter() -> ()", symbolOffset: 96,
                        file: "/src/chat-demo/Sources/ChatDemo/SessionList.swift", line: 43),
                    StackFrame(
                        address: 0x55d0a0002f10, image: demo, offset: 0x2f10,
                        symbol: "closure #1 () -> () in ChatDemo.Server.handle(request: ChatDemo.Request) -> ()",
                        symbolOffset: 212, file: "/src/chat-demo/Sources/ChatDemo/Server.swift", line: 118),
                ],
                pauseMicros: 24.25),
        ],
        images: images, signature: "9f2c4e1a7b3d5f60",
        capture: .init(
            method: "signal", sampleIntervalMs: 50, samplesTaken: 2, samplesFailed: 0, pauseMicrosMedian: 21.375,
            pauseMicrosMax: 24.25, unwindMicrosMedian: 37.5, symbolicationMicros: 412),
        notes: ["The watchdog woke 1.25 ms after the threshold was crossed."],
        annotations: ["request": "POST /sessions/sort", "client": "10.0.0.7"])

    package static let unrecoveredHang = StallReport(
        id: "20261201T080000.000Z-977-1", status: .unrecovered, severity: .hang,
        startedAt: date("2026-12-01T08:00:00.000Z"), endedAt: nil, durationMs: 63250,
        detection: .init(
            source: "proc", strategy: .deadline, thresholdMs: 250, hangThresholdMs: 5000,
            detectedAt: date("2026-12-01T08:00:00.262Z"), latencyMs: 12),
        process: .init(pid: 977, executable: demo, buildId: nil, host: "web-2"),
        loop: .init(name: "main", threadId: 977, phase: "afterWaiting", iteration: 5),
        samples: [
            .init(
                offsetMs: 262,
                frames: [
                    StackFrame(address: 0x7f3a122a1000, image: libc, offset: 0xa1000),
                    StackFrame(address: 0x55d0a0004100, image: demo, offset: 0x4100),
                    StackFrame(address: 0x1000),
                ],
                pauseMicros: 104),
            .init(
                offsetMs: 5262, frames: [],
                error: "thread in uninterruptible sleep (state D, wchan io_schedule); no stack"),
        ],
        images: Array(images.prefix(2)), signature: "0b1d2e3f40516273",
        capture: .init(
            method: "ptrace", sampleIntervalMs: 50, samplesTaken: 2, samplesFailed: 1, pauseMicrosMedian: 104,
            pauseMicrosMax: 104, errors: ["sample 2: PTRACE_INTERRUPT not acknowledged within 100 ms"]),
        notes: [
            "The process exited while the loop was still stuck.", "Symbolication was off: frames carry image + offset.",
        ])

    /// Under way when watching started: its start and duration are bounds (`startedBeforeAttach`).
    package static let ongoingStall: StallReport = {
        var report = ongoingStallAsRead
        report.startedBeforeAttach = true
        return report
    }()

    private static let ongoingStallAsRead = StallReport(
        id: "20261201T090000.500Z-4242-7", status: .ongoing, severity: .stall,
        startedAt: date("2026-12-01T09:00:00.500Z"), endedAt: nil, durationMs: 251,
        detection: .init(
            source: "heartbeat", strategy: .classic, thresholdMs: 250, hangThresholdMs: 5000,
            detectedAt: date("2026-12-01T09:00:00.751Z"), latencyMs: 0.5),
        process: .init(pid: 4242, executable: demo, buildId: "3f9a1c0e5b7d2468ace013579bdf2468ace01357", host: "web-1"),
        loop: .init(name: "main", threadId: 4242, phase: "beforeTimers", iteration: 99),
        samples: [
            .init(
                offsetMs: 251,
                frames: [
                    StackFrame(
                        address: 0x55d0a0006000, image: demo, offset: 0x6000, symbol: "sw_capture_handler",
                        symbolOffset: 30),
                    StackFrame(
                        address: 0x7f3a1223c050, image: libc, offset: 0x3c050, symbol: "__restore_rt",
                        symbolOffset: 0),
                    StackFrame(
                        address: 0x55d0a0005000, image: demo, offset: 0x5000,
                        symbol: "ChatDemo.Store.save() throws -> ()",
                        symbolOffset: 40, file: "/src/chat-demo/Sources/ChatDemo/Store.swift", line: 77),
                ])
        ],
        images: Array(images.prefix(2)), signature: "77aa88bb99cc00dd",
        capture: .init(method: "signal", sampleIntervalMs: 50, samplesTaken: 1))

    /// A lock stall with the diagnosis of issue 3: cause, thread states, the other threads, context, repeats.
    package static let diagnosedLock: StallReport = {
        let lockFrames = [
            StackFrame(
                address: 0x7f3a1229a129, image: libc, offset: 0x9a129, symbol: "__GI___lll_lock_wait",
                symbolOffset: 41),
            StackFrame(
                address: 0x7f3a122a0482, image: libc, offset: 0xa0482, symbol: "__pthread_mutex_lock@GLIBC_2.2.5",
                symbolOffset: 274),
            StackFrame(
                address: 0x55d0a0007100, image: demo, offset: 0x7100, symbol: "ChatDemo.Database.withLock() -> ()",
                symbolOffset: 32, file: "/src/chat-demo/Sources/ChatDemo/Database.swift", line: 12),
            StackFrame(
                address: 0x55d0a0002f10, image: demo, offset: 0x2f10,
                symbol: "closure #1 () -> () in ChatDemo.Server.handle(request: ChatDemo.Request) -> ()",
                symbolOffset: 212, file: "/src/chat-demo/Sources/ChatDemo/Server.swift", line: 118),
        ]
        let waiting = StallReport.ThreadState(
            state: "S", wchan: "futex_wait_queue", syscall: "futex", syscallNumber: 202, cpuTimeMs: 0.1,
            voluntarySwitches: 41, involuntarySwitches: 3, runQueueWaitMs: 0)
        var report = StallReport(
            id: "20261201T100000.000Z-4242-9", status: .ended, severity: .stall,
            startedAt: date("2026-12-01T10:00:00.000Z"), endedAt: date("2026-12-01T10:00:00.760Z"), durationMs: 760,
            detection: .init(
                source: "in-process", strategy: .deadline, thresholdMs: 250, hangThresholdMs: 5000,
                detectedAt: date("2026-12-01T10:00:00.250Z"), latencyMs: 0.2),
            process: .init(
                pid: 4242, executable: demo, buildId: "3f9a1c0e5b7d2468ace013579bdf2468ace01357", host: "web-1"),
            loop: .init(name: "main", threadId: 4242, phase: "beforeSources", iteration: 777),
            samples: [
                .init(offsetMs: 250, frames: lockFrames, pauseMicros: 31, thread: waiting),
                .init(offsetMs: 300, frames: lockFrames, pauseMicros: 29, thread: waiting),
            ],
            images: Array(images.prefix(2)), signature: "4c4f434b53544c4c",
            capture: .init(
                method: "signal", sampleIntervalMs: 50, samplesTaken: 2, pauseMicrosMedian: 30, pauseMicrosMax: 31))
        report.cause = .init(
            kind: .lock,
            evidence: [
                "2 of 2 samples: waiting in futex (wchan futex_wait_queue)",
                "the lock is held by thread 4250 (db-writer)", "thread 4250 is sleeping, in fsync",
            ],
            blockingThreadId: 4250)
        report.pointStack = .init(frames: lockFrames, count: 2)
        report.threads = [
            .init(
                threadId: 4242, name: "chat-demo", state: "S", wchan: "futex_wait_queue", syscall: "futex",
                waitAddress: 0x55d0a0100040, waitingForThreadId: 4250, frames: lockFrames),
            .init(
                threadId: 4250, name: "db-writer", state: "D", wchan: "jbd2_log_wait_commit", syscall: "fsync",
                frames: [
                    StackFrame(
                        address: 0x7f3a12290a10, image: libc, offset: 0x90a10, symbol: "fsync", symbolOffset: 16),
                    StackFrame(
                        address: 0x55d0a0007300, image: demo, offset: 0x7300,
                        symbol: "ChatDemo.Database.flush() -> ()",
                        symbolOffset: 64, file: "/src/chat-demo/Sources/ChatDemo/Database.swift", line: 40),
                ]),
            .init(
                threadId: 4251, name: "dispatch-worker", state: "S", syscall: "futex",
                error: "the thread blocks the sampling signal; its stack was not captured"),
        ]
        report.context = .init(
            processCpuPercent: 12.5, loopCpuPercent: 0.1, loadAverage: [0.5, 0.4, 0.3], cpuCount: 2, stealPercent: 0)
        report.occurrences = 3
        report.firstSeen = date("2026-12-01T10:00:00.000Z")
        report.lastSeen = date("2026-12-01T10:04:00.000Z")
        report.leadUp = leadUpBeforeLock
        return report
    }()

    /// The lead-up of ``diagnosedLock``: a 165 ms item ended 5 ms before the stuck one began, with the stacks the
    /// kernel's ring sampled while it ran.
    package static let leadUpBeforeLock: StallReport.LeadUp = {
        let sort = StallReport.LeadUp.Item(startMs: -420, durationMs: 165, delayMs: 2.5, label: "route=/sessions/sort")
        let sortFrame = StackFrame(
            address: 0x55d0a0004a20, image: demo, offset: 0x4a20, symbol: "ChatDemo.Sessions.sortByActivity() -> ()",
            symbolOffset: 96, file: "/src/chat-demo/Sources/ChatDemo/Sessions.swift", line: 57)
        let handler = StackFrame(
            address: 0x55d0a0002e80, image: demo, offset: 0x2e80,
            symbol: "ChatDemo.Server.handle(request: ChatDemo.Request) -> ()", symbolOffset: 64,
            file: "/src/chat-demo/Sources/ChatDemo/Server.swift", line: 97)
        let compare = StackFrame(
            address: 0x55d0a0004c10, image: demo, offset: 0x4c10,
            symbol: "ChatDemo.Session.isMoreActive(than: ChatDemo.Session) -> Swift.Bool", symbolOffset: 12,
            file: "/src/chat-demo/Sources/ChatDemo/Sessions.swift", line: 71)
        var sortWithStacks = sort
        sortWithStacks.stacks = [
            .init(samples: 12, frames: [sortFrame, handler]), .init(samples: 4, frames: [compare, sortFrame, handler]),
        ]
        let timer = StallReport.LeadUp.Item(startMs: -905, durationMs: 4.5, delayMs: 0.25, label: "timer")
        let read = StallReport.LeadUp.Item(startMs: -612.25, durationMs: 1.5, label: "read fd 7")
        return StallReport.LeadUp(
            endedAt: date("2026-12-01T10:00:00.250Z"), stallStartMs: -250, windowMs: 1000, bucketMs: 100, itemMinMs: 1,
            buckets: .init(
                busyMs: [4.5, 0.75, 0.5, 2, 0.5, 20, 100, 95, 100, 100],
                items: [1, 3, 2, 4, 2, 0, 0, 1, 0, 0],
                longestMs: [4.5, 0.5, 0.25, 1.5, 0.25, 0, 0, 165, 0, 0],
                longestLabel: ["timer", "", "", "read fd 7", "", "", "", "route=/sessions/sort", "", ""],
                maxDelayMs: [0.25, 0.5, 0, 0.75, 0, 0, 0, 2.5, 0, 0],
                runQueueWaitMs: [0, 0.5, 0, 0, 0, 1.25, 3, 2, 0, 0],
                cpuMs: [4.5, 0.75, 0.5, 2, 0.5, 20, 97, 48, 0.5, 0],
                voluntarySwitches: [2, 3, 2, 4, 2, 1, 0, 2, 1, 0],
                involuntarySwitches: [0, 0, 0, 0, 0, 1, 2, 1, 0, 0]),
            items: [timer, read, sort],
            inFlight: .init(startMs: -250, durationMs: 250, label: "route=/messages/send"),
            topItems: [sortWithStacks, timer, read],
            findings: [
                "'route=/sessions/sort' ran 165 ms and ended 5 ms before the stuck item began: the stall may be the tail "
                    + "of it"
            ],
            patterns: [.longItemBefore], stackSource: .init(method: "perf-clock", intervalMs: 10, samples: 19))
    }()
}

extension ReportFixtures {
    /// The lock report's stall as two locks that record no owner, waited crosswise: a likely deadlock whose other
    /// half is a candidate holder, with no certain blocking thread.
    package static let likelyDeadlock: StallReport = {
        var report = diagnosedLock
        report.id = "20261201T100000.000Z-4242-9"
        report.cause = .init(
            kind: .deadlock,
            evidence: [
                "2 of 2 samples: waiting in futex (wchan futex_wait_queue)",
                "the lock's owner could not be read (not a glibc mutex, or a condition/semaphore)",
                "candidate holders, not certain (the lock keeps no owner): thread 4250 (db-writer, sleeping, in futex)",
                "thread 4250 (db-writer) waits on another lock that records no owner, whose best candidate holder is "
                    + "the loop thread: likely a deadlock",
            ],
            deadlockedThreadIds: [4242, 4250], deadlockCertainty: .likely,
            candidateHolders: [
                .init(
                    threadId: 4250, name: "db-writer",
                    reason: "blocked on another lock (futex), for which the loop thread is in turn the best candidate",
                    confidence: .likely)
            ])
        if var threads = report.threads, threads.count >= 2 {
            threads[0].waitingForThreadId = nil
            threads[1].state = "S"
            threads[1].wchan = "futex_wait_queue"
            threads[1].syscall = "futex"
            threads[1].waitAddress = 0x55d0_a010_0080
            report.threads = threads
        }
        return report
    }()
}

extension ReportFixtures {
    /// The lock report's stall as a wait on a SysV semaphore that another process took last: `lock`, its likely
    /// holder named as `blockingProcess`, with its thread and state.
    package static let semaphoreHeldByProcess: StallReport = {
        var report = diagnosedLock
        report.id = "20261201T100000.000Z-4242-11"
        let waitFrames = [
            StackFrame(address: 0x7f3a122f31b2, image: libc, offset: 0xf31b2, symbol: "semtimedop", symbolOffset: 18),
            StackFrame(
                address: 0x55d0a0007400, image: demo, offset: 0x7400,
                symbol: "ChatDemo.Archive.withSharedLock() -> ()", symbolOffset: 96,
                file: "/src/chat-demo/Sources/ChatDemo/Archive.swift", line: 31),
        ]
        let waiting = StallReport.ThreadState(
            state: "S", wchan: "do_semtimedop", syscall: "semtimedop", syscallNumber: 220, cpuTimeMs: 0.1,
            voluntarySwitches: 2, involuntarySwitches: 0, runQueueWaitMs: 0)
        report.samples = report.samples.map { sample in
            var sample = sample
            sample.frames = waitFrames
            sample.thread = waiting
            return sample
        }
        report.pointStack = .init(frames: waitFrames, count: 2)
        if var threads = report.threads, !threads.isEmpty {
            threads[0] = .init(
                threadId: 4242, name: "chat-demo", state: "S", wchan: "do_semtimedop", syscall: "semtimedop",
                frames: waitFrames)
            report.threads = threads
        }
        report.cause = .init(
            kind: .lock,
            evidence: [
                "2 of 2 samples: waiting on a SysV semaphore in semtimedop",
                "waiting on semaphore 0 of SysV set 32769, last operated by process 5150 (archiver), thread 5150 "
                    + "sleeping, in clock_nanosleep (semctl GETPID): likely the holder",
            ],
            blockingProcess: .init(
                processId: 5150, name: "archiver",
                reason: "the last process to operate on the semaphore 0 of SysV set 32769 the loop waits on "
                    + "(semctl GETPID): likely its holder",
                threadId: 5150, state: "sleeping, in clock_nanosleep"))
        report.leadUp = nil
        return report
    }()
}

extension ReportFixtures {
    /// A watch started while the loop slept: judged busy, reported as begun before watching, then withdrawn when
    /// the loop came back to that same sleep after work (a loop that polls between sleeps idles there).
    package static let withdrawnStall: StallReport = {
        var report = diagnosedLock
        report.id = "20261201T100000.000Z-4242-12"
        report.status = .withdrawn
        report.startedBeforeAttach = true
        report.cause = .init(kind: .sleep, evidence: ["2 of 2 samples: sleeping in clock_nanosleep"])
        report.notes.append(
            "withdrawn: watching started while the loop was in clock_nanosleep, judged busy from what the wait is; the loop then "
                + "came back to that same wait after doing work, so it is the loop's idle wait, not a stall")
        report.leadUp = nil
        report.occurrences = nil
        report.firstSeen = nil
        report.lastSeen = nil
        report.maxDurationMs = nil
        report.totalDurationMs = nil
        return report
    }()
}
