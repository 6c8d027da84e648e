// The workers' lead-up rings: their sizes, turned on and off by the watchdog, allocated at a worker's first job.
#include "sw_pool_slots.h"

#if defined(__linux__)

#include "sw_leadup.h"

_Atomic int sw_pool_leadup_on;
static _Atomic uint64_t window_ns, bucket_ns, item_min_ns;
static _Atomic uint32_t item_capacity;

// CLOCK_MONOTONIC_COARSE's tick here (4 ms): a job measured with it is off by up to one tick either way.
#define SW_COARSE_TICK_NS 4000000ull

void sw_pool_leadup_configure(uint64_t window, uint64_t bucket, uint64_t item_min, uint32_t capacity) {
    if (window == 0 || bucket == 0) {
        atomic_store_explicit(&sw_pool_leadup_on, 0, memory_order_release);
        return;
    }
    atomic_store_explicit(&window_ns, window, memory_order_relaxed);
    atomic_store_explicit(&bucket_ns, bucket, memory_order_relaxed);
    atomic_store_explicit(&item_min_ns, item_min, memory_order_relaxed);
    atomic_store_explicit(&item_capacity, capacity, memory_order_relaxed);
    atomic_store_explicit(&sw_pool_leadup_on, 1, memory_order_release);
}

struct sw_leadup *sw_pool_slot_leadup(int index) {
    if (index < 0 || index >= sw_pool_slot_count()) return NULL;
    return atomic_load_explicit(&sw_pool_slots[index].leadup, memory_order_acquire);
}

// Allocates the worker's rings (its first job with the rings on). The worker's own thread, in its job trampoline:
// no signal handler runs this. NULL when out of memory (the job then goes unrecorded, and the next one tries again).
struct sw_leadup *sw_pool_leadup_create(sw_slot *slot) {
    // Only jobs truly longer than the item bound are kept one by one: measured with a 4 ms clock, that is the bound
    // plus two ticks (a 10 µs job that spans one tick measures 4 ms).
    uint64_t item_min = atomic_load_explicit(&item_min_ns, memory_order_relaxed) + 2 * SW_COARSE_TICK_NS;
    sw_leadup *rings = sw_leadup_create(atomic_load_explicit(&window_ns, memory_order_relaxed),
                                        atomic_load_explicit(&bucket_ns, memory_order_relaxed), item_min,
                                        atomic_load_explicit(&item_capacity, memory_order_relaxed));
    if (!rings) return NULL;
    rings->enabled = 1;
    atomic_store_explicit(&slot->leadup, rings, memory_order_release);
    return rings;
}

#endif
