// KernelStack: the system call a thread is working inside, from its kernel stack, when nothing else says.

import Foundation

/// Reads `/proc/<pid>/task/<tid>/stack` — the thread's kernel stack, innermost first (`generic_perform_write`,
/// `shmem_file_write_iter`, `vfs_write`, `ksys_write`, `do_syscall_64`, `entry_SYSCALL_64_after_hwframe`) — to
/// name the system call a thread is busy inside.
///
/// A thread copying a large `write()` into the page cache is runnable (state R), so `/proc/…/syscall` says only
/// "running", and it does not reach a ptrace stop (or run a signal handler) until the call returns: a capture
/// times out with no registers. The kernel stack still names the call. The file needs `CAP_SYS_ADMIN`; for a
/// thread on a CPU it shows the stack as of its last switch, which inside a long call is still in that call.
/// Without the capability, or outside a system call, there is no answer.
enum KernelStack {
    /// The function names of the thread's kernel stack, innermost first; nil when it cannot be read.
    static func read(pid: Int32, tid: Int32) -> [String]? {
        ProcDirectory(processID: pid, threadID: tid).kernelStack()
    }

    /// The function names of a `stack` file's text, innermost first; nil when it names none.
    static func functions(in text: String) -> [String]? {
        let names = text.split(separator: "\n").compactMap(functionName)
        return names.isEmpty ? nil : names
    }

    /// The number of the system call the stack is inside: the function called by the system call dispatcher
    /// (`do_syscall_64`), without its entry prefixes (`__x64_sys_fsync`, `ksys_write`, `__do_sys_pwrite64`).
    static func syscall(in names: [String]) -> Int? {
        guard let dispatcher = names.firstIndex(where: { $0 == "do_syscall_64" || $0 == "do_fast_syscall_32" }),
            dispatcher > 0
        else { return nil }
        // Inner frames first: the closest one to the dispatcher is the call's own entry point; if it does not name
        // a call (an unusual wrapper), the next one in may.
        for name in names[..<dispatcher].reversed() {
            if let number = number(ofKernelFunction: name) { return number }
        }
        return nil
    }

    /// Whether the stack is that of a thread switched out on the way back from an interrupt or exception (the
    /// timer's, say): preempted, not sleeping. The scheduler's own functions are left out of the file, so the
    /// innermost frame is the exit path that called it; a thread that went to sleep shows the call it sleeps in.
    static func isPreempted(_ names: [String]) -> Bool {
        guard let innermost = names.first else { return false }
        return [
            "irqentry_exit", "exit_to_user_mode", "syscall_exit_to_user_mode", "asm_sysvec_", "asm_common_interrupt",
        ]
        .contains { innermost.hasPrefix($0) }
    }

    /// `__x64_sys_fsync` → 74, `ksys_write` → 1, `do_sys_poll` → 7; nil for a function that names no call.
    static func number(ofKernelFunction name: String) -> Int? {
        for prefix in ["__x64_sys_", "__ia32_sys_", "__se_sys_", "__do_sys_", "ksys_", "do_sys_", "sys_"]
        where name.hasPrefix(prefix) {
            return SyscallTable.number(named: String(name.suffix(name.count - prefix.count)))
        }
        return nil
    }

    /// `[<0>] ksys_write+0x66/0xe0` → `ksys_write`.
    private static func functionName(_ line: Substring) -> String? {
        var rest = line
        if let close = rest.firstIndex(of: "]") { rest = rest[rest.index(after: close)...] }
        let name = rest.trimmingCharacters(in: .whitespaces).prefix { $0 != "+" && $0 != " " }
        return name.isEmpty ? nil : String(name)
    }
}
