// sw_lock_book.h: the lock book, a preloadable library that records which thread last took each POSIX semaphore.
//
// A POSIX semaphore keeps no owner: a thread blocked in `sem_wait` cannot be told who holds the lock it waits for
// from the semaphore itself (CPython's `threading.Lock`, a runtime's own mutex, a C program's binary semaphore).
// Loaded with `LD_PRELOAD` (or `stallwatch run --lock-book`), this library interposes the semaphore calls and keeps,
// per semaphore, the thread id of the last thread that took it and has not posted it since, in `sw_lock_book`: a
// fixed table StallWatch reads from the same process or from outside (/proc/PID/mem), never with a stop.
//
// Async-signal-safety: `sem_post` may be called from a signal handler, so every interposed call records with
// atomic stores into the static table only: it allocates nothing, takes no lock, and reads its thread id from an
// initial-exec thread-local (set with the `gettid` system call on a thread's first record, reset in a forked child).
// The real functions are resolved with `dlsym(RTLD_NEXT, …)` in the library's constructor, which runs before the
// program's own code; only a semaphore call made by another library's constructor before it would resolve lazily
// (not async-signal-safe, and never from a handler in practice).
//
// The table is best effort: a record lags a take or a post by a few instructions, and when more than
// `SW_LOCK_BOOK_PROBES` semaphores hash to one place the oldest record there is overwritten. A reader takes a record
// as a likely holder, never as proof.
#ifndef SW_LOCK_BOOK_H
#define SW_LOCK_BOOK_H

#include <stdint.h>

#define SW_LOCK_BOOK_MAGIC 0x6B6F6F42u /* "Book" */
#define SW_LOCK_BOOK_VERSION 1u
#define SW_LOCK_BOOK_SLOTS 4096u
#define SW_LOCK_BOOK_PROBES 8u

/// One semaphore's record. `address` is the semaphore's address (its futex word on x86_64), 0 for a free slot;
/// `taker` the thread that last took it and has not posted it since, 0 when it was posted last. A writer replacing
/// a slot's semaphore clears `address` first, so a reader that reads `address` before and after `taker` and sees the
/// same value read that semaphore's record.
struct sw_lock_book_slot {
    uint64_t address;
    int32_t taker;
    uint32_t takes; /* takes recorded in this slot, wrapping: tells a reader that the record changed */
};

/// The table, exported as `sw_lock_book`. Readers check `magic`, `version`, `slot_count` and `slot_bytes`.
struct sw_lock_book {
    uint32_t magic;
    uint32_t version;
    uint32_t slot_count;
    uint32_t slot_bytes;
    struct sw_lock_book_slot slots[SW_LOCK_BOOK_SLOTS];
};

extern struct sw_lock_book sw_lock_book;

/// The slot where the record of the semaphore at `address` starts its probe. Pure arithmetic; async-signal-safe.
static inline uint32_t sw_lock_book_home(uint64_t address) {
    return (uint32_t)(((address >> 3) * 0x9E3779B97F4A7C15ull) >> 52) & (SW_LOCK_BOOK_SLOTS - 1);
}

/// The thread `address`'s record names as its taker, 0 if none (read in this process). Async-signal-safe.
int32_t sw_lock_book_taker(uint64_t address);

#endif
