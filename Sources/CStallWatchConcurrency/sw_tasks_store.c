// The task table's storage: rows indexed by task address, and their free list.
#include "sw_tasks_store.h"

#if defined(__linux__)

#include <string.h>

sw_tasks_store sw_store;

static inline uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

void sw_store_prefetch_slot(uint64_t address) {
    if (sw_store.index) __builtin_prefetch(&sw_store.index[(uint32_t)mix(address) & sw_store.index_mask]);
}

void sw_store_prefetch_row(uint64_t address) {
    if (!sw_store.index) return;
    uint32_t entry = sw_store.index[(uint32_t)mix(address) & sw_store.index_mask];
    if (entry == 0) return;
    __builtin_prefetch(&sw_store.rows_private[entry - 1]);
    __builtin_prefetch(&sw_store.rows[entry - 1], 1);
}

int64_t sw_store_lookup(uint64_t address) {
    if (!sw_store.index) return -1;
    for (uint32_t slot = (uint32_t)mix(address) & sw_store.index_mask;; slot = (slot + 1) & sw_store.index_mask) {
        uint32_t entry = sw_store.index[slot];
        if (entry == 0) return -1;
        if (sw_store.rows_private[entry - 1].address == address) return entry - 1;
    }
}

static void place(uint64_t address, uint32_t row) {
    uint32_t slot = (uint32_t)mix(address) & sw_store.index_mask;
    while (sw_store.index[slot] != 0) slot = (slot + 1) & sw_store.index_mask;
    sw_store.index[slot] = row + 1;
}

// The index is kept at most half full, and no larger: its slots are read at every job end the watchdog drains, and a
// small one stays in the cache (a table sized for 65,536 tasks that holds a few thousand probes a few pages, not
// half a megabyte). Grown by doubling into its reserved memory, every live row placed again.
static void grow_index(void) {
    uint32_t slots = (sw_store.index_mask + 1) * 2;
    memset(sw_store.index, 0, (size_t)slots * sizeof *sw_store.index);
    sw_store.index_mask = slots - 1;
    for (uint32_t row = 0; row < sw_store.rows_used; row++) {
        uint64_t address = sw_store.rows_private[row].address;
        if (address != 0) place(address, row);
    }
}

int64_t sw_store_insert(uint64_t address) {
    if (sw_store.free_head == 0) return -1;
    if (2ull * (sw_store.indexed + 1) > (uint64_t)sw_store.index_mask + 1 &&
        sw_store.index_mask + 1 < sw_store.index_max_slots) {
        grow_index();
    }
    uint32_t row = sw_store.free_head - 1;
    sw_store.free_head = sw_store.rows_private[row].next;
    sw_row_private *p = &sw_store.rows_private[row];
    memset(p, 0, sizeof *p);
    p->address = address;
    place(address, row);
    sw_store.indexed++;
    sw_tasks_header *h = sw_store.header;
    if (row + 1 > h->high_water) __atomic_store_n(&h->high_water, row + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&h->live, h->live + 1, __ATOMIC_RELAXED);
    __atomic_store_n(&h->tasks_seen, h->tasks_seen + 1, __ATOMIC_RELAXED);
    return row;
}

// Linear probing's deletion: later entries of the same run move back into the hole, so no lookup stops early.
static void unindex(uint64_t address, uint32_t row) {
    uint32_t mask = sw_store.index_mask;
    uint32_t hole = (uint32_t)mix(address) & mask;
    while (sw_store.index[hole] != row + 1) {
        if (sw_store.index[hole] == 0) return;
        hole = (hole + 1) & mask;
    }
    for (uint32_t next = (hole + 1) & mask; sw_store.index[next] != 0; next = (next + 1) & mask) {
        uint32_t home = (uint32_t)mix(sw_store.rows_private[sw_store.index[next] - 1].address) & mask;
        // The entry at `next` may fill the hole when its home is not cyclically within (hole, next].
        int between = hole <= next ? (home > hole && home <= next) : (home > hole || home <= next);
        if (!between) {
            sw_store.index[hole] = sw_store.index[next];
            hole = next;
        }
    }
    sw_store.index[hole] = 0;
}

void sw_store_begin(uint32_t row) {
    sw_task_row *r = &sw_store.rows[row];
    __atomic_store_n(&r->sequence, r->sequence + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

void sw_store_end(uint32_t row) {
    sw_task_row *r = &sw_store.rows[row];
    __atomic_store_n(&r->sequence, r->sequence + 1, __ATOMIC_RELEASE);
}

void sw_store_remove(uint32_t row) {
    sw_task_row *r = &sw_store.rows[row];
    sw_store_begin(row);
    uint32_t sequence = r->sequence;
    memset((char *)r + sizeof r->sequence, 0, sizeof *r - sizeof r->sequence);
    r->sequence = sequence;
    sw_store_end(row);
    unindex(sw_store.rows_private[row].address, row);
    sw_store.indexed--;
    sw_store.rows_private[row].address = 0;
    sw_store.rows_private[row].next = sw_store.free_head;
    sw_store.free_head = row + 1;
    sw_tasks_header *h = sw_store.header;
    __atomic_store_n(&h->live, h->live - 1, __ATOMIC_RELAXED);
}

#endif
