// sw_tasks: the live task table, fed from the job trampoline, kept and validated by the pool watchdog's thread.
#ifndef SW_TASKS_H
#define SW_TASKS_H

#include "sw_task_read.h"
#include "sw_task_table.h"
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Nothing here runs in a signal handler and nothing here is async-signal-safe.
//
// The per-job path (sw_pool.c's trampoline, while the table is enabled): for a job that is a task, it takes a
// reference to the task before running the job and reads the task's status word after it (the task cannot be
// freed in between), drops the reference, and appends one event (task, id, start, end, status) to its worker's
// own ring: no allocation, no lock, no system call; one futex wake per quarter ring. A task whose first job (it
// started at one of the runtime's entry adapters) leaves it completed never suspended, and appends nothing. An
// `async let` child is not retained (its memory is its parent's): its event says its status was not read, and the
// next task found at its address takes its row over. Everything else runs on the pool
// watchdog's thread, the table's one writer: draining the rings into the rows. A row is found by its task's address
// and trusted only with the task's id: an address whose task completed may hold another task (or anything) later,
// and the address is never dereferenced after the job's reference is dropped.
//
// A suspended task's wait and name are published only once the hung-await detector read them (sw_tasks_mark,
// when its suspension reached the threshold); its async backtrace is not kept in the rows yet (chains stay empty).

/// Job ends one worker can hold before the watchdog drains them (more are counted as dropped): 256 KiB a worker,
/// touched only by workers that run tasks, so that a watchdog thread held off its CPU for ~10 ms on a loaded
/// machine loses none.
#define SW_TASKS_RING_EVENTS 8192

/// Sets the table up in `region` (`size` bytes: at least sw_tasks_region_size(capacity)), a shared file's mapping
/// or anonymous memory, and writes its header. Watchdog thread, before sw_tasks_enable. Returns 0, or -1 when the
/// runtime's layout is not version 1 or memory for the index cannot be had.
int sw_tasks_setup(void *region, uint64_t size, uint32_t capacity, int32_t pid, uint64_t start_time_ticks);
/// Bytes a table of `capacity` rows takes (header, chains, rows).
uint64_t sw_tasks_region_size(uint32_t capacity);
/// Frees what sw_tasks_setup allocated (not `region`). Call after sw_tasks_enable(0) and sw_pool_disable.
void sw_tasks_teardown(void);
/// Starts (1) or stops (0) the per-job events. Jobs running at that moment may still append one.
void sw_tasks_enable(int on);
/// The table's header and rows (NULL before setup).
sw_tasks_header *sw_tasks_header_pointer(void);

/// Applies every job end recorded so far to the table and refreshes the header's counters and the running tasks.
/// Watchdog thread.
void sw_tasks_drain(uint64_t now_ns);

/// Copies row `row` coherently (retrying while the writer changes it): 1, or 0 when it is free or kept changing.
/// Any thread.
int sw_tasks_copy_row(uint32_t row, sw_task_row *out);
/// Copies chain `index` (1-based, as rows name it) coherently: 1, or 0.
int sw_tasks_copy_chain(uint32_t index, sw_task_chain *out);

/// The address of row `row`'s task (0: a free row), for a read of the task (sw_task_read), which checks the id.
/// Watchdog thread.
uint64_t sw_tasks_address(uint32_t row);
/// The row of the task at `address` whose id is `task_id` (-1: none). Watchdog thread.
int64_t sw_tasks_find(uint64_t address, uint64_t task_id);
/// The start of the last job of `task_id` if it completed in row `row` (its row then freed), else 0. Watchdog thread.
uint64_t sw_tasks_completed_at(uint32_t row, uint64_t task_id);
/// Publishes what a read of the task of row `row` found (its wait, its name) and the detector's `verdict`
/// (SW_TASK_EXEMPT, SW_TASK_HUNG, or 0), if the row still holds that task in the suspension that began at
/// `since_ns`. The row's job end clears it. Watchdog thread.
void sw_tasks_mark(uint32_t row, uint64_t task_id, uint64_t since_ns, const sw_task_state *state, uint16_t verdict);
/// Fills `out` with this process's runtime facts for sw_task_read (its task metadata, task size, resume adapters):
/// 0, or -1 when the runtime does not export them or its layout is not version 1.
int sw_tasks_runtime(sw_task_runtime *out);

/// For tests and benchmarks: the bytes the watchdog's private index and bookkeeping take for `capacity` rows.
uint64_t sw_tasks_private_bytes(uint32_t capacity);

#ifdef __cplusplus
}
#endif

#endif
