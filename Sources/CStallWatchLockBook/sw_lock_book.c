// sw_lock_book.c: interposed POSIX semaphore calls that record each semaphore's last taker (see sw_lock_book.h).
#include "sw_lock_book.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__attribute__((visibility("default"))) struct sw_lock_book sw_lock_book = {
    .magic = SW_LOCK_BOOK_MAGIC,
    .version = SW_LOCK_BOOK_VERSION,
    .slot_count = SW_LOCK_BOOK_SLOTS,
    .slot_bytes = sizeof(struct sw_lock_book_slot),
};

static __thread int32_t own_tid __attribute__((tls_model("initial-exec")));

static int32_t current_tid(void) {
    int32_t tid = own_tid;
    if (tid == 0) {
        tid = (int32_t)syscall(SYS_gettid);
        own_tid = tid;
    }
    return tid;
}

// The forking thread's id is stale in the child.
static void forget_tid_in_child(void) { own_tid = 0; }

#define SLOT_ADDRESS(s) ((_Atomic uint64_t *)&(s)->address)
#define SLOT_TAKER(s) ((_Atomic int32_t *)&(s)->taker)
#define SLOT_TAKES(s) ((_Atomic uint32_t *)&(s)->takes)

// The slot holding `address`'s record, claiming a free one (or, with none free among the probes, the home slot) when
// `claim`; NULL when not found and not claiming.
static struct sw_lock_book_slot *slot_for(uint64_t address, int claim) {
    uint32_t home = sw_lock_book_home(address);
    for (uint32_t i = 0; i < SW_LOCK_BOOK_PROBES; i++) {
        struct sw_lock_book_slot *slot = &sw_lock_book.slots[(home + i) & (SW_LOCK_BOOK_SLOTS - 1)];
        uint64_t seen = atomic_load_explicit(SLOT_ADDRESS(slot), memory_order_relaxed);
        if (seen == address) return slot;
        if (seen == 0) {
            if (!claim) return NULL;
            uint64_t expected = 0;
            if (atomic_compare_exchange_strong_explicit(
                    SLOT_ADDRESS(slot), &expected, address, memory_order_acq_rel, memory_order_relaxed)
                || expected == address)
                return slot;
        }
    }
    if (!claim) return NULL;
    // Every probe holds another semaphore: the home slot is taken over, its address cleared while its taker changes.
    struct sw_lock_book_slot *slot = &sw_lock_book.slots[home];
    atomic_store_explicit(SLOT_ADDRESS(slot), 0, memory_order_release);
    atomic_store_explicit(SLOT_TAKER(slot), 0, memory_order_release);
    atomic_store_explicit(SLOT_ADDRESS(slot), address, memory_order_release);
    return slot;
}

static void record_take(sem_t *sem) {
    struct sw_lock_book_slot *slot = slot_for((uint64_t)(uintptr_t)sem, 1);
    atomic_store_explicit(SLOT_TAKER(slot), current_tid(), memory_order_release);
    atomic_fetch_add_explicit(SLOT_TAKES(slot), 1, memory_order_relaxed);
}

static void record_post(sem_t *sem) {
    struct sw_lock_book_slot *slot = slot_for((uint64_t)(uintptr_t)sem, 0);
    if (slot) atomic_store_explicit(SLOT_TAKER(slot), 0, memory_order_release);
}

int32_t sw_lock_book_taker(uint64_t address) {
    struct sw_lock_book_slot *slot = slot_for(address, 0);
    if (!slot) return 0;
    int32_t taker = atomic_load_explicit(SLOT_TAKER(slot), memory_order_acquire);
    return atomic_load_explicit(SLOT_ADDRESS(slot), memory_order_acquire) == address ? taker : 0;
}

typedef int (*sem_wait_fn)(sem_t *);
typedef int (*sem_timedwait_fn)(sem_t *, const struct timespec *);
typedef int (*sem_clockwait_fn)(sem_t *, clockid_t, const struct timespec *);
typedef int (*sem_init_fn)(sem_t *, int, unsigned int);

static _Atomic(sem_wait_fn) real_wait, real_trywait, real_post, real_destroy;
static _Atomic(sem_timedwait_fn) real_timedwait;
static _Atomic(sem_clockwait_fn) real_clockwait;
static _Atomic(sem_init_fn) real_init;

#define REAL(var, type, name)                                                                                        \
    type fn = atomic_load_explicit(&var, memory_order_acquire);                                                     \
    if (!fn) {                                                                                                        \
        fn = (type)dlsym(RTLD_NEXT, name);                                                                            \
        atomic_store_explicit(&var, fn, memory_order_release);                                                        \
    }

__attribute__((constructor)) static void sw_lock_book_start(void) {
    atomic_store(&real_wait, (sem_wait_fn)dlsym(RTLD_NEXT, "sem_wait"));
    atomic_store(&real_trywait, (sem_wait_fn)dlsym(RTLD_NEXT, "sem_trywait"));
    atomic_store(&real_post, (sem_wait_fn)dlsym(RTLD_NEXT, "sem_post"));
    atomic_store(&real_destroy, (sem_wait_fn)dlsym(RTLD_NEXT, "sem_destroy"));
    atomic_store(&real_timedwait, (sem_timedwait_fn)dlsym(RTLD_NEXT, "sem_timedwait"));
    atomic_store(&real_clockwait, (sem_clockwait_fn)dlsym(RTLD_NEXT, "sem_clockwait"));
    atomic_store(&real_init, (sem_init_fn)dlsym(RTLD_NEXT, "sem_init"));
    pthread_atfork(NULL, NULL, forget_tid_in_child);
}

// A semaphore made anew (possibly where a destroyed one was) starts with no taker.
int sem_init(sem_t *sem, int pshared, unsigned int value) {
    REAL(real_init, sem_init_fn, "sem_init");
    int result = fn(sem, pshared, value);
    if (result == 0) record_post(sem);
    return result;
}

int sem_destroy(sem_t *sem) {
    REAL(real_destroy, sem_wait_fn, "sem_destroy");
    record_post(sem);
    return fn(sem);
}

int sem_wait(sem_t *sem) {
    REAL(real_wait, sem_wait_fn, "sem_wait");
    int result = fn(sem);
    if (result == 0) record_take(sem);
    return result;
}

int sem_trywait(sem_t *sem) {
    REAL(real_trywait, sem_wait_fn, "sem_trywait");
    int result = fn(sem);
    if (result == 0) record_take(sem);
    return result;
}

int sem_timedwait(sem_t *sem, const struct timespec *abstime) {
    REAL(real_timedwait, sem_timedwait_fn, "sem_timedwait");
    int result = fn(sem, abstime);
    if (result == 0) record_take(sem);
    return result;
}

int sem_clockwait(sem_t *sem, clockid_t clock, const struct timespec *abstime) {
    REAL(real_clockwait, sem_clockwait_fn, "sem_clockwait");
    int result = fn(sem, clock, abstime);
    if (result == 0) record_take(sem);
    return result;
}

// Posted: whoever took it last no longer holds it. Records before the post, so a waiter the post wakes never finds
// the poster's stale take (errno is kept: the record touches none).
int sem_post(sem_t *sem) {
    REAL(real_post, sem_wait_fn, "sem_post");
    record_post(sem);
    return fn(sem);
}
