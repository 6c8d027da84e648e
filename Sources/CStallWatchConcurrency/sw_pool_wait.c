// The pool watchdog's wait: a futex word parked on while the pool is idle, woken on its idle → busy edge.
#include "sw_pool.h"
#include "sw_sys.h"

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

void sw_pool_wake_if_parked(void) {
    if (atomic_load_explicit(&waiting, memory_order_relaxed) != 1) return;
    uint32_t expected = 1;
    if (atomic_compare_exchange_strong(&waiting, &expected, 0)) {
        atomic_fetch_add(&generation, 1);
        sw_futex(&generation, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL);
    }
}

void sw_pool_wake(void) {
    atomic_store(&waiting, 0);
    atomic_fetch_add(&generation, 1);
    sw_futex(&generation, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL);
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
        long rc = sw_futex(&generation, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, seen, NULL);
        if (rc != 0 && rc != -EINTR && rc != -EAGAIN) break;
    }
    atomic_store(&waiting, 0);
    return 1;
}

int sw_pool_sleep_until(uint64_t deadline_ns, uint32_t seen) {
    atomic_store(&waiting, 2);
    for (;;) {
        uint64_t now = sw_monotonic_ns();
        if (now >= deadline_ns) break;
        uint64_t left = deadline_ns - now;
        struct timespec timeout = {.tv_sec = (time_t)(left / 1000000000ull), .tv_nsec = (long)(left % 1000000000ull)};
        long rc = sw_futex(&generation, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, seen, &timeout);
        if (atomic_load(&generation) != seen) {
            atomic_store(&waiting, 0);
            return 0;
        }
        if (rc == -ETIMEDOUT) break;
    }
    atomic_store(&waiting, 0);
    return 1;
}

#endif
