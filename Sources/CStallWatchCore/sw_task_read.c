// Reading a Swift task's state, wait, async backtrace and name from memory, every step checked (layout version 1).
#include "sw_task_read.h"
#include "sw_sys.h"

#if defined(__linux__)

#include <string.h>

enum {
    // AsyncTask (Swift 6.3.1, layout version 1): see sw_task_read.h.
    TASK_METADATA = 0x00,
    TASK_FLAGS = 0x20,
    TASK_ID_LOW = 0x24,
    TASK_RESUME_TASK = 0x38,
    TASK_RESUME_CONTEXT = 0x40,
    TASK_STATUS_FLAGS = 0x60,
    TASK_STATUS_RECORD = 0x68,
    TASK_ID_HIGH = 0x90,
    TASK_DEPENDENCY_RECORD = 0xa0,
    TASK_HEADER_BYTES = 0xa8,
    // ActiveTaskStatus flags (no priority escalation on Linux: running is a flag).
    STATUS_RECORD_LOCKED = 0x200,
    STATUS_RUNNING = 0x800,
    STATUS_ENQUEUED = 0x1000,
    STATUS_COMPLETE = 0x2000,
    STATUS_HAS_DEPENDENCY = 0x4000,
    // Job flags.
    JOB_CHILD = 1u << 24,
    JOB_GROUP_CHILD = 1u << 26,
    JOB_ASYNC_LET = 1u << 28,
    JOB_NAMED = 1u << 30,
    // Status records.
    RECORD_DEPENDENCY = 0,
    RECORD_TASK_GROUP = 2,
    RECORD_NAME = 6,
    GROUP_RECORD_OFFSET = 8,
    MAX_RECORDS = 64,
};

static int read_exact(const sw_task_runtime *rt, uint64_t address, void *out, unsigned long length) {
    if (address == 0 || address % 8) return -1;
    return sw_read_memory(rt->pid, address, out, length) == (long)length ? 0 : -1;
}

static uint32_t u32_at(const uint64_t *words, unsigned offset) {
    uint32_t value;
    memcpy(&value, (const char *)words + offset, sizeof value);
    return value;
}

static uint64_t u64_at(const uint64_t *words, unsigned offset) { return words[offset / 8]; }

int sw_task_looks_alive(const sw_task_runtime *rt, const uint64_t *words) {
    if (u64_at(words, TASK_METADATA) != rt->task_metadata) return 0;
    if ((u32_at(words, TASK_FLAGS) & 0xff) != 0) return 0;
    return (u32_at(words, TASK_STATUS_FLAGS) & STATUS_COMPLETE) == 0;
}

// Reads the header of a task at `address` and checks it is a task: returns 0 and fills `words`, or an error code.
static int read_header(const sw_task_runtime *rt, uint64_t address, uint64_t expected_id, uint64_t *words,
                       uint64_t *id) {
    if (read_exact(rt, address, words, TASK_HEADER_BYTES) != 0) return SW_TASK_READ_UNREADABLE;
    if (u64_at(words, TASK_METADATA) != rt->task_metadata || (u32_at(words, TASK_FLAGS) & 0xff) != 0) {
        return SW_TASK_READ_NOT_A_TASK;
    }
    *id = (uint64_t)u32_at(words, TASK_ID_LOW) | (uint64_t)u32_at(words, TASK_ID_HIGH) << 32;
    if (expected_id && *id != expected_id) return SW_TASK_READ_OTHER_TASK;
    if (u32_at(words, TASK_STATUS_FLAGS) & STATUS_COMPLETE) return SW_TASK_READ_COMPLETED;
    return 0;
}

// The dependency record: the innermost status record, of kind 0, naming this task back, of a known kind.
static void read_wait(const sw_task_runtime *rt, const uint64_t *words, sw_task_state *out) {
    out->wait_kind = SW_WAIT_UNKNOWN;
    uint64_t record = u64_at(words, TASK_STATUS_RECORD);
    out->wait_check = SW_WAIT_CHECK_NO_RECORD;
    if (!(out->status_flags & STATUS_HAS_DEPENDENCY) || record == 0) return;
    out->wait_check = SW_WAIT_CHECK_NOT_INNERMOST;
    if (record != u64_at(words, TASK_DEPENDENCY_RECORD)) return;
    uint64_t r[6];
    out->wait_check = SW_WAIT_CHECK_UNREADABLE;
    if (read_exact(rt, record, r, sizeof r) != 0) return;
    out->wait_check = SW_WAIT_CHECK_MISMATCH;
    // The kind is read as one byte: read as a whole word, the check failed now and then on a record that was
    // otherwise right (the rest of the word is likely padding, left as the allocator found it).
    uint64_t kind = r[4] & 0xff;
    if ((r[0] & 0xff) != RECORD_DEPENDENCY || r[5] != out->address || kind < SW_WAIT_TASK || kind > SW_WAIT_EXECUTOR) {
        return;
    }
    out->wait_check = SW_WAIT_CHECK_STATE;
    if (kind == SW_WAIT_EXECUTOR) {
        if (out->state != SW_TASK_ENQUEUED) return;
    } else if (out->state != SW_TASK_SUSPENDED) {
        return;
    }
    // A continuation is the context the task resumes in; anything else is a record this reader does not know.
    out->wait_check = SW_WAIT_CHECK_TARGET;
    if (kind == SW_WAIT_CONTINUATION && r[2] != out->resume_context) return;
    if (kind != SW_WAIT_EXECUTOR && r[2] == 0) return;
    out->wait_check = SW_WAIT_CHECK_OK;
    out->wait_kind = (uint8_t)kind;
    out->wait_address = r[2];
}

// The awaited task: read and checked; a child of the waiter (an `async let`) makes the wait structured.
static void read_awaited_task(const sw_task_runtime *rt, sw_task_state *out) {
    uint64_t words[TASK_HEADER_BYTES / 8];
    uint64_t id = 0;
    int rc = read_header(rt, out->wait_address, 0, words, &id);
    if (rc != 0 && rc != SW_TASK_READ_COMPLETED) return;
    out->wait_task_id = id;
    out->flags |= SW_TASK_TARGET_VALIDATED;
    uint32_t job_flags = u32_at(words, TASK_FLAGS);
    uint64_t parent = 0;
    if ((job_flags & JOB_CHILD) && read_exact(rt, out->wait_address + rt->task_size, &parent, 8) == 0 &&
        parent == out->address) {
        out->flags |= SW_TASK_STRUCTURED_WAIT;
    }
}

// The task group: its record must be in the waiter's record list; its children are listed (not checked).
static void read_group(const sw_task_runtime *rt, const uint64_t *words, sw_task_state *out) {
    uint64_t group_record = out->wait_address + GROUP_RECORD_OFFSET;
    uint64_t record = u64_at(words, TASK_STATUS_RECORD);
    for (int step = 0; record && step < MAX_RECORDS; step++) {
        uint64_t r[4];
        if (read_exact(rt, record, r, sizeof r) != 0) break;
        if (record == group_record && (r[0] & 0xff) == RECORD_TASK_GROUP) {
            out->flags |= SW_TASK_STRUCTURED_WAIT;
            uint64_t child = r[2];
            while (child && out->child_count < SW_TASK_MAX_CHILDREN) {
                out->children[out->child_count++] = child;
                if (read_exact(rt, child + rt->task_size + 8, &child, 8) != 0) break;
            }
            return;
        }
        record = r[1];
    }
    // The group's record is not among the waiter's: the wait is not one this reader can vouch for.
    out->wait_check = SW_WAIT_CHECK_GROUP;
    out->wait_kind = SW_WAIT_UNKNOWN;
    out->wait_address = 0;
}

static int is_adapter(const sw_task_runtime *rt, uint64_t address) {
    for (int i = 0; i < 4; i++) {
        if (rt->adapters[i] && rt->adapters[i] == address) return 1;
    }
    return 0;
}

// The resume points: where the task resumes (unless an adapter of the runtime's), then up the context chain.
static void read_frames(const sw_task_runtime *rt, sw_task_state *out) {
    uint64_t context = out->resume_context;
    uint64_t first[2];
    int have_first = read_exact(rt, context, first, sizeof first) == 0;
    if (out->resume_task && !is_adapter(rt, out->resume_task) && !(have_first && first[1] == out->resume_task)) {
        out->frames[out->frame_count++] = out->resume_task;
    }
    // Bounded: a chain that loops (memory reused meanwhile) fills the frames and stops.
    while (context) {
        uint64_t c[2];
        if (read_exact(rt, context, c, sizeof c) != 0 || c[1] == 0) break;
        if (out->frame_count == SW_TASK_MAX_FRAMES) {
            out->truncated = 1;
            break;
        }
        out->frames[out->frame_count++] = c[1];
        context = c[0];
    }
}

static void read_name(const sw_task_runtime *rt, const uint64_t *words, sw_task_state *out) {
    uint64_t record = u64_at(words, TASK_STATUS_RECORD);
    for (int step = 0; record && step < MAX_RECORDS; step++) {
        uint64_t r[3];
        if (read_exact(rt, record, r, sizeof r) != 0) return;
        if ((r[0] & 0xff) == RECORD_NAME) {
            uint64_t at = r[2];
            uint32_t length = 0;
            // Page by page: the string may end just before an unmapped page.
            while (at && length < SW_TASK_NAME_CAPACITY - 1) {
                uint64_t page_left = 4096 - (at + length) % 4096;
                uint64_t chunk = SW_TASK_NAME_CAPACITY - 1 - length;
                if (chunk > page_left) chunk = page_left;
                if (sw_read_memory(rt->pid, at + length, out->name + length, chunk) != (long)chunk) break;
                char *end = memchr(out->name + length, 0, chunk);
                if (end) {
                    length = (uint32_t)(end - out->name);
                    break;
                }
                length += (uint32_t)chunk;
            }
            out->name[length] = 0;
            out->name_length = length;
            return;
        }
        record = r[1];
    }
}

int sw_task_read(const sw_task_runtime *rt, uint64_t address, uint64_t expected_id, int details,
                 sw_task_state *out) {
    memset(out, 0, sizeof *out);
    out->address = address;
    uint64_t words[TASK_HEADER_BYTES / 8];
    int rc = read_header(rt, address, expected_id, words, &out->id);
    if (rc != 0) return rc;
    out->status_flags = u32_at(words, TASK_STATUS_FLAGS);
    out->job_flags = u32_at(words, TASK_FLAGS);
    out->priority = (out->job_flags >> 8) & 0xff;
    if (out->status_flags & STATUS_RECORD_LOCKED) return SW_TASK_READ_CHANGING;
    if (out->job_flags & JOB_NAMED) out->flags |= SW_TASK_NAMED;
    if (out->job_flags & JOB_CHILD) out->flags |= SW_TASK_CHILD;
    if (out->job_flags & JOB_GROUP_CHILD) out->flags |= SW_TASK_GROUP_CHILD;
    if (out->job_flags & JOB_ASYNC_LET) out->flags |= SW_TASK_ASYNC_LET;
    out->resume_task = u64_at(words, TASK_RESUME_TASK);
    out->resume_context = u64_at(words, TASK_RESUME_CONTEXT);
    if (out->status_flags & STATUS_RUNNING) {
        out->state = SW_TASK_RUNNING;
    } else if (out->status_flags & STATUS_ENQUEUED) {
        out->state = SW_TASK_ENQUEUED;
    } else {
        out->state = SW_TASK_SUSPENDED;
    }
    if (out->flags & SW_TASK_CHILD) {
        if (read_exact(rt, address + rt->task_size, &out->parent_address, 8) != 0) out->parent_address = 0;
    }
    if (out->state != SW_TASK_RUNNING) read_wait(rt, words, out);
    if (out->wait_kind == SW_WAIT_TASK) read_awaited_task(rt, out);
    if (out->wait_kind == SW_WAIT_TASK_GROUP) read_group(rt, words, out);
    if (details && out->state == SW_TASK_SUSPENDED) read_frames(rt, out);
    if (details && (out->flags & SW_TASK_NAMED)) read_name(rt, words, out);
    // The same suspension still: what was read belongs together (a task resumed meanwhile reads as changing).
    uint64_t again[TASK_HEADER_BYTES / 8];
    if (read_exact(rt, address, again, TASK_HEADER_BYTES) != 0) return SW_TASK_READ_UNREADABLE;
    if (u64_at(again, TASK_METADATA) != rt->task_metadata) return SW_TASK_READ_NOT_A_TASK;
    if (u32_at(again, TASK_STATUS_FLAGS) != out->status_flags || u64_at(again, TASK_RESUME_CONTEXT) != out->resume_context ||
        u64_at(again, TASK_STATUS_RECORD) != u64_at(words, TASK_STATUS_RECORD)) {
        return (u32_at(again, TASK_STATUS_FLAGS) & STATUS_COMPLETE) ? SW_TASK_READ_COMPLETED : SW_TASK_READ_CHANGING;
    }
    return SW_TASK_READ_OK;
}

#endif
