// Private to the capture files: the request slots shared by the requester (sw_capture.c) and the signal
// handler (sw_capture_handler.c). Everything here is async-signal-safe.
#ifndef SW_CAPTURE_SLOTS_H
#define SW_CAPTURE_SLOTS_H
#ifdef __linux__
#ifndef __x86_64__
#error "in-process capture is written for x86_64: a port needs the handler's ucontext register copy (copy_registers and the SP index in sw_capture_handler.c, in the unwinder's register numbering) and a spin hint for __builtin_ia32_pause in sw_capture.c"
#endif
#include "sw_capture.h"
#include "sw_sys.h"

#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// A slot's state word: bits 0-2 the state, bit 3 "a requester sleeps on the futex", bits 4-31 a
// generation bumped on every claim, so a handler that read a slot just before it was recycled fails its
// compare-and-swap instead of writing into someone else's request (ABA).
enum { ST_FREE, ST_CLAIMED, ST_REQUESTED, ST_COPYING, ST_DONE, ST_CANCELLED };
#define STATE_MASK 7u
#define WAITER_BIT 8u
#define GEN_ONE 16u
#define STATE(w) ((w) & STATE_MASK)
#define WITH_STATE(w, s) (((w) & ~(STATE_MASK | WAITER_BIT)) | (s))

// Spinning first costs the requester a little CPU but keeps the handler from paying for a futex wake
// (LIMITS.md: waking a sleeper from the handler adds 1.6-13 us to the pause; most captures finish here).
#define SPIN_NS 50000ull
// After this much pure spinning, yield between polls: on a busy machine the target may need our CPU.
#define PURE_SPIN_NS 5000ull

typedef struct slot {
    _Atomic uint32_t word;
    _Atomic pid_t tid;
    // Written by the requester before the release store of REQUESTED; read by the handler after its
    // acquire load. The record is written by the handler before its release of DONE.
    uint64_t stack_low, stack_high;
    int approximate_bounds;
    size_t copy_limit;  // the requester's bound on the bytes the handler copies (at most the slot size)
    uint8_t *buffer;
    sw_capture_record record;
} slot;

extern slot sw_capture_slots[SW_CAPTURE_SLOT_COUNT];
/// The per-slot stack buffer size; 0 until the handler is installed.
extern _Atomic size_t sw_capture_slot_bytes;

#endif
#endif
