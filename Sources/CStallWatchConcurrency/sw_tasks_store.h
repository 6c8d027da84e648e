// Private to the task table files: the rows and their index by task address.
// Every function here runs on the pool watchdog's thread only (the single writer of the table).
#ifndef SW_TASKS_STORE_H
#define SW_TASKS_STORE_H
#include "sw_tasks.h"

#include <stdatomic.h>

/// What the watchdog keeps per row beside the published row.
typedef struct {
    uint64_t address;        // the task's address: the index's key (never dereferenced)
    uint32_t next;           // the next free row + 1 (0: none)
    uint32_t reserved;
    uint64_t completed_id;   // the last task of the row that completed, and the start of its last job
    uint64_t completed_ns;
} sw_row_private;

typedef struct {
    sw_tasks_header *header;
    sw_task_chain *chains;
    sw_task_row *rows;
    uint32_t capacity;
    sw_row_private *rows_private;
    uint32_t *index;         // row + 1 per slot, 0: empty; open addressing, linear probing
    uint32_t index_mask;     // slots in use - 1: grown with the live rows, so the index stays as small as they are
    uint32_t index_max_slots;  // slots reserved (twice the capacity, a power of two)
    uint32_t indexed;        // rows in the index
    uint32_t rows_used;      // rows ever taken (0 ..< rows_used may be live)
    uint32_t free_head;      // row + 1
} sw_tasks_store;

/// The fewest slots the index has (a power of two).
#define SW_STORE_MIN_SLOTS 1024u

extern sw_tasks_store sw_store;

/// Brings the index slot of `address` toward the cache (step 1 of a drain's batch).
void sw_store_prefetch_slot(uint64_t address);
/// Brings the row its slot names, if any, toward the cache (step 2, once the slot is there).
void sw_store_prefetch_row(uint64_t address);
/// The row of the task at `address` (-1: none).
int64_t sw_store_lookup(uint64_t address);
/// A free row for the task at `address`, indexed; -1 when the table is full.
int64_t sw_store_insert(uint64_t address);
/// Frees the row, unindexes it.
void sw_store_remove(uint32_t row);

/// Starts changing a published row (its sequence turns odd) / ends it (even again).
void sw_store_begin(uint32_t row);
void sw_store_end(uint32_t row);

#endif
