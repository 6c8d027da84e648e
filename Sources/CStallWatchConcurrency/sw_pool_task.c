// The name of a stuck job's task, read from the task's status records by the pool watchdog, off the worker.
#include "sw_pool.h"

#if defined(__linux__)

#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

// Layout of the Swift 6.3.1 Concurrency runtime (internal layout version 1), as its own
// `swift::AsyncTask::getTaskName` reads it:
// - the task's `ActiveTaskStatus` is 16 bytes at offset 0x60: 32-bit flags, the 32-bit execution lock, then the
//   innermost `TaskStatusRecord *` at 0x68;
// - a status record starts with a word whose low byte is its kind, then its parent record; a `TaskNameStatusRecord`
//   (kind 6) holds `const char *name` in its third word.
// The runtime walks these records under the task's status record lock; the watchdog cannot take that lock, so it
// reads them with process_vm_readv and bounds the walk, and the caller checks that the job still runs.
enum {
    SW_TASK_STATUS_RECORD = 0x68,
    SW_RECORD_KIND_TASK_NAME = 6,
    SW_MAX_RECORDS = 64,
};

static int read_words(uint64_t address, void *out, size_t length) {
    struct iovec local = {.iov_base = out, .iov_len = length};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)address, .iov_len = length};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)length ? 0 : -1;
}

// Reads the NUL-terminated string at `address`, page by page (it may end just before an unmapped page).
static int read_string(uint64_t address, char *out, int capacity) {
    int length = 0;
    while (length < capacity - 1) {
        uint64_t at = address + (uint64_t)length;
        size_t page_left = 4096 - (size_t)(at % 4096);
        size_t chunk = (size_t)(capacity - 1 - length);
        if (chunk > page_left) chunk = page_left;
        if (read_words(at, out + length, chunk) != 0) return -1;
        char *end = memchr(out + length, 0, chunk);
        if (end) return (int)(end - out);
        length += (int)chunk;
    }
    out[length] = 0;
    return length;
}

int sw_pool_task_name(int index, char *out, int capacity) {
    if (!out || capacity < 1) return -1;
    out[0] = 0;
    sw_pool_slot_view before, after;
    if (sw_pool_slot(index, &before) != 0 || !before.busy || !before.job) return -1;
    if (!before.named) return 0;
    uint64_t record = 0;
    if (read_words(before.job + SW_TASK_STATUS_RECORD, &record, sizeof record) != 0) return -1;
    int length = 0;
    for (int step = 0; record && step < SW_MAX_RECORDS; step++) {
        uint64_t words[3];
        if (record % 8 || read_words(record, words, sizeof words) != 0) return -1;
        if ((words[0] & 0xff) == SW_RECORD_KIND_TASK_NAME) {
            length = words[2] ? read_string(words[2], out, capacity) : 0;
            break;
        }
        record = words[1];
    }
    // The same job still running means the task (and its records) lived through the reads.
    if (length < 0 || sw_pool_slot(index, &after) != 0 || !after.busy || after.job != before.job ||
        after.sequence != before.sequence) {
        out[0] = 0;
        return -1;
    }
    return length;
}

#endif
