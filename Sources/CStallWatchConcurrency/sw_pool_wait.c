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

// 0: the watchdog is not waiting; 1: parked, maybe until a deadline (a starting job wakes it); 2: in a timed
// sleep while workers are busy (only sw_pool_wake ends it). The generation moves on every wake, so a wake between the check and the futex call is not lost.
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

// Parks (a starting job wakes it), until `deadline_ns` when it is not 0: 1 if it waited to the end (the deadline,
// or a wake-up with no deadline), 0 when it returned at once or a wake ended a timed park.
static int park(uint64_t jobs_started, uint32_t seen, uint64_t deadline_ns) {
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
        struct timespec timeout, *until = NULL;
        if (deadline_ns) {
            uint64_t now = sw_monotonic_ns();
            if (now >= deadline_ns) break;
            uint64_t left = deadline_ns - now;
            timeout = (struct timespec){.tv_sec = (time_t)(left / 1000000000ull), .tv_nsec = (long)(left % 1000000000ull)};
            until = &timeout;
        }
        long rc = sw_futex(&generation, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, seen, until);
        if (rc != 0 && rc != -EINTR && rc != -EAGAIN && rc != -ETIMEDOUT) break;
    }
    int woken = atomic_load(&generation) != seen;
    atomic_store(&waiting, 0);
    return deadline_ns && woken ? 0 : 1;
}

int sw_pool_park(uint64_t jobs_started, uint32_t seen) { return park(jobs_started, seen, 0); }

int sw_pool_park_until(uint64_t jobs_started, uint32_t seen, uint64_t deadline_ns) {
    return park(jobs_started, seen, deadline_ns ? deadline_ns : 1);
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
