// Syscall shims and the libdispatch main-queue hooks.
#ifdef __linux__
#include "sw_sys.h"

#include <errno.h>
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
