// The requesting side of in-process capture (see sw_capture.h): claim a slot, signal the thread, wait for
// its handler (sw_capture_handler.c), collect the copy. Not async-signal-safe (it blocks).
#ifdef __linux__
#include "sw_capture_slots.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

slot sw_capture_slots[SW_CAPTURE_SLOT_COUNT];
_Atomic size_t sw_capture_slot_bytes;

int sw_capture_slots_in_use(void) {
    int n = 0;
    for (int i = 0; i < SW_CAPTURE_SLOT_COUNT; i++)
        if (STATE(atomic_load(&sw_capture_slots[i].word)) != ST_FREE) n++;
    return n;
}

int sw_capture_current_stack(uint64_t *low, uint64_t *high) {
    pthread_attr_t attributes;
    void *address = NULL;
    size_t size = 0;
    int err = pthread_getattr_np(pthread_self(), &attributes);
    if (err) return err;
    err = pthread_attr_getstack(&attributes, &address, &size);
    pthread_attr_destroy(&attributes);
    if (err) return err;
    *low = (uint64_t)(uintptr_t)address;
    *high = *low + size;
    return 0;
}

static slot *claim_for_requester(uint32_t *claimed) {
    for (int i = 0; i < SW_CAPTURE_SLOT_COUNT; i++) {
        uint32_t w = atomic_load_explicit(&sw_capture_slots[i].word, memory_order_relaxed);
        if (STATE(w) != ST_FREE) continue;
        uint32_t next = WITH_STATE(w + GEN_ONE, ST_CLAIMED);
        if (atomic_compare_exchange_strong_explicit(&sw_capture_slots[i].word, &w, next, memory_order_acquire,
                                                    memory_order_relaxed)) {
            *claimed = next;
            return &sw_capture_slots[i];
        }
    }
    return NULL;
}

// Sleeps until the slot's word leaves `w` (which must be REQUESTED or COPYING) or `deadline` (0: none)
// passes. Sets the waiter bit first so the handler knows to wake us.
static void wait_for_change(slot *s, uint32_t w, uint64_t deadline) {
    if (!(w & WAITER_BIT)) {
        if (!atomic_compare_exchange_strong(&s->word, &w, w | WAITER_BIT)) return;  // changed: re-examine
        w |= WAITER_BIT;
    }
    struct timespec ts, *timeout = NULL;
    if (deadline) {
        uint64_t now = sw_monotonic_ns();
        if (now >= deadline) return;
        uint64_t left = deadline - now;
        ts.tv_sec = (time_t)(left / 1000000000ull);
        ts.tv_nsec = (long)(left % 1000000000ull);
        timeout = &ts;
    }
    sw_futex(&s->word, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, w, timeout);  // EAGAIN/EINTR/ETIMEDOUT: the caller re-examines
}

// Waits for DONE until `deadline`; then cancels unless the handler already started copying.
// Returns 1 when the record is complete, 0 when the request was cancelled before the handler ran.
static int finish(slot *s, uint64_t deadline) {
    uint64_t spin_until = s->record.sent_ns + SPIN_NS;
    for (;;) {
        uint32_t w = atomic_load_explicit(&s->word, memory_order_acquire);
        if (STATE(w) == ST_DONE) return 1;
        uint64_t now = sw_monotonic_ns();
        if (STATE(w) == ST_REQUESTED && now >= deadline) {
            if (atomic_compare_exchange_strong_explicit(&s->word, &w, WITH_STATE(w, ST_CANCELLED),
                                                        memory_order_acq_rel, memory_order_acquire))
                return 0;
            continue;  // the handler claimed it (or the waiter bit moved): re-examine
        }
        if (now < spin_until && now < deadline) {
            if (now - s->record.sent_ns < PURE_SPIN_NS) __builtin_ia32_pause();
            else sched_yield();
            continue;
        }
        // A handler in COPYING cannot block, so waiting for it without a deadline is bounded.
        wait_for_change(s, w, STATE(w) == ST_COPYING ? 0 : deadline);
    }
}

int sw_capture_thread(pid_t tid, uint64_t stack_low, uint64_t stack_high, int approximate_bounds, uint64_t timeout_ns,
                      sw_capture_record *record, uint8_t *stack_out, size_t stack_capacity) {
    int signo = sw_capture_signal();
    if (signo == 0) return SW_CAPTURE_NOT_INSTALLED;
    uint32_t w;
    slot *s = claim_for_requester(&w);
    if (!s) return SW_CAPTURE_NO_SLOT;
    int result = SW_CAPTURE_OK;
    if (!s->buffer) {
        void *p = mmap(NULL, atomic_load(&sw_capture_slot_bytes), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p == MAP_FAILED) {
            atomic_store_explicit(&s->word, WITH_STATE(w, ST_FREE), memory_order_release);
            return SW_CAPTURE_NO_MEMORY;
        }
        s->buffer = p;
    }
    atomic_store_explicit(&s->tid, tid, memory_order_relaxed);
    s->stack_low = stack_low;
    s->stack_high = stack_high;
    s->approximate_bounds = approximate_bounds;
    s->copy_limit = stack_capacity;
    memset(&s->record, 0, sizeof s->record);
    s->record.thread_id = tid;
    s->record.sent_ns = sw_monotonic_ns();
    atomic_store_explicit(&s->word, WITH_STATE(w, ST_REQUESTED), memory_order_release);

    int saved_errno = errno;
    long r = syscall(SYS_tgkill, getpid(), tid, signo);
    int send_error = r == 0 ? 0 : -errno;
    errno = saved_errno;

    // A failed tgkill still goes through finish (deadline now): a late signal from an earlier, cancelled
    // request to the same thread may have claimed the slot, and then it must be waited for.
    uint64_t deadline = send_error ? s->record.sent_ns : s->record.sent_ns + timeout_ns;
    if (finish(s, deadline)) {
        *record = s->record;
        size_t n = s->record.stack_size;
        if (n > stack_capacity) {
            n = stack_capacity;
            record->stack_size = n;
            record->flags |= SW_CAPTURE_TRUNCATED;
        }
        if (n) memcpy(stack_out, s->buffer, n);
    } else {
        result = send_error ? send_error : SW_CAPTURE_TIMED_OUT;
    }
    atomic_store_explicit(&s->tid, 0, memory_order_relaxed);
    uint32_t now = atomic_load_explicit(&s->word, memory_order_relaxed);
    atomic_store_explicit(&s->word, WITH_STATE(now, ST_FREE), memory_order_release);
    return result;
}
#endif
