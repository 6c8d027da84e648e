// epoll(7) in three calls for Swift code; see sw_epoll.h.
#include "sw_epoll.h"

#ifdef __linux__
#include <errno.h>
#include <sys/epoll.h>

int sw_epoll_create(void) {
    int fd = epoll_create1(EPOLL_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int sw_epoll_add(int epfd, int fd, int exclusive) {
    struct epoll_event event = {.events = EPOLLIN | (exclusive ? EPOLLEXCLUSIVE : 0u), .data = {.fd = fd}};
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event) == 0 ? 0 : -errno;
}

int sw_epoll_wait(int epfd, int *fds, int max, int timeout_ms) {
    enum { batch = 16 };
    struct epoll_event events[batch];
    int n = epoll_wait(epfd, events, max < batch ? max : batch, timeout_ms);
    if (n < 0) return -errno;
    for (int i = 0; i < n; i++) fds[i] = events[i].data.fd;
    return n;
}
#endif
