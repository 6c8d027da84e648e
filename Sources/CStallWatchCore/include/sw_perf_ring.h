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
    /// Bytes of user stack each sample carries above the stack pointer, with the user RBP, RSP and RIP (in that
    /// order); 0 when the samples carry the call chain only.
    uint32_t leaf_stack_bytes;
} sw_perf_ring;

/// Opens a ring for thread `tid` of this process: every `period_ns` of the thread's CPU time (task clock, user
/// space only) the kernel records the time (CLOCK_MONOTONIC) and the user call chain (frame pointers, at most
/// `max_frames`) into `data_pages` pages (a power of two). With `leaf_stack_bytes` (a multiple of 8; x86-64 only),
/// each sample also carries the user RBP, RSP and RIP and that many bytes of stack above RSP
/// (`PERF_SAMPLE_REGS_USER`, `PERF_SAMPLE_STACK_USER`): enough to unwind the innermost frame by its unwind tables
/// where the frame-pointer chain skips it (a leaf without a frame, a prologue or an epilogue); a kernel that
/// refuses them gets a ring without (`leaf_stack_bytes` 0 in `ring`). No signal reaches the thread and none of its
/// calls is interrupted. Returns 0, or -errno (-EACCES/-EPERM where `perf_event_paranoid` or a seccomp filter
/// forbids it, -ENOSYS without perf, -EPERM/-ENOMEM past the locked-memory budget). Not async-signal-safe.
int sw_perf_ring_open(sw_perf_ring *ring, pid_t tid, uint64_t period_ns, uint32_t data_pages, uint16_t max_frames,
                      uint32_t leaf_stack_bytes);

/// Copies the ring's records, newest first, into `out` (at most `capacity` bytes, whole records only), with the
/// kernel's writing paused for the copy (samples the thread takes meanwhile are dropped). Returns the bytes copied.
/// Each record is a `struct perf_event_header`; a sample (`PERF_RECORD_SAMPLE`) carries u32 pid, u32 tid, u64
/// time, u64 nr and nr u64 call chain entries (context markers included), then, in a ring with
/// `leaf_stack_bytes`, u64 abi (0: no registers follow) and the three registers, u64 size, `size` bytes of stack
/// and u64 dyn_size (the bytes of it filled; absent when size is 0). Not async-signal-safe.
size_t sw_perf_ring_copy(sw_perf_ring *ring, uint8_t *out, size_t capacity);

/// Unmaps and closes the ring (safe on a ring that failed to open).
void sw_perf_ring_close(sw_perf_ring *ring);

#ifdef __cplusplus
}
#endif
#endif
