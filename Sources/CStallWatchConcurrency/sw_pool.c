// The global enqueue hook, the job trampoline and the per-worker slots that time every Concurrency job.
#include "sw_pool_slots.h"
#include "sw_tasks_ring.h"
#include "sw_leadup.h"

#if defined(__linux__)

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#define SWIFTCC __attribute__((swiftcall))

// The job header of ExecutorImpl.h (Swift 6.3.1): declared here because the toolchain's headers are not on the
// package's search path.
typedef struct {
    const void *metadata;
    uintptr_t ref_counts;
    void *scheduler_private[2];
    uint32_t flags;
} sw_job;

typedef SWIFTCC void (*sw_enqueue_original)(sw_job *job);
typedef SWIFTCC void (*sw_enqueue_hook)(sw_job *job, sw_enqueue_original original);
extern sw_enqueue_hook swift_task_enqueueGlobal_hook;
extern SWIFTCC void swift_job_run(sw_job *job, const void *identity, uintptr_t implementation);
extern SWIFTCC uint64_t swift_task_getJobTaskId(sw_job *job);
extern SWIFTCC sw_job *swift_task_getCurrent(void);
// libswiftCore's reference counting (C calling convention): keeps a task alive from its job's start to the read of
// its status after the job.
extern void *swift_retain(void *object);
extern void swift_release(void *object);
extern const uint32_t _swift_concurrency_debug_internal_layout_version __attribute__((weak));
// The runtime's two entry adapters (exported for debuggers): a task is created resuming at one of them, and its
// ResumeTask names something else from the moment it first suspends.
extern const void *const _swift_concurrency_debug_future_adapter __attribute__((weak));
extern const void *const _swift_concurrency_debug_non_future_adapter __attribute__((weak));

// libdispatch, as the runtime's own Linux executor uses it (dispatch_queue_set_width is exported, not public).
typedef struct sw_dispatch_object *sw_dispatch_queue;
extern char _dispatch_queue_attr_concurrent;
extern sw_dispatch_queue dispatch_queue_create(const char *label, void *attributes);
extern sw_dispatch_queue dispatch_get_global_queue(intptr_t qos, uintptr_t flags);
extern void dispatch_set_target_queue(void *object, sw_dispatch_queue target);
extern void dispatch_queue_set_width(sw_dispatch_queue queue, long width);
extern void dispatch_async_f(sw_dispatch_queue queue, void *context, void (*work)(void *));

// Our use of the job's scheduler-private words, free while we own the job (between our hook and its run).
enum { SW_JOB_ENQUEUED_AT = 1 };
// Job flags bit 30 (`Task_HasInitialTaskName` in the runtime's MetadataValues.h): the task was given a name.
#define SW_JOB_HAS_TASK_NAME (1u << 30)
// Job flags bits 24, 26, 28: a child task, a task group's child, an `async let` child (whose memory, and immortal
// reference count, belong to its parent: it is not retained).
#define SW_JOB_CHILD (1u << 24)
#define SW_JOB_GROUP_CHILD (1u << 26)
#define SW_JOB_ASYNC_LET (1u << 28)
// The ActiveTaskStatus flags word of a task (ExecutorImpl.h's private storage, layout version 1).
#define SW_TASK_STATUS_OFFSET 0x60
// A task's ResumeTask, the partial function its next job runs (layout version 1).
#define SW_TASK_RESUME_OFFSET 0x38


sw_slot sw_pool_slots[SW_POOL_MAX_SLOTS];
_Atomic int sw_pool_slots_used;
static _Atomic int enabled;
static _Atomic(sw_enqueue_hook) previous_hook;
static _Atomic(sw_enqueue_original) runtime_enqueue;
_Atomic uint64_t sw_pool_foreign_enqueued, sw_pool_untimed;
static _Atomic uint64_t late_threshold_ns;
static __thread int my_slot = -1;
static __thread int my_slot_ready;
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static pthread_key_t slot_key;
static sw_dispatch_queue queues[5];
static int width;
static const void *entry_adapters[2];

extern void sw_pool_wake_if_parked(void);
extern void sw_pool_late_push(int index, const sw_pool_late_job *record);

#define SW_COARSE_SLACK_NS 10000000ull

static inline uint64_t clock_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int bucket_of(uint64_t ns) {
    uint64_t bound = 100000;  // 0.1 ms
    for (int i = 0; i < SW_POOL_HISTOGRAM_BUCKETS - 1; i++, bound *= 10) {
        if (ns <= bound) return i;
    }
    return SW_POOL_HISTOGRAM_BUCKETS - 1;
}

// A worker's own counters: only it writes them, so a relaxed load and store is enough.
static inline void bump(_Atomic uint64_t *word, uint64_t by) {
    atomic_store_explicit(word, atomic_load_explicit(word, memory_order_relaxed) + by, memory_order_relaxed);
}

static void release_slot(void *value) {
    int index = (int)(intptr_t)value - 1;
    if (index >= 0) atomic_store_explicit(&sw_pool_slots[index].thread_id, 0, memory_order_release);
}

static void setup(void) {
    pthread_key_create(&slot_key, release_slot);
    if (&_swift_concurrency_debug_future_adapter) entry_adapters[0] = _swift_concurrency_debug_future_adapter;
    if (&_swift_concurrency_debug_non_future_adapter) entry_adapters[1] = _swift_concurrency_debug_non_future_adapter;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    width = cpus > 0 ? (int)cpus : 1;
    // One concurrent queue per priority bucket, as wide as the machine, on the global queue of that QoS.
    static const intptr_t qos[5] = {0x21, 0x19, 0x15, 0x11, 0x09};
    for (int i = 0; i < 5; i++) {
        queues[i] = dispatch_queue_create("org.stallwatch.cooperative", &_dispatch_queue_attr_concurrent);
        dispatch_queue_set_width(queues[i], width);
        dispatch_set_target_queue(queues[i], dispatch_get_global_queue(qos[i], 0));
    }
}

// The job is the task's first: it resumes at an entry adapter, so the task never suspended. The word is read before
// the job runs, while no one else may change it.
static inline int starts_task(const sw_job *job) {
    const void *resume = __atomic_load_n((const void *const *)((const char *)job + SW_TASK_RESUME_OFFSET),
                                         __ATOMIC_RELAXED);
    return resume && (resume == entry_adapters[0] || resume == entry_adapters[1]);
}

// Claims a free slot for the calling worker (once per thread); -1 when all are taken.
static int claim_slot(void) {
    my_slot_ready = 1;
    int32_t tid = (int32_t)syscall(SYS_gettid);
    int count = atomic_load_explicit(&sw_pool_slots_used, memory_order_acquire);
    for (int i = 0; i < count; i++) {
        int32_t expected = 0;
        if (atomic_compare_exchange_strong(&sw_pool_slots[i].thread_id, &expected, tid)) {
            pthread_setspecific(slot_key, (void *)(intptr_t)(i + 1));
            return my_slot = i;
        }
    }
    for (;;) {
        int index = atomic_load(&sw_pool_slots_used);
        if (index >= SW_POOL_MAX_SLOTS) return -1;
        int32_t expected = 0;
        if (atomic_compare_exchange_strong(&sw_pool_slots[index].thread_id, &expected, tid)) {
            int want = index;
            atomic_compare_exchange_strong(&sw_pool_slots_used, &want, index + 1);
            pthread_setspecific(slot_key, (void *)(intptr_t)(index + 1));
            return my_slot = index;
        }
        int want = index;
        atomic_compare_exchange_strong(&sw_pool_slots_used, &want, index + 1);
    }
}

// A job that ran past the threshold: if the watchdog opened no stall for it (it was busy with other workers, or
// the job ended between two of its looks), the worker records it for a late report and wakes the watchdog. The
// claim's compare-and-swap decides, once per job, whether the watchdog follows it or the worker records it.
static void finish_slow_job(sw_slot *slot, int index, uint64_t number, uint64_t claim, uint64_t start,
                            uint64_t threshold) {
    uint64_t end = clock_ns(CLOCK_MONOTONIC);
    for (;;) {
        if (claim == SW_CLAIM_FOLLOWED(number)) {
            atomic_store_explicit(&slot->stall_end_ns, end, memory_order_relaxed);
            return;
        }
        if (end < start || end - start < threshold) return;
        if (atomic_compare_exchange_weak(&slot->claim, &claim, SW_CLAIM_LATE(number))) break;
    }
    if (!atomic_load_explicit(&enabled, memory_order_relaxed)) return;
    sw_pool_late_job record = {
        .job_number = number,
        .thread_id = atomic_load_explicit(&slot->thread_id, memory_order_relaxed),
        .priority = atomic_load_explicit(&slot->priority, memory_order_relaxed),
        .start_ns = start,
        .end_ns = end,
        .task_id = atomic_load_explicit(&slot->task_id, memory_order_relaxed),
        .named = atomic_load_explicit(&slot->named, memory_order_relaxed),
        .queued_ns = atomic_load_explicit(&slot->queued_ns, memory_order_relaxed),
    };
    sw_pool_late_push(index, &record);
}

static void run_job(void *context) {
    sw_job *job = context;
    int index = my_slot_ready ? my_slot : claim_slot();
    if (index < 0) {
        atomic_fetch_add_explicit(&sw_pool_untimed, 1, memory_order_relaxed);
        swift_job_run(job, NULL, 0);
        return;
    }
    sw_slot *slot = &sw_pool_slots[index];
    uint64_t now = clock_ns(CLOCK_MONOTONIC_COARSE);
    uint64_t enqueued_at = (uint64_t)(uintptr_t)job->scheduler_private[SW_JOB_ENQUEUED_AT];
    uint64_t queued = now > enqueued_at ? now - enqueued_at : 0;
    uint64_t sequence = atomic_load_explicit(&slot->sequence, memory_order_relaxed);
    atomic_store_explicit(&slot->sequence, sequence + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&slot->start_ns, now, memory_order_relaxed);
    atomic_store_explicit(&slot->task_id, swift_task_getJobTaskId(job), memory_order_relaxed);
    uint32_t flags = job->flags;
    atomic_store_explicit(&slot->priority, (flags >> 8) & 0xff, memory_order_relaxed);
    // A task (kind 0) created with a name: its name record is read later, off this thread, only if it stalls.
    atomic_store_explicit(&slot->named, (flags & 0xff) == 0 && (flags & SW_JOB_HAS_TASK_NAME), memory_order_relaxed);
    atomic_store_explicit(&slot->job, (uint64_t)(uintptr_t)job, memory_order_relaxed);
    atomic_store_explicit(&slot->queued_ns, queued, memory_order_relaxed);
    atomic_store_explicit(&slot->busy, 1, memory_order_relaxed);
    // Full barrier: the slot's busy word is visible before we look whether the watchdog is parked (it sets its
    // park flag, then reads the slots).
    atomic_fetch_add_explicit(&slot->started, 1, memory_order_seq_cst);
    atomic_store_explicit(&slot->sequence, sequence + 2, memory_order_release);
    sw_pool_wake_if_parked();
    bump(&slot->delay[bucket_of(queued)], 1);
    bump(&slot->delay_sum, queued);
    // The worker's lead-up: its jobs as items, labelled with their task ids (coarse times; sw_pool.h says why).
    sw_leadup *leadup = NULL;
    uint32_t label = 0;
    if (atomic_load_explicit(&sw_pool_leadup_on, memory_order_relaxed)) {
        leadup = atomic_load_explicit(&slot->leadup, memory_order_relaxed);
        if (!leadup) leadup = sw_pool_leadup_create(slot);
        uint64_t task_id = atomic_load_explicit(&slot->task_id, memory_order_relaxed);
        label = task_id <= UINT32_MAX ? (uint32_t)task_id : 0;
        if (leadup) sw_leadup_begin(leadup, now, label);
    }
    // The task table: a task's job is bracketed by a reference, so that its status can be read after the job (the
    // job may complete the task and drop the runtime's last reference).
    int tracked = (flags & 0xff) == 0 && atomic_load_explicit(&sw_tasks_on, memory_order_relaxed);
    int retained = tracked && !(flags & SW_JOB_ASYNC_LET);
    int first = retained && starts_task(job);
    if (retained) swift_retain(job);

    swift_job_run(job, NULL, 0);

    uint64_t end = clock_ns(CLOCK_MONOTONIC_COARSE);
    uint16_t status = 0;
    if (retained) {
        status = (uint16_t)__atomic_load_n((uint32_t *)((char *)job + SW_TASK_STATUS_OFFSET), __ATOMIC_RELAXED);
        swift_release(job);
    }
    // A task whose first job completed it never suspended: no row holds it and none will, so its job end is not
    // worth the watchdog's time (the short child tasks of a fan-out or of a request are most tasks).
    if (tracked && !(first && (status & SW_STATUS_COMPLETE))) {
        uint64_t took = end > now ? (end - now) / 1000 : 0;
        sw_task_event event = {
            .task = (uint64_t)(uintptr_t)job,
            .id = atomic_load_explicit(&slot->task_id, memory_order_relaxed),
            .start_ns = now,
            .duration_us = took > UINT32_MAX ? UINT32_MAX : (uint32_t)took,
            .status = status,
            .bits = (uint16_t)(((flags >> 8) & 0xff) | (flags & SW_JOB_CHILD ? SW_EVENT_CHILD : 0) |
                               (flags & SW_JOB_GROUP_CHILD ? SW_EVENT_GROUP_CHILD : 0) |
                               (flags & SW_JOB_ASYNC_LET ? SW_EVENT_ASYNC_LET : 0) |
                               (flags & SW_JOB_HAS_TASK_NAME ? SW_EVENT_NAMED : 0) | (retained ? SW_EVENT_STATUS_READ : 0)),
        };
        sw_tasks_push(index, &event);
    }
    uint64_t number = sequence / 2 + 1;
    uint64_t claim = atomic_load_explicit(&slot->claim, memory_order_acquire);
    uint64_t threshold = atomic_load_explicit(&late_threshold_ns, memory_order_relaxed);
    if (claim == SW_CLAIM_FOLLOWED(number)) {
        atomic_store_explicit(&slot->stall_end_ns, clock_ns(CLOCK_MONOTONIC), memory_order_relaxed);
    } else if (threshold && end - now + SW_COARSE_SLACK_NS >= threshold) {
        finish_slow_job(slot, index, number, claim, now, threshold);
    }
    if (leadup) sw_leadup_end(leadup, now, end, label, queued);
    atomic_store_explicit(&slot->busy, 0, memory_order_release);
    uint64_t duration = end > now ? end - now : 0;
    bump(&slot->duration[bucket_of(duration)], 1);
    bump(&slot->duration_sum, duration);
}

static inline int bucket_of_priority(uint32_t priority) {
    if (priority > 0x19) return 0;
    if (priority > 0x15) return 1;
    if (priority > 0x11) return 2;
    if (priority > 0x09) return 3;
    return 4;
}

// Where jobs go once past a previous hook: to our queues while enabled, else to the runtime.
static SWIFTCC void route(sw_job *job) {
    if (!atomic_load_explicit(&enabled, memory_order_relaxed)) {
        atomic_load_explicit(&runtime_enqueue, memory_order_relaxed)(job);
        return;
    }
    if (my_slot >= 0) {
        bump(&sw_pool_slots[my_slot].enqueued, 1);
    } else {
        atomic_fetch_add_explicit(&sw_pool_foreign_enqueued, 1, memory_order_relaxed);
    }
    job->scheduler_private[SW_JOB_ENQUEUED_AT] = (void *)(uintptr_t)clock_ns(CLOCK_MONOTONIC_COARSE);
    // Unspecified priority runs as default, as in the runtime's executor.
    uint32_t priority = (job->flags >> 8) & 0xff;
    dispatch_async_f(queues[bucket_of_priority(priority ? priority : 0x15)], job, run_job);
}

static SWIFTCC void hook(sw_job *job, sw_enqueue_original original) {
    atomic_store_explicit(&runtime_enqueue, original, memory_order_relaxed);
    sw_enqueue_hook previous = atomic_load_explicit(&previous_hook, memory_order_relaxed);
    // A hook installed before ours still sees every job; what it calls "the original" is our routing.
    if (previous) {
        previous(job, route);
    } else {
        route(job);
    }
}

uint64_t sw_pool_current_task_id(void) {
    sw_job *task = swift_task_getCurrent();  // a task is a job: its id is read the same way
    return task ? swift_task_getJobTaskId(task) : 0;
}

int sw_pool_runtime_layout_version(void) {
    return &_swift_concurrency_debug_internal_layout_version ? (int)_swift_concurrency_debug_internal_layout_version
                                                             : -1;
}

int sw_pool_enable(void) {
    pthread_once(&setup_once, setup);
    sw_enqueue_hook current = swift_task_enqueueGlobal_hook;
    if (current != hook) atomic_store(&previous_hook, current);
    atomic_store(&enabled, 1);
    __atomic_store_n(&swift_task_enqueueGlobal_hook, hook, __ATOMIC_RELEASE);
    return 0;
}

int sw_pool_disable(void) {
    atomic_store(&enabled, 0);
    sw_enqueue_hook current = __atomic_load_n(&swift_task_enqueueGlobal_hook, __ATOMIC_ACQUIRE);
    if (current != hook) return 1;
    __atomic_store_n(&swift_task_enqueueGlobal_hook, atomic_load(&previous_hook), __ATOMIC_RELEASE);
    return 0;
}

int sw_pool_is_enabled(void) { return atomic_load(&enabled); }
int sw_pool_hook_is_ours(void) { return __atomic_load_n(&swift_task_enqueueGlobal_hook, __ATOMIC_ACQUIRE) == hook; }

int sw_pool_width(void) {
    pthread_once(&setup_once, setup);
    return width;
}

void sw_pool_set_threshold(uint64_t threshold_ns) {
    atomic_store_explicit(&late_threshold_ns, threshold_ns, memory_order_relaxed);
}

#endif
