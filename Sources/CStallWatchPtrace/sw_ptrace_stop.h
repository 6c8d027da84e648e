// Whether a thread can reach a ptrace stop soon, read from /proc with raw system calls only (no libc function
// that touches errno or TLS, no allocation, no lock: usable in the capture helper, which shares its parent's
// memory and thread-local storage). Internal to CStallWatchPtrace.
#ifndef SW_PTRACE_STOP_H
#define SW_PTRACE_STOP_H
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include "sw_ptrace.h"

/// A system call made with the `syscall` instruction: returns its result or -errno, never touches errno.
static inline long sw_raw_syscall(long n, long a, long b, long c, long d, long e, long f) {
    register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
    long result;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return result;
}

/// Appends the decimal digits of `value` at `out`; returns the end.
static inline char *sw_stop_put_number(char *out, long value) {
    char digits[24];
    int n = 0;
    do digits[n++] = (char)('0' + value % 10);
    while ((value /= 10) > 0 && n < 24);
    while (n > 0) *out++ = digits[--n];
    return out;
}

/// Reads /proc/PID/task/TID/<file> into `text` (NUL-terminated); its length, or -1 when it cannot be read.
static inline long sw_stop_read_task_file(pid_t pid, pid_t tid, const char *file, char *text, size_t capacity) {
    char path[96], *p = path;
    for (const char *s = "/proc/"; *s;) *p++ = *s++;
    p = sw_stop_put_number(p, pid);
    for (const char *s = "/task/"; *s;) *p++ = *s++;
    p = sw_stop_put_number(p, tid);
    *p++ = '/';
    while (*file && p < path + sizeof path - 1) *p++ = *file++;
    *p = 0;
    long fd = sw_raw_syscall(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
    if (fd < 0) return -1;
    long n = sw_raw_syscall(SYS_read, fd, (long)text, (long)capacity - 1, 0, 0, 0);
    sw_raw_syscall(SYS_close, fd, 0, 0, 0, 0, 0);
    if (n <= 0) return -1;
    text[n] = 0;
    return n;
}

/// The thread's state letter (field 3 of its `stat`: 'R', 'S', 'D' …), or 0 when it cannot be read; and, when
/// `cpu` is not NULL, the CPU it last ran on (field 39) in *cpu, or -1.
static inline char sw_stop_task_state_cpu(pid_t pid, pid_t tid, int *cpu) {
    char text[512];
    long n = sw_stop_read_task_file(pid, tid, "stat", text, sizeof text);
    if (cpu) *cpu = -1;
    // The name in parentheses may hold anything: the state follows the last ") ".
    for (long i = n - 2; i > 0; i--) {
        if (text[i] != ')' || text[i + 1] != ' ') continue;
        if (i + 2 >= n) return 0;
        if (cpu) {  // field 39 is the 37th space-separated field after the state (field 3)
            long at = i + 2;
            for (int field = 3; field < 39 && at < n; at++)
                if (text[at] == ' ') field++;
            int value = -1;
            for (; at < n && text[at] >= '0' && text[at] <= '9'; at++) value = (value < 0 ? 0 : value * 10) + (text[at] - '0');
            *cpu = value;
        }
        return text[i + 2];
    }
    return 0;
}

/// The thread's state letter (field 3 of its `stat`: 'R', 'S', 'D' …), or 0 when it cannot be read.
static inline char sw_stop_task_state(pid_t pid, pid_t tid) { return sw_stop_task_state_cpu(pid, tid, NULL); }

/// The thread's time on a CPU (the first field of its `schedstat`), nanoseconds; UINT64_MAX when unknown. The
/// kernel brings it up to date at every scheduler tick and context switch, so a running thread's figure grows
/// in steps of at most one tick.
static inline uint64_t sw_stop_task_run_ns(pid_t pid, pid_t tid) {
    char text[128];
    if (sw_stop_read_task_file(pid, tid, "schedstat", text, sizeof text) < 0) return UINT64_MAX;
    uint64_t value = 0;
    const char *c = text;
    if (*c < '0' || *c > '9') return UINT64_MAX;
    for (; *c >= '0' && *c <= '9'; c++) value = value * 10 + (uint64_t)(*c - '0');
    return value;
}

/// CPU time after the interrupt that only work inside the kernel explains: reaching the stop from user space
/// takes microseconds, but a running thread's figure is brought up to date only at the scheduler's ticks (up to
/// 10 ms apart) and context switches, so the figure read at the interrupt may lag by a tick. Five ticks at 250 Hz.
#define SW_PTRACE_IN_KERNEL_RUN_NS 20000000ull

/// Whether a seized, interrupted thread that has not stopped yet never will soon, and why:
/// - SW_PTRACE_UNSTOPPED_UNINTERRUPTIBLE: it sleeps in state D (an fsync waiting for writeback, a read from a
///   disk): only the end of its call wakes it, and a ptrace stop is reached only after that.
/// - SW_PTRACE_UNSTOPPED_IN_KERNEL: it was running when seized (`state_at_seize` 'R') and has run on a CPU for
///   a while since the interrupt (its CPU time grew by SW_PTRACE_IN_KERNEL_RUN_NS past `run_ns_at_interrupt`)
///   without reaching the stop. A thread in user space stops as soon as it runs (the interrupt is a pending trap,
///   handled on its first return to user space, microseconds later), so it is working inside a system call, such
///   as a write copied into the page cache, and stops only when that call returns. A thread that waits for a
///   CPU inside a short call is waited for: it stops when the call returns, and the sample shows that call
///   (released at once, it would leave the samples to the moments the thread is in user space).
/// - SW_PTRACE_STOPPED (0): it may still stop soon (it waits for a CPU, or the interrupt is on its way).
static inline int sw_ptrace_stop_hopeless(pid_t pid, pid_t tid, char state_at_seize, uint64_t run_ns_at_interrupt) {
    if (sw_stop_task_state(pid, tid) == 'D') return SW_PTRACE_UNSTOPPED_UNINTERRUPTIBLE;
    if (state_at_seize != 'R') return SW_PTRACE_STOPPED;
    uint64_t run = sw_stop_task_run_ns(pid, tid);
    if (run != UINT64_MAX && run_ns_at_interrupt != UINT64_MAX && run > run_ns_at_interrupt + SW_PTRACE_IN_KERNEL_RUN_NS)
        return SW_PTRACE_UNSTOPPED_IN_KERNEL;
    return SW_PTRACE_STOPPED;
}

#endif
