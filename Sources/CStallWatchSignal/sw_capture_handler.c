// The in-process capture signal handler and its installation (see sw_capture.h): the only code here that
// runs in a signal handler is capture_handler and what it calls, all async-signal-safe.
#ifdef __linux__
#include "sw_capture_slots.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/uio.h>
#include <ucontext.h>

static _Atomic int installed_signal;
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;

static void copy_registers(const ucontext_t *uc, uint64_t *r) {
    const greg_t *g = uc->uc_mcontext.gregs;
    static const int order[SW_REGISTER_COUNT] = {  // sw_registers.h's layout, from ucontext's
        [SW_REG_RAX] = REG_RAX, [SW_REG_RDX] = REG_RDX, [SW_REG_RCX] = REG_RCX, [SW_REG_RBX] = REG_RBX,
        [SW_REG_RSI] = REG_RSI, [SW_REG_RDI] = REG_RDI, [SW_REG_RBP] = REG_RBP, [SW_REG_RSP] = REG_RSP,
        [SW_REG_R8] = REG_R8,   [SW_REG_R9] = REG_R9,   [SW_REG_R10] = REG_R10, [SW_REG_R11] = REG_R11,
        [SW_REG_R12] = REG_R12, [SW_REG_R13] = REG_R13, [SW_REG_R14] = REG_R14, [SW_REG_R15] = REG_R15,
        [SW_REG_RIP] = REG_RIP,
    };
    for (int i = 0; i < SW_REGISTER_COUNT; i++) r[i] = (uint64_t)g[order[i]];
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
        uint32_t w = atomic_load_explicit(&sw_capture_slots[i].word, memory_order_acquire);
        if (STATE(w) == ST_COPYING && atomic_load_explicit(&sw_capture_slots[i].tid, memory_order_relaxed) == self)
            return NULL;  // recursion guard: this thread is already inside the handler
    }
    for (int i = 0; i < SW_CAPTURE_SLOT_COUNT; i++) {
        slot *s = &sw_capture_slots[i];
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
        uint64_t start = sw_monotonic_ns();
        sw_capture_record *r = &s->record;
        copy_registers((const ucontext_t *)context, r->registers);
        uint64_t sp = r->registers[SW_REG_RSP];
        size_t capacity = atomic_load_explicit(&sw_capture_slot_bytes, memory_order_relaxed);
        if (s->copy_limit < capacity) capacity = s->copy_limit;
        r->stack_pointer = sp;
        r->stack_size = 0;
        r->flags = 0;
        if (sp >= s->stack_low && sp < s->stack_high) {
            // The red zone too (see SW_CAPTURE_RED_ZONE_BYTES): this handler's frame lies below it.
            if (sp - s->stack_low >= SW_CAPTURE_RED_ZONE_BYTES) sp -= SW_CAPTURE_RED_ZONE_BYTES;
            r->stack_pointer = sp;
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
        r->handler_end_ns = sw_monotonic_ns();
        uint32_t old = atomic_exchange_explicit(&s->word, WITH_STATE(w, ST_DONE), memory_order_acq_rel);
        if (old & WAITER_BIT) sw_futex(&s->word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL);  // only when a requester sleeps
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
    volatile uint64_t t = sw_monotonic_ns();
    (void)t;
    memcpy(scratch, scratch + 32, 16);
    (void)syscall(SYS_gettid);
    sw_futex(&dummy, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL);
}

int sw_capture_install(int signo, size_t stack_bytes) {
    pthread_mutex_lock(&install_lock);
    int current = atomic_load(&installed_signal), result;
    if (current != 0) {
        result = (signo == 0 || signo == current) ? current : -EBUSY;
    } else if (signo != 0 && (is_forbidden(signo) || signo < SIGRTMIN || signo > SIGRTMAX)) {
        result = -EINVAL;
    } else {
        atomic_store(&sw_capture_slot_bytes, stack_bytes ? stack_bytes : SW_CAPTURE_DEFAULT_STACK_BYTES);
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
        else atomic_store(&sw_capture_slot_bytes, 0);
    }
    pthread_mutex_unlock(&install_lock);
    return result;
}

int sw_capture_signal(void) { return atomic_load(&installed_signal); }
size_t sw_capture_stack_bytes(void) { return atomic_load(&sw_capture_slot_bytes); }
#endif

#ifdef __linux__
int sw_capture_disposition(void) {
    int signo = atomic_load(&installed_signal);
    if (signo == 0) return SW_DISPOSITION_NOT_INSTALLED;
    struct sigaction now;
    if (sigaction(signo, NULL, &now) != 0) return SW_DISPOSITION_NOT_INSTALLED;
    if (now.sa_flags & SA_SIGINFO)
        return now.sa_sigaction == capture_handler ? SW_DISPOSITION_OURS : SW_DISPOSITION_OTHER_HANDLER;
    if (now.sa_handler == SIG_DFL) return SW_DISPOSITION_DEFAULT;
    if (now.sa_handler == SIG_IGN) return SW_DISPOSITION_IGNORED;
    return SW_DISPOSITION_OTHER_HANDLER;
}
#endif
