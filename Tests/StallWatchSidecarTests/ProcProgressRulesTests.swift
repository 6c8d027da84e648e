// What counts as progress of a thread seen from /proc: leaving a call, not counters moving inside one.
import Foundation
import StallWatchTestSupport
import Testing

@testable import StallWatch
@testable import StallWatchSidecar

@Suite(.offPool) struct ProcProgressRulesTests {
    static let fsync = ThreadWait(
        number: 74, arguments: [5, 0, 0, 0, 0, 0], stackPointer: 0x7ffe_1000, programCounter: 0x7f00)
    static let read = ThreadWait(
        number: 0, arguments: [6, 0x5000, 4096, 0, 0, 0], stackPointer: 0x7ffe_1000, programCounter: 0x7f10)
    static let userSpace = ThreadWait(number: nil)
    static let none: [UInt64] = [0, 0, 0]

    /// (voluntary switches, syscr, syscw).
    static func counters(_ c: [UInt64]) -> ThreadCounters {
        ThreadCounters(voluntarySwitches: c[0], readCalls: c[1], writeCalls: c[2])
    }

    static func progress(
        _ before: ThreadWait?, _ after: ThreadWait?, _ old: [UInt64], _ new: [UInt64], allowance: [UInt64] = none
    ) -> Bool {
        let captures = CaptureAllowance(switches: allowance[0], readCalls: allowance[1], writeCalls: allowance[2])
        return ProcProgressProbe.isProgress(
            from: before, to: after, moves: CounterMoves(from: counters(old), to: counters(new), allowance: captures),
            afterCapture: allowance[0] > 0)
    }

    @Test func voluntarySwitchesInsideOneLongFsyncAreNotProgress() {
        #expect(!Self.progress(Self.fsync, Self.fsync, [10, 3, 7], [25, 3, 7]))
    }

    @Test func leavingTheCallIsProgress() {
        #expect(Self.progress(Self.fsync, Self.userSpace, [10, 3, 7], [11, 3, 8]))
        #expect(Self.progress(Self.fsync, Self.read, [10, 3, 7], [11, 3, 8]))
    }

    static func call(_ number: Int, fd: UInt64) -> ThreadWait {
        ThreadWait(number: number, arguments: [fd, 0, 0, 0, 0, 0], stackPointer: 0x7ffe_1000, programCounter: 0x7f30)
    }

    @Test func goingStraightFromOneCallOnAFileToTheNextOnTheSameFileIsNotProgress() {
        let write = Self.call(1, fd: 5)
        let close = Self.call(3, fd: 5)
        // fsync, then close of the same file; a write just completed, then its fsync.
        #expect(!Self.progress(Self.fsync, close, [10, 3, 7], [14, 3, 7]))
        #expect(!Self.progress(write, Self.fsync, [10, 3, 7], [11, 3, 8]))
        // Another descriptor, or other reads and writes in between: the thread did other work.
        #expect(Self.progress(Self.fsync, Self.call(3, fd: 6), [10, 3, 7], [11, 3, 7]))
        #expect(Self.progress(Self.fsync, close, [10, 3, 7], [11, 6, 7]))
        #expect(Self.progress(write, Self.fsync, [10, 3, 7], [11, 3, 10]))
        // A read that completed, then another read of the same descriptor into another buffer: a new read.
        let nextRead = ThreadWait(
            number: 0, arguments: [6, 0x6000, 4096, 0, 0, 0], stackPointer: 0x7ffe_1000, programCounter: 0x7f10)
        #expect(Self.progress(Self.read, nextRead, [10, 3, 7], [11, 4, 7]))
        // A wait on a set of descriptors names none.
        #expect(Self.call(232, fd: 5).descriptor == nil && close.descriptor == 5)
    }

    @Test func theReadACaptureRestartsIsDiscountedButAnotherCompletedReadIsNot() {
        let capture: [UInt64] = [2, 1, 1]
        #expect(!Self.progress(Self.read, Self.read, [10, 3, 7], [12, 4, 7], allowance: capture))
        #expect(Self.progress(Self.read, Self.read, [10, 3, 7], [12, 5, 7], allowance: capture))
        #expect(Self.progress(Self.read, Self.read, [10, 3, 7], [10, 4, 7]))
    }

    @Test func aThreadSeenOutsideItsCallJustAfterACaptureHasNotLeftIt() {
        #expect(!Self.progress(Self.read, Self.userSpace, [10, 3, 7], [12, 4, 7], allowance: [2, 1, 1]))
    }

    @Test func aThreadInUserSpaceProgressesOnlyBySystemCalls() {
        #expect(!Self.progress(Self.userSpace, Self.userSpace, [10, 3, 7], [10, 3, 7]))
        #expect(!Self.progress(Self.userSpace, Self.userSpace, [10, 3, 7], [12, 3, 7], allowance: [2, 1, 1]))
        #expect(Self.progress(Self.userSpace, Self.userSpace, [10, 3, 7], [11, 3, 7]))
        // Entering the call it now blocks in is not progress by itself.
        #expect(!Self.progress(Self.userSpace, Self.fsync, [10, 3, 7], [11, 3, 7]))
        #expect(Self.progress(Self.userSpace, Self.fsync, [10, 3, 7], [11, 3, 9]))
    }

    static func futex(op: UInt64, value: UInt64, timeout: UInt64) -> ThreadWait {
        ThreadWait(
            number: 202, arguments: [0x5555_1000, op, value, timeout, 0, 0], stackPointer: 0x7ffe_1000,
            programCounter: 0x7f20)
    }

    @Test func sleepingAgainInAWaitOnlyAnotherThreadEndsIsProgressButNotInATimedOrMutexWait() {
        // sem_wait or a condition variable with no timeout: woken by another thread, back in the same call.
        let park = Self.futex(op: 0x189, value: 0, timeout: 0)
        #expect(park.isWakeOnlyFutexWait)
        #expect(Self.progress(park, park, [10, 3, 7], [11, 3, 7]))
        #expect(!Self.progress(park, park, [10, 3, 7], [10, 3, 7]))
        #expect(!Self.progress(park, park, [10, 3, 7], [12, 3, 7], allowance: [2, 1, 1]), "a capture's switches")
        // A timed wait re-checks on its own; a mutex waiter that lost the lock again is still acquiring it.
        let timed = Self.futex(op: 0x189, value: 0, timeout: 0x7ffe_2000)
        let mutex = Self.futex(op: 0x80, value: 2, timeout: 0)
        #expect(!timed.isWakeOnlyFutexWait && !mutex.isWakeOnlyFutexWait)
        #expect(!Self.progress(timed, timed, [10, 3, 7], [15, 3, 7]))
        #expect(!Self.progress(mutex, mutex, [10, 3, 7], [15, 3, 7]))
    }
}

/// One piece of work on one file (a write into the page cache, its fsync, the close) is one stall, whatever /proc
/// shows between its calls: the thread "running" in a write, or briefly in user space between the calls.
@Suite(.offPool) struct FileWorkProgressTests {
    static let mib: UInt64 = 1 << 20
    static let running = ThreadWait(number: nil)

    static func fsync(_ fd: UInt64) -> ThreadWait {
        ThreadWait(number: 74, arguments: [fd, 0, 0, 0, 0, 0], stackPointer: 0x7ffe_1000, programCounter: 0x7f00)
    }

    /// Moves between two looks: write calls and their bytes, file pages dirtied, user and system ticks.
    static func moves(
        switches: UInt64 = 0, reads: UInt64 = 0, readBytes: UInt64 = 0, fetched: UInt64 = 0, writes: UInt64 = 0,
        written: UInt64 = 0, dirtied: UInt64 = 0, user: UInt64 = 0, system: UInt64 = 3
    ) -> CounterMoves {
        let old = ThreadCounters(
            voluntarySwitches: 0, readCalls: 0, writeCalls: 0, readBytes: 0, writtenBytes: 0, fetchedBytes: 0,
            dirtiedBytes: 0, userTicks: 0, systemTicks: 0)
        let new = ThreadCounters(
            voluntarySwitches: switches, readCalls: reads, writeCalls: writes, readBytes: readBytes,
            writtenBytes: written, fetchedBytes: fetched, dirtiedBytes: dirtied, userTicks: user, systemTicks: system)
        return CounterMoves(from: old, to: new)
    }

    static let file = FileIdentity(device: 8, inode: 1234)

    @Test func writesThatAllWentIntoFilePagesAreTheSameWorkNotProgress() {
        // Forty 1 MiB writes into a file's page cache between two looks, mostly kernel time.
        let spell = Self.moves(writes: 40, written: 40 * Self.mib, dirtied: 40 * Self.mib, user: 1, system: 4)
        #expect(!ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: spell))
        // The same calls to a socket or a pipe dirty no file page: the loop wrote replies, it turned.
        let replies = Self.moves(writes: 40, written: 40 * Self.mib)
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: replies))
        // File writes with the thread busy in user space in between: other work of the loop.
        let busy = Self.moves(writes: 40, written: 40 * Self.mib, dirtied: 40 * Self.mib, user: 5, system: 1)
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: busy))
        // A read of a timer or a socket between them: the loop turned.
        let turned = Self.moves(reads: 1, readBytes: 8, writes: 40, written: 40 * Self.mib, dirtied: 40 * Self.mib)
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: turned))
    }

    @Test func theTickOfALongWriteEndingJustBeforeItsFsyncIsNotProgress() {
        // One 512 MiB write, seen "running" while it dirtied the page cache, completes; the thread is in fsync.
        var work = FileWork()
        work.account(Self.moves(dirtied: 448 * Self.mib))
        let end = Self.moves(writes: 1, written: 512 * Self.mib, dirtied: 64 * Self.mib)
        #expect(!ProcProgressProbe.isProgress(from: Self.running, to: Self.fsync(5), moves: end, work: work))
        // Without the pages dirtied before the last look, the completed write is not this file's work.
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.fsync(5), moves: end))
        // The looks saw the call dirty only part of its pages (it began before the work's first look, on a loaded
        // machine): still the one write they saw in flight.
        var late = FileWork()
        late.account(Self.moves(dirtied: 98 * Self.mib))
        let partly = Self.moves(writes: 1, written: 512 * Self.mib, dirtied: 6 * Self.mib)
        #expect(!ProcProgressProbe.isProgress(from: Self.running, to: Self.fsync(5), moves: partly, work: late))
        // The looks saw a tenth of its pages dirtied, all in the last interval (the rest before the work's first
        // look): still one write going straight into the sync or the close of the file the work is on; not into a
        // call on another, nor after user-space work, nor one that dirtied no file page (a socket's).
        let unseen = Self.moves(writes: 1, written: 512 * Self.mib, dirtied: 50 * Self.mib)
        let onFile = FileWork(descriptor: 5, file: Self.file)
        #expect(!ProcProgressProbe.isProgress(from: Self.running, to: Self.fsync(5), moves: unseen, work: onFile))
        let close = ThreadWait(
            number: 3, arguments: [5, 0, 0, 0, 0, 0], stackPointer: 0x7ffe_1000, programCounter: 0x7f00)
        #expect(!ProcProgressProbe.isProgress(from: Self.running, to: close, moves: unseen, work: onFile))
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.fsync(5), moves: unseen))
        let worked = Self.moves(writes: 1, written: 512 * Self.mib, dirtied: 50 * Self.mib, user: 6, system: 1)
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.fsync(5), moves: worked, work: onFile))
        let reply = Self.moves(writes: 1, written: 64 << 10)
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.fsync(5), moves: reply, work: onFile))
        // Two calls completing: the second may be a reply on a socket, the loop's own work.
        let andAnother = Self.moves(writes: 2, written: 512 * Self.mib + 4096, dirtied: 6 * Self.mib)
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.fsync(5), moves: andAnother, work: late))
    }

    @Test func leavingACallOnTheFileForTheKernelOrUserSpaceIsNotProgress() {
        let work = FileWork(descriptor: 5, file: Self.file)
        // Out of fsync into its CPU work ("running"), having slept in it in between.
        let sleeps = Self.moves(switches: 3)
        #expect(!ProcProgressProbe.isProgress(from: Self.fsync(5), to: Self.running, moves: sleeps, work: work))
        // Not a file (a socket: no identity), or user-space work since: the thread left the call.
        let socket = FileWork(descriptor: 5)
        #expect(ProcProgressProbe.isProgress(from: Self.fsync(5), to: Self.running, moves: sleeps, work: socket))
        let busy = Self.moves(switches: 3, user: 5, system: 0)
        #expect(ProcProgressProbe.isProgress(from: Self.fsync(5), to: Self.running, moves: busy, work: work))
    }

    static func openat(path: UInt64) -> ThreadWait {
        ThreadWait(
            number: 257, arguments: [UInt64(bitPattern: -100), path, 0o1101, 0o600, 0, 0], stackPointer: 0x7ffe_1000,
            programCounter: 0x7f00)
    }

    static func write(_ fd: UInt64) -> ThreadWait {
        ThreadWait(number: 1, arguments: [fd, 0, 1 << 20, 0, 0, 0], stackPointer: 0x7ffe_1000, programCounter: 0x7f00)
    }

    /// An `open` that truncates a file with pages under writeback sleeps in the call (state D); then the writes
    /// into the file it opened, "running" or in a call on its descriptor: one piece of work, not progress.
    @Test func leavingTheCallThatOpenedTheWorksFileForItsWritesIsNotProgress() {
        var work = FileWork(file: Self.file)
        work.beganWithOpen = true
        let writes = Self.moves(switches: 2, writes: 30, written: 30 * Self.mib, dirtied: 30 * Self.mib)
        let open = Self.openat(path: 0x5000)
        #expect(!ProcProgressProbe.isProgress(from: open, to: Self.running, moves: writes, work: work))
        var onDescriptor = work
        onDescriptor.descriptor = 7
        #expect(!ProcProgressProbe.isProgress(from: open, to: Self.write(7), moves: writes, work: onDescriptor))
        #expect(!ProcProgressProbe.isProgress(from: open, to: Self.fsync(7), moves: writes, work: onDescriptor))
        // A call on another descriptor, or an open that named no file (nothing known of its path): it left the call.
        #expect(ProcProgressProbe.isProgress(from: open, to: Self.write(9), moves: writes, work: onDescriptor))
        #expect(ProcProgressProbe.isProgress(from: open, to: Self.running, moves: writes, work: FileWork()))
        // Work that began on a descriptor is not continued by an open.
        #expect(
            ProcProgressProbe.isProgress(
                from: open, to: Self.running, moves: writes, work: FileWork(descriptor: 5, file: Self.file)))
    }

    /// An open that creates its file, seen before the file existed: nothing is known of its path then; once the
    /// thread has left the call the path is read again, and the work begins with the file it names.
    @Test func anOpenThatCreatesItsFileBeginsTheWorkOnceTheFileExists() throws {
        let path =
            FileManager.default.temporaryDirectory.path
            + "/stallwatch-created-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try path.withCString { name in
            let open = Self.openat(path: UInt64(UInt(bitPattern: name)))
            var work = FileWork()
            work.resolveOpen(open, pid: getpid())
            #expect(work.file == nil && !work.beganWithOpen)
            #expect(FileManager.default.createFile(atPath: path, contents: nil))
            var info = stat()
            try #require(stat(path, &info) == 0)
            work.resolveOpen(open, pid: getpid())
            #expect(work.file == FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)))
            #expect(work.beganWithOpen)
            // Leaving it for the writes into that file is then not progress.
            let writes = Self.moves(switches: 2, writes: 30, written: 30 * Self.mib, dirtied: 30 * Self.mib)
            #expect(!ProcProgressProbe.isProgress(from: open, to: Self.running, moves: writes, work: work))
            // Work already on a descriptor is never taken over by an open.
            var onDescriptor = FileWork(descriptor: 5)
            onDescriptor.resolveOpen(open, pid: getpid())
            #expect(onDescriptor.file == nil)
        }
    }

    /// A fresh path under the temporary directory (removed afterwards), in a buffer an `openat` look names, and
    /// work that noted that look before the file existed (its path read, no file yet): what `body` goes on from.
    static func withOpenSeenBeforeItsFile(
        _ kind: String,
        _ body: (String, ThreadWait, inout FileWork, UnsafeMutableBufferPointer<CChar>) throws -> Void
    ) throws {
        let path =
            FileManager.default.temporaryDirectory.path
            + "/stallwatch-\(kind)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: path) }
        var buffer = Array(path.utf8CString)
        try buffer.withUnsafeMutableBufferPointer { name in
            let open = Self.openat(path: UInt64(UInt(bitPattern: name.baseAddress)))
            var work = FileWork()
            work.noteOpen(open, pid: getpid())
            #expect(work.file == nil && work.openPath != nil)
            try body(path, open, &work, name)
        }
    }

    /// The path an open names is read while a look sees the call: a runtime keeps it in a buffer on its stack
    /// (Node's `fs.openSync`), which the next calls overwrite once the open has returned, so the look that sees the
    /// thread leave the call cannot read it again. The work still begins with the file once it exists.
    @Test func anOpenWhosePathMemoryIsReusedAfterTheCallBeginsTheWorkWithItsFile() throws {
        try Self.withOpenSeenBeforeItsFile("reused") { path, open, work, name in
            // The call returns, creating the file, and the buffer is reused.
            #expect(FileManager.default.createFile(atPath: path, contents: nil))
            for i in 0..<name.count - 1 { name[i] = CChar(UInt8(ascii: "x")) }
            var info = stat()
            try #require(stat(path, &info) == 0)
            work.resolveOpen(open, pid: getpid())
            #expect(work.file == FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)))
            #expect(work.beganWithOpen)
        }
    }

    /// A scratch file, unlinked as soon as it is opened (Node's `fs.openSync` then `fs.unlinkSync`), has no path
    /// once the thread has left the open: the work begins with the descriptor that still names it.
    @Test func anOpenOfAFileUnlinkedAtOnceBeginsTheWorkWithTheDescriptorNamingIt() throws {
        try Self.withOpenSeenBeforeItsFile("scratch") { path, open, work, _ in
            let fd = Glibc.open(path, O_CREAT | O_WRONLY | O_TRUNC, 0o600)
            try #require(fd >= 0)
            defer { close(fd) }
            try #require(unlink(path) == 0)
            var info = stat()
            try #require(fstat(fd, &info) == 0)
            work.resolveOpen(open, pid: getpid())
            #expect(work.descriptor == UInt64(fd))
            #expect(work.file == FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)))
            #expect(work.beganWithOpen)
            let writes = Self.moves(switches: 0, writes: 3, written: 3 * Self.mib, dirtied: 3 * Self.mib)
            #expect(!ProcProgressProbe.isProgress(from: open, to: Self.running, moves: writes, work: work))
            // Two descriptors naming different files by that name (the path created again since): neither is taken.
            #expect(FileManager.default.createFile(atPath: path, contents: nil))
            let other = Glibc.open(path, O_RDONLY)
            try #require(other >= 0)
            defer { close(other) }
            try #require(unlink(path) == 0)
            var again = FileWork()
            again.openPath = work.openPath
            again.resolveOpen(open, pid: getpid())
            #expect(again.file == nil && again.descriptor == nil)
        }
    }

    /// The file an `openat` names is read from the calling process's memory and resolved in its working directory.
    @Test func theFileAnOpenCallNamesIsReadFromItsArguments() throws {
        let name = "stallwatch-opened-\(getpid())"
        let path = FileManager.default.currentDirectoryPath + "/" + name
        #expect(FileManager.default.createFile(atPath: path, contents: Data("x".utf8)))
        defer { try? FileManager.default.removeItem(atPath: path) }
        var info = stat()
        try #require(stat(path, &info) == 0)
        let expected = FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
        try name.withCString { relative in
            try path.withCString { absolute in
                let fromCwd = Self.openat(path: UInt64(UInt(bitPattern: relative)))
                #expect(FileIdentity.opened(by: fromCwd, pid: getpid()) == expected)
                let open = ThreadWait(
                    number: 2, arguments: [UInt64(UInt(bitPattern: absolute)), 0, 0, 0, 0, 0], stackPointer: 1,
                    programCounter: 1)
                #expect(FileIdentity.opened(by: open, pid: getpid()) == expected)
                let missing = Self.openat(path: 0)
                #expect(FileIdentity.opened(by: missing, pid: getpid()) == nil)
                let notOpen = ThreadWait(
                    number: 0, arguments: [UInt64(UInt(bitPattern: absolute)), 0, 0, 0, 0, 0], stackPointer: 1,
                    programCounter: 1)
                try #require(FileIdentity.opened(by: notOpen, pid: getpid()) == nil)
            }
        }
    }

    @Test func wakeUpWritesAreNotTheLoopsWorkButReadsAre() {
        // Two 8-byte eventfd writes (waking other threads) between the fsync and the close.
        let work = FileWork(descriptor: 5, file: Self.file)
        let wakeups = Self.moves(writes: 2, written: 16)
        #expect(!ProcProgressProbe.isProgress(from: Self.fsync(5), to: Self.running, moves: wakeups, work: work))
        let timer = Self.moves(reads: 1, readBytes: 8)
        #expect(ProcProgressProbe.isProgress(from: Self.fsync(5), to: Self.running, moves: timer, work: work))
    }

    @Test func aShortAppendBetweenTheWritesAndTheFsyncIsNotProgressOnceFilePagesWereDirtied() {
        // Two appends of 93 bytes in all (a JIT runtime's symbol map, a page already dirty) after a 1 MiB write.
        var work = FileWork()
        work.account(Self.moves(writes: 1, written: Self.mib, dirtied: Self.mib))
        let appends = Self.moves(writes: 2, written: 93)
        #expect(!ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: appends, work: work))
        // Before any file page was dirtied, the same writes are the loop's work (a reply on a socket).
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: appends))
    }

    /// The kernel's count of the pages a write dirtied can trail the write by one call (1 MiB writes into an ext4
    /// file: one interval with a completed write and nothing dirtied, a later one with a call's worth more dirtied
    /// than written). In work that has dirtied file pages, a completed write whose pages are not counted yet is
    /// not progress — once: a second such write puts the count two calls behind, which no file write does (a
    /// socket's writes are never counted). Once the count catches up, the work may trail by a call again.
    @Test func aWriteWhosePagesTheKernelCountsOneCallLateIsNotProgressButASecondIs() {
        var work = FileWork()
        work.account(Self.moves(writes: 3, written: 3 * Self.mib, dirtied: 3 * Self.mib))
        let uncounted = Self.moves(writes: 1, written: Self.mib)
        #expect(!ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: uncounted, work: work))
        work.account(uncounted)
        #expect(work.dirtiedDebt == Self.mib)
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: uncounted, work: work))
        // Caught up: the next interval counts the trailing call's pages besides its own write's.
        let caughtUp = Self.moves(writes: 1, written: Self.mib, dirtied: 2 * Self.mib)
        #expect(!ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: caughtUp, work: work))
        work.account(caughtUp)
        #expect(work.dirtiedDebt == 0)
        #expect(!ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: uncounted, work: work))
        // Before any file page was dirtied, the same write is the loop's (a reply on a socket).
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: uncounted))
        // A new piece of work owes nothing of the last one's.
        work.account(uncounted)
        #expect(work.dirtiedDebt == Self.mib)
        #expect(FileWork(carryingCreditOf: work).dirtiedDebt == 0)
    }

    /// The last 1 MiB write of a series whose pages the kernel counts late, completing in the same interval as two
    /// appends (93 bytes, a JIT runtime's symbol map), then straight into the fsync: the interval's average call is a
    /// third of the write, but the call that trails is one of the work's 1 MiB writes (the figures of a Node service
    /// writing 768 MiB on a busy disk). Not progress; two such writes behind are.
    @Test func aTrailingWriteCompletingBesideAppendsIsNotProgressButTwoTrailingWritesAre() {
        var work = FileWork(descriptor: 19, file: Self.file)
        work.account(Self.moves(writes: 10, written: 10 * Self.mib, dirtied: 10 * Self.mib))
        #expect(work.largestWrite == Self.mib)
        let trailing = Self.moves(writes: 3, written: Self.mib + 93, dirtied: 24 << 10, user: 0, system: 1)
        #expect(!ProcProgressProbe.isProgress(from: Self.running, to: Self.fsync(19), moves: trailing, work: work))
        work.account(trailing)
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.fsync(19), moves: trailing, work: work))
        // Work whose writes were a page each learns no large call: there, the same interval is a write of another
        // kind (a 1 MiB reply on a socket).
        var pages = FileWork(descriptor: 19, file: Self.file)
        pages.account(Self.moves(writes: 4, written: 4 * 4096, dirtied: 4 * 4096))
        #expect(pages.largestWrite == 4096 && pages.dirtiedDebt == 0)
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.fsync(19), moves: trailing, work: pages))
        // Nor does a write that moved more than it dirtied: only the bytes that went into file pages count.
        var reply = FileWork(descriptor: 19, file: Self.file)
        reply.account(Self.moves(writes: 1, written: 10 * Self.mib, dirtied: 4096))
        #expect(reply.largestWrite == 4096)
    }

    /// A series of writes into a file's pages on a busy disk: writeback throttling blocks each write in the call, and
    /// two looks see two writes of it blocked, with the leftover registers past a write's three arguments differing.
    @Test func theNextBlockedWriteOfASeriesIntoTheWorksFileIsNotProgress() {
        let work = FileWork(descriptor: 5, file: Self.file)
        let first = ThreadWait(
            number: 1, arguments: [5, 0x5000, 1 << 20, 0x7f3a, 0, 0x1d], stackPointer: 0x7ffe_1000,
            programCounter: 0x7f00)
        let next = ThreadWait(
            number: 1, arguments: [5, 0x5000, 1 << 20, 0, 0x40, 0x2b], stackPointer: 0x7ffe_1000,
            programCounter: 0x7f00)
        #expect(!first.isSameCall(as: next))
        let throttled = Self.moves(switches: 4, writes: 3, written: 3 * Self.mib, dirtied: 3 * Self.mib)
        #expect(!ProcProgressProbe.isProgress(from: first, to: next, moves: throttled, work: work))
        // Not when the writes went elsewhere (no file page dirtied: a socket's), nor with other work in user space,
        // nor when the work knows no file.
        let replies = Self.moves(switches: 4, writes: 3, written: 3 * Self.mib)
        #expect(ProcProgressProbe.isProgress(from: first, to: next, moves: replies, work: work))
        let busy = Self.moves(switches: 4, writes: 3, written: 3 * Self.mib, dirtied: 3 * Self.mib, user: 6, system: 1)
        #expect(ProcProgressProbe.isProgress(from: first, to: next, moves: busy, work: work))
        #expect(ProcProgressProbe.isProgress(from: first, to: next, moves: throttled, work: FileWork(descriptor: 5)))
    }

    @Test func aSleepInTheMiddleOfALongWriteIsNotProgress() {
        // Throttled by writeback in the middle of one long write: a switch, nothing dirtied in this interval.
        var work = FileWork()
        work.account(Self.moves(dirtied: 24 * Self.mib))
        #expect(
            !ProcProgressProbe.isProgress(
                from: Self.running, to: Self.running, moves: Self.moves(switches: 1), work: work))
        // With no call in flight and no file seen, a sleep in user space between two looks is a blocking call.
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: Self.moves(switches: 1)))
    }

    @Test func writesTheJITSymbolMapsGrowthCoversAreNotProgressButOthersAre() {
        // A CPU-bound callback that compiles code as it runs: 35 appends of 427 bytes in all to the runtime's
        // symbol map, which grew by 390 bytes over the two looks (its size lags the writer's count by a line or so).
        func counters(written: UInt64, map: UInt64?) -> ThreadCounters {
            var counters = ThreadCounters(
                voluntarySwitches: 0, readCalls: 0, writeCalls: written / 12, readBytes: 0, writtenBytes: written,
                fetchedBytes: 0, dirtiedBytes: 0, userTicks: 0, systemTicks: 0)
            counters.jitMapBytesBefore = map
            counters.jitMapBytes = map
            return counters
        }
        let compiling = CounterMoves(from: counters(written: 0, map: 1000), to: counters(written: 427, map: 1390))
        #expect(compiling.writeCalls == 0 && compiling.writtenBytes == 0)
        #expect(!ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: compiling))
        // A reply of 4 KiB while the map grew by a line: the loop wrote elsewhere, it turned.
        let replied = CounterMoves(from: counters(written: 0, map: 1000), to: counters(written: 4096, map: 1040))
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: replied))
        // No map at all: the same appends are the loop's work.
        let noMap = CounterMoves(from: counters(written: 0, map: nil), to: counters(written: 427, map: nil))
        #expect(ProcProgressProbe.isProgress(from: Self.running, to: Self.running, moves: noMap))
    }
}
