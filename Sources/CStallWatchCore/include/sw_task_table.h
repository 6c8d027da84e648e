// The task table's published form: a header and fixed-size rows, in memory or in a shared file a sidecar reads.
#ifndef SW_TASK_TABLE_H
#define SW_TASK_TABLE_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// One writer (the pool watchdog's thread) and any number of readers, in this process or another. Nothing here
// locks: the writer brackets every change of a row with its sequence word (odd while it writes), and a reader
// copies a row, checks the sequence is even and unchanged, and retries or skips it otherwise. The workers that
// run jobs write nothing here (their job ends reach the writer through rings of their own). A reader in another
// process trusts none of it: every size, count, index and code is checked before use.
//
// The wait fields (wait_kind, wait_target_id, wait_address), the chains, the name and the flags from
// SW_TASK_VALIDATED up are room for what a later writer may read from a suspended task; this one leaves them zero,
// and readers accept them.
//
// Times are CLOCK_MONOTONIC nanoseconds (CLOCK_MONOTONIC_COARSE for job starts and ends, ~4 ms resolution), the
// same clock in every process of one time namespace; `realtime_offset_ns` turns them into wall-clock time.

/// "SWTASKS1" read as a little-endian word.
#define SW_TASKS_MAGIC 0x31534B5341545753ull
#define SW_TASKS_VERSION 1u
/// Worker slots whose running task is published.
#define SW_TASKS_RUNNING_SLOTS 64
/// Async frames (resume points) kept per chain: the innermost ones.
#define SW_TASKS_FRAMES 16
/// Bytes of a task's name kept per row, NUL included.
#define SW_TASKS_NAME_BYTES 32
/// Distinct async backtraces kept at once (tasks suspended at the same place share one).
#define SW_TASKS_CHAINS 4096

/// A row's state.
enum {
    SW_TASK_FREE = 0,       // no task
    SW_TASK_RUNNING = 1,    // a job of the task runs (or ran when its last job ended: resumed at once)
    SW_TASK_SUSPENDED = 2,  // its last job ended with the task suspended
    SW_TASK_ENQUEUED = 3,   // waiting to run (on the global executor, or on an actor)
    SW_TASK_UNKNOWN = 4,    // its last job ended and the task could not be read then
};

/// What a suspended task waits for, as the runtime's dependency record says (SW_WAIT_NONE until validated;
/// SW_WAIT_UNKNOWN when the record could not be read and checked).
enum {
    SW_WAIT_NONE = 0,
    SW_WAIT_TASK = 1,          // another task's completion (`Task.value`, an `async let`)
    SW_WAIT_CONTINUATION = 2,  // a continuation (`withCheckedContinuation` and the like, `Task.sleep`)
    SW_WAIT_TASK_GROUP = 3,    // the next child of its task group
    SW_WAIT_EXECUTOR = 4,      // enqueued on an executor (an actor) to run
    SW_WAIT_UNKNOWN = 5,
};

/// Row flags.
enum {
    SW_TASK_NAMED = 1u << 0,          // created with a name (`Task(name:)`)
    SW_TASK_CHILD = 1u << 1,          // a child task (structured)
    SW_TASK_GROUP_CHILD = 1u << 2,    // a task group's child
    SW_TASK_ASYNC_LET = 1u << 3,      // an `async let` child
    SW_TASK_VALIDATED = 1u << 4,      // the wait fields and frames were read from the task and checked
    SW_TASK_EXEMPT = 1u << 5,         // its await site matches an exemption pattern: never a hung await
    SW_TASK_HUNG = 1u << 6,           // suspended past the hung-await threshold and not exempt
    SW_TASK_STRUCTURED_WAIT = 1u << 7, // waits on its own child tasks (a task group, an `async let`)
    SW_TASK_AGE_AT_MOST = 1u << 8,    // it ran unseen since `since_ns` (on an actor): the age is an upper bound
    SW_TASK_TARGET_VALIDATED = 1u << 9, // wait_target_id names a task read and checked at its address
};

typedef struct sw_task_row {
    uint32_t sequence;       // even when stable, odd while the writer changes the row; atomic
    uint8_t state;           // SW_TASK_*
    uint8_t wait_kind;       // SW_WAIT_*
    uint16_t flags;          // SW_TASK_* flags
    uint64_t task_id;        // the runtime's task id (never reused)
    uint64_t first_seen_ns;  // start of the first job of the task seen
    uint64_t last_start_ns;  // start of its latest job
    uint64_t last_end_ns;    // end of its latest job
    uint64_t since_ns;       // since when it has been in its current state (== last_end_ns unless AGE_AT_MOST)
    uint32_t runs;           // jobs seen
    int32_t thread_id;       // the worker that ran its latest job
    uint64_t wait_target_id; // SW_WAIT_TASK: the awaited task's id (with SW_TASK_TARGET_VALIDATED)
    uint64_t wait_address;   // the awaited continuation context, task group or executor (an identity, not read)
    uint16_t priority;       // Swift's TaskPriority raw value of its latest job
    uint16_t reserved;
    uint32_t chain;          // 1 + index in the chains of its async backtrace (with SW_TASK_VALIDATED); 0: none
    char name[SW_TASKS_NAME_BYTES]; // NUL-terminated, cut at a UTF-8 character boundary; "" when unnamed
} sw_task_row;

/// One async backtrace, shared by every row that names it. Rewritten only once no row names it.
typedef struct sw_task_chain {
    uint32_t sequence;       // even when stable, odd while the writer changes it; atomic
    uint16_t frame_count;    // valid entries of frames[]
    uint16_t truncated;      // 1 when the chain had more frames than kept
    uint64_t frames[SW_TASKS_FRAMES]; // resume points of the suspended async functions, innermost first
} sw_task_chain;

typedef struct sw_tasks_header {
    uint64_t magic;               // SW_TASKS_MAGIC
    uint32_t version;             // SW_TASKS_VERSION
    uint32_t header_size;         // sizeof(sw_tasks_header)
    uint32_t row_size;            // sizeof(sw_task_row)
    uint32_t capacity;            // rows
    uint32_t chain_size;          // sizeof(sw_task_chain)
    uint32_t chain_capacity;      // chains (SW_TASKS_CHAINS)
    uint64_t chains_offset;       // header_size: the chains follow the header
    uint64_t rows_offset;         // chains_offset + chain_capacity * chain_size
    uint64_t file_size;           // rows_offset + capacity * row_size: the file's size
    int32_t pid;                  // the publishing process
    uint32_t reserved0;
    uint64_t start_time_ticks;    // field 22 of /proc/<pid>/stat: tells a reused pid apart
    uint64_t hung_threshold_ns;   // reserved for a hung-await threshold (0: none)
    uint64_t validate_age_ns;     // reserved (0)
    // Written by the watchdog, atomically, read without a lock.
    uint64_t published_ns;        // CLOCK_MONOTONIC when the watchdog last brought the rows up to date
    int64_t realtime_offset_ns;   // CLOCK_REALTIME - CLOCK_MONOTONIC at that moment
    uint32_t high_water;          // rows [0, high_water) may be in use
    uint32_t live;                // rows in use
    uint64_t tasks_seen;          // tasks ever given a row
    uint64_t tasks_dropped;       // tasks not given a row: the table was full
    uint64_t events_dropped;      // job ends lost: a worker's event ring was full
    uint64_t chains_dropped;      // validated rows left without a backtrace: every chain was in use
    uint64_t events_applied;      // job ends drained into the rows since the table was set up
    uint64_t reserved1;
    uint64_t running[SW_TASKS_RUNNING_SLOTS]; // per worker slot: the id of the task it runs now (0: none)
} sw_tasks_header;

_Static_assert(sizeof(sw_task_row) == 112, "task row layout is part of the file format");
_Static_assert(sizeof(sw_task_chain) == 136, "task chain layout is part of the file format");
_Static_assert(sizeof(sw_tasks_header) == 672, "task table header layout is part of the file format");

#ifdef __cplusplus
}
#endif
#endif
