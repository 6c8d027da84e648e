// Capture in a forked child (see sw_fork_fixtures.h).
#ifdef __linux__
#include "sw_fork_fixtures.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sw_capture_helper.h"

#define NOINLINE __attribute__((noinline))
#define PARK_TIMEOUT_MS 10000
#define PARKED_WITHIN_MS 5000

typedef struct parked {
    int fd;
    _Atomic pid_t tid;
    int result, error;
} parked;

NOINLINE int sw_test_fork_parked(int fd) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int result = poll(&pfd, 1, PARK_TIMEOUT_MS);
    __asm__ volatile("" ::: "memory");  // no tail call: this frame stays on the stack
    return result;
}

static void *park(void *argument) {
    parked *p = argument;
    atomic_store(&p->tid, (pid_t)syscall(SYS_gettid));
    errno = 0;
    p->result = sw_test_fork_parked(p->fd);
    p->error = p->result < 0 ? errno : 0;
    return NULL;
}

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// Reads a small /proc file into `buffer` (NUL-terminated); returns its length or -1.
static ssize_t read_text(const char *path, char *buffer, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t got = read(fd, buffer, size - 1);
    close(fd);
    if (got >= 0) buffer[got] = 0;
    return got;
}

static void number(char *out, const char *prefix, long value, const char *suffix) {
    char digits[24];
    int n = 0;
    do digits[n++] = (char)('0' + value % 10), value /= 10;
    while (value);
    size_t at = strlen(prefix);
    memcpy(out, prefix, at);
    while (n) out[at++] = digits[--n];
    strcpy(out + at, suffix);
}

// True once /proc shows thread `tid` of this process inside poll (x86_64 system call 7).
static int in_poll(pid_t tid) {
    char path[64], text[256];
    number(path, "/proc/self/task/", tid, "/syscall");
    return read_text(path, text, sizeof text) > 0 && strncmp(text, "7 ", 2) == 0;
}

// The parent of `pid` per /proc/PID/stat (field 4), or -1.
static pid_t parent_of(pid_t pid) {
    char path[64], text[512];
    number(path, "/proc/", pid, "/stat");
    if (read_text(path, text, sizeof text) <= 0) return -1;
    char *close_paren = strrchr(text, ')');
    if (!close_paren || close_paren[1] != ' ' || !close_paren[2] || close_paren[3] != ' ') return -1;
    long value = 0;
    for (const char *c = close_paren + 4; *c >= '0' && *c <= '9'; c++) value = value * 10 + (*c - '0');
    return (pid_t)value;
}

static void child(sw_test_fork_result *r, uint8_t *stack, size_t capacity) {
    int fds[2];
    parked p = {0};
    pthread_t thread;
    if (pipe2(fds, O_CLOEXEC) != 0) {
        r->failed_step = SW_TEST_FORK_STEP_THREAD;
        r->failed_errno = errno;
        return;
    }
    p.fd = fds[0];
    int created = pthread_create(&thread, NULL, park, &p);
    if (created != 0) {
        r->failed_step = SW_TEST_FORK_STEP_THREAD;
        r->failed_errno = created;
        return;
    }
    int waited = 0;
    while ((atomic_load(&p.tid) == 0 || !in_poll(atomic_load(&p.tid))) && waited < PARKED_WITHIN_MS) {
        pause_ms(1);  // polling the thread's state in /proc: there is no event for "entered poll"
        waited++;
    }
    r->parked_thread = atomic_load(&p.tid);
    if (waited >= PARKED_WITHIN_MS) {
        r->failed_step = SW_TEST_FORK_STEP_PARK;
        r->failed_errno = ETIMEDOUT;
    } else {
        r->capture_status =
            sw_helper_capture(r->parked_thread, 0, 0, 2000000000ull, &r->record, stack, capacity);
        r->helper = sw_helper_pid();
        r->helper_parent = r->helper > 0 ? parent_of(r->helper) : -1;
        if (r->capture_status != 0) {
            r->failed_step = SW_TEST_FORK_STEP_CAPTURE;
            r->failed_errno = -r->capture_status;
        }
    }
    char byte = 1;
    if (write(fds[1], &byte, 1) != 1 && !r->failed_step) {
        r->failed_step = SW_TEST_FORK_STEP_RELEASE;
        r->failed_errno = errno;
    }
    pthread_join(thread, NULL);
    r->poll_result = p.result;
    r->poll_errno = p.error;
}

int sw_test_fork_and_capture(sw_test_fork_result *result, uint8_t *stack, size_t stack_capacity,
                             unsigned timeout_ms) {
    memset(result, 0, sizeof *result);
    size_t bytes = sizeof *result + stack_capacity;
    // Shared with the child: it writes its findings and the stack copy here.
    uint8_t *area = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) return -errno;
    memset(area, 0, sizeof *result);
    pid_t pid = fork();
    if (pid < 0) {
        int err = errno;
        munmap(area, bytes);
        result->failed_step = SW_TEST_FORK_STEP_FORK;
        result->failed_errno = err;
        return -err;
    }
    if (pid == 0) {
        child((sw_test_fork_result *)area, area + sizeof *result, stack_capacity);
        _exit(0);
    }
    int status = 0, waited = 0;
    pid_t got;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0 && waited < (int)timeout_ms) {
        pause_ms(1);  // bounded wait for the child's exit
        waited++;
    }
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    memcpy(result, area, sizeof *result);
    result->child = pid;
    if (result->record.stack_size <= stack_capacity) memcpy(stack, area + sizeof *result, result->record.stack_size);
    munmap(area, bytes);
    if (!result->failed_step && (got != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
        result->failed_step = SW_TEST_FORK_STEP_EXIT;
        result->failed_errno = got == 0 ? ETIMEDOUT : ECHILD;
    }
    return result->failed_step ? -result->failed_errno : 0;
}
typedef struct tracing {
    pid_t pid;
    unsigned timeout_ms;
    _Atomic int seized;  // 0 until the seize was tried, then 1 or -errno
} tracing;

// 'Z' once the process is a zombie (or gone), else its state letter.
static char process_state(pid_t pid) {
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 'Z';
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return 'Z';
    text[n] = 0;
    char *end = strrchr(text, ')');  // the command name may hold spaces
    return end && end[1] == ' ' ? end[2] : '?';
}

static void *trace_until_exit(void *argument) {
    tracing *t = argument;
    pid_t pid = t->pid;
    unsigned timeout_ms = t->timeout_ms;
    int seized = ptrace(PTRACE_SEIZE, pid, NULL, (void *)0) == 0 ? 1 : -errno;
    atomic_store(&t->seized, seized);  // `t` belongs to the caller from here on
    if (seized < 0) return NULL;
    for (unsigned waited = 0; waited < timeout_ms && process_state(pid) != 'Z'; waited++) pause_ms(1);
    return NULL;  // this thread's exit detaches the tracee
}

int sw_test_trace_until_exit(pid_t pid, unsigned timeout_ms) {
    tracing t = {.pid = pid, .timeout_ms = timeout_ms};
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&thread, &attributes, trace_until_exit, &t);
    pthread_attr_destroy(&attributes);
    if (err != 0) return -err;
    int seized;
    while ((seized = atomic_load(&t.seized)) == 0) pause_ms(1);
    return seized < 0 ? seized : 0;
}
#endif
