// Reading which thread drains a Dispatch queue, from the lock word libdispatch keeps in the queue object.
#ifndef SW_DISPATCH_H
#define SW_DISPATCH_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// libdispatch's DLOCK_OWNER_MASK on Linux (FUTEX_TID_MASK): the drain lock's owner thread id bits.
#define SW_DISPATCH_LOCK_OWNER_MASK 0x3fffffffu

/// The thread id held in the 32-bit drain-lock word at `offset` bytes into the queue object at `queue` (the
/// low half of libdispatch's `dq_state`), or 0 when no thread holds it. The layout is libdispatch-private: the
/// caller validates the offset (from a block running on the queue, the owner must be the calling thread)
/// before trusting it. Async-signal-safe; lock-free; one relaxed atomic load.
static inline int32_t sw_dispatch_queue_owner(const void *queue, unsigned long offset) {
    uint32_t word = __atomic_load_n((const uint32_t *)((const char *)queue + offset), __ATOMIC_RELAXED);
    return (int32_t)(word & SW_DISPATCH_LOCK_OWNER_MASK);
}

#ifdef __cplusplus
}
#endif
#endif
