// OwnWakeups: a timed event wait on nothing but the process's own wake-up descriptors is a sleep.
import CStallWatchCore

/// Tells a sleep performed as a timed event wait — a `ppoll` on a runtime's internal pipe, a `select` on a
/// signal wake-up fd with a period — from a wait for I/O: every descriptor is one only the process itself can make
/// ready (an eventfd, timerfd or signalfd; a pipe or Unix socket pair whose other end is open in this process alone,
/// non-blocking, as a self-pipe must be so that a signal handler or another thread never blocks writing to it), and
/// the wait has a timeout. Nothing outside the process can end such a wait: it ends on its timeout or on the
/// process's own wake-up. A blocking pipe to itself is left as I/O (a hand-off between its threads).
enum OwnWakeups {
    /// The evidence sentence when `waits` (of process `pid`) is such a sleep; nil otherwise.
    static func sleep(pid: Int32, waits: WaitDescriptors) -> String? {
        guard waits.isEventWait, let timeout = waits.timeoutMs, timeout > 0, !waits.descriptors.isEmpty,
            waits.descriptors.count <= 16
        else { return nil }
        let process = ProcDirectory(processID: pid)
        guard let mine = process.descriptors() else { return nil }
        var kinds: [String] = []
        var ends: Set<String> = []  // the link targets whose other end must be in no other process
        for fd in waits.descriptors {
            guard let target = mine.first(where: { $0.fd == fd })?.target else { return nil }
            switch target {
            case "anon_inode:[eventfd]", "anon_inode:[timerfd]", "anon_inode:[signalfd]":
                kinds.append(String(target.dropFirst(12).dropLast()))
            default:
                guard let other = selfEnd(process: process, fd: fd, target: target, descriptors: mine) else {
                    return nil
                }
                kinds.append(other.description)
                ends.insert(other.target)
            }
        }
        let index = ProcessDescriptorIndex(targets: ends, excluding: pid)
        // Another process with the other end (or one whose descriptors could not be read) may be the waker.
        guard index.holders.isEmpty, index.refused == 0 else { return nil }
        let call = waits.descriptors.count == 1 ? "descriptor" : "descriptors"
        return "a timed event wait (timeout \(timeout) ms) on the process's own wake-up \(call) only ("
            + kinds.joined(separator: ", ") + "): nothing outside the process can end it before its timeout — a sleep"
    }

    /// The other end of a pipe or Unix socket `fd` when it is open in this process (among `descriptors`),
    /// non-blocking: a self-pipe. Its link target and a description; nil otherwise.
    static func selfEnd(
        process: ProcDirectory, fd: Int32, target: String, descriptors: [(fd: Int32, target: String)]
    ) -> (target: String, description: String)? {
        let nonBlocking = 0o4000
        if let inode = ProcDescriptorInfo.inode(target, kind: "pipe") {
            let writers = descriptors.filter { $0.target == target && $0.fd != fd }.filter {
                guard let flags = process.descriptorFlags($0.fd) else { return false }
                return flags & 3 != 0 && flags & nonBlocking != 0
            }
            guard let writer = writers.first else { return nil }
            return (target, "pipe:[\(inode)], its non-blocking write end \(writer.fd) in this process")
        }
        guard let inode = ProcDescriptorInfo.inode(target, kind: "socket") else { return nil }
        let peer = sw_unix_peer_inode(UInt32(truncatingIfNeeded: inode))
        guard peer > 0 else { return nil }
        let peerTarget = "socket:[\(peer)]"
        guard let end = descriptors.first(where: { $0.target == peerTarget }),
            let flags = process.descriptorFlags(end.fd), flags & nonBlocking != 0
        else { return nil }
        return (peerTarget, "a socket pair, its non-blocking other end \(end.fd) in this process")
    }
}
