// Slow jobs the pool watchdog never saw: recorded by their worker when the job returns, reported late.
#include "sw_pool.h"

#if defined(__linux__)

#include <stdatomic.h>

// One ring per worker slot, each with one producer (the slot's worker, in sw_pool.c's run_job) and one consumer
// (the pool watchdog's thread): lock-free, preallocated, nothing to allocate on the worker. A worker that finishes
// SW_POOL_LATE_RECORDS slow jobs before the watchdog takes any counts the ones past that as dropped, and the next
// record it keeps says how many.
typedef struct {
    _Atomic uint64_t head;  // next record to take; written by the watchdog
    _Atomic uint64_t tail;  // next record to write; written by the worker
    _Atomic uint64_t dropped;  // records dropped since the last one kept; written by the worker
    _Atomic uint64_t dropped_total;
    sw_pool_late_job records[SW_POOL_LATE_RECORDS];
} __attribute__((aligned(64))) sw_late_ring;

static sw_late_ring rings[SW_POOL_MAX_SLOTS];

void sw_pool_late_push(int index, const sw_pool_late_job *record) {
    if (index < 0 || index >= SW_POOL_MAX_SLOTS) return;
    sw_late_ring *ring = &rings[index];
    uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
    if (tail - head >= SW_POOL_LATE_RECORDS) {
        atomic_store_explicit(&ring->dropped, atomic_load_explicit(&ring->dropped, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        atomic_store_explicit(&ring->dropped_total,
                              atomic_load_explicit(&ring->dropped_total, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    } else {
        sw_pool_late_job *slot = &ring->records[tail % SW_POOL_LATE_RECORDS];
        *slot = *record;
        slot->slot = index;
        slot->dropped_before = atomic_load_explicit(&ring->dropped, memory_order_relaxed);
        atomic_store_explicit(&ring->dropped, 0, memory_order_relaxed);
        atomic_store_explicit(&ring->tail, tail + 1, memory_order_release);
    }
    // A job ended unseen: the watchdog reports it now, whether it sleeps, parks or is busy (then its next wait
    // returns at once). Only slow jobs get here, so an idle pool still costs no wake-up.
    sw_pool_wake();
}

int sw_pool_take_late(sw_pool_late_job *out) {
    int count = sw_pool_slot_count();
    for (int i = 0; i < count; i++) {
        sw_late_ring *ring = &rings[i];
        uint64_t head = atomic_load_explicit(&ring->head, memory_order_relaxed);
        if (head == atomic_load_explicit(&ring->tail, memory_order_acquire)) continue;
        *out = ring->records[head % SW_POOL_LATE_RECORDS];
        atomic_store_explicit(&ring->head, head + 1, memory_order_release);
        return 1;
    }
    return 0;
}

int sw_pool_late_pending(void) {
    int pending = 0;
    int count = sw_pool_slot_count();
    for (int i = 0; i < count; i++) {
        pending += (int)(atomic_load_explicit(&rings[i].tail, memory_order_acquire) -
                         atomic_load_explicit(&rings[i].head, memory_order_acquire));
    }
    return pending;
}

uint64_t sw_pool_late_dropped(void) {
    uint64_t total = 0;
    for (int i = 0; i < SW_POOL_MAX_SLOTS; i++) total += atomic_load_explicit(&rings[i].dropped_total, memory_order_relaxed);
    return total;
}

#endif
