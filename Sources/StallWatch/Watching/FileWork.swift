// FileWork: one piece of work on one file a watched thread is doing (write, fsync, close), as /proc shows it.
import CStallWatchCore

#if canImport(Glibc)
    import Glibc
#endif

/// The file a descriptor of a watched process names: a regular file or a block device, by device and inode.
package struct FileIdentity: Sendable, Hashable {
    package var device: UInt64
    package var inode: UInt64

    package init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }

    /// What descriptor `descriptor` of process `pid` names now (`stat` through `/proc/<pid>/fd/<n>`, which
    /// needs the same rights as ptrace); nil when it is closed, unreadable, or not a file (a socket, a pipe).
    package static func of(pid: Int32, descriptor: UInt64) -> FileIdentity? {
        var info = stat()
        guard descriptor < 1 << 31, stat("/proc/\(pid)/fd/\(descriptor)", &info) == 0 else { return nil }
        let type = info.st_mode & S_IFMT
        guard type == S_IFREG || type == S_IFBLK else { return nil }
        return FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// The file an `open`, `creat`, `openat` or `openat2` call of a thread of process `pid` opens, by the path its
    /// arguments give (read from the process's memory, resolved in its root, its working directory or the
    /// directory descriptor it names); nil for another call, an unreadable path, or one that names no regular file
    /// or block device (yet: a file the call creates exists once it has).
    package static func opened(by wait: ThreadWait, pid: Int32) -> FileIdentity? {
        openedPath(by: wait, pid: pid).flatMap(at)
    }

    /// The path an `open`, `creat`, `openat` or `openat2` call of a thread of process `pid` opens, read from its
    /// arguments in the process's memory and made absolute through the process's root, working directory or the
    /// directory descriptor it names (`/proc/<pid>/…`); nil for another call or an unreadable path. Read while the
    /// call runs: once it has returned, the memory may hold something else (a runtime's path buffer on its stack).
    package static func openedPath(by wait: ThreadWait, pid: Int32) -> String? {
        guard let number = wait.number, wait.arguments.count == 6 else { return nil }
        let a = wait.arguments
        let atCurrentDirectory = UInt64(bitPattern: -100)  // AT_FDCWD
        let (directory, address): (UInt64, UInt64)
        switch number {
        case 2, 85: (directory, address) = (atCurrentDirectory, a[0])  // open, creat
        case 257, 437: (directory, address) = (UInt64(UInt32(truncatingIfNeeded: a[0])), a[1])  // openat, openat2
        default: return nil
        }
        guard let path = cString(pid, at: address), !path.isEmpty else { return nil }
        let base: String
        if path.hasPrefix("/") {
            base = "/proc/\(pid)/root"
        } else if directory == UInt64(UInt32(truncatingIfNeeded: atCurrentDirectory)) {
            base = "/proc/\(pid)/cwd/"
        } else {
            guard directory < 1 << 31 else { return nil }
            base = "/proc/\(pid)/fd/\(directory)/"
        }
        return base + path
    }

    /// The descriptor of process `pid` that an open of `path` (as ``openedPath(by:pid:)`` gives it) returned, and
    /// the file it names, found by the name the kernel keeps for each open file (`/proc/<pid>/fd/<n>`, with
    /// " (deleted)" once the file has no name): for a file unlinked as soon as it was opened (a scratch file),
    /// which no path names any more. Nil when no descriptor, or descriptors naming different files, match.
    package static func descriptor(opening path: String, pid: Int32) -> (descriptor: UInt64, file: FileIdentity)? {
        // The kernel shows a descriptor's name as the reader sees it: the directory is resolved the same way.
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex,
            let directory = realpath(String(path[..<slash]), nil)
        else { return nil }
        defer { free(directory) }
        let name = path[path.index(after: slash)...]
        guard !name.isEmpty, name != ".", name != ".." else { return nil }
        let base = String(cString: directory)
        let expected = (base == "/" ? "" : base) + "/" + name
        guard let descriptors = ProcDirectory(processID: pid).descriptors() else { return nil }
        var found: (descriptor: UInt64, file: FileIdentity)?
        for (fd, target) in descriptors where target == expected || target == expected + " (deleted)" {
            guard let file = of(pid: pid, descriptor: UInt64(fd)) else { continue }
            if let earlier = found, earlier.file != file { return nil }
            found = (UInt64(fd), file)
        }
        return found
    }

    /// The regular file or block device at `path`; nil when there is none (yet).
    package static func at(_ path: String) -> FileIdentity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let type = info.st_mode & S_IFMT
        guard type == S_IFREG || type == S_IFBLK else { return nil }
        return FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// A NUL-terminated string of at most `PATH_MAX` bytes at `address` in process `pid`'s memory.
    private static func cString(_ pid: Int32, at address: UInt64) -> String? {
        guard address != 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: 4096)
        // A string near the end of its mapping reads short: what was read is enough if it holds the NUL.
        let read = bytes.withUnsafeMutableBytes { sw_read_memory(pid, address, $0.baseAddress, UInt($0.count)) }
        guard read > 0, let end = bytes.prefix(Int(read)).firstIndex(of: 0) else { return nil }
        return String(decoding: bytes[..<end], as: UTF8.self)
    }
}

/// One piece of work on one file that a thread may be in the middle of, between two looks that cannot see it
/// whole: `/proc/<tid>/syscall` reads "running" while a write is copied into the page cache, and between
/// the calls (a write, its fsync, the close) the thread is briefly in user space.
///
/// The work is known by the file a look saw the thread in a call on (a regular file or a block device), and by
/// what the thread's counters say about its reads and writes: bytes written into file pages (`write_bytes`,
/// which a socket, a pipe or tmpfs never moves) and bytes fetched from storage (`read_bytes`). The bytes a call
/// in progress has dirtied or fetched are counted as it goes, the call itself only when it completes: the
/// credit carries the first over to the look where the second lands.
package struct FileWork: Sendable, Equatable {
    /// The descriptor and the file it named when a look saw the thread in a call on it; nil until one did.
    package var descriptor: UInt64?
    package var file: FileIdentity?
    /// Bytes dirtied or fetched by calls that had not completed at the last look.
    package var dirtiedCredit: UInt64 = 0
    package var fetchedCredit: UInt64 = 0
    /// Bytes completed writes moved beyond the file pages counted as dirtied so far: the kernel's count of a
    /// write's pages can trail the write itself by one call (seen with 1 MiB writes on ext4: an interval with one
    /// completed write and nothing dirtied, the next with a call's worth more dirtied than written). Owed by this
    /// piece of work only: a new one starts owing nothing.
    package var dirtiedDebt: UInt64 = 0
    /// The thread dirtied or fetched file pages since the work began: its next file call (the fsync of what it
    /// wrote, seen "running" while it allocates blocks) may sleep before any look sees it in that call.
    package var touchedFilePages = false
    /// The most bytes one write call of this work moved into file pages, as intervals of its writes showed it (their
    /// bytes over their calls): the size of the call whose pages the kernel may count late, however many appends
    /// share the interval it completes in.
    package var largestWrite: UInt64 = 0

    package init(descriptor: UInt64? = nil, file: FileIdentity? = nil) {
        self.descriptor = descriptor
        self.file = file
    }

    /// No work known yet, but the bytes of `previous`'s calls still under way, which complete later.
    package init(carryingCreditOf previous: FileWork) {
        dirtiedCredit = previous.dirtiedCredit
        fetchedCredit = previous.fetchedCredit
    }

    /// The work began with the call that opened its file by its path (`file` is what the path named).
    package var beganWithOpen = false
    /// The path an open call a look saw the thread in named, read then (``FileIdentity/openedPath(by:pid:)``).
    package var openPath: String?

    /// A look saw the thread in `call`: an open, while the work knows no file, gives the path it names, read now
    /// while the call runs.
    package mutating func noteOpen(_ call: ThreadWait?, pid: Int32) {
        guard let call, Self.isOpenCall(call), file == nil, descriptor == nil, openPath == nil else { return }
        openPath = FileIdentity.openedPath(by: call, pid: pid)
    }

    /// Work that began in an open call whose path named no file while the call ran (an open that creates its
    /// file, seen sleeping before it did: a directory's journal on a busy disk): once the thread has left the call,
    /// the path a look read while the call ran (or, without one, the call's arguments read again) is looked up
    /// again, and the work begins with the file it names now — or, when no path names it any more (unlinked as
    /// soon as it was opened), with the descriptor of the process that names it.
    package mutating func resolveOpen(_ call: ThreadWait?, pid: Int32) {
        guard let call, Self.isOpenCall(call), file == nil, descriptor == nil else { return }
        if let opened = openPath.flatMap(FileIdentity.at) ?? FileIdentity.opened(by: call, pid: pid) {
            file = opened
            beganWithOpen = true
        } else if let path = openPath ?? FileIdentity.openedPath(by: call, pid: pid),
            let opened = FileIdentity.descriptor(opening: path, pid: pid)
        {
            // Unlinked as soon as it was opened (a scratch file): the descriptor the open gave still names it.
            (descriptor, file) = opened
            beganWithOpen = true
        }
    }

    /// A look saw the thread in a call on this work's file: on its descriptor, or the call that opened it.
    package func isOn(_ wait: ThreadWait?) -> Bool {
        guard file != nil, let wait else { return false }
        if Self.isOpenCall(wait) { return beganWithOpen }
        guard let descriptor else { return false }
        return Self.isFileCall(wait) && wait.descriptor == descriptor
    }

    /// A call that opens a file by its path: its descriptor is known only once it returns.
    package static func isOpenCall(_ wait: ThreadWait) -> Bool {
        wait.number.map { [2, 85, 257, 437].contains($0) } ?? false
    }

    /// A call on a descriptor that works on the file's data or its life: a read or write, a sync, a truncation,
    /// an allocation, the close.
    package static func isFileCall(_ wait: ThreadWait) -> Bool {
        guard let number = wait.number, wait.descriptor != nil else { return false }
        return number == 3 || SyscallTable.kind(number) == .io
    }

    /// Whether the counters moved only as this work moves them: every write call wrote into file pages and every
    /// read call fetched from storage (at least half their bytes, for the pages a call touches partly and the
    /// start of a call before the first look), the thread spent no more CPU in user space than in the kernel
    /// (give or take a tick),
    /// and it slept only where file calls sleep (a look saw it in a call on the file, or it dirtied or fetched
    /// file pages since the work began, or is in the middle of a call that does: writeback throttling, the sync
    /// of what it wrote, a read from a disk). Writes of at most
    /// ``wakeupBytes`` a call that dirty nothing are wake-ups of other threads (a runtime's eventfd or
    /// self-pipe), and once file pages were dirtied writes of at most ``appendBytes`` a call that dirty nothing
    /// are appends (a log line), not work of the loop's; a read is never let go so (reading its timer or wake-up descriptor
    /// is how a loop turns).
    package func explains(_ moves: CounterMoves) -> Bool {
        guard !moves.inconsistent else { return false }
        // One tick of slack: the kernel splits a thread's CPU time between user and system by sampling at its
        // ticks, so a short interval of kernel work can show one user tick.
        if moves.ticksKnown, moves.userTicks > moves.systemTicks + 1 { return false }
        if moves.writeCalls > 0 {
            let dirtied = moves.dirtiedBytes + dirtiedCredit
            // Once the work has dirtied file pages, a short write that dirties nothing is an append into a page
            // already dirty (a log line, a JIT runtime's symbol map) made as part of it.
            let small = (touchedFilePages ? Self.appendBytes : Self.wakeupBytes) * moves.writeCalls
            // One call completing that the looks before saw dirtying file pages while it ran (a long write into
            // the page cache) is this work's whatever share of its bytes they saw dirtied: it may have begun
            // before the work's first look (a loaded machine's looks come late), or dirtied pages before they did.
            let oneWriteSeenInFlight = moves.writeCalls == 1 && callInFlight
            // Writes in work that has dirtied file pages whose pages the kernel has not all counted yet: at most one
            // call's bytes behind, over the whole work (a socket's write is never counted, and falls further behind
            // with each one) — a call of the size the work's writes have had, even when appends completed beside it
            // and the interval's average is smaller.
            let oneCall = max(moves.writtenBytes / moves.writeCalls, largestWrite) + Self.appendBytes
            let trailingByOneCall = touchedFilePages && dirtiedDebt + moves.writtenBytes <= dirtied + oneCall
            guard moves.bytesKnown,
                oneWriteSeenInFlight || trailingByOneCall
                    || ((dirtied > 0 || moves.writtenBytes <= small) && moves.writtenBytes <= 2 * dirtied + small)
            else { return false }
        }
        if moves.readCalls > 0 {
            let fetched = moves.fetchedBytes + fetchedCredit
            guard moves.bytesKnown, fetched > 0, moves.readBytes <= 2 * fetched else { return false }
        }
        if moves.switches > 0, file == nil, moves.dirtiedBytes == 0, moves.fetchedBytes == 0, !callInFlight,
            !touchedFilePages
        {
            return false
        }
        return true
    }

    /// A call that has dirtied or fetched much more than it has completed is still under way (a long write the
    /// kernel throttles, or that waits for memory, sleeps in the middle); a page's worth is only the rounding of
    /// calls that touched part of one.
    var callInFlight: Bool { dirtiedCredit >= 64 << 10 || fetchedCredit >= 64 << 10 }

    /// The most bytes a write call moves when it only wakes another thread (an eventfd's counter is 8 bytes).
    package static let wakeupBytes: UInt64 = 8
    /// The most bytes a write call that dirties nothing moves, in work that has dirtied file pages, when it is
    /// an append into a page already dirty: a page. (Blind spot: a loop that wrote a file, then answers with
    /// short writes and no read in between, looks busy with the file; so does one write of any size right after
    /// file work, which reads as a write whose pages the kernel counts one call late.)
    package static let appendBytes: UInt64 = 4096

    /// Carries the bytes of calls still in progress to the next look.
    package mutating func account(_ moves: CounterMoves) {
        if moves.dirtiedBytes > 0 || moves.fetchedBytes > 0 { touchedFilePages = true }
        if moves.writeCalls > 0, moves.dirtiedBytes > 0 {
            let intoFilePages = min(moves.writtenBytes, moves.dirtiedBytes + dirtiedCredit)
            largestWrite = max(largestWrite, intoFilePages / moves.writeCalls)
        }
        // Credit and debt are one balance, dirtied less written, kept as two unsigned halves.
        let gained = dirtiedCredit + moves.dirtiedBytes
        let owed = dirtiedDebt + moves.writtenBytes
        (dirtiedCredit, dirtiedDebt) = gained >= owed ? (gained - owed, 0) : (0, owed - gained)
        // Up to a page short is the rounding of appends into pages already dirty (a log line, a JIT runtime's symbol
        // map), never counted: not owed.
        if dirtiedDebt <= Self.appendBytes { dirtiedDebt = 0 }
        fetchedCredit += moves.fetchedBytes
        fetchedCredit -= min(fetchedCredit, moves.readBytes)
    }
}
