// Out-of-process stack capture for the sidecar: stop one thread with PTRACE_SEIZE + PTRACE_INTERRUPT,
// copy its registers and stack, detach at once.
#ifndef SW_PTRACE_H
#define SW_PTRACE_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sw_registers.h"

#ifdef __cplusplus
extern "C" {
#endif

/// The x86-64 red zone below the stack pointer, copied with the stack: a leaf function keeps data there, and at an
/// epilogue's `ret` some CFI still locates the caller's RBP at CFA-16, the word just popped (see sw_capture.h).
#define SW_PTRACE_RED_ZONE_BYTES 128

/// Which ptrace call (or step) failed, in `sw_ptrace_record.failed_step`.
typedef enum sw_ptrace_step {
    SW_PTRACE_STEP_NONE = 0,
    SW_PTRACE_STEP_SEIZE,      ///< PTRACE_SEIZE (ESRCH: no such thread; EPERM: not permitted / already traced)
    SW_PTRACE_STEP_INTERRUPT,  ///< PTRACE_INTERRUPT
    SW_PTRACE_STEP_STOP,       ///< waiting for the stop (ETIMEDOUT: it did not stop; ESRCH: it exited)
    SW_PTRACE_STEP_GETREGS,    ///< PTRACE_GETREGS
    SW_PTRACE_STEP_READ_STACK, ///< process_vm_readv of the stack (the registers are still valid)
    SW_PTRACE_STEP_DETACH,     ///< PTRACE_DETACH
    SW_PTRACE_STEP_THREAD,     ///< creating the helper thread that acts as tracer
} sw_ptrace_step;

/// Why a capture took nothing from a thread that exists: it could not reach the stop (`failed_step` is
/// SW_PTRACE_STEP_STOP). A thread that cannot stop is never left seized: it is released at once.
typedef enum sw_ptrace_unstopped {
    SW_PTRACE_STOPPED = 0,                ///< it stopped (or failed otherwise)
    SW_PTRACE_UNSTOPPED_TIMEOUT,          ///< no stop by the deadline (it may have been waiting for a CPU); ETIMEDOUT
    SW_PTRACE_UNSTOPPED_UNINTERRUPTIBLE,  ///< in uninterruptible sleep (state D); EAGAIN
    SW_PTRACE_UNSTOPPED_IN_KERNEL,        ///< ran on a CPU without reaching the stop: inside a system call; EAGAIN
} sw_ptrace_unstopped;

/// What one ptrace capture produced (the stack bytes go to a caller buffer).
typedef struct sw_ptrace_record {
    /// The general registers, in the layout of sw_registers.h.
    uint64_t registers[SW_REGISTER_COUNT];
    /// Where the stack copy starts: SP less the red zone, or SP itself when that would leave the stack
    /// (registers[SW_REG_RSP] holds SP).
    uint64_t stack_pointer;
    /// The mapping that holds SP (from /proc/PID/maps), or 0/0 if none was found.
    uint64_t stack_low, stack_high;
    /// Bytes of stack copied, starting at `stack_pointer`.
    size_t stack_size;
    /// PTRACE_INTERRUPT requested → PTRACE_DETACH returned, nanoseconds (the tracer's view of the pause).
    uint64_t pause_ns;
    /// PTRACE_INTERRUPT requested → the stop seen, nanoseconds: long when the thread was inside a kernel call
    /// that does not stop (an fsync in state D, a long write) or was waiting for a CPU; part of `pause_ns`.
    uint64_t stop_wait_ns;
    /// The target's extra wait for a CPU over the capture: its schedstat run_delay growth before the
    /// interrupt, plus, after the detach, the larger of its run_delay growth and the time until it was seen
    /// running again (a remote wake-up is not in run_delay). 0 when schedstat is unavailable.
    uint64_t run_delay_ns;
    /// `pause_ns + run_delay_ns`: the pause as the target sees it (stopped, then waiting for a CPU).
    uint64_t seen_pause_ns;
    /// CLOCK_MONOTONIC when PTRACE_DETACH returned (0 if it was not reached).
    uint64_t detached_at_ns;
    /// CLOCK_MONOTONIC when the stop was seen (0 if it was not reached): the registers are the thread's state at a
    /// moment no later than this, and the thread ran none of its own code from then until `detached_at_ns`.
    uint64_t stopped_at_ns;
    /// Nonzero if the tracer was kept off the target's CPU (it spins there while it waits for the stop).
    int other_cpu;
    /// Signal the thread was about to receive when it stopped (re-delivered on detach), or 0.
    int pending_signal;
    /// Nonzero if the stack copy was cut at the buffer size.
    int truncated;
    /// Nonzero if the stop found the thread leaving a system call that the stop alone had cut short (it was about
    /// to return EINTR: a socket call with SO_RCVTIMEO, epoll_wait, semtimedop …) and the call was set to run
    /// again instead, as the kernel itself restarts calls after a stop (see sw_ptrace_restart_cut_short_call).
    int restarted_call;
    /// On failure: the step that failed and its errno.
    sw_ptrace_step failed_step;
    int failed_errno;
    /// Why the thread did not stop (sw_ptrace_unstopped), when `failed_step` is SW_PTRACE_STEP_STOP.
    int unstopped;
    /// Nonzero if the thread was seized (0: found in state D before the seize, and left alone).
    int seized;
    /// CLOCK_MONOTONIC when the registers were read (and written back, for a restarted call), and when the stack
    /// copy ended (0 if not reached): with `stopped_at_ns` and `detached_at_ns`, where the pause went, step by step.
    uint64_t registers_at_ns, stack_read_at_ns;
    /// The CPU the tracer ran on when it saw the stop, and the CPU the thread last ran on before the capture
    /// (-1 when unknown).
    int tracer_cpu, target_cpu;
    /// The system call the thread stopped at the boundary of (ORIG_RAX at the stop: it was in that call, or had
    /// just left or entered it), or -1 when the stop interrupted user-space code. Valid when registers are.
    long long stop_syscall;
} sw_ptrace_record;

/// The kernel's "restart this call, whatever its kind" code (ERESTARTNOINTR, include/linux/errno.h); never seen by
/// a program: on the way back to user space the kernel re-runs the call with its original arguments.
#define SW_ERESTARTNOINTR 513

/// A ptrace stop of a thread inside a call that the kernel never restarts after a stop (signal(7): socket calls
/// with a timeout, epoll_wait, semtimedop, sigtimedwait, io_getevents, inotify reads) makes that call return
/// EINTR. At the stop the thread is on its way out of the call with RAX = -EINTR; if no signal of its own is
/// pending (the stop alone cut the call short), setting RAX to -ERESTARTNOINTR makes the kernel run the call
/// again after the detach, as it does for calls it restarts itself: the program never sees EINTR. A timed call
/// starts its timeout over. Pure arithmetic (async-signal-safe). Returns 1 if `*rax` was changed: the caller
/// writes the registers back (PTRACE_SETREGS) before the detach.
static inline int sw_ptrace_restart_cut_short_call(unsigned long long orig_rax, unsigned long long *rax,
                                                   int pending_signal) {
    if (pending_signal != 0 || (long long)orig_rax < 0 || (long long)*rax != -4 /* -EINTR */) return 0;
    *rax = (unsigned long long)(-(long long)SW_ERESTARTNOINTR);
    return 1;
}


/// Captures thread `tid` of process `pid`. All ptrace work runs on a short-lived helper thread that is
/// the tracer, because a tracee that has not stopped cannot be detached: if the stop does not come
/// within `timeout_ns`, the helper exits and the kernel detaches the tracee and drops the pending
/// interrupt. A thread that cannot stop soon is not held that long: one in uninterruptible sleep (state D)
/// is not seized at all, and one seen in state D, or running on a CPU without reaching the stop (working
/// inside a system call), is released at once the same way (`record->unstopped` says why; no stack).
/// Every other path detaches explicitly. The stop is detected by polling PTRACE_GETREGS, not
/// waitpid, so a parent process reaping its children (the tracee may be ours) cannot steal it.
/// Returns 0, or -errno with `record->failed_step` set. Registers may be valid with a failed stack read
/// (`failed_step == SW_PTRACE_STEP_READ_STACK`). Not async-signal-safe (creates a thread, allocates).
/// So that no CPU has to be woken for the target, the tracer runs on the CPU the target last ran on (when allowed),
/// at the highest priority the machine allows, sleeping between its polls so the target can reach the stop there;
/// the calling thread is kept off that CPU (until its next capture) and spins while the tracer works, so the target,
/// woken at the detach, runs again where it was. After the detach the call waits (bounded, 20 ms, yielding) until
/// the target has run again, to read its run-queue wait from schedstat.
int sw_ptrace_capture(pid_t pid, pid_t tid, uint64_t timeout_ns, uint8_t *stack_out, size_t stack_capacity,
                      sw_ptrace_record *record);

/// One address range of /proc/PID/maps: [low, high).
typedef struct sw_ptrace_range {
    uint64_t low, high;
} sw_ptrace_range;

/// Reads the address ranges of /proc/PID/maps into a malloc'd array (free it with free()); returns the
/// count, or 0 (and *out NULL) when the file cannot be read. Not async-signal-safe (allocates).
size_t sw_ptrace_read_maps(pid_t pid, sw_ptrace_range **out);

/// `sw_ptrace_capture` with the maps the caller already read (`sw_ptrace_read_maps`), so that capturing many
/// threads, or one thread many times, parses /proc/PID/maps once. A stack pointer outside every given range
/// (a thread created since) is looked up in a fresh read, as `sw_ptrace_capture` does. `maps` may be NULL
/// with `map_count` 0. Not async-signal-safe.
int sw_ptrace_capture_with_maps(pid_t pid, pid_t tid, uint64_t timeout_ns, uint8_t *stack_out,
                                size_t stack_capacity, const sw_ptrace_range *maps, size_t map_count,
                                sw_ptrace_record *record);

#ifdef __cplusplus
}
#endif
#endif
