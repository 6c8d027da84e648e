// Reading one Swift task of a process (this one or another) from its memory, validated, without stopping it.
#ifndef SW_TASK_READ_H
#define SW_TASK_READ_H
#include "sw_task_table.h"
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Every read goes through process_vm_readv(2), so a task freed meanwhile reads as an error, never a fault, and
// nothing read is trusted: a task is the one expected only if its metadata is the runtime's task metadata and its
// id is the expected one, and a wait is reported only if the dependency record names the task back and its kind is
// known. Nothing here is async-signal-safe (nothing needs to be); nothing allocates or locks.
//
// The layout is the Swift 6.3.1 Concurrency runtime's (`_swift_concurrency_debug_internal_layout_version` 1),
// read and checked against the runtime's own sources and a live process:
// - an AsyncTask is a Job (heap header, two scheduler-private words, 32-bit flags at 0x20 whose low byte is the
//   kind (0: a task) and bits 8–15 the priority, the low 32 bits of the id at 0x24, ResumeTask at 0x38), then
//   ResumeContext at 0x40 and private storage at 0x50: the ActiveTaskStatus's flags at 0x60 and its innermost status
//   record at 0x68, the id's high 32 bits at 0x90 and the dependency record at 0xa0; a child task's fragment follows
//   at `_swift_concurrency_debug_asyncTaskSize` (its parent, then its next sibling), a group child's group after;
// - a status record is a word whose low byte is its kind, then its parent record; a TaskDependencyStatusRecord
//   (kind 0) holds what it waits on (two words), the dependency's kind (1 task, 2 continuation, 3 task group,
//   4 enqueued on an executor) and the waiting task; a task group's record (kind 2) lies 8 bytes into the group and
//   holds its first and last child; a name record (kind 6) holds the name's address;
// - an async context begins with its parent context and the resume point of the function awaiting it.

/// The runtime facts a reader needs, found in the watched process.
typedef struct sw_task_runtime {
    int32_t pid;                 // whose memory is read
    uint32_t reserved;
    uint64_t task_metadata;      // the value of `_swift_concurrency_debug_asyncTaskMetadata` there
    uint64_t task_size;          // the value of `_swift_concurrency_debug_asyncTaskSize` there (208 on 6.3.1)
    uint64_t adapters[4];        // resume adapters of the runtime, left out of backtraces (0: unused)
} sw_task_runtime;

/// What sw_task_read returns.
enum {
    SW_TASK_READ_OK = 0,
    SW_TASK_READ_UNREADABLE = -1,  // the address could not be read (freed and unmapped, or not an address)
    SW_TASK_READ_NOT_A_TASK = -2,  // what is there is not a task (freed and reused)
    SW_TASK_READ_OTHER_TASK = -3,  // a task, but not the one expected: the expected one is gone
    SW_TASK_READ_COMPLETED = -4,   // the task has completed
    SW_TASK_READ_CHANGING = -5,    // the task changed while it was read (its records locked, or it resumed)
};

/// Why a wait was left SW_WAIT_UNKNOWN: the first check its dependency record failed.
enum {
    SW_WAIT_CHECK_OK = 0,
    SW_WAIT_CHECK_NO_RECORD = 1,      // the task's status says it has no dependency record
    SW_WAIT_CHECK_NOT_INNERMOST = 2,  // its innermost status record is not its dependency record
    SW_WAIT_CHECK_UNREADABLE = 3,     // the record could not be read
    SW_WAIT_CHECK_MISMATCH = 4,       // the record is not a dependency of this task, or of an unknown kind
    SW_WAIT_CHECK_STATE = 5,          // the kind does not fit the task's state (suspended, or enqueued on an executor)
    SW_WAIT_CHECK_TARGET = 6,         // what it names does not check out (no context, another continuation)
    SW_WAIT_CHECK_GROUP = 7,          // the task group's record is not among the waiter's records
};

/// Most children of a task group listed.
#define SW_TASK_MAX_CHILDREN 16
/// Most async frames read (a row keeps the innermost SW_TASKS_FRAMES).
#define SW_TASK_MAX_FRAMES 64
/// Bytes of a name read, NUL included.
#define SW_TASK_NAME_CAPACITY 256

/// One task as read.
typedef struct sw_task_state {
    uint64_t address;
    uint64_t id;
    uint32_t status_flags;       // the ActiveTaskStatus flags
    uint32_t job_flags;          // the job flags (kind, priority, child/future/group/async-let/named bits)
    uint8_t state;               // SW_TASK_RUNNING, SW_TASK_SUSPENDED or SW_TASK_ENQUEUED
    uint8_t wait_kind;           // SW_WAIT_*: NONE when not suspended or enqueued, UNKNOWN when not checked
    uint16_t flags;              // SW_TASK_NAMED, CHILD, GROUP_CHILD, ASYNC_LET, STRUCTURED_WAIT, TARGET_VALIDATED
    uint32_t priority;
    uint64_t wait_address;       // the awaited continuation context, task, task group, or executor identity
    uint64_t wait_task_id;       // SW_WAIT_TASK: the awaited task's id (with SW_TASK_TARGET_VALIDATED)
    uint64_t parent_address;     // a child task's parent (0 otherwise)
    uint64_t resume_task;        // where the task resumes, and its context: together, which suspension this is
    uint64_t resume_context;
    uint32_t frame_count;
    uint32_t truncated;          // 1 when the context chain went on past the frames kept
    uint32_t wait_check;         // SW_WAIT_CHECK_*: why wait_kind is SW_WAIT_UNKNOWN (0 otherwise)
    uint32_t reserved;
    uint64_t frames[SW_TASK_MAX_FRAMES];
    uint32_t child_count;        // SW_WAIT_TASK_GROUP: the group's children listed (addresses, not checked)
    uint32_t name_length;        // bytes of name (0: none read)
    uint64_t children[SW_TASK_MAX_CHILDREN];
    char name[SW_TASK_NAME_CAPACITY];
} sw_task_state;

/// Reads the task at `address` in `runtime->pid`. `expected_id` (0: any) must be its id. With `details`, also the
/// async backtrace, the name (named tasks), and a task group's children; otherwise only the state and the wait.
/// Returns SW_TASK_READ_OK with `out` filled, or a negative SW_TASK_READ_* code (`out->id` is then the id found, if
/// any). A wait is left SW_WAIT_UNKNOWN when its record does not check out, never guessed.
int sw_task_read(const sw_task_runtime *runtime, uint64_t address, uint64_t expected_id, int details,
                 sw_task_state *out);

/// Whether the bytes at `words` (at least 0xa8 of them) look like a live task of `runtime`: the task metadata,
/// kind 0, not completed. For a scan of memory that has no table (a process that embeds nothing).
int sw_task_looks_alive(const sw_task_runtime *runtime, const uint64_t *words);

#ifdef __cplusplus
}
#endif
#endif
