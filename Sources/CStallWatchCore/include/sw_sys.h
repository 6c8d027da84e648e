// Thin syscall and libdispatch shims that Swift cannot reach directly.
#ifndef SW_SYS_H
#define SW_SYS_H
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/// gettid(2). Async-signal-safe.
pid_t sw_gettid(void);

/// tgkill(2); returns 0 or -errno. Async-signal-safe.
int sw_tgkill(pid_t pid, pid_t tid, int sig);

/// clock_gettime(CLOCK_MONOTONIC) in nanoseconds. Async-signal-safe.
uint64_t sw_monotonic_ns(void);

/// clock_gettime(CLOCK_MONOTONIC_COARSE) in nanoseconds (vDSO, ~4 ms resolution). Async-signal-safe.
uint64_t sw_monotonic_coarse_ns(void);

/// clock_gettime(CLOCK_BOOTTIME) in nanoseconds (advances across suspend). Async-signal-safe.
uint64_t sw_boottime_ns(void);

/// CLOCK_REALTIME in nanoseconds since the epoch. Async-signal-safe.
uint64_t sw_realtime_ns(void);

/// futex(2) on `word` (`op` as the call takes it: add FUTEX_PRIVATE_FLAG for a word of one process), made with
/// the raw `syscall` instruction: returns the call's result or -errno and never touches errno, so it is safe in
/// a signal handler and in a cloned child that shares its creator's thread-local storage (the capture helper).
/// The one futex wrapper of StallWatch's C. Async-signal-safe.
long sw_futex(_Atomic uint32_t *word, int op, uint32_t value, const struct timespec *timeout);

/// The Dispatch main queue's wake-up handle (an eventfd on Linux), as Foundation's run loop uses it.
/// Returns -1 where libdispatch does not export the hook. Not async-signal-safe.
int sw_main_queue_handle(void);

/// Drains the Dispatch main queue on the calling thread (libdispatch's `_dispatch_main_queue_callback_4CF`).
/// Must be called on the process's main thread. Not async-signal-safe.
void sw_main_queue_drain(void);

/// Reads `len` bytes at `address` in process `pid` (which may be this process) with process_vm_readv(2):
/// an unmapped address gives an error instead of a fault. Returns the bytes read or -errno.
/// Async-signal-safe.
long sw_read_memory(pid_t pid, uint64_t address, void *buffer, unsigned long len);

/// The CPU the calling thread runs on now, or -errno.
int sw_current_cpu(void);

/// Moves the calling thread to `cpu` alone (it runs there when this returns), after saving its CPU affinity
/// mask into `saved` (`size` bytes, at least 128). Returns 0 or -errno (`saved` unchanged on failure).
int sw_pin_to_cpu(int cpu, void *saved, unsigned long size);

/// Sets the calling thread's CPU affinity mask (as saved by `sw_pin_to_cpu`). Returns 0 or -errno.
int sw_set_affinity(const void *mask, unsigned long size);

/// Names the calling thread (prctl PR_SET_NAME; the kernel keeps 15 bytes). Not async-signal-safe (not needed).
void sw_set_thread_name(const char *name);

/// eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); returns the fd or -errno. Not async-signal-safe (not needed).
int sw_eventfd_create(void);

/// Adds one to an eventfd's counter (a wake-up). Returns 0 or -errno. Async-signal-safe.
int sw_eventfd_signal(int fd);

/// Resets an eventfd's counter without blocking. Async-signal-safe.
void sw_eventfd_drain(int fd);

/// Bits of sw_wait_readable's result.
enum { SW_WAIT_FD0 = 1, SW_WAIT_FD1 = 2 };

/// ppoll(2) for readability of up to two descriptors (pass -1 to skip one) until `timeout_ns` elapses
/// (negative: no timeout; 0: just check). Returns a mask of SW_WAIT_FD0/SW_WAIT_FD1 (0 on timeout or EINTR)
/// or -errno. Async-signal-safe.
int sw_wait_readable(int fd0, int fd1, int64_t timeout_ns);

/// pidfd_open(2) (close-on-exec): a descriptor that polls readable once process
/// `pid` has exited, whoever its parent or tracer is. Returns the fd or -errno (ENOSYS before Linux 5.3).
/// Not async-signal-safe (not needed).
int sw_pidfd_open(pid_t pid);

#ifdef __cplusplus
}
#endif
#endif
