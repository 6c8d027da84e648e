// A kernel-kept overwrite ring of one thread's user stacks: perf_event_open's software task clock, mapped read-only.
#ifndef SW_PERF_RING_H
#define SW_PERF_RING_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// One thread's sample ring. The kernel writes it (backward, overwriting the oldest records: the mapping is
/// read-only); the owner reads it with `sw_perf_ring_copy`.
typedef struct sw_perf_ring {
    int fd;
    void *base;        // the header page, then `data_size` bytes of records
    size_t map_size;
    size_t data_size;  // a power of two
} sw_perf_ring;

/// Opens a ring for thread `tid` of this process: every `period_ns` of the thread's CPU time (task clock, user
/// space only) the kernel records the time (CLOCK_MONOTONIC) and the user call chain (frame pointers, at most
/// `max_frames`) into `data_pages` pages (a power of two). No signal reaches the thread and none of its calls is
/// interrupted. Returns 0, or -errno (-EACCES/-EPERM where `perf_event_paranoid` or a seccomp filter forbids it,
/// -ENOSYS without perf, -EPERM/-ENOMEM past the locked-memory budget). Not async-signal-safe.
int sw_perf_ring_open(sw_perf_ring *ring, pid_t tid, uint64_t period_ns, uint32_t data_pages, uint16_t max_frames);

/// Copies the ring's records, newest first, into `out` (at most `capacity` bytes, whole records only), with the
/// kernel's writing paused for the copy (samples the thread takes meanwhile are dropped). Returns the bytes copied.
/// Each record is a `struct perf_event_header`; a sample (`PERF_RECORD_SAMPLE`) carries u32 pid, u32 tid, u64
/// time, u64 nr and nr u64 call chain entries (context markers included). Not async-signal-safe.
size_t sw_perf_ring_copy(sw_perf_ring *ring, uint8_t *out, size_t capacity);

/// Unmaps and closes the ring (safe on a ring that failed to open).
void sw_perf_ring_close(sw_perf_ring *ring);

#ifdef __cplusplus
}
#endif
#endif
