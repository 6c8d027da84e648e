// Syscall shims and the libdispatch main-queue hooks.
#ifdef __linux__
#include "sw_sys.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

pid_t sw_gettid(void) { return (pid_t)syscall(SYS_gettid); }

int sw_tgkill(pid_t pid, pid_t tid, int sig) {
    int saved = errno;
    long r = syscall(SYS_tgkill, pid, tid, sig);
    int result = r == 0 ? 0 : -errno;
    errno = saved;
    return result;
}

static uint64_t clock_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t sw_monotonic_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
uint64_t sw_monotonic_coarse_ns(void) { return clock_ns(CLOCK_MONOTONIC_COARSE); }
uint64_t sw_boottime_ns(void) { return clock_ns(CLOCK_BOOTTIME); }
uint64_t sw_realtime_ns(void) { return clock_ns(CLOCK_REALTIME); }

long sw_futex(_Atomic uint32_t *word, int op, uint32_t value, const struct timespec *timeout) {
#if defined(__x86_64__)
    register long r10 __asm__("r10") = (long)timeout, r8 __asm__("r8") = 0, r9 __asm__("r9") = 0;
    long result;
    __asm__ volatile("syscall"
                     : "=a"(result)
                     : "a"((long)SYS_futex), "D"(word), "S"((long)op), "d"((long)value), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return result;
#else
    int saved = errno;
    long r = syscall(SYS_futex, (uint32_t *)word, op, value, timeout, NULL, 0);
    long result = r < 0 ? -errno : r;
    errno = saved;
    return result;
#endif
}

int sw_pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
    long r = syscall(SYS_pidfd_open, pid, 0);
    return r < 0 ? -errno : (int)r;
#else
    (void)pid;
    return -ENOSYS;
#endif
}

long sw_read_memory(pid_t pid, uint64_t address, void *buffer, unsigned long len) {
    struct iovec local = {.iov_base = buffer, .iov_len = len};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)address, .iov_len = len};
    int saved = errno;
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    long result = n < 0 ? -errno : (long)n;
    errno = saved;
    return result;
}

int sw_current_cpu(void) {
    unsigned cpu = 0;
    return syscall(SYS_getcpu, &cpu, NULL, NULL) == 0 ? (int)cpu : -errno;
}

int sw_pin_to_cpu(int cpu, void *saved, unsigned long size) {
    unsigned char mask[128] = {0};
    if (cpu < 0 || (unsigned long)cpu >= sizeof mask * 8 || size < sizeof mask) return -EINVAL;
    memset(saved, 0, size);
    if (syscall(SYS_sched_getaffinity, 0, size, saved) < 0) return -errno;
    mask[cpu / 8] = (unsigned char)(1u << (cpu % 8));
    return syscall(SYS_sched_setaffinity, 0, sizeof mask, mask) == 0 ? 0 : -errno;
}

int sw_set_affinity(const void *mask, unsigned long size) {
    return syscall(SYS_sched_setaffinity, 0, size, mask) == 0 ? 0 : -errno;
}

void sw_set_thread_name(const char *name) { prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0); }

int sw_eventfd_create(void) {
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return fd < 0 ? -errno : fd;
}

int sw_eventfd_signal(int fd) {
    uint64_t one = 1;
    for (;;) {
        ssize_t n = write(fd, &one, sizeof one);
        if (n == (ssize_t)sizeof one) return 0;
        if (n < 0 && errno == EINTR) continue;
        // EAGAIN means the counter is saturated: the reader is already due to wake.
        return n < 0 && errno != EAGAIN ? -errno : 0;
    }
}

void sw_eventfd_drain(int fd) {
    uint64_t value;
    int saved = errno;
    while (read(fd, &value, sizeof value) < 0 && errno == EINTR) {
    }
    errno = saved;
}

int sw_wait_readable(int fd0, int fd1, int64_t timeout_ns) {
    struct pollfd fds[2] = {{.fd = fd0, .events = POLLIN}, {.fd = fd1, .events = POLLIN}};
    struct timespec ts, *tsp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1000000000;
        ts.tv_nsec = timeout_ns % 1000000000;
        tsp = &ts;
    }
    int saved = errno;
    int n = ppoll(fds, 2, tsp, NULL);
    int result = 0;
    if (n < 0) {
        result = errno == EINTR ? 0 : -errno;
    } else if (n > 0) {
        if (fds[0].revents) result |= SW_WAIT_FD0;
        if (fds[1].revents) result |= SW_WAIT_FD1;
    }
    errno = saved;
    return result;
}

// libdispatch exports these for CoreFoundation's run loop; declared weak so a libdispatch without them
// degrades to "no main-queue integration" instead of a link failure.
extern int _dispatch_get_main_queue_handle_4CF(void) __attribute__((weak));
extern void _dispatch_main_queue_callback_4CF(void *msg) __attribute__((weak));

int sw_main_queue_handle(void) {
    if (!_dispatch_get_main_queue_handle_4CF) return -1;
    return _dispatch_get_main_queue_handle_4CF();
}

void sw_main_queue_drain(void) {
    if (_dispatch_main_queue_callback_4CF) _dispatch_main_queue_callback_4CF(0);
}
#endif
