// The task table's life on the pool watchdog's thread: set-up, draining job ends into rows, counters.
#include "sw_pool_slots.h"
#include "sw_sys.h"
#include "sw_tasks_ring.h"
#include "sw_tasks_store.h"

#if defined(__linux__)

#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// The runtime's debugging symbols (exported data, weak: a runtime without them leaves the reader off).
extern const void *const _swift_concurrency_debug_asyncTaskMetadata __attribute__((weak));
extern const size_t _swift_concurrency_debug_asyncTaskSize __attribute__((weak));
extern const void *const _swift_concurrency_debug_future_adapter __attribute__((weak));
extern const void *const _swift_concurrency_debug_non_future_adapter __attribute__((weak));
extern const void *const _swift_concurrency_debug_task_future_wait_resume_adapter __attribute__((weak));
extern const void *const _swift_concurrency_debug_task_wait_throwing_resume_adapter __attribute__((weak));

sw_task_ring sw_tasks_rings[SW_POOL_MAX_SLOTS];
_Atomic int sw_tasks_on;

static uint64_t ring_dropped_seen[SW_POOL_MAX_SLOTS];
static void *private_memory;
static size_t private_size;

/// Job ends drained as one batch (their memory fetched ahead together).
#define DRAIN_BATCH 16u

static uint64_t round_up(uint64_t value, uint64_t to) { return (value + to - 1) / to * to; }

static uint32_t index_slots(uint32_t capacity) {
    uint32_t slots = 16;
    while (slots < 2ull * capacity) slots <<= 1;
    return slots;
}

uint64_t sw_tasks_region_size(uint32_t capacity) {
    return sizeof(sw_tasks_header) + (uint64_t)SW_TASKS_CHAINS * sizeof(sw_task_chain) +
           (uint64_t)capacity * sizeof(sw_task_row);
}

uint64_t sw_tasks_private_bytes(uint32_t capacity) {
    return round_up((uint64_t)capacity * sizeof(sw_row_private), 64) + (uint64_t)index_slots(capacity) * 4;
}

sw_tasks_header *sw_tasks_header_pointer(void) { return sw_store.header; }

int sw_tasks_setup(void *region, uint64_t size, uint32_t capacity, int32_t pid, uint64_t start_time_ticks) {
    // The trampoline reads the task's status word at the offset of layout version 1.
    if (sw_store.header || sw_pool_runtime_layout_version() != 1 || capacity == 0) return -1;
    if (size < sw_tasks_region_size(capacity) || ((uintptr_t)region % 64)) return -1;
    private_size = sw_tasks_private_bytes(capacity);
    // Touched as rows are used: a table sized for many tasks costs memory only for the tasks it holds.
    void *memory = mmap(NULL, private_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) return -1;
    private_memory = memory;
    char *at = memory;
    memset(&sw_store, 0, sizeof sw_store);
    sw_store.rows_private = (sw_row_private *)at;
    at += round_up((uint64_t)capacity * sizeof(sw_row_private), 64);
    sw_store.index = (uint32_t *)at;
    sw_store.index_max_slots = index_slots(capacity);
    sw_store.index_mask = (sw_store.index_max_slots < SW_STORE_MIN_SLOTS ? sw_store.index_max_slots
                                                                          : SW_STORE_MIN_SLOTS) - 1;
    sw_store.capacity = capacity;
    sw_tasks_header *h = region;
    memset(h, 0, sizeof *h);
    h->magic = SW_TASKS_MAGIC;
    h->version = SW_TASKS_VERSION;
    h->header_size = sizeof *h;
    h->row_size = sizeof(sw_task_row);
    h->capacity = capacity;
    h->chain_size = sizeof(sw_task_chain);
    h->chain_capacity = SW_TASKS_CHAINS;
    h->chains_offset = sizeof *h;
    h->rows_offset = h->chains_offset + (uint64_t)SW_TASKS_CHAINS * sizeof(sw_task_chain);
    h->file_size = sw_tasks_region_size(capacity);
    h->pid = pid;
    h->start_time_ticks = start_time_ticks;
    sw_store.chains = (sw_task_chain *)((char *)region + h->chains_offset);
    sw_store.rows = (sw_task_row *)((char *)region + h->rows_offset);
    // Events of an earlier table (jobs that ended after it stopped) describe nothing this one knows.
    for (int i = 0; i < SW_POOL_MAX_SLOTS; i++) {
        atomic_store(&sw_tasks_rings[i].head, atomic_load(&sw_tasks_rings[i].tail));
        ring_dropped_seen[i] = atomic_load(&sw_tasks_rings[i].dropped);
    }
    __atomic_store_n(&sw_store.header, h, __ATOMIC_RELEASE);
    return 0;
}

void sw_tasks_teardown(void) {
    atomic_store(&sw_tasks_on, 0);
    if (private_memory) munmap(private_memory, private_size);
    private_memory = NULL;
    memset(&sw_store, 0, sizeof sw_store);
}

void sw_tasks_enable(int on) { atomic_store(&sw_tasks_on, on && sw_store.header ? 1 : 0); }

// Rows are taken from the free list, else from the never-used ones (so untouched rows cost no memory).
static int64_t take_row(uint64_t address) {
    if (sw_store.free_head == 0 && sw_store.rows_used < sw_store.capacity) {
        sw_store.rows_private[sw_store.rows_used].next = 0;
        sw_store.free_head = ++sw_store.rows_used;
    }
    return sw_store_insert(address);
}

static void apply(const sw_task_event *event, int32_t thread_id) {
    int64_t found = sw_store_lookup(event->task);
    // The address holds another task now: the row's task is gone.
    int stale = found >= 0 && sw_store.rows[found].task_id != event->id;
    int read = event->bits & SW_EVENT_STATUS_READ;
    if (read && (event->status & SW_STATUS_COMPLETE)) {
        if (found >= 0) {
            sw_store_remove((uint32_t)found);
            if (!stale) {
                sw_store.rows_private[found].completed_id = event->id;
                sw_store.rows_private[found].completed_ns = event->start_ns;
            }
        }
        return;
    }
    int fresh = found < 0 || stale;
    if (found < 0) {
        found = take_row(event->task);
        if (found < 0) {
            sw_tasks_header *h = sw_store.header;
            __atomic_store_n(&h->tasks_dropped, h->tasks_dropped + 1, __ATOMIC_RELAXED);
            return;
        }
    }
    uint32_t row = (uint32_t)found;
    sw_task_row *r = &sw_store.rows[row];
    if (!fresh && event->start_ns < r->last_start_ns) return;  // an older job's end, drained after a newer one
    sw_store_begin(row);
    if (stale) {
        // The new task takes the row where it is (same address, same index slot): a task freed unseen, as an
        // `async let` child is, makes way without an unindexing and a reindexing.
        memset((char *)r + sizeof r->sequence, 0, sizeof *r - sizeof r->sequence);
        sw_tasks_header *h = sw_store.header;
        __atomic_store_n(&h->tasks_seen, h->tasks_seen + 1, __ATOMIC_RELAXED);
    }
    if (fresh) {
        r->task_id = event->id;
        r->first_seen_ns = event->start_ns;
        r->name[0] = 0;
    }
    r->last_start_ns = event->start_ns;
    r->last_end_ns = event->start_ns + (uint64_t)event->duration_us * 1000;
    r->since_ns = r->last_end_ns;
    r->runs++;
    r->thread_id = thread_id;
    r->priority = event->bits & 0xff;
    // What a reader found of the previous suspension is stale now.
    r->wait_kind = SW_WAIT_NONE;
    r->wait_target_id = 0;
    r->wait_address = 0;
    r->flags = (uint16_t)((event->bits & SW_EVENT_NAMED ? SW_TASK_NAMED : 0) |
                          (event->bits & SW_EVENT_CHILD ? SW_TASK_CHILD : 0) |
                          (event->bits & SW_EVENT_GROUP_CHILD ? SW_TASK_GROUP_CHILD : 0) |
                          (event->bits & SW_EVENT_ASYNC_LET ? SW_TASK_ASYNC_LET : 0));
    r->state = !read ? SW_TASK_UNKNOWN
               : event->status & SW_STATUS_RUNNING ? SW_TASK_RUNNING
               : event->status & SW_STATUS_ENQUEUED ? SW_TASK_ENQUEUED
                                                 : SW_TASK_SUSPENDED;
    sw_store_end(row);
}

uint64_t sw_tasks_address(uint32_t row) {
    if (!sw_store.header || row >= sw_store.capacity || row >= sw_store.rows_used) return 0;
    return sw_store.rows[row].state == SW_TASK_FREE ? 0 : sw_store.rows_private[row].address;
}

int64_t sw_tasks_find(uint64_t address, uint64_t task_id) {
    if (!sw_store.header) return -1;
    int64_t row = sw_store_lookup(address);
    return row >= 0 && sw_store.rows[row].task_id == task_id ? row : -1;
}

uint64_t sw_tasks_completed_at(uint32_t row, uint64_t task_id) {
    if (!sw_store.header || row >= sw_store.rows_used) return 0;
    return sw_store.rows_private[row].completed_id == task_id ? sw_store.rows_private[row].completed_ns : 0;
}

void sw_tasks_mark(uint32_t row, uint64_t task_id, uint64_t since_ns, const sw_task_state *state, uint16_t verdict) {
    if (!sw_store.header || row >= sw_store.rows_used) return;
    sw_task_row *r = &sw_store.rows[row];
    if (r->state == SW_TASK_FREE || r->task_id != task_id || r->since_ns != since_ns) return;
    sw_store_begin(row);
    r->wait_kind = state->wait_kind;
    r->wait_target_id = (state->flags & SW_TASK_TARGET_VALIDATED) ? state->wait_task_id : 0;
    r->wait_address = state->wait_address;
    r->flags |= (uint16_t)(SW_TASK_VALIDATED | verdict |
                           (state->flags & (SW_TASK_TARGET_VALIDATED | SW_TASK_STRUCTURED_WAIT)));
    if (state->name_length > 0 && r->name[0] == 0) {
        // Cut at a UTF-8 character boundary: never the middle of a character.
        uint32_t length = state->name_length < SW_TASKS_NAME_BYTES - 1 ? state->name_length : SW_TASKS_NAME_BYTES - 1;
        if (length < state->name_length) {
            while (length > 0 && ((unsigned char)state->name[length] & 0xc0) == 0x80) length--;
        }
        memcpy(r->name, state->name, length);
        r->name[length] = 0;
    }
    sw_store_end(row);
}

int sw_tasks_runtime(sw_task_runtime *out) {
    memset(out, 0, sizeof *out);
    if (sw_pool_runtime_layout_version() != 1 || !&_swift_concurrency_debug_asyncTaskMetadata ||
        !&_swift_concurrency_debug_asyncTaskSize) {
        return -1;
    }
    out->pid = (int32_t)getpid();
    out->task_metadata = (uint64_t)(uintptr_t)_swift_concurrency_debug_asyncTaskMetadata;
    out->task_size = (uint64_t)_swift_concurrency_debug_asyncTaskSize;
    const void *const *adapters[4] = {
        &_swift_concurrency_debug_future_adapter, &_swift_concurrency_debug_non_future_adapter,
        &_swift_concurrency_debug_task_future_wait_resume_adapter,
        &_swift_concurrency_debug_task_wait_throwing_resume_adapter,
    };
    for (int i = 0; i < 4; i++) out->adapters[i] = adapters[i] ? (uint64_t)(uintptr_t)*adapters[i] : 0;
    return out->task_metadata && out->task_size ? 0 : -1;
}

void sw_tasks_drain(uint64_t now_ns) {
    sw_tasks_header *h = sw_store.header;
    if (!h) return;
    int count = sw_pool_slot_count();
    uint64_t dropped = 0, applied = h->events_applied;
    for (int i = 0; i < count; i++) {
        sw_task_ring *ring = &sw_tasks_rings[i];
        uint64_t head = atomic_load_explicit(&ring->head, memory_order_relaxed);
        uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_acquire);
        int32_t thread_id = atomic_load_explicit(&sw_pool_slots[i].thread_id, memory_order_relaxed);
        while (head != tail) {
            // A batch at a time, its memory asked for ahead: the index slots, then the rows they name, then the
            // events applied in order. The workers' own work evicts the table between drains, and each event's
            // lookup would otherwise wait on memory twice, one after another (the prefetches are hints only).
            uint64_t batch = tail - head < DRAIN_BATCH ? tail - head : DRAIN_BATCH;
            const sw_task_event *events = ring->events;
            for (uint64_t i = 0; i < batch; i++) sw_store_prefetch_slot(events[(head + i) % SW_TASKS_RING_EVENTS].task);
            for (uint64_t i = 0; i < batch; i++) sw_store_prefetch_row(events[(head + i) % SW_TASKS_RING_EVENTS].task);
            for (uint64_t i = 0; i < batch; i++) apply(&events[(head + i) % SW_TASKS_RING_EVENTS], thread_id);
            head += batch;
            applied += batch;
            // Give the slots back as they are read, so a worker never waits on a long drain.
            atomic_store_explicit(&ring->head, head, memory_order_release);
        }
        atomic_store_explicit(&ring->head, head, memory_order_release);
        dropped += atomic_load_explicit(&ring->dropped, memory_order_relaxed) - ring_dropped_seen[i];
    }
    __atomic_store_n(&h->events_dropped, dropped, __ATOMIC_RELAXED);
    __atomic_store_n(&h->events_applied, applied, __ATOMIC_RELAXED);
    for (int i = 0; i < SW_TASKS_RUNNING_SLOTS; i++) {
        sw_pool_slot_view view;
        uint64_t id = i < count && sw_pool_slot(i, &view) == 0 && view.busy ? view.task_id : 0;
        __atomic_store_n(&h->running[i], id, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&h->realtime_offset_ns, (int64_t)(sw_realtime_ns() - sw_monotonic_ns()), __ATOMIC_RELAXED);
    __atomic_store_n(&h->published_ns, now_ns, __ATOMIC_RELEASE);
}

#endif
