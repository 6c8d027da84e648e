// The words a loop publishes on every activity transition, read by a watchdog (in this process, or a sidecar
// through the heartbeat segment). Everything here is static inline, lock-free and allocation-free.
#ifndef SW_LOOP_STATE_H
#define SW_LOOP_STATE_H
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Activity codes as stored in the low byte of `word` (CFRunLoopActivity bit positions).
enum {
    SW_PHASE_NOT_RUNNING = 0,
    SW_PHASE_ENTRY = 1,
    SW_PHASE_BEFORE_TIMERS = 2,
    SW_PHASE_BEFORE_SOURCES = 3,
    SW_PHASE_BEFORE_WAITING = 6,
    SW_PHASE_AFTER_WAITING = 7,
    SW_PHASE_EXIT = 8,
};

/// Flags returned by sw_loop_state_record: what the loop must do on its slow path.
enum {
    SW_RECORD_WAKE_WATCHDOG = 1,  // the watchdog is parked and the loop just became busy: signal it once
    SW_RECORD_STALL_FOLLOWED = 2, // the watchdog is following a stall: record its precise end
    SW_RECORD_SIGNAL_EVERY = 4,   // a classic-strategy watchdog wants a signal on every transition
};

/// Shared between one loop and its watchdog. Plain words accessed only through the functions below, so the
/// same layout can live in ordinary memory or in a shared-memory heartbeat segment.
typedef struct sw_loop_state {
    uint64_t word;            // sequence << 8 | phase code
    uint64_t phase_start_ns;  // CLOCK_MONOTONIC_COARSE when the current busy phase began
    uint32_t watchdog_parked; // 1 while the watchdog waits without a deadline
    uint32_t flags;           // SW_RECORD_STALL_FOLLOWED | SW_RECORD_SIGNAL_EVERY, set by the watchdog
    uint64_t stall_end_ns;    // CLOCK_MONOTONIC when the loop left a followed stall (0 until then)
} sw_loop_state;

/// CLOCK_MONOTONIC_COARSE in nanoseconds (a vDSO read). Async-signal-safe.
static inline uint64_t sw_loop_state_coarse_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/// Whether `code` is a phase in which the loop runs code (entry, beforeTimers, beforeSources, afterWaiting).
/// Async-signal-safe; pure.
static inline int sw_phase_is_busy(uint32_t code) {
    return code == SW_PHASE_ENTRY || code == SW_PHASE_BEFORE_TIMERS || code == SW_PHASE_BEFORE_SOURCES ||
           code == SW_PHASE_AFTER_WAITING;
}

/// Publishes a transition: two stores, one or two loads and, when `take_time` is set, one coarse clock read.
/// The loop passes `take_time` only when code ran (or the loop slept) since its last timestamp: otherwise the
/// new phase began at that same instant and the stored phase start stays exact. `busy_edge` is non-zero when
/// the loop leaves its idle wait (afterWaiting) or starts running (entry): only then is a sequentially
/// consistent store needed, to pair with the watchdog's parking (Dekker-style).
/// Async-signal-safe; lock-free; no syscall (the coarse clock is a vDSO read).
static inline int sw_loop_state_record(sw_loop_state *s, uint64_t sequence, uint32_t code, int busy_edge,
                                       int take_time) {
    if (take_time && sw_phase_is_busy(code))
        __atomic_store_n(&s->phase_start_ns, sw_loop_state_coarse_now(), __ATOMIC_RELAXED);
    uint64_t word = (sequence << 8) | code;
    int flags = 0;
    if (busy_edge) {
        __atomic_store_n(&s->word, word, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&s->watchdog_parked, __ATOMIC_SEQ_CST) &&
            __atomic_exchange_n(&s->watchdog_parked, 0, __ATOMIC_SEQ_CST))
            flags |= SW_RECORD_WAKE_WATCHDOG;
    } else {
        __atomic_store_n(&s->word, word, __ATOMIC_RELEASE);
    }
    return flags | (int)__atomic_load_n(&s->flags, __ATOMIC_RELAXED);
}

/// A consistent (word, phase start) pair, read seqlock-style. Async-signal-safe; lock-free.
static inline void sw_loop_state_read(const sw_loop_state *s, uint64_t *word, uint64_t *phase_start_ns) {
    for (;;) {
        uint64_t w1 = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE);
        uint64_t t = __atomic_load_n(&s->phase_start_ns, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        uint64_t w2 = __atomic_load_n(&s->word, __ATOMIC_RELAXED);
        if (w1 == w2) {
            *word = w1;
            *phase_start_ns = t;
            return;
        }
    }
}

/// Watchdog side: announce parking. Returns the word read after announcing, so the caller re-checks the
/// phase before sleeping (the loop may have become busy in between). Async-signal-safe; lock-free.
static inline uint64_t sw_loop_state_park(sw_loop_state *s) {
    __atomic_store_n(&s->watchdog_parked, 1, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&s->word, __ATOMIC_SEQ_CST);
}

/// Watchdog side: withdraw a parking announcement. Returns 1 if it was still set (nobody will signal),
/// 0 if the loop already took it (a signal is on its way and must be consumed). Async-signal-safe; lock-free.
static inline int sw_loop_state_unpark(sw_loop_state *s) {
    return (int)__atomic_exchange_n(&s->watchdog_parked, 0, __ATOMIC_SEQ_CST);
}

/// Watchdog side: start or stop following a stall. Async-signal-safe; lock-free.
static inline void sw_loop_state_follow(sw_loop_state *s, int on) {
    if (on) {
        __atomic_store_n(&s->stall_end_ns, 0, __ATOMIC_RELAXED);
        __atomic_fetch_or(&s->flags, (uint32_t)SW_RECORD_STALL_FOLLOWED, __ATOMIC_RELEASE);
    } else {
        __atomic_fetch_and(&s->flags, ~(uint32_t)SW_RECORD_STALL_FOLLOWED, __ATOMIC_RELEASE);
    }
}

/// Watchdog side: ask for (or stop asking for) a signal on every transition (the classic strategy).
/// Async-signal-safe; lock-free.
static inline void sw_loop_state_signal_every(sw_loop_state *s, int on) {
    if (on)
        __atomic_fetch_or(&s->flags, (uint32_t)SW_RECORD_SIGNAL_EVERY, __ATOMIC_RELEASE);
    else
        __atomic_fetch_and(&s->flags, ~(uint32_t)SW_RECORD_SIGNAL_EVERY, __ATOMIC_RELEASE);
}

/// Loop side, slow path: the precise time the loop moved on from a followed stall (first call wins).
/// Returns 1 if this call recorded it. Async-signal-safe; lock-free.
static inline int sw_loop_state_mark_stall_end(sw_loop_state *s) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    uint64_t expected = 0;
    return __atomic_compare_exchange_n(&s->stall_end_ns, &expected, now, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/// The end recorded by sw_loop_state_mark_stall_end, or 0. Async-signal-safe; lock-free.
static inline uint64_t sw_loop_state_stall_end(const sw_loop_state *s) {
    return __atomic_load_n(&s->stall_end_ns, __ATOMIC_ACQUIRE);
}

/// The heartbeat segment: a small shared-memory file (`/dev/shm/stallwatch.<pid>` by default) holding one loop's
/// `sw_loop_state` so a sidecar can watch it. The loop writes `state` exactly as it writes private memory (no
/// syscall per transition); the header is written once at creation, except `loop_tid`, stored when the loop runs,
/// and the snapshot words: a requester (`stallwatch snapshot`) writes `snapshot_requested` + 1 with pwrite, the
/// watchdog answers by storing it in `snapshot_answered` once the report and its answer file are written.
/// Readers must validate every field: the file belongs to another process and may be hostile or truncated.
#define SW_HEARTBEAT_MAGIC 0x3154414542485753ull /* "SWHBEAT1" little-endian */
#define SW_HEARTBEAT_VERSION 1u

typedef struct sw_heartbeat {
    uint64_t magic;             // SW_HEARTBEAT_MAGIC
    uint32_t version;           // SW_HEARTBEAT_VERSION
    uint32_t size;              // sizeof(sw_heartbeat); must equal the file size
    int32_t pid;                // the publishing process
    int32_t loop_tid;           // the loop thread (0 until the loop runs); atomic
    uint64_t threshold_ns;      // the stall threshold the publisher uses
    uint64_t hang_threshold_ns; // its hang threshold
    uint64_t start_time_ticks;  // field 22 of /proc/<pid>/stat: tells a reused pid apart
    uint64_t snapshot_requested; // snapshots asked for from outside (`stallwatch snapshot`); atomic, 0 at first
    uint64_t snapshot_answered;  // the request count the watchdog last answered; atomic (0 in older writers)
    sw_loop_state state;        // offset 64
    char loop_name[32];         // NUL-terminated, truncated
} sw_heartbeat;

_Static_assert(sizeof(sw_heartbeat) == 128, "heartbeat layout is part of the file format");
_Static_assert(__builtin_offsetof(sw_heartbeat, state) == 64, "heartbeat layout is part of the file format");

/// Publishes the loop thread id into a heartbeat segment. Async-signal-safe; lock-free.
static inline void sw_heartbeat_set_tid(sw_heartbeat *h, int32_t tid) {
    __atomic_store_n(&h->loop_tid, tid, __ATOMIC_RELEASE);
}

/// Watchdog side: the snapshot request count another process has written. Async-signal-safe; lock-free.
static inline uint64_t sw_heartbeat_snapshot_requested(const sw_heartbeat *h) {
    return __atomic_load_n(&h->snapshot_requested, __ATOMIC_ACQUIRE);
}

/// Watchdog side: snapshot requests up to `count` are answered (their report and its answer file are written).
/// Async-signal-safe; lock-free.
static inline void sw_heartbeat_snapshot_answer(sw_heartbeat *h, uint64_t count) {
    __atomic_store_n(&h->snapshot_answered, count, __ATOMIC_RELEASE);
}

#ifdef __cplusplus
}
#endif
#endif
