// PeerEndpoints: which other process holds the other end of the pipe, Unix socket or loopback TCP connection a
// thread waits on.
import CStallWatchCore

#if canImport(Glibc)
    import Glibc
#endif

/// Finds the process at the other end of a descriptor a thread reads (or writes), by inode: a pipe's other end is
/// the same `pipe:[inode]` open for the other direction in another process's `/proc/<pid>/fd`; a Unix socket's peer
/// inode comes from the kernel's `sock_diag` (`UNIX_DIAG_PEER`); a loopback TCP connection's other socket is the
/// line of `/proc/<pid>/net/tcp{,6}` with the two addresses swapped (or, not yet accepted, the listening socket).
/// A descriptor whose other end is this process's own is no other process's doing: nil.
enum PeerEndpoints {
    /// One descriptor's other end, before the process scan.
    struct Wanted {
        var fd: Int32
        var object: OtherProcessWait.Object
        /// The link target the other end has (`pipe:[…]` or `socket:[…]`).
        var target: String
        /// How the other end was matched, and what it is, for the evidence.
        var how: String
        /// For a pipe: the other end must be open for writing (the loop reads) or reading.
        var pipeWriteEnd: Bool?
        /// A note when the other end could not be looked for (another namespace, no sock_diag).
        var unknown: String?
    }

    /// The other process behind `waits` of process `pid`: the first descriptor whose other end another process
    /// holds; nil when every descriptor's other end is this process's own or none is a pipe or socket.
    static func otherProcess(pid: Int32, waits: WaitDescriptors) -> OtherProcessWait? {
        let process = ProcDirectory(processID: pid)
        var wanted: [Wanted] = []
        for fd in waits.descriptors.prefix(16) {
            guard let target = process.descriptorTarget(fd) else { continue }
            if let want = otherEnd(pid: pid, fd: fd, target: target, reading: waits.reading) { wanted.append(want) }
        }
        guard !wanted.isEmpty else { return nil }
        // An other end this process holds itself is a hand-off between its own threads: no other process's doing.
        if let mine = process.descriptors() {
            wanted.removeAll { want in
                mine.contains { held in
                    held.target == want.target && held.fd != want.fd
                        && (want.pipeWriteEnd.map { writeEnd in
                            process.descriptorFlags(held.fd).map { isEnd($0, writeEnd: writeEnd) } ?? true
                        } ?? true)
                }
            }
        }
        guard !wanted.isEmpty else { return nil }
        if !wanted.contains(where: { $0.unknown == nil }) {
            return .init(object: wanted[0].object, evidence: wanted[0].unknown ?? "")
        }
        let index = ProcessDescriptorIndex(targets: Set(wanted.map(\.target)), excluding: pid)
        for want in wanted where want.unknown == nil {
            let holders = (index.holders[want.target] ?? []).filter { holder in
                guard let writeEnd = want.pipeWriteEnd else { return true }
                guard let flags = ProcDirectory(processID: holder.pid).descriptorFlags(holder.fd) else { return true }
                return isEnd(flags, writeEnd: writeEnd)
            }
            guard let holder = holders.first else { continue }
            var found = OtherProcessWait(object: want.object, evidence: "")
            found.describe(pid: holder.pid, fd: holder.fd)
            let others =
                holders.count > 1 ? " (and \(holders.count - 1) other process\(holders.count > 2 ? "es" : ""))" : ""
            found.reason = "holds \(want.how) (its descriptor \(holder.fd))" + others
            found.evidence = "\(found.processPhrase) holds \(want.how)\(others), matched by inode in /proc/<pid>/fd"
            return found
        }
        // Another process's end was looked for and not found: say why, never guess.
        let first = wanted.first { $0.unknown == nil } ?? wanted[0]
        let why = index.refusedNote ?? "no other process has it open (closed, or this process holds it elsewhere)"
        return .init(object: first.object, evidence: "the other end of \(first.how): \(why)")
    }

    /// Whether a pipe descriptor with open-file `flags` is a write end (`writeEnd`) or a read end.
    static func isEnd(_ flags: Int, writeEnd: Bool) -> Bool {
        let mode = flags & 3  // O_RDONLY 0, O_WRONLY 1, O_RDWR 2
        return writeEnd ? mode != 0 : mode != 1
    }

    /// What the other end of descriptor `fd` (`target`) of process `pid` is; nil when it is no pipe or socket.
    static func otherEnd(pid: Int32, fd: Int32, target: String, reading: Bool) -> Wanted? {
        if let inode = ProcDescriptorInfo.inode(target, kind: "pipe") {
            let direction =
                reading ? "the write end of the pipe the loop reads" : "the read end of the pipe the loop writes"
            return .init(
                fd: fd, object: .pipe, target: target, how: "\(direction) (pipe:[\(inode)])", pipeWriteEnd: reading)
        }
        guard let inode = ProcDescriptorInfo.inode(target, kind: "socket") else { return nil }
        let verb = reading ? "reads" : "writes"
        if let tcp = LoopbackTCP.peer(pid: pid, inode: inode) {
            guard let peerInode = tcp.peerInode else {
                return .init(
                    fd: fd, object: .tcp, target: "", how: "", pipeWriteEnd: nil,
                    unknown: "the loop \(verb) TCP connection \(tcp.connection), whose other end is not on this "
                        + "machine's loopback: no local process to name")
            }
            return .init(
                fd: fd, object: .tcp, target: "socket:[\(peerInode)]",
                how: "the \(tcp.listening ? "listening socket, not yet accepting," : "other end") of the loopback "
                    + "TCP connection the loop \(verb) (\(tcp.connection))", pipeWriteEnd: nil)
        }
        // A Unix socket (or another family, which sock_diag's AF_UNIX lookup does not know: ENOENT).
        let mine = ProcDirectory(processID: getpid()).namespace("net")
        guard let mine, mine == ProcDirectory(processID: pid).namespace("net") else {
            return .init(
                fd: fd, object: .unixSocket, target: "", how: "", pipeWriteEnd: nil,
                unknown: "the loop \(verb) a socket (socket:[\(inode)]) in another network namespace than the "
                    + "watcher's: its peer could not be asked for")
        }
        let peer = sw_unix_peer_inode(UInt32(truncatingIfNeeded: inode))
        guard peer > 0 else {
            if peer == 0 || peer == -Int(ENOENT) { return nil }  // unconnected, or no Unix socket
            return .init(
                fd: fd, object: .unixSocket, target: "", how: "", pipeWriteEnd: nil,
                unknown: "the loop \(verb) a socket (socket:[\(inode)]) whose peer the kernel would not tell "
                    + "(sock_diag: \(String(cString: strerror(Int32(-peer)))))")
        }
        return .init(
            fd: fd, object: .unixSocket, target: "socket:[\(peer)]",
            how:
                "the other end of the Unix socket the loop \(verb) (socket:[\(inode)] ↔ socket:[\(peer)], by sock_diag)",
            pipeWriteEnd: nil)
    }
}
