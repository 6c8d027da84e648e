// Signal witness: a small process beside `stallwatch run`'s child that reports every signal it receives, with its
// sender, so that `run` can tell a signal sent to its whole process group or cgroup (which its child received too)
// from one sent to `run` alone (which only forwarding delivers).
#ifndef SW_WITNESS_H
#define SW_WITNESS_H
#include <stddef.h>
#include <sys/types.h>

#include "sw_relay.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Forks the witness. The calling thread blocks every signal across the fork, so that no handler of this process
/// ever runs in the child; the child keeps them all blocked, reads `signals` from a signalfd and writes one
/// `sw_relay_record` per signal to the report pipe, until the lifeline pipe reaches end of file (every process that
/// holds its write end has exited: this one, and any it forked without exec since) or `sw_witness_stop`. It shares this process's process group, session and cgroup, closes every
/// other descriptor, and is named `stallwatch-sigw`. Not async-signal-safe (the child runs only async-signal-safe
/// calls). Returns 0 and fills `*pid`, `*report_fd` (read end: non-blocking, close-on-exec) and `*lifeline_fd`
/// (write end, close-on-exec: close it to stop the witness), or -errno.
int sw_witness_start(const int *signals, size_t count, pid_t *pid, int *report_fd, int *lifeline_fd);

/// Stops the witness: closes `lifeline_fd`, kills `pid` and reaps it. Not async-signal-safe.
void sw_witness_stop(pid_t pid, int lifeline_fd);

#ifdef __cplusplus
}
#endif
#endif
