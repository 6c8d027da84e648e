// Unwinding a copied stack off-thread with libunwind's remote API: stack words come from the copy,
// everything else (code, .eh_frame) from the target's live memory through process_vm_readv.
#ifndef SW_UNWIND_H
#define SW_UNWIND_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sw_registers.h"

#ifdef __cplusplus
extern "C" {
#endif

/// One libunwind address space (with its global cache) and one libunwind-ptrace handle for a process.
/// Not thread-safe: use one per thread; any number may coexist.
typedef struct sw_unwinder sw_unwinder;

/// A captured thread to unwind.
typedef struct sw_unwind_input {
    /// SW_REGISTER_COUNT general registers, in the layout of sw_registers.h (libunwind's x86_64 numbering).
    const uint64_t *registers;
    /// The address of `stack[0]`.
    uint64_t stack_pointer;
    const uint8_t *stack;
    size_t stack_size;
    /// The thread's stack bounds: reads inside them but outside the copy are refused (the live stack has
    /// moved on). 0/0 when unknown.
    uint64_t stack_low, stack_high;
} sw_unwind_input;

/// Why an unwind stopped, in `sw_unwind_result.stop`.
typedef enum sw_unwind_stop {
    SW_UNWIND_COMPLETE = 0,    ///< reached the outermost frame (unw_step returned 0, or IP 0)
    SW_UNWIND_MAX_FRAMES,      ///< the address buffer is full
    SW_UNWIND_NO_PROGRESS,     ///< a step returned the same IP and SP
    SW_UNWIND_STEP_FAILED,     ///< unw_step failed; `unw_error` holds its (negative) code
    SW_UNWIND_INIT_FAILED,     ///< unw_init_remote or reading the first IP failed; `unw_error` holds the code
} sw_unwind_stop;

typedef struct sw_unwind_result {
    size_t count;
    sw_unwind_stop stop;
    int unw_error;
    /// A static description of `stop` (libunwind's unw_strerror for failures); never NULL.
    const char *reason;
} sw_unwind_result;

/// Creates an unwinder for process `pid` (may be our own): an address space with UNW_CACHE_GLOBAL and a
/// `_UPT_create(pid)` handle (which reads /proc/PID/maps and the ELF files; it never attaches).
/// Returns NULL with errno set on failure. Not async-signal-safe.
sw_unwinder *sw_unwinder_create(pid_t pid);

/// Frees the unwinder. Not async-signal-safe.
void sw_unwinder_destroy(sw_unwinder *unwinder);

/// Forgets all cached unwind information, for example after the target unloaded a library.
/// Not async-signal-safe.
void sw_unwinder_flush(sw_unwinder *unwinder);

/// Unwinds `input` into `addresses` (innermost first: the PC, then return addresses), at most
/// `max_frames`. Returns the number of addresses (also in `result->count`). Never dereferences target
/// addresses directly: an unmapped address yields a failed step, not a crash.
/// Not async-signal-safe (libunwind locks and allocates; run it off the sampled thread).
size_t sw_unwind(sw_unwinder *unwinder, const sw_unwind_input *input, uint64_t *addresses, size_t max_frames,
                 sw_unwind_result *result);

/// The registers of one unwound frame that a later walk of Swift async frames needs.
typedef struct sw_unwind_frame {
    /// RSP while the frame runs (for the innermost frame: at capture; for a caller: just after its call).
    uint64_t stack_pointer;
    /// RBP while the frame runs, as libunwind restored it; 0 when it could not.
    uint64_t frame_pointer;
} sw_unwind_frame;

/// sw_unwind, also recording each frame's stack and frame pointer in `frames` (room for `max_frames`, or NULL).
/// Not async-signal-safe.
size_t sw_unwind_frames(sw_unwinder *unwinder, const sw_unwind_input *input, uint64_t *addresses,
                        sw_unwind_frame *frames, size_t max_frames, sw_unwind_result *result);

#ifdef __cplusplus
}
#endif
#endif
