// In-process stack capture: a real-time signal handler copies a thread's registers and live stack.
//
// One handler per process serves any number of concurrent requesters through a fixed table of request
// slots keyed by target thread id; each slot owns a preallocated stack buffer. The handler allocates
// nothing, takes no lock and only touches its own slot, so it cannot block on the loader lock or malloc.
#ifndef SW_CAPTURE_H
#define SW_CAPTURE_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sw_registers.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Concurrent requests the handler can serve (one slot each).
#define SW_CAPTURE_SLOT_COUNT 32
/// Stack bytes copied per capture unless `sw_capture_install` is told otherwise.
#define SW_CAPTURE_DEFAULT_STACK_BYTES 65536
/// The x86-64 red zone: the 128 bytes below the stack pointer that a function may use without moving it, and that
/// signal delivery leaves alone. The copy starts there, not at the stack pointer: a leaf function keeps data there,
/// and at an epilogue's `ret` some CFI (seen in libswiftSwiftOnoneSupport) still says the caller's RBP is saved at
/// CFA-16 — the word just popped, now below the stack pointer. Without it the unwind stops one frame further up.
#define SW_CAPTURE_RED_ZONE_BYTES 128

/// Flags in `sw_capture_record.flags`.
enum {
    /// The interrupted SP was outside the registered [stack_low, stack_high): no stack was copied
    /// (the thread ran on an alternate signal stack, a coroutine stack, or the bounds were wrong).
    SW_CAPTURE_SP_OUTSIDE_STACK = 1 << 0,
    /// The live stack was larger than the slot buffer: the copy holds only its innermost part.
    SW_CAPTURE_TRUNCATED = 1 << 1,
};

/// Results of `sw_capture_thread` (0 or a negative errno-style value).
enum {
    SW_CAPTURE_OK = 0,
    /// `sw_capture_install` has not succeeded yet.
    SW_CAPTURE_NOT_INSTALLED = -1000,
    /// Every request slot is in use.
    SW_CAPTURE_NO_SLOT = -1001,
    /// The handler did not run before the deadline; the request was cancelled.
    SW_CAPTURE_TIMED_OUT = -1002,
    /// A slot's stack buffer could not be allocated (mmap failed).
    SW_CAPTURE_NO_MEMORY = -1003,
    // Any other negative value is -errno from tgkill (for example -ESRCH: no such thread).
};

/// What one capture produced (the stack bytes go to a caller buffer).
typedef struct sw_capture_record {
    pid_t thread_id;
    int flags;
    /// The general registers, in the layout of sw_registers.h.
    uint64_t registers[SW_REGISTER_COUNT];
    /// Where the copy starts: the stack pointer less the red zone (SW_CAPTURE_RED_ZONE_BYTES), or the stack
    /// pointer itself when that would leave the stack (registers[SW_REG_RSP] holds the stack pointer).
    uint64_t stack_pointer;
    /// Bytes of stack copied, starting at `stack_pointer`.
    size_t stack_size;
    /// CLOCK_MONOTONIC: just before tgkill, handler entry, handler done.
    uint64_t sent_ns;
    uint64_t handler_start_ns;
    uint64_t handler_end_ns;
} sw_capture_record;

/// Installs the process-wide capture handler for `signo`, or for the first real-time signal between
/// SIGRTMIN+1 and SIGRTMAX-1 whose disposition is SIG_DFL when `signo` is 0. Never replaces a
/// disposition someone else installed. `stack_bytes` sizes every slot's buffer (0: the default); it is
/// fixed by the first successful call. Idempotent: later calls return the installed signal if `signo`
/// is 0 or equal to it.
/// Returns the signal number (> 0), or -EBUSY (`signo` has someone else's disposition, or a different
/// signal is already installed), -EINVAL (`signo` is not a usable real-time signal), -ENOSPC (no free
/// real-time signal), or -errno from sigaction. Not async-signal-safe (takes a mutex).
int sw_capture_install(int signo, size_t stack_bytes);

/// The installed signal, or 0. Async-signal-safe.
int sw_capture_signal(void);

/// The per-slot stack buffer size in bytes (0 before installation). Async-signal-safe.
size_t sw_capture_stack_bytes(void);

/// Copies the registers and stack of thread `tid` of this process: claims a slot, sends the signal with
/// tgkill, waits (a brief spin, then a futex wait the handler wakes only if someone sleeps) at most
/// `timeout_ns`, copies the result into `record` and up to `stack_capacity` bytes into `stack_out`, and
/// frees the slot. On timeout the request is cancelled atomically, so a late handler writes nothing; a
/// handler caught mid-copy is waited for (the copy cannot block) and its result returned.
/// `stack_low`/`stack_high` bound the thread's stack; the handler copies from SP up to
/// min(stack_high, SP + min(slot size, stack_capacity)) only if SP lies inside them, so `stack_capacity`
/// bounds the work done on the target thread as well as the bytes returned. With `approximate_bounds` (bounds read from
/// /proc/self/maps for a thread that never registered, possibly stale) the handler copies with
/// process_vm_readv, which stops at an unmapped page instead of faulting; otherwise with memcpy.
/// Returns SW_CAPTURE_OK or one of the negative values above. Safe to call from many threads at once,
/// also for the same target; the calling thread may target itself (the handler runs before tgkill
/// returns, unless the signal is blocked). Not async-signal-safe (blocks).
int sw_capture_thread(pid_t tid, uint64_t stack_low, uint64_t stack_high, int approximate_bounds,
                      uint64_t timeout_ns, sw_capture_record *record, uint8_t *stack_out, size_t stack_capacity);

/// The calling thread's stack bounds from pthread_getattr_np: [*low, *high). Returns 0 or an errno.
/// Not async-signal-safe (may allocate and read /proc/self/maps for the main thread).
int sw_capture_current_stack(uint64_t *low, uint64_t *high);

/// What the installed signal's disposition is now (the application may have changed it since).
enum {
    SW_DISPOSITION_OURS = 0,
    SW_DISPOSITION_DEFAULT = 1,       ///< SIG_DFL: a real-time signal would kill the process
    SW_DISPOSITION_IGNORED = 2,       ///< SIG_IGN: the handler would never run
    SW_DISPOSITION_OTHER_HANDLER = 3, ///< someone else's handler would receive the signal
    SW_DISPOSITION_NOT_INSTALLED = 4,
};

/// The installed signal's current disposition (one sigaction query). Async-signal-safe.
int sw_capture_disposition(void);

/// Slots currently claimed by a requester (for tests and diagnostics). Async-signal-safe.
int sw_capture_slots_in_use(void);

#ifdef __cplusplus
}
#endif
#endif
