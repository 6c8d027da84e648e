// Signal relay for the command line tools: a handler that turns each signal into one byte on a pipe, so an
// ordinary thread can act on it (forward it to a child, stop between captures, shut down).
#ifndef SW_RELAY_H
#define SW_RELAY_H
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Set in a relayed byte when the kernel sent the signal (`si_code > 0`: the terminal's ^C/^Z/^\, a timer)
/// rather than a process (`kill`, `tgkill`, `sigqueue`). A terminal signal reaches the whole foreground
/// process group, so a child in that group already has it and must not get it a second time.
#define SW_RELAY_FROM_KERNEL 0x80

/// Installs the relay handler (SA_SIGINFO | SA_RESTART, empty mask) for `count` signals; each delivery writes
/// one byte, `signo | (sent by the kernel ? SW_RELAY_FROM_KERNEL : 0)`, to `write_fd` (make it non-blocking:
/// a full pipe drops the byte rather than block the handler). Returns 0, or -errno of the first failure.
/// Not async-signal-safe (call it from normal code, before the signals matter).
int sw_relay_install(int write_fd, const int *signals, size_t count);

/// The handler itself: async-signal-safe (one write(2), errno saved and restored, no allocation, no lock).
/// Exposed for tests; installed by `sw_relay_install`.
void sw_relay_handler(int signo, void *info, void *context);

#ifdef __cplusplus
}
#endif
#endif
