// Test and benchmark fixtures for the capture stage: a thread parked at the bottom of a known call chain
// with its own ground-truth backtrace, and a thread parked inside glibc's loader lock.
#ifndef SW_CAPTURE_FIXTURES_H
#define SW_CAPTURE_FIXTURES_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SW_TEST_CHAIN_MAX_TRUTH 256

/// A call chain run on a target thread. Zero it, set `depth`, then call `sw_test_chain_run` on the target.
typedef struct sw_test_chain {
    /// Frames of the chain below the entry point (non-inlined, no tail calls).
    int depth;
    /// 0 while descending, 1 while spinning at the bottom, 2 once released.
    int state;
    pid_t thread_id;
    /// A local unwind taken at the bottom by the target itself: [0] is an address inside the bottom
    /// function, then the return addresses of its callers, outermost last.
    uint64_t truth[SW_TEST_CHAIN_MAX_TRUTH];
    size_t truth_count;
} sw_test_chain;

/// Runs on the target thread: descends `chain->depth` frames, records the ground truth, then busy-spins
/// in a separate non-inlined function until `sw_test_chain_release`. Not async-signal-safe.
void sw_test_chain_run(sw_test_chain *chain);

/// The chain's state (acquire load). Async-signal-safe.
int sw_test_chain_state(const sw_test_chain *chain);

/// Makes the spinning target return from `sw_test_chain_run`. Async-signal-safe.
void sw_test_chain_release(sw_test_chain *chain);

/// A two-event gate for parking a thread inside `dl_iterate_phdr` (which holds glibc's loader lock).
typedef struct sw_test_gate sw_test_gate;

/// Creates a closed gate, or NULL. Not async-signal-safe.
sw_test_gate *sw_test_gate_create(void);
/// Frees a gate nobody waits on any more. Not async-signal-safe.
void sw_test_gate_destroy(sw_test_gate *gate);
/// Runs on the parking thread: enters `dl_iterate_phdr`, reports `entered`, then blocks in the callback
/// until the gate opens. Not async-signal-safe.
void sw_test_gate_hold_loader_lock(sw_test_gate *gate);
/// Blocks until the parking thread is inside the callback. Not async-signal-safe.
void sw_test_gate_wait_entered(sw_test_gate *gate);
/// Lets the parked thread leave `dl_iterate_phdr`. Async-signal-safe (sem_post).
void sw_test_gate_open(sw_test_gate *gate);

/// Unwinds the calling thread with libunwind's local API, skipping `skip` innermost frames (frame 0 is the caller
/// of this function): the ground truth the capture tests compare against. Returns the count.
/// Not async-signal-safe.
size_t sw_test_local_backtrace(uint64_t *addresses, size_t max_frames, size_t skip);

/// Forks a child process whose main thread blocks in vfork() for `milliseconds` (a killable,
/// uninterruptible wait: /proc shows state D, and ptrace cannot stop it) while its vfork child sleeps, then
/// waits in pause() until killed. The caller kills and reaps it. Returns the pid or -errno.
/// Not async-signal-safe.
pid_t sw_test_spawn_vfork_blocked(unsigned milliseconds);

/// Forks a child process whose main thread makes one write() of `bytes` bytes into a file on tmpfs (/dev/shm,
/// deleted at once): the thread works inside the kernel, runnable, until the call returns, and a ptrace stop cannot
/// come before that. The child writes 'S' to the pipe whose read end goes to `*events` just before the call and
/// 'E' just after it, then waits in pause() until killed. The caller kills and reaps it and closes `*events`.
/// Returns the pid or -errno. Not async-signal-safe.
pid_t sw_test_spawn_long_write(size_t bytes, int *events);

/// Waits on `*word` (which must hold `expected`) with FUTEX_WAIT and a relative timeout, as a timed lock or
/// condition wait does underneath. Returns 0 when woken, else the errno (ETIMEDOUT when the time ran out,
/// EINTR if a signal cut the wait short). Not async-signal-safe.
int sw_test_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns);

#ifdef __cplusplus
}
#endif
#endif
