// Test fixture for capture in a forked child: a child forked without exec parks a thread of its own in
// poll() and captures it through the process's capture helper, as a service that forks workers would.
#ifndef SW_FORK_FIXTURES_H
#define SW_FORK_FIXTURES_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sw_ptrace.h"

#ifdef __cplusplus
extern "C" {
#endif

/// What the forked child saw. `failed_step` names the first step that failed (0: none).
typedef struct sw_test_fork_result {
    int failed_step;
    int failed_errno;
    pid_t child;
    /// The child's parked thread, and the helper that captured it (`sw_helper_pid()` in the child after the
    /// capture) with that helper's parent according to /proc/PID/stat.
    pid_t parked_thread;
    pid_t helper;
    pid_t helper_parent;
    /// The parked thread's poll(): its return value and errno once released (1 and 0 unless it was cut short).
    int poll_result;
    int poll_errno;
    /// The return of `sw_helper_capture`, and its record; the stack copy is in the caller's buffer.
    int capture_status;
    sw_ptrace_record record;
} sw_test_fork_result;

enum {
    SW_TEST_FORK_STEP_FORK = 1,
    SW_TEST_FORK_STEP_THREAD,
    SW_TEST_FORK_STEP_PARK,
    SW_TEST_FORK_STEP_CAPTURE,
    SW_TEST_FORK_STEP_RELEASE,
    SW_TEST_FORK_STEP_EXIT,
};

/// Forks a child (no exec) that starts a thread parked in poll() on a pipe nobody writes (at most 10 s),
/// waits until /proc shows it in that call, captures it with `sw_helper_capture` (stack bounds unknown, up to
/// `stack_capacity` bytes, 2 s to stop), releases it and exits. The parent waits at most `timeout_ms` for the
/// child (then kills it) and fills `result` and `stack` (the stack copy, `result->record.stack_size` bytes).
/// The child calls C only: the parent may be multithreaded. Returns 0 or -errno. Not async-signal-safe.
int sw_test_fork_and_capture(sw_test_fork_result *result, uint8_t *stack, size_t stack_capacity,
                             unsigned timeout_ms);

/// The function the child's parked thread blocks in (its frame is what the capture must show).
int sw_test_fork_parked(int fd);

/// Starts a thread of this process that seizes `pid` (PTRACE_SEIZE, no stop), as a capture thread does, and
/// keeps tracing it until /proc shows it a zombie (at most `timeout_ms`), then exits, which detaches it: the
/// order in which a child killed mid-capture dies. Returns 0 once seized, or -errno. Not async-signal-safe.
int sw_test_trace_until_exit(pid_t pid, unsigned timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
