// Fixtures for capture tests and benchmarks (see sw_capture_fixtures.h).
#ifdef __linux__
#ifndef __x86_64__
#error "the capture fixtures spin with __builtin_ia32_pause; a port needs its architecture's spin hint"
#endif
#include "sw_capture_fixtures.h"

#include <libunwind.h>

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
// After each call: keeps the compiler from turning the call into a tail call (which would drop a frame).
#define NO_TAIL_CALL() __asm__ volatile("" ::: "memory")

int sw_test_chain_state(const sw_test_chain *c) { return __atomic_load_n(&c->state, __ATOMIC_ACQUIRE); }
void sw_test_chain_release(sw_test_chain *c) { __atomic_store_n(&c->state, 2, __ATOMIC_RELEASE); }

static NOINLINE int chain_spin(sw_test_chain *c) {
    int spins = 0;
    // The load is inline (no call) so that the captured PC is always in this function.
    while (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != 2) {
        __builtin_ia32_pause();
        spins++;
    }
    return spins & 1;
}

static NOINLINE int chain_bottom(sw_test_chain *c) {
    c->truth_count = sw_test_local_backtrace(c->truth, SW_TEST_CHAIN_MAX_TRUTH, 0);
    __atomic_store_n(&c->state, 1, __ATOMIC_RELEASE);
    int r = chain_spin(c);
    NO_TAIL_CALL();
    return r + 1;
}

static NOINLINE int chain_b(sw_test_chain *c, int n);
static NOINLINE int chain_c(sw_test_chain *c, int n);

static NOINLINE int chain_a(sw_test_chain *c, int n) {
    int r = n <= 0 ? chain_bottom(c) : chain_b(c, n - 1);
    NO_TAIL_CALL();
    return r + 1;
}

static NOINLINE int chain_b(sw_test_chain *c, int n) {
    int r = n <= 0 ? chain_bottom(c) : chain_c(c, n - 1);
    NO_TAIL_CALL();
    return r + 2;
}

static NOINLINE int chain_c(sw_test_chain *c, int n) {
    int r = n <= 0 ? chain_bottom(c) : chain_a(c, n - 1);
    NO_TAIL_CALL();
    return r + 3;
}

void sw_test_chain_run(sw_test_chain *c) {
    c->thread_id = (pid_t)syscall(SYS_gettid);
    volatile int sink = chain_a(c, c->depth > 0 ? c->depth - 1 : 0);
    (void)sink;
}

struct sw_test_gate {
    sem_t entered, release;
};

sw_test_gate *sw_test_gate_create(void) {
    sw_test_gate *g = malloc(sizeof *g);
    if (g) {
        sem_init(&g->entered, 0, 0);
        sem_init(&g->release, 0, 0);
    }
    return g;
}

void sw_test_gate_destroy(sw_test_gate *g) {
    if (!g) return;
    sem_destroy(&g->entered);
    sem_destroy(&g->release);
    free(g);
}

static int park_in_callback(struct dl_phdr_info *info, size_t size, void *data) {
    sw_test_gate *g = data;
    sem_post(&g->entered);
    while (sem_wait(&g->release) != 0) {}
    return 1;  // stop iterating
}

void sw_test_gate_hold_loader_lock(sw_test_gate *g) { dl_iterate_phdr(park_in_callback, g); }
void sw_test_gate_wait_entered(sw_test_gate *g) { while (sem_wait(&g->entered) != 0) {} }
void sw_test_gate_open(sw_test_gate *g) { sem_post(&g->release); }

pid_t sw_test_spawn_vfork_blocked(unsigned milliseconds) {
    pid_t pid = fork();
    if (pid < 0) return -errno;
    if (pid > 0) return pid;
    // The forked child: only async-signal-safe calls from here on (the parent may be multithreaded).
    pid_t sleeper = vfork();
    if (sleeper == 0) {
        struct timespec ts = {milliseconds / 1000, (long)(milliseconds % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        _exit(0);
    }
    if (sleeper > 0) waitpid(sleeper, NULL, 0);
    for (;;) pause();
}

pid_t sw_test_spawn_long_write(size_t bytes, int *events) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int err = errno;
        close(fds[0]);
        close(fds[1]);
        return -err;
    }
    if (pid > 0) {
        close(fds[1]);
        *events = fds[0];
        return pid;
    }
    // The forked child: only async-signal-safe calls (and mmap) from here on (the parent may be multithreaded).
    char path[64] = "/dev/shm/stallwatch-long-write-";
    char *p = path + strlen(path);
    for (pid_t n = getpid(); n > 0; n /= 10) *p++ = (char)('0' + n % 10);
    *p = 0;
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) _exit(3);
    unlink(path);
    void *source = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);  // zero pages
    if (source == MAP_FAILED) _exit(3);
    if (write(fds[1], "S", 1) != 1) _exit(3);
    ssize_t written = write(fd, source, bytes);
    if (write(fds[1], written == (ssize_t)bytes ? "E" : "F", 1) != 1) _exit(3);
    for (;;) pause();
}

size_t sw_test_local_backtrace(uint64_t *addresses, size_t max_frames, size_t skip) {
    unw_context_t context;
    unw_cursor_t cursor;
    unw_word_t ip;
    size_t count = 0;
    if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0) return 0;
    // The cursor starts in this function's frame; each step moves one caller out.
    while (count < max_frames && unw_step(&cursor) > 0) {
        if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
        if (skip) skip--;
        else addresses[count++] = ip;
    }
    return count;
}
NOINLINE int sw_test_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns) {
    struct timespec timeout = {(time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull)};
    long r = syscall(SYS_futex, word, 0 /* FUTEX_WAIT */, expected, &timeout, NULL, 0);
    int result = r == 0 ? 0 : errno;
    NO_TAIL_CALL();
    return result;
}
#endif
