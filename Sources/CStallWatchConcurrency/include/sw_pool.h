// sw_pool: times every job of the Swift Concurrency global executor, in per-worker slots, for a pool watchdog.
#ifndef SW_POOL_H
#define SW_POOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Nothing here runs in a signal handler and nothing here is async-signal-safe: the hook and the job trampoline
// run on the threads that enqueue and run jobs; the rest on the watchdog's thread. The per-job path allocates
// nothing and takes no lock (atomic stores to the worker's own slot; one futex wake on the pool's idle → busy
// edge, only while the watchdog is parked; for a job that ran past the threshold unseen, a record in the worker's own
// ring and one futex wake).
//
// Layout this relies on (Swift 6.3.1 runtime, `_swift_concurrency_debug_internal_layout_version` 1..2 — checked
// by sw_pool_runtime_layout_version() before enabling): a job starts with a heap header (metadata, refcount),
// then `void *schedulerPrivate[2]` (free for the executor that took the job), then 32-bit flags whose bits 8–15
// are the priority — as declared by the toolchain's `usr/include/swift/ExecutorImpl.h`. The global enqueue hook
// and `swift_job_run` use the Swift calling convention; an executor reference is two words.

/// Most pool workers that get a slot of their own; a worker beyond that runs its jobs untimed.
#define SW_POOL_MAX_SLOTS 64
/// Buckets of the job-duration and enqueue-to-start histograms: upper bounds of 0.1, 1, 10, 100 ms, 1 s, 10 s,
/// and one bucket above.
#define SW_POOL_HISTOGRAM_BUCKETS 7

/// What one slot says about the job its worker runs now.
typedef struct {
    int32_t thread_id;       ///< 0: the slot is free.
    uint32_t busy;           ///< 1 while a job runs.
    uint64_t sequence;       ///< jobs started on this worker (moves with every job).
    uint64_t start_ns;       ///< CLOCK_MONOTONIC_COARSE when the job started.
    uint64_t stall_end_ns;   ///< CLOCK_MONOTONIC at the end of a followed job, else 0.
    uint64_t task_id;        ///< the job's task id (0 for a job that is no task).
    uint32_t priority;       ///< the job's priority (Swift's JobPriority raw value).
    uint32_t named;          ///< 1 when the job is a task created with a name (`Task(name:)`).
    uint64_t job;            ///< the job's address, for sw_pool_task_name (never dereferenced directly).
    uint64_t queued_ns;      ///< how long the job waited between enqueue and start.
} sw_pool_slot_view;

/// Slow jobs one worker can record before the watchdog takes them (more are counted as dropped).
#define SW_POOL_LATE_RECORDS 16

/// A job that ran past the threshold while the watchdog opened no stall for it, as its worker recorded it when the
/// job returned.
typedef struct {
    uint64_t job_number;     ///< the job's number on its worker (sw_pool_slot_view.sequence while it ran).
    int32_t thread_id;       ///< the worker.
    uint32_t priority;       ///< the job's priority (Swift's JobPriority raw value).
    uint64_t start_ns;       ///< CLOCK_MONOTONIC_COARSE when the job started.
    uint64_t end_ns;         ///< CLOCK_MONOTONIC when it returned.
    uint64_t task_id;        ///< the job's task id (0 for a job that is no task).
    uint32_t named;          ///< 1 when the job is a task created with a name.
    int32_t slot;            ///< the worker's slot.
    uint64_t queued_ns;      ///< how long the job waited between enqueue and start.
    uint64_t dropped_before; ///< slow jobs of this worker dropped just before this one (its ring was full).
} sw_pool_late_job;

/// Counters and histograms summed over every slot that ever existed.
typedef struct {
    uint64_t jobs_enqueued;
    uint64_t jobs_started;
    uint64_t jobs_untimed;   ///< ran without a slot (more than SW_POOL_MAX_SLOTS workers).
    uint64_t duration_buckets[SW_POOL_HISTOGRAM_BUCKETS];
    uint64_t duration_sum_ns;
    uint64_t delay_buckets[SW_POOL_HISTOGRAM_BUCKETS];
    uint64_t delay_sum_ns;
} sw_pool_totals;

struct sw_leadup;

/// Turns the workers' lead-up rings on with these sizes (each worker's rings are allocated at its next job, and keep
/// the sizes they were made with) or, with a zero window, off (the rings stay, unwritten). Jobs are timed with the
/// coarse clock (4 ms ticks here): busy time sums without bias, and only jobs measured at least `item_min_ns` plus
/// two ticks — truly longer than `item_min_ns` — are kept one by one. Labels are task ids up to 2^32 - 1 (0: a job
/// that is no task, or a larger id).
void sw_pool_leadup_configure(uint64_t window_ns, uint64_t bucket_ns, uint64_t item_min_ns, uint32_t item_capacity);
/// The lead-up rings of worker slot `index`; NULL before its first job with the rings on.
struct sw_leadup *sw_pool_slot_leadup(int index);

/// The runtime's internal layout version, or -1 when the Concurrency runtime does not export it.
int sw_pool_runtime_layout_version(void);

/// Installs the global enqueue hook (chaining to one installed before) and starts timing jobs. Returns 0, or
/// -1 when the runtime's hook is not available. Call with the caller's own serialisation (not thread-safe
/// against sw_pool_disable).
int sw_pool_enable(void);

/// Stops timing: restores the previous hook when ours is still the installed one (returns 0), otherwise leaves
/// ours in place passing every job straight on (returns 1). Jobs already routed keep running normally.
int sw_pool_disable(void);

/// True while the hook is installed and timing.
int sw_pool_is_enabled(void);

/// True when swift_task_enqueueGlobal_hook is ours (enabled, or left passing through).
int sw_pool_hook_is_ours(void);

/// The number of worker slots ever handed out (an upper bound for sw_pool_slot).
int sw_pool_slot_count(void);

/// Copies slot `index` (coherent: retried while the worker changes it). Returns 0, or -1 for a bad index.
int sw_pool_slot(int index, sw_pool_slot_view *out);

/// Claims job number `job` of slot `index` (sw_pool_slot_view.sequence) for a stall the watchdog opens: its worker
/// then records the job's precise end (stall_end_ns) instead of a late record. Returns 1, or 0 when the job already
/// returned and its worker recorded it as a late job (sw_pool_take_late), so that no stall is opened for it.
int sw_pool_follow(int index, uint64_t job);

/// The threshold past which a job the watchdog did not claim is recorded as a late job (0: none is). Set before
/// sw_pool_enable.
void sw_pool_set_threshold(uint64_t threshold_ns);

/// Takes the oldest late job of some worker into `out`: returns 1, or 0 when there is none. Watchdog thread only.
int sw_pool_take_late(sw_pool_late_job *out);
/// Late jobs recorded and not yet taken.
int sw_pool_late_pending(void);
/// Late jobs dropped because their worker's ring was full, since the process started.
uint64_t sw_pool_late_dropped(void);

/// The pool's width: how many workers run jobs of one priority at once.
int sw_pool_width(void);

/// The id of the task running on the calling thread (0 outside a task), as a report's `task.id` gives it.
uint64_t sw_pool_current_task_id(void);

/// Copies the name of the task whose job runs in slot `index` (given with `Task(name:)`) into `out` (NUL-terminated,
/// cut to `capacity` - 1 bytes). Returns the name's length, 0 when the job has no name, or -1 when the slot's job
/// changed meanwhile or the runtime's records could not be read. Reads the task's status records with
/// process_vm_readv (an unmapped address is an error, never a fault) and checks afterwards that the same job still
/// runs, so the task was alive throughout. Call it from the watchdog's thread, never from a worker.
int sw_pool_task_name(int index, char *out, int capacity);

/// Sums the counters and histograms.
void sw_pool_read_totals(sw_pool_totals *out);

/// The wake generation: read it before checking the stop flag, then pass it to sw_pool_park, so a stop (or a
/// job start) between that check and the park ends the park at once instead of being lost.
uint32_t sw_pool_wake_generation(void);
/// The watchdog's wait. Parks until a job starts when no job started since `jobs_started` was read and no wake
/// came since `seen` (sw_pool_wake_generation) was read (returns 1 if it parked), otherwise returns 0 at once.
/// sw_pool_wake() ends a park.
int sw_pool_park(uint64_t jobs_started, uint32_t seen);
/// sw_pool_park, but at most until `deadline_ns` (CLOCK_MONOTONIC): 1 on timeout, 0 when a job started or a wake
/// came (or had come since `jobs_started` and `seen` were read).
int sw_pool_park_until(uint64_t jobs_started, uint32_t seen, uint64_t deadline_ns);
/// Sleeps until `deadline_ns` (CLOCK_MONOTONIC) or sw_pool_wake(), returning 0 at once if a wake came since
/// `seen` (sw_pool_wake_generation) was read. Returns 1 on timeout.
int sw_pool_sleep_until(uint64_t deadline_ns, uint32_t seen);
/// Wakes the watchdog's wait.
void sw_pool_wake(void);

#ifdef __cplusplus
}
#endif

#endif
