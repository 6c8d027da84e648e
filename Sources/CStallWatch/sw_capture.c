// The in-process capture handler and its request slots (see sw_capture.h).
#ifdef __linux__
#include "sw_capture.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
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
    uint8_t *buffer;
    sw_capture_record record;
} slot;

static slot slots[SW_CAPTURE_SLOT_COUNT];
static _Atomic int installed_signal;
static _Atomic size_t slot_stack_bytes;
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now_ns(void) {  // clock_gettime is async-signal-safe (POSIX) and a vDSO call here
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static long futex(_Atomic uint32_t *word, int op, uint32_t value, const struct timespec *timeout) {
    return syscall(SYS_futex, (uint32_t *)word, op | FUTEX_PRIVATE_FLAG, value, timeout, NULL, 0);
}

static void copy_registers(const ucontext_t *uc, uint64_t *r) {
    const greg_t *g = uc->uc_mcontext.gregs;
    static const int order[SW_CAPTURE_REGISTER_COUNT] = {  // UNW_X86_64_RAX … UNW_X86_64_RIP (DWARF order)
        REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP, REG_R8,
        REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP,
    };
    for (int i = 0; i < SW_CAPTURE_REGISTER_COUNT; i++) r[i] = (uint64_t)g[order[i]];
}

// Copies `n` bytes of this process's memory at `src` without faulting: process_vm_readv on our own pid returns
// short at the first unmapped page (bounds read from /proc/self/maps may be stale by the time the signal
// lands). Where seccomp forbids the syscall (EPERM/ENOSYS, as in default container profiles) the bounds are
// trusted and memcpy is used. Async-signal-safe (syscalls and memcpy only); may change errno.
static size_t copy_stack(void *dst, uint64_t src, size_t n) {
    struct iovec local = {.iov_base = dst, .iov_len = n};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)src, .iov_len = n};
    long got = syscall(SYS_process_vm_readv, (pid_t)syscall(SYS_getpid), &local, 1UL, &remote, 1UL, 0UL);
    if (got >= 0) return (size_t)got;
    if (errno == EPERM || errno == ENOSYS) {
        memcpy(dst, (const void *)(uintptr_t)src, n);
        return n;
    }
    return 0;
}

// Finds a REQUESTED slot for `self` and moves it to COPYING. NULL if none (a late signal whose request
// was cancelled, or a re-entry while this thread is already copying).
static slot *claim_for_handler(pid_t self, uint32_t *claimed) {
    for (int i = 0; i < SW_CAPTURE_SLOT_COUNT; i++) {
        uint32_t w = atomic_load_explicit(&slots[i].word, memory_order_acquire);
        if (STATE(w) == ST_COPYING && atomic_load_explicit(&slots[i].tid, memory_order_relaxed) == self)
            return NULL;  // recursion guard: this thread is already inside the handler
    }
    for (int i = 0; i < SW_CAPTURE_SLOT_COUNT; i++) {
        slot *s = &slots[i];
        uint32_t w = atomic_load_explicit(&s->word, memory_order_acquire);
        while (STATE(w) == ST_REQUESTED && atomic_load_explicit(&s->tid, memory_order_relaxed) == self) {
            uint32_t copying = (w & ~STATE_MASK) | ST_COPYING;  // keeps the waiter bit
            if (atomic_compare_exchange_weak_explicit(&s->word, &w, copying, memory_order_acq_rel,
                                                      memory_order_acquire)) {
                *claimed = copying;
                return s;
            }
        }
    }
    return NULL;
}

// Async-signal-safe by construction: no allocation, no lock, no libc call but clock_gettime, memcpy and
// syscall (gettid, getpid, process_vm_readv, futex); errno is preserved.
static void capture_handler(int sig, siginfo_t *info, void *context) {
    (void)sig;
    (void)info;
    int saved_errno = errno;
    pid_t self = (pid_t)syscall(SYS_gettid);
    uint32_t w;
    slot *s = claim_for_handler(self, &w);
    if (s) {
        uint64_t start = now_ns();
        sw_capture_record *r = &s->record;
        copy_registers((const ucontext_t *)context, r->registers);
        uint64_t sp = r->registers[7];  // UNW_X86_64_RSP
        size_t capacity = atomic_load_explicit(&slot_stack_bytes, memory_order_relaxed);
        r->stack_pointer = sp;
        r->stack_size = 0;
        r->flags = 0;
        if (sp >= s->stack_low && sp < s->stack_high) {
            size_t n = (size_t)(s->stack_high - sp);
            if (n > capacity) {
                n = capacity;
                r->flags |= SW_CAPTURE_TRUNCATED;
            }
            size_t copied = n;
            if (s->approximate_bounds)
                copied = copy_stack(s->buffer, sp, n);
            else
                memcpy(s->buffer, (const void *)(uintptr_t)sp, n);  // bounds from pthread_getattr_np
            if (copied < n) r->flags |= SW_CAPTURE_TRUNCATED;
            r->stack_size = copied;
        } else {
            r->flags |= SW_CAPTURE_SP_OUTSIDE_STACK;
        }
        r->handler_start_ns = start;
        r->handler_end_ns = now_ns();
        uint32_t old = atomic_exchange_explicit(&s->word, WITH_STATE(w, ST_DONE), memory_order_acq_rel);
        if (old & WAITER_BIT) futex(&s->word, FUTEX_WAKE, 1, NULL);  // only when a requester sleeps
    }
    errno = saved_errno;
}

static int is_default(const struct sigaction *sa) {
    return !(sa->sa_flags & SA_SIGINFO) && sa->sa_handler == SIG_DFL;
}

static int try_install(int signo) {
    struct sigaction old, sa;
    if (sigaction(signo, NULL, &old) != 0) return -errno;
    if (!is_default(&old)) return -EBUSY;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = capture_handler;
    // SA_RESTART: most interrupted syscalls resume; SA_ONSTACK: a thread with an alternate stack keeps
    // the handler off its (possibly nearly full) main stack. The signal itself stays blocked inside.
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(signo, &sa, &old) != 0) return -errno;
    if (!is_default(&old)) {  // someone installed a handler between our look and our install
        sigaction(signo, &old, NULL);
        return -EBUSY;
    }
    return signo;
}

static int is_forbidden(int signo) {  // owned by the Swift runtime's crash handling
    return signo == SIGSEGV || signo == SIGBUS || signo == SIGILL || signo == SIGTRAP || signo == SIGABRT ||
           signo == SIGFPE || signo == SIGQUIT;
}

// Resolves the lazily bound symbols the handler uses, so its first run does not enter the dynamic linker.
static void warm_up(void) {
    static uint8_t scratch[64];
    static _Atomic uint32_t dummy;
    volatile uint64_t t = now_ns();
    (void)t;
    memcpy(scratch, scratch + 32, 16);
    (void)syscall(SYS_gettid);
    futex(&dummy, FUTEX_WAKE, 1, NULL);
}

int sw_capture_install(int signo, size_t stack_bytes) {
    pthread_mutex_lock(&install_lock);
    int current = atomic_load(&installed_signal), result;
    if (current != 0) {
        result = (signo == 0 || signo == current) ? current : -EBUSY;
    } else if (signo != 0 && (is_forbidden(signo) || signo < SIGRTMIN || signo > SIGRTMAX)) {
        result = -EINVAL;
    } else {
        atomic_store(&slot_stack_bytes, stack_bytes ? stack_bytes : SW_CAPTURE_DEFAULT_STACK_BYTES);
        warm_up();
        if (signo != 0) {
            result = try_install(signo);
        } else {
            result = -ENOSPC;
            for (int s = SIGRTMIN + 1; s < SIGRTMAX && result < 0; s++) {
                int r = try_install(s);
                if (r > 0) result = r;
            }
        }
        if (result > 0) atomic_store(&installed_signal, result);
        else atomic_store(&slot_stack_bytes, 0);
    }
    pthread_mutex_unlock(&install_lock);
    return result;
}

int sw_capture_signal(void) { return atomic_load(&installed_signal); }
size_t sw_capture_stack_bytes(void) { return atomic_load(&slot_stack_bytes); }

int sw_capture_slots_in_use(void) {
    int n = 0;
    for (int i = 0; i < SW_CAPTURE_SLOT_COUNT; i++)
        if (STATE(atomic_load(&slots[i].word)) != ST_FREE) n++;
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
        uint32_t w = atomic_load_explicit(&slots[i].word, memory_order_relaxed);
        if (STATE(w) != ST_FREE) continue;
        uint32_t next = WITH_STATE(w + GEN_ONE, ST_CLAIMED);
        if (atomic_compare_exchange_strong_explicit(&slots[i].word, &w, next, memory_order_acquire,
                                                    memory_order_relaxed)) {
            *claimed = next;
            return &slots[i];
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
        uint64_t now = now_ns();
        if (now >= deadline) return;
        uint64_t left = deadline - now;
        ts.tv_sec = (time_t)(left / 1000000000ull);
        ts.tv_nsec = (long)(left % 1000000000ull);
        timeout = &ts;
    }
    futex(&s->word, FUTEX_WAIT, w, timeout);  // EAGAIN/EINTR/ETIMEDOUT: the caller re-examines
}

// Waits for DONE until `deadline`; then cancels unless the handler already started copying.
// Returns 1 when the record is complete, 0 when the request was cancelled before the handler ran.
static int finish(slot *s, uint64_t deadline) {
    uint64_t spin_until = s->record.sent_ns + SPIN_NS;
    for (;;) {
        uint32_t w = atomic_load_explicit(&s->word, memory_order_acquire);
        if (STATE(w) == ST_DONE) return 1;
        uint64_t now = now_ns();
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
    int signo = atomic_load(&installed_signal);
    if (signo == 0) return SW_CAPTURE_NOT_INSTALLED;
    uint32_t w;
    slot *s = claim_for_requester(&w);
    if (!s) return SW_CAPTURE_NO_SLOT;
    int result = SW_CAPTURE_OK;
    if (!s->buffer) {
        void *p = mmap(NULL, atomic_load(&slot_stack_bytes), PROT_READ | PROT_WRITE,
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
    memset(&s->record, 0, sizeof s->record);
    s->record.thread_id = tid;
    s->record.sent_ns = now_ns();
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
