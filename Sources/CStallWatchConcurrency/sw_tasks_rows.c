// The task table's rows: brought up to date from a read of their task, moved between lists, copied by readers.
#include "sw_tasks_store.h"

#if defined(__linux__)

#include <string.h>

// `name` cut to fit, at a UTF-8 character boundary (never half a character).
int sw_tasks_copy_row(uint32_t row, sw_task_row *out) {
    sw_tasks_header *h = __atomic_load_n(&sw_store.header, __ATOMIC_ACQUIRE);
    if (!h || row >= h->capacity) return 0;
    const sw_task_row *r = &sw_store.rows[row];
    for (int attempt = 0; attempt < 64; attempt++) {
        uint32_t before = __atomic_load_n(&r->sequence, __ATOMIC_ACQUIRE);
        if (before & 1) continue;
        memcpy(out, r, sizeof *out);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&r->sequence, __ATOMIC_RELAXED) == before) return out->state != SW_TASK_FREE;
    }
    return 0;
}

int sw_tasks_copy_chain(uint32_t index, sw_task_chain *out) {
    sw_tasks_header *h = __atomic_load_n(&sw_store.header, __ATOMIC_ACQUIRE);
    if (!h || index == 0 || index > h->chain_capacity) return 0;
    const sw_task_chain *c = &sw_store.chains[index - 1];
    for (int attempt = 0; attempt < 64; attempt++) {
        uint32_t before = __atomic_load_n(&c->sequence, __ATOMIC_ACQUIRE);
        if (before & 1) continue;
        memcpy(out, c, sizeof *out);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&c->sequence, __ATOMIC_RELAXED) == before) {
            return out->frame_count <= SW_TASKS_FRAMES;
        }
    }
    return 0;
}

#endif
