// The pool watchdog's wait: a futex word parked on while the pool is idle, woken on its idle → busy edge.
#include "sw_pool.h"

#if defined(__linux__)

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// 0: the watchdog is not waiting; 1: parked (a starting job wakes it); 2: in a timed sleep (only a stop
// wakes it). The generation moves on every wake, so a wake between the check and the futex call is not lost.
static _Atomic uint32_t waiting;
static _Atomic uint32_t generation;

static long futex(_Atomic uint32_t *word, int op, uint32_t value, const struct timespec *timeout) {
    return syscall(SYS_futex, (uint32_t *)word, op | FUTEX_PRIVATE_FLAG, value, timeout, NULL, 0);
}

void sw_pool_wake_if_parked(void) {
    if (atomic_load_explicit(&waiting, memory_order_relaxed) != 1) return;
    uint32_t expected = 1;
    if (atomic_compare_exchange_strong(&waiting, &expected, 0)) {
        atomic_fetch_add(&generation, 1);
        futex(&generation, FUTEX_WAKE, INT_MAX, NULL);
    }
}

void sw_pool_wake(void) {
    atomic_store(&waiting, 0);
    atomic_fetch_add(&generation, 1);
    futex(&generation, FUTEX_WAKE, INT_MAX, NULL);
}

uint32_t sw_pool_wake_generation(void) { return atomic_load(&generation); }

int sw_pool_park(uint64_t jobs_started, uint32_t seen) {
    atomic_store(&waiting, 1);  // seq_cst: before the slots are read again
    if (atomic_load(&generation) != seen) {  // a stop or a job start since the caller's check
        atomic_store(&waiting, 0);
        return 0;
    }
    sw_pool_totals totals;
    sw_pool_read_totals(&totals);
    if (totals.jobs_started != jobs_started) {
        atomic_store(&waiting, 0);
        return 0;
    }
    while (atomic_load(&generation) == seen) {
        long rc = futex(&generation, FUTEX_WAIT, seen, NULL);
        if (rc != 0 && errno != EINTR && errno != EAGAIN) break;
    }
    atomic_store(&waiting, 0);
    return 1;
}

int sw_pool_sleep_until(uint64_t deadline_ns, uint32_t seen) {
    atomic_store(&waiting, 2);
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
        if (now_ns >= deadline_ns) break;
        uint64_t left = deadline_ns - now_ns;
        struct timespec timeout = {.tv_sec = (time_t)(left / 1000000000ull), .tv_nsec = (long)(left % 1000000000ull)};
        long rc = futex(&generation, FUTEX_WAIT, seen, &timeout);
        if (atomic_load(&generation) != seen) {
            atomic_store(&waiting, 0);
            return 0;
        }
        if (rc != 0 && errno == ETIMEDOUT) break;
    }
    atomic_store(&waiting, 0);
    return 1;
}

#endif
