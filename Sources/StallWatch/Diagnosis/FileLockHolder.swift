// FileLockHolder: the process that holds the file lock a thread waits for, as /proc/locks records it.
#if canImport(Glibc)
    import Glibc
#endif

/// Finds who holds the `flock`/`fcntl` lock behind a blocked lock call: the kernel lists every held lock with the
/// holder's process id and the file's device and inode in `/proc/locks`, so the holder is a recorded owner, not a
/// guess. A `flock` or OFD lock belongs to an open file description, not a process: `/proc/locks` names the process
/// that took it (or none, -1, for an OFD lock), which may have exited while a child that inherited the descriptor
/// keeps the lock (`exec 9>f; flock 9; exec server`). The holders are then the processes whose descriptor on the
/// file shows the lock in its `fdinfo`, which lists the locks of that description only.
enum FileLockHolder {
    /// The holder of a file lock another thread waits for.
    struct Holder: Sendable, Hashable {
        var processID: Int32
        /// The holder's command name (`/proc/<pid>/comm`), printable; empty when it could not be read.
        var name: String
        /// The lock as the kernel lists it: `FLOCK WRITE`, `POSIX READ`, `OFDLCK WRITE`.
        var lock: String
        /// The process `/proc/locks` names when it is not the holder (it exited, or an OFD lock's -1): the holder
        /// was found by the open file description that carries the lock. Nil when `/proc/locks` names the holder.
        var recordedProcessID: Int32? = nil

        /// How the holder is known, as the end of a sentence: `as /proc/locks records it`, or by the descriptor.
        var source: String {
            guard let recorded = recordedProcessID else { return "as /proc/locks records it" }
            return (recorded > 0 ? "/proc/locks names process \(recorded), which no longer exists; " : "")
                + "this process's descriptor on the file carries the lock (its fdinfo lists it)"
        }
    }

    /// The holder of the lock `wait` waits for — a blocking `flock` (73) or an `fcntl` (72) `F_SETLKW` or
    /// `F_OFD_SETLKW` — in process `pid`, read from `/proc/locks` by the file's device and inode. Nil for any other
    /// call, when the file or the list cannot be read, or when no other process is listed as holding a lock on the
    /// file (an OFD lock lists no process: its holder is unknown).
    static func holder(pid: Int32, wait: ThreadWait) -> Holder? {
        guard wait.kind == .lock, wait.number == 72 || wait.number == 73, wait.arguments.count == 6 else { return nil }
        let fd = Int32(truncatingIfNeeded: wait.arguments[0])
        var file = stat()
        let waiter = ProcDirectory(processID: pid)
        guard fd >= 0, stat(waiter.path + "/fd/\(fd)", &file) == 0, let text = try? ProcFile.read("/proc/locks")
        else { return nil }
        let device = UInt64(file.st_dev), inode = UInt64(file.st_ino)
        let recorded = holder(in: text, device: device, inode: inode, waiter: pid)
        if let recorded, access(ProcDirectory(processID: recorded.processID).path, F_OK) == 0 { return recorded }
        // No living process recorded: look for the open file description that carries the lock.
        let key = lockKey(device: device, inode: inode)
        guard let link = waiter.descriptorTarget(fd), let held = heldLock(in: text, key: key, waiter: pid) else {
            return nil
        }
        let index = ProcessDescriptorIndex(targets: [link], excluding: pid)
        for (other, otherFD) in index.holders[link] ?? [] {
            guard let info = ProcDirectory(processID: other).text("fdinfo/\(otherFD)"),
                info.split(separator: "\n").contains(where: {
                    $0.hasPrefix("lock:") && !$0.contains("->") && $0.contains(" \(key) ")
                })
            else { continue }
            let comm = ProcDirectory(processID: other).comm() ?? ""
            return Holder(
                processID: other, name: PrintableText.filtered(comm), lock: held.lock,
                recordedProcessID: held.processID)
        }
        return nil
    }

    /// `fe:00:16238039`: how `/proc/locks` and `fdinfo` name the file `device`/`inode`.
    static func lockKey(device: UInt64, inode: UInt64) -> String {
        // glibc's encoding of st_dev: major in bits 8–19 and 32–43, minor in bits 0–7 and 20–31.
        let major = (device >> 8) & 0xfff | (device >> 32) & ~0xfff
        let minor = device & 0xff | (device >> 12) & ~0xff
        return String(major, radix: 16).leftPadded(2) + ":" + String(minor, radix: 16).leftPadded(2) + ":\(inode)"
    }

    /// The kind and recorded process of the first held (not waiting) lock on the file `key` in `text`
    /// (`/proc/locks`) not listed for `waiter`; the process may be -1 (an OFD lock) or gone.
    static func heldLock(in text: String, key: String, waiter: Int32) -> (lock: String, processID: Int32)? {
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1] != "->", fields[5] == key, let recorded = Int32(fields[4]),
                recorded != waiter
            else { continue }
            return ("\(fields[1]) \(fields[3])", recorded)
        }
        return nil
    }

    /// The first lock of `text` (`/proc/locks`) held on the file `device`/`inode` by a process other than `waiter`.
    /// Lines of waiters (`->`) are skipped.
    static func holder(in text: String, device: UInt64, inode: UInt64, waiter: Int32) -> Holder? {
        // `1: FLOCK  ADVISORY  WRITE 4242 08:01:131090 0 EOF`; a waiter's line has `->` after the number.
        guard let held = heldLock(in: text, key: lockKey(device: device, inode: inode), waiter: waiter),
            held.processID > 0
        else { return nil }
        let comm = ProcDirectory(processID: held.processID).comm() ?? ""
        return Holder(processID: held.processID, name: PrintableText.filtered(comm), lock: held.lock)
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
