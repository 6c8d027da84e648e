// FileLockHolder: the process that holds the file lock a thread waits for, as /proc/locks records it.
#if canImport(Glibc)
    import Glibc
#endif

/// Finds who holds the `flock`/`fcntl` lock behind a blocked lock call: the kernel lists every held lock with the
/// holder's process id and the file's device and inode in `/proc/locks`, so the holder is a recorded owner, not a
/// guess.
enum FileLockHolder {
    /// The holder of a file lock another thread waits for.
    struct Holder: Sendable, Hashable {
        var processID: Int32
        /// The holder's command name (`/proc/<pid>/comm`), printable; empty when it could not be read.
        var name: String
        /// The lock as the kernel lists it: `FLOCK WRITE`, `POSIX READ`, `OFDLCK WRITE`.
        var lock: String
    }

    /// The holder of the lock `wait` waits for — a blocking `flock` (73) or an `fcntl` (72) `F_SETLKW` or
    /// `F_OFD_SETLKW` — in process `pid`, read from `/proc/locks` by the file's device and inode. Nil for any other
    /// call, when the file or the list cannot be read, or when no other process is listed as holding a lock on the
    /// file (an OFD lock lists no process: its holder is unknown).
    static func holder(pid: Int32, wait: ThreadWait) -> Holder? {
        guard wait.kind == .lock, wait.number == 72 || wait.number == 73, wait.arguments.count == 6 else { return nil }
        let fd = Int32(truncatingIfNeeded: wait.arguments[0])
        var file = stat()
        guard fd >= 0, stat(ProcDirectory(processID: pid).path + "/fd/\(fd)", &file) == 0,
            let text = try? ProcFile.read("/proc/locks")
        else { return nil }
        return holder(in: text, device: UInt64(file.st_dev), inode: UInt64(file.st_ino), waiter: pid)
    }

    /// The first lock of `text` (`/proc/locks`) held on the file `device`/`inode` by a process other than `waiter`.
    /// Lines of waiters (`->`) are skipped.
    static func holder(in text: String, device: UInt64, inode: UInt64, waiter: Int32) -> Holder? {
        // glibc's encoding of st_dev: major in bits 8–19 and 32–43, minor in bits 0–7 and 20–31.
        let major = (device >> 8) & 0xfff | (device >> 32) & ~0xfff
        let minor = device & 0xff | (device >> 12) & ~0xff
        let key = String(major, radix: 16).leftPadded(2) + ":" + String(minor, radix: 16).leftPadded(2) + ":\(inode)"
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            // `1: FLOCK  ADVISORY  WRITE 4242 08:01:131090 0 EOF`; a waiter's line has `->` after the number.
            guard fields.count >= 6, fields[1] != "->", fields[5] == key, let holder = Int32(fields[4]), holder > 0,
                holder != waiter
            else { continue }
            let comm = ProcDirectory(processID: holder).comm() ?? ""
            return Holder(processID: holder, name: PrintableText.filtered(comm), lock: "\(fields[1]) \(fields[3])")
        }
        return nil
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
