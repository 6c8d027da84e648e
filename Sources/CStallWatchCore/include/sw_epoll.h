// A few lines of epoll(7) for Swift code (Glibc's Swift module does not expose <sys/epoll.h>): the demo's
// event-loop threads and the tests' fixtures of event loops StallWatch does not instrument.
#ifndef SW_EPOLL_H
#define SW_EPOLL_H

#ifdef __cplusplus
extern "C" {
#endif

/// epoll_create1(EPOLL_CLOEXEC). Returns the descriptor or -errno. Async-signal-safe.
int sw_epoll_create(void);

/// Watches `fd` for readability (level-triggered EPOLLIN); with `exclusive` non-zero also EPOLLEXCLUSIVE, so an
/// event on a descriptor several loops watch (a shared listening socket) wakes one of them. Returns 0 or -errno.
/// Async-signal-safe.
int sw_epoll_add(int epfd, int fd, int exclusive);

/// epoll_wait(2) for up to `max` events (`timeout_ms` < 0: no timeout); stores the ready descriptors in `fds`.
/// Returns their count (0 on timeout) or -errno (-EINTR included: the caller waits again). Async-signal-safe.
int sw_epoll_wait(int epfd, int *fds, int max, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
