// Non-interrupting capture of this process's own threads: a helper process, cloned once, that stops one
// thread with PTRACE_SEIZE + PTRACE_INTERRUPT, copies its registers and stack into shared memory and detaches.
//
// A process cannot ptrace its own threads, so the tracer is a child: created by clone() with CLONE_VM (it
// shares this address space, so nothing is copied-on-write and its answers land directly in our memory),
// without CLONE_THREAD (a separate process, allowed to trace us), and with a termination signal of 0 (not
// SIGCHLD), so the application's wait(), waitpid(-1) and SIGCHLD handling never see it (only __WALL/__WCLONE
// waits do). It runs on its own stack and executes raw system calls only: no malloc, no locks, no stdio, and
// no errno (it shares the TLS of the thread that created it). It closes every inherited file descriptor but
// its wake-up pipe (so it holds no socket, pipe or tty of the application open), runs with every signal
// blocked (no application handler ever runs in it), and exits when its parent is gone: EOF on the wake-up
// pipe, whose write end is O_CLOEXEC (exit or exec), or getppid() changed (checked every 250 ms).
// Scheduling: the helper runs on the CPU the thread last ran on (pinned before each request), at the highest
// priority the machine allows, and sleeps between its polls for the stop, so the thread reaches its stop and runs
// again on its own CPU with no other CPU to wake; the requester waits on another CPU, spinning briefly. Everything
// it writes while a thread is stopped is touched in advance (no page fault in the pause).
// A ptrace stop, unlike a signal, makes no blocking call of the stopped thread fail: the kernel restarts it
// (restart_syscall for timed sleeps and futex waits), so no EINTR is ever seen.
//
// Every path detaches: after the copy with PTRACE_DETACH; when the thread does not stop in time the helper
// exits, and the kernel detaches the tracee and drops the pending interrupt (SEIZE semantics; the next
// capture starts a new helper). A helper killed mid-capture leaves the thread running for the same reason.
//
// fork() without exec: the child gets copies of the helper's state but not the helper (the parent's child,
// tracing the parent's threads). A pthread_atfork child handler, installed with the first helper, drops those
// copies (closes the child's ends of the wake-up pipe, unmaps the child's channel and helper stack, resets the
// lock a parent thread may have held mid-capture) without touching the parent's helper; the child's first
// capture clones a helper of its own.
#ifndef SW_CAPTURE_HELPER_H
#define SW_CAPTURE_HELPER_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sw_ptrace.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Starts the process's helper if it is not running (idempotent) with room for `stack_bytes` of stack per
/// capture (fixed by the first successful call; 0: 64 KiB), and lets it trace this process
/// (PR_SET_PTRACER, for Yama). Returns the helper's pid (> 0) or -errno (clone or mmap failed).
/// Not async-signal-safe (takes a mutex).
int sw_helper_start(size_t stack_bytes);

/// The running helper's pid, or 0. Async-signal-safe.
pid_t sw_helper_pid(void);

/// The per-capture stack room fixed by `sw_helper_start` (0 before). Async-signal-safe.
size_t sw_helper_stack_bytes(void);

/// Captures thread `tid` of this process through the helper (starting it first if needed): seize,
/// interrupt, wait for the stop at most `timeout_ns`, registers, one process_vm_readv of the stack from SP
/// up to `stack_high` (or `stack_capacity` bytes when the bounds are 0/0; a read stops at an unmapped page),
/// detach. The registers and up to `stack_capacity` bytes of stack land in `record` and `stack_out`.
/// `record->stack_low/stack_high` hold the bounds used. Requests from several threads are served one at a
/// time. Returns 0 or -errno with `record->failed_step` set as for `sw_ptrace_capture` (EPERM from
/// SW_PTRACE_STEP_SEIZE: ptrace refused — seccomp, a container, a tracer already attached; ETIMEDOUT from
/// SW_PTRACE_STEP_STOP: the thread did not stop; SW_PTRACE_STEP_THREAD: the helper could not be started
/// or stopped answering and was killed). Not async-signal-safe (blocks).
int sw_helper_capture(pid_t tid, uint64_t stack_low, uint64_t stack_high, uint64_t timeout_ns,
                      sw_ptrace_record *record, uint8_t *stack_out, size_t stack_capacity);

/// Asks the helper to exit and reaps it (a later capture starts a new one). Not async-signal-safe.
void sw_helper_stop(void);

#ifdef __cplusplus
}
#endif
#endif
