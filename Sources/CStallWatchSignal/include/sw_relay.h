// Signal relay for the command line tools: a handler that turns each signal into one record on a pipe, so an
// ordinary thread can act on it (forward it to a child, stop between captures, shut down), knowing who sent it.
#ifndef SW_RELAY_H
#define SW_RELAY_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Flags of `sw_relay_record.flags`.
enum {
    /// When the handler ran, the witness process (`sw_relay_set_witness`) had the same signal pending: it was sent
    /// to the witness too, at most a moment before.
    SW_RELAY_WITNESS_PENDING = 1 << 0,
};

/// One signal as the kernel described it to the handler (`siginfo_t`): 20 bytes, written whole (a pipe write
/// under PIPE_BUF is atomic, so records never interleave).
typedef struct sw_relay_record {
    int32_t signo;
    /// `si_code`: > 0 sent by the kernel (a terminal's ^C/^Z/^\, a hangup, a timer), SI_USER (0) by `kill`,
    /// SI_TKILL (-6) by `tgkill`/`tkill`, SI_QUEUE (-1) by `sigqueue`.
    int32_t code;
    /// `si_pid`: the sending process for SI_USER/SI_TKILL/SI_QUEUE, 0 for the kernel.
    int32_t pid;
    /// `si_uid`: the sender's real user id.
    uint32_t uid;
    /// SW_RELAY_* flags set by the handler (0 in a witness's report).
    uint32_t flags;
} sw_relay_record;

/// Installs the relay handler (SA_SIGINFO | SA_RESTART, empty mask) for `count` signals; each delivery writes
/// one `sw_relay_record` to `write_fd` (make it non-blocking: a full pipe drops the record rather than block the
/// handler). Returns 0, or -errno of the first failure. Not async-signal-safe (call it from normal code, before
/// the signals matter).
int sw_relay_install(int write_fd, const int *signals, size_t count);

/// Whether process `pid` has `signo` pending for the whole process (sent, not yet taken: the `ShdPnd` mask of its
/// /proc status); 0 also when that cannot be read. Async-signal-safe: open, read and close, and parsing by hand.
int sw_signal_pending(int pid, int signo);

/// Names the process whose pending signals the handler looks at (0: none): each record then says whether that
/// process had the same signal pending when the handler ran (SW_RELAY_WITNESS_PENDING). Async-signal-safe.
void sw_relay_set_witness(int pid);

/// The handler itself: async-signal-safe (errno saved and restored, no allocation, no lock): with a witness named,
/// an open/read/close of its /proc status; then one write(2). Exposed for tests; installed by `sw_relay_install`.
void sw_relay_handler(int signo, void *info, void *context);

#ifdef __cplusplus
}
#endif
#endif
