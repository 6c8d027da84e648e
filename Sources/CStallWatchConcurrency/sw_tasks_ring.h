// Private to the pool files: the job-end events a worker appends for the task table, one ring per worker slot.
// Nothing here runs in a signal handler.
#ifndef SW_TASKS_RING_H
#define SW_TASKS_RING_H
#include "sw_pool.h"
#include "sw_tasks.h"

#include <stdatomic.h>

/// One job of a task, as its worker saw it end.
typedef struct {
    uint64_t task;           // the task's address (never dereferenced by the watchdog: read with process_vm_readv)
    uint64_t id;             // its id
    uint64_t start_ns;       // CLOCK_MONOTONIC_COARSE at the job's start
    uint32_t duration_us;    // the job's duration (saturating)
    uint16_t status;         // the task's ActiveTaskStatus flags right after the job (with SW_EVENT_STATUS_READ)
    uint16_t bits;           // priority in bits 0–7, then SW_EVENT_* flags
} sw_task_event;

enum {
    SW_EVENT_CHILD = 1u << 8,
    SW_EVENT_GROUP_CHILD = 1u << 9,
    SW_EVENT_ASYNC_LET = 1u << 10,
    SW_EVENT_NAMED = 1u << 11,
    SW_EVENT_STATUS_READ = 1u << 12,  // `status` was read (the task was retained): not for `async let` children
};

/// The ActiveTaskStatus flags a job end is judged by (layout version 1).
enum { SW_STATUS_RUNNING = 0x800, SW_STATUS_ENQUEUED = 0x1000, SW_STATUS_COMPLETE = 0x2000 };

/// One producer (the slot's worker) and one consumer (the pool watchdog's thread).
typedef struct {
    _Atomic uint64_t head;   // next event to take; written by the watchdog
    char pad0[56];
    _Atomic uint64_t tail;   // next event to write; written by the worker
    _Atomic uint64_t dropped;
    char pad1[48];
    sw_task_event events[SW_TASKS_RING_EVENTS];
} __attribute__((aligned(64))) sw_task_ring;

extern sw_task_ring sw_tasks_rings[SW_POOL_MAX_SLOTS];
/// 1 while job ends are recorded.
extern _Atomic int sw_tasks_on;

/// Appends `event` to slot `index`'s ring (worker of that slot only); a full ring counts it as dropped. Wakes the
/// watchdog when the ring reaches a quarter full, and again at a half and three quarters if it has not drained
/// yet (a loaded machine may leave a woken thread waiting for a CPU), so that it drains before the ring overflows.
static inline void sw_tasks_push(int index, const sw_task_event *event) {
    sw_task_ring *ring = &sw_tasks_rings[index];
    uint64_t tail = atomic_load_explicit(&ring->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&ring->head, memory_order_acquire);
    uint64_t used = tail - head;
    if (used >= SW_TASKS_RING_EVENTS) {
        atomic_store_explicit(&ring->dropped, atomic_load_explicit(&ring->dropped, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        return;
    }
    ring->events[tail % SW_TASKS_RING_EVENTS] = *event;
    atomic_store_explicit(&ring->tail, tail + 1, memory_order_release);
    if ((used + 1) % (SW_TASKS_RING_EVENTS / 4) == 0) sw_pool_wake();
}

#endif
