// Private to the pool files: the per-worker slots the job trampoline (sw_pool.c) writes and the watchdog's
// readers (sw_pool_slots.c) read. Nothing here runs in a signal handler.
#ifndef SW_POOL_SLOTS_H
#define SW_POOL_SLOTS_H
#include "sw_pool.h"

#include <stdatomic.h>

typedef struct {
    _Atomic int32_t thread_id;
    _Atomic uint32_t busy;
    _Atomic uint64_t sequence;  // odd while the worker updates the words below
    _Atomic uint64_t started;
    _Atomic uint64_t start_ns;
    _Atomic uint64_t task_id;
    _Atomic uint32_t priority;
    _Atomic uint32_t named;
    _Atomic uint64_t job;
    _Atomic uint64_t queued_ns;
    // Who owns the stall of a slow job, decided once per job by a compare-and-swap: SW_CLAIM_FOLLOWED(job) when
    // the watchdog opened a stall for it, SW_CLAIM_LATE(job) when the worker recorded it as a late job instead.
    _Atomic uint64_t claim;
    _Atomic uint64_t stall_end_ns;
    _Atomic uint64_t enqueued;  // jobs this worker enqueued (its own counter: no shared line per job)
    _Atomic uint64_t duration[SW_POOL_HISTOGRAM_BUCKETS];
    _Atomic uint64_t duration_sum;
    _Atomic uint64_t delay[SW_POOL_HISTOGRAM_BUCKETS];
    _Atomic uint64_t delay_sum;
    // The worker's lead-up rings (sw_leadup.h), allocated at its first job once the rings are turned on; written by
    // the worker alone (one thread owns a slot at a time), read by the watchdog. Never freed: a slot outlives its
    // thread and the next owner writes on.
    struct sw_leadup *_Atomic leadup;
} __attribute__((aligned(64))) sw_slot;

extern sw_slot sw_pool_slots[SW_POOL_MAX_SLOTS];
extern _Atomic int sw_pool_slots_used;
extern _Atomic uint64_t sw_pool_foreign_enqueued, sw_pool_untimed;

// The workers' lead-up rings (sw_pool_leadup.c): on or off, and the rings of a slot's first job with them on.
extern _Atomic int sw_pool_leadup_on;
struct sw_leadup *sw_pool_leadup_create(sw_slot *slot);

// Job numbers start at 1 (a slot's sequence / 2 once the job runs), so neither claim is ever 0.
#define SW_CLAIM_FOLLOWED(job) (((job) << 1) | 1)
#define SW_CLAIM_LATE(job) ((job) << 1)
// CLOCK_MONOTONIC_COARSE ticks here every 4 ms: a job this close to the threshold has its end read precisely.
#endif
