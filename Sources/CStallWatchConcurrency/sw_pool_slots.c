// The watchdog's side of the worker slots: coherent copies, the claim of a slow job, the summed counters.
#include "sw_pool_slots.h"

#if defined(__linux__)

int sw_pool_slot_count(void) { return atomic_load_explicit(&sw_pool_slots_used, memory_order_acquire); }

int sw_pool_slot(int index, sw_pool_slot_view *out) {
    if (index < 0 || index >= sw_pool_slot_count()) return -1;
    sw_slot *slot = &sw_pool_slots[index];
    for (int attempt = 0; attempt < 1000; attempt++) {
        uint64_t before = atomic_load_explicit(&slot->sequence, memory_order_acquire);
        if (before & 1) continue;
        out->thread_id = atomic_load_explicit(&slot->thread_id, memory_order_relaxed);
        out->busy = atomic_load_explicit(&slot->busy, memory_order_relaxed);
        out->start_ns = atomic_load_explicit(&slot->start_ns, memory_order_relaxed);
        out->task_id = atomic_load_explicit(&slot->task_id, memory_order_relaxed);
        out->priority = atomic_load_explicit(&slot->priority, memory_order_relaxed);
        out->named = atomic_load_explicit(&slot->named, memory_order_relaxed);
        out->job = atomic_load_explicit(&slot->job, memory_order_relaxed);
        out->queued_ns = atomic_load_explicit(&slot->queued_ns, memory_order_relaxed);
        out->stall_end_ns = atomic_load_explicit(&slot->stall_end_ns, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&slot->sequence, memory_order_relaxed) == before) {
            out->sequence = before / 2;
            return 0;
        }
    }
    return -1;
}

int sw_pool_follow(int index, uint64_t job) {
    if (index < 0 || index >= SW_POOL_MAX_SLOTS || job == 0) return 0;
    sw_slot *slot = &sw_pool_slots[index];
    atomic_store_explicit(&slot->stall_end_ns, 0, memory_order_relaxed);
    uint64_t claim = atomic_load(&slot->claim);
    for (;;) {
        if (claim == SW_CLAIM_FOLLOWED(job)) return 1;
        if (claim == SW_CLAIM_LATE(job)) return 0;
        if (atomic_compare_exchange_weak(&slot->claim, &claim, SW_CLAIM_FOLLOWED(job))) return 1;
    }
}

void sw_pool_read_totals(sw_pool_totals *out) {
    *out = (sw_pool_totals){0};
    out->jobs_enqueued = atomic_load(&sw_pool_foreign_enqueued);
    out->jobs_untimed = atomic_load(&sw_pool_untimed);
    int count = sw_pool_slot_count();
    for (int i = 0; i < count; i++) {
        sw_slot *slot = &sw_pool_slots[i];
        out->jobs_enqueued += atomic_load_explicit(&slot->enqueued, memory_order_relaxed);
        out->jobs_started += atomic_load_explicit(&slot->started, memory_order_relaxed);
        out->duration_sum_ns += atomic_load_explicit(&slot->duration_sum, memory_order_relaxed);
        out->delay_sum_ns += atomic_load_explicit(&slot->delay_sum, memory_order_relaxed);
        for (int b = 0; b < SW_POOL_HISTOGRAM_BUCKETS; b++) {
            out->duration_buckets[b] += atomic_load_explicit(&slot->duration[b], memory_order_relaxed);
            out->delay_buckets[b] += atomic_load_explicit(&slot->delay[b], memory_order_relaxed);
        }
    }
}

#endif
