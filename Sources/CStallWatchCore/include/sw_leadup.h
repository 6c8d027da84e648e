// The lead-up recorder's rings: per loop, fixed time buckets and the last long items, written by the loop thread.
#ifndef SW_LEADUP_H
#define SW_LEADUP_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// One writer (the loop thread) and any number of readers (the watchdog, a snapshot). The writer uses relaxed
// stores into memory allocated once, takes no lock, makes no system call; a reader copies and then checks that
// what it copied was not rewritten meanwhile (sw_leadup_copy). Buckets and items hold CLOCK_MONOTONIC
// nanoseconds. Everything here is async-signal-safe.

/// One bucket of loop time (`bucket_ns` wide): what the loop ran in it.
typedef struct sw_leadup_bucket {
    uint64_t number;         ///< which bucket this is (monotonic time / bucket_ns) + 1; 0 while never used or reset
    uint64_t busy_ns;        ///< time inside items, clipped to the bucket
    uint64_t longest_ns;     ///< the longest item that ended in this bucket
    uint64_t max_delay_ns;   ///< the largest queue delay of an item that ended in it
    uint32_t items;          ///< items that ended in it
    uint32_t longest_label;  ///< the label of the longest item (0: none)
    uint64_t reserved[2];
} sw_leadup_bucket;

/// One item that ran at least `item_min_ns`.
typedef struct sw_leadup_item {
    uint64_t begin_ns;
    uint64_t end_ns;
    uint64_t delay_ns;       ///< queued → started (0 when not known)
    uint32_t label;          ///< interned label (0: none)
    uint32_t reserved;
} sw_leadup_item;

/// The kernel-side trend of the loop thread, one entry per bucket, written by the watching thread (not the loop).
typedef struct sw_leadup_sched {
    uint64_t number;            ///< as sw_leadup_bucket.number
    uint64_t run_queue_wait_ns; ///< runnable but waiting for a CPU, during the bucket
    uint64_t cpu_ns;            ///< on a CPU during the bucket
    uint32_t voluntary;         ///< voluntary context switches during the bucket
    uint32_t involuntary;       ///< involuntary ones (preempted)
} sw_leadup_sched;

/// The rings of one loop. `buckets`, `items` and `sched` point into the same allocation (sw_leadup_create).
typedef struct sw_leadup {
    uint64_t bucket_ns;
    uint64_t item_min_ns;
    uint32_t bucket_count;
    uint32_t item_capacity;     ///< a power of two
    uint32_t enabled;           ///< 0: the loop records nothing (set by the watching side)
    uint32_t current_label;     ///< the item running now
    uint64_t current_begin_ns;  ///< when it began; 0 between items
    uint64_t items_written;     ///< items appended to `items` so far (its low bits index the ring)
    uint64_t items_total;       ///< items recorded so far (any length)
    // Loop thread only: the bucket being filled, so most items need one comparison, not a division.
    uint64_t open_number;
    uint64_t open_end_ns;
    sw_leadup_bucket *buckets;
    sw_leadup_item *items;
    sw_leadup_sched *sched;
} sw_leadup;

/// Allocates the rings (zeroed). `window_ns / bucket_ns` buckets (at least 1); `item_capacity` is rounded up to a
/// power of two. Returns NULL when out of memory. Not async-signal-safe (allocates).
sw_leadup *sw_leadup_create(uint64_t window_ns, uint64_t bucket_ns, uint64_t item_min_ns, uint32_t item_capacity);
/// Frees what sw_leadup_create returned; the loop must no longer use it. Not async-signal-safe.
void sw_leadup_destroy(sw_leadup *r);
/// The bytes sw_leadup_create allocated for these parameters (for memory budgets).
uint64_t sw_leadup_footprint(uint64_t window_ns, uint64_t bucket_ns, uint32_t item_capacity);

/// Slow path of sw_leadup_end: a bucket boundary was crossed, or the item spans several buckets.
void sw_leadup_end_slow(sw_leadup *r, uint64_t begin_ns, uint64_t end_ns, uint32_t label, uint64_t delay_ns);

/// An item begins now (`begin_ns`): two relaxed stores, so a snapshot can name the item in flight.
static inline void sw_leadup_begin(sw_leadup *r, uint64_t begin_ns, uint32_t label) {
    __atomic_store_n(&r->current_label, label, __ATOMIC_RELAXED);
    __atomic_store_n(&r->current_begin_ns, begin_ns, __ATOMIC_RELAXED);
}

/// Appends a long item to the item ring: the entry first, then the count (release), so a reader that sees the
/// count sees the entry. Loop thread only.
static inline void sw_leadup_append(sw_leadup *r, uint64_t begin_ns, uint64_t end_ns, uint32_t label,
                                    uint64_t delay_ns) {
    uint64_t n = r->items_written;
    sw_leadup_item *slot = &r->items[n & (r->item_capacity - 1)];
    __atomic_store_n(&slot->begin_ns, begin_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->end_ns, end_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->delay_ns, delay_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->label, label, __ATOMIC_RELAXED);
    __atomic_store_n(&r->items_written, n + 1, __ATOMIC_RELEASE);
}

/// The item begun at `begin_ns` ended at `end_ns`. The common case (the item began and ended in the open
/// bucket) is a comparison and a handful of relaxed stores. Loop thread only.
static inline void sw_leadup_end(sw_leadup *r, uint64_t begin_ns, uint64_t end_ns, uint32_t label,
                                 uint64_t delay_ns) {
    __atomic_store_n(&r->current_begin_ns, 0, __ATOMIC_RELAXED);
    if (end_ns < begin_ns) end_ns = begin_ns;
    uint64_t open_start = r->open_end_ns - r->bucket_ns;
    if (end_ns >= r->open_end_ns || begin_ns < open_start || r->open_number == 0) {
        sw_leadup_end_slow(r, begin_ns, end_ns, label, delay_ns);
        return;
    }
    sw_leadup_bucket *b = &r->buckets[(r->open_number - 1) % r->bucket_count];
    uint64_t duration = end_ns - begin_ns;
    __atomic_store_n(&b->busy_ns, b->busy_ns + duration, __ATOMIC_RELAXED);
    __atomic_store_n(&b->items, b->items + 1, __ATOMIC_RELAXED);
    if (duration > b->longest_ns) {
        __atomic_store_n(&b->longest_ns, duration, __ATOMIC_RELAXED);
        __atomic_store_n(&b->longest_label, label, __ATOMIC_RELAXED);
    }
    if (delay_ns > b->max_delay_ns) __atomic_store_n(&b->max_delay_ns, delay_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&r->items_total, r->items_total + 1, __ATOMIC_RELAXED);
    if (duration >= r->item_min_ns) sw_leadup_append(r, begin_ns, end_ns, label, delay_ns);
}

/// The item running now: its start (0 between items) and label. Any thread.
static inline uint64_t sw_leadup_current(const sw_leadup *r, uint32_t *label) {
    *label = __atomic_load_n(&r->current_label, __ATOMIC_RELAXED);
    return __atomic_load_n(&r->current_begin_ns, __ATOMIC_RELAXED);
}

/// What sw_leadup_copy returns.
typedef struct sw_leadup_copy_result {
    uint32_t buckets;        ///< buckets copied into `buckets` (oldest first), those of the window ending `now_ns`
    uint32_t items;          ///< items copied into `items` (oldest first), those that ended in the window
    uint64_t items_from_ns;  ///< 0, or when the ring had overwritten older long items of the window: the items
                             ///< are complete only from this time on
    uint64_t first_bucket;   ///< the number of the window's first bucket (buckets[i] is number first_bucket + i)
} sw_leadup_copy_result;

/// Copies the window of `bucket_count` buckets that ends with the bucket holding `now_ns`: every bucket in it
/// (one that the loop never touched is zero, with its number set) and every long item that ended in it. Buckets
/// and sched entries being rewritten during the copy are zeroed rather than torn; items overwritten during it
/// are dropped (see `items_from_ns`). `buckets` and `sched` hold `bucket_count` entries each, `items`
/// `item_capacity`. Any thread.
sw_leadup_copy_result sw_leadup_copy(const sw_leadup *r, uint64_t now_ns, sw_leadup_bucket *buckets,
                                     sw_leadup_sched *sched, sw_leadup_item *items);

/// The watching thread adds the loop thread's scheduler figures for the bucket holding `at_ns` (adding to what
/// that bucket already has). Not the loop thread: one other writer.
void sw_leadup_add_sched(sw_leadup *r, uint64_t at_ns, uint64_t run_queue_wait_ns, uint64_t cpu_ns,
                         uint32_t voluntary, uint32_t involuntary);

#ifdef __cplusplus
}
#endif
#endif
