// The capture helper (see sw_capture_helper.h): the parent's request side, and the helper's loop, which runs
// in a cloned child of a multithreaded process and therefore uses raw system calls only.
#ifdef __linux__
#include "sw_capture_helper.h"
#include "sw_ptrace_stop.h"
#include "sw_registers.h"
#include "sw_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_STACK_BYTES 65536u
// The helper runs on another CPU than the thread's, when there is one. For a running thread it spins there for the
// stop during the first SPIN_NS (a thread running in user space stops on its own CPU within microseconds, and a
// spinning helper sees it at once), then polls every POLL_SLEEP_NS. For a sleeping thread, which the interrupt wakes
// and which may be placed on the helper's CPU to reach its stop, and on the thread's own CPU (its only one), it
// yields between polls for SPIN_NS instead, so that the thread gets the CPU it needs; microsecond sleeps there let the
// helper's virtual CPU halt and resume late (sw_ptrace.c has the figures). Measured from the thread's side, a helper
// on the thread's CPU paused it about 4x longer: the thread waits for its wake-ups twice.
#define SPIN_NS 300000ull
#define POLL_SLEEP_NS 20000L
// How often an idle helper checks that its parent still exists.
#define PARENT_CHECK_NS 250000000L
// Beyond its own stop timeout, how long the helper may take to answer before it is presumed stuck.
#define ANSWER_MARGIN_NS 2000000000ull
#define HELPER_STACK_BYTES (64u * 1024u)

enum { CMD_CAPTURE = 1, CMD_EXIT = 2 };

// The request channel, in memory the helper shares (CLONE_VM). The parent writes a request, bumps
// `request_seq` and writes a byte to the wake-up pipe; the helper answers and sets `done_seq` to it, and
// wakes the parent's futex wait.
typedef struct channel {
    _Atomic uint32_t request_seq;
    _Atomic uint32_t done_seq;
    /// Nonzero once the helper is about to exit (after a stop timeout or an exit request).
    _Atomic uint32_t exiting;
    /// This process, and the wake-up pipe: a byte per request; EOF tells the helper its parent is gone.
    pid_t parent;
    int wake_read, wake_write;
    int command;
    pid_t tid;
    /// What the requester read just before waking the helper: the thread's state and CPU, its CPU time and when
    /// that was read (sw_stop_task_run_ns; the helper reads nothing from /proc while it holds the thread's CPU).
    char state;
    int cpu;
    uint64_t run_ns, run_read_at_ns;
    uint64_t stack_low, stack_high, timeout_ns;
    size_t capacity;
    sw_ptrace_record record;
    uint8_t stack[];
} channel;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static channel *shared;
static size_t room;
static _Atomic pid_t helper;
static void *helper_stack;
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;
/// The CPUs the helper may run on (the cloning thread's), and the one it is kept off now (-1: none).
static cpu_set_t helper_allowed;
static int helper_avoids = -1;

// System calls return -errno and never touch errno (sw_raw_syscall): the helper shares this address space and
// the TLS of the thread that created it, so glibc's syscall() (which sets errno) would write into that
// thread's errno behind its back.
#define RAW(n, a, b, c, d, e) sw_raw_syscall((long)(n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

// MARK: The helper (raw system calls only)

static void fail(sw_ptrace_record *r, sw_ptrace_step step, long result) {
    r->failed_step = step;
    r->failed_errno = (int)-result;
}

// Waits for the ptrace stop of thread `tid` of process `pid`. Returns 0 when stopped (and the signal a
// signal-delivery-stop would deliver in *signal), -ETIMEDOUT at the deadline, -EAGAIN as soon as the thread
// cannot stop soon (in state D, or running inside a system call: sw_ptrace_stop_hopeless; the reason goes to
// *unstopped), -ESRCH if the thread is gone.
static int await_stop(pid_t pid, pid_t tid, uint64_t start, uint64_t timeout_ns, char state_at_seize,
                      uint64_t run_at_interrupt, int spin, int *signal, int *unstopped) {
    for (int checked = 0;; checked = 1) {
        int status = 0;
        long got = RAW(SYS_wait4, tid, &status, __WALL | WNOHANG, 0, 0);
        if (got == tid) {
            if (!WIFSTOPPED(status)) return -ESRCH;  // exited while seized
            // Our interrupt or a group-stop is a PTRACE_EVENT_STOP; otherwise a signal-delivery-stop, whose
            // signal is passed on at detach.
            *signal = (status >> 16) == PTRACE_EVENT_STOP ? 0 : WSTOPSIG(status);
            return 0;
        }
        if (got < 0 && got != -EINTR) return -ESRCH;
        uint64_t now = sw_monotonic_ns();
        if (now - start > SPIN_NS && checked) {
            // Past the time a thread in user space takes to stop. Looked at once more first (it may have
            // stopped since the last wait4), then released if it cannot stop soon.
            int hopeless = sw_ptrace_stop_hopeless(pid, tid, state_at_seize, run_at_interrupt);
            if (hopeless != SW_PTRACE_STOPPED) {
                got = RAW(SYS_wait4, tid, &status, __WALL | WNOHANG, 0, 0);
                if (got == tid && WIFSTOPPED(status)) {
                    *signal = (status >> 16) == PTRACE_EVENT_STOP ? 0 : WSTOPSIG(status);
                    return 0;
                }
                if (got == tid) return -ESRCH;
                *unstopped = hopeless;
                return -EAGAIN;
            }
        }
        if (now - start >= timeout_ns) {
            *unstopped = SW_PTRACE_UNSTOPPED_TIMEOUT;
            return -ETIMEDOUT;
        }
        // Spin at first for a running thread on another CPU; otherwise yield between polls: it may need this CPU.
        if (now - start <= SPIN_NS) {
            if (!spin) RAW(SYS_sched_yield, 0, 0, 0, 0, 0);
            continue;
        }
        struct timespec pause = {0, POLL_SLEEP_NS};
        RAW(SYS_nanosleep, &pause, 0, 0, 0, 0);
    }
}

// One capture. Returns 1 if the helper must exit afterwards (a seized thread that never stopped: only the
// tracer's exit releases it).
static int capture(channel *c) {
    sw_ptrace_record *r = &c->record;
    memset(r, 0, sizeof *r);  // a plain store loop: async-signal-safe
    r->stop_syscall = -1;
    // In uninterruptible sleep: no stop before its call ends, so no seize (it would only show as traced).
    char state_at_seize = c->state;
    r->target_cpu = c->cpu;
    if (state_at_seize == 'D') {
        r->unstopped = SW_PTRACE_UNSTOPPED_UNINTERRUPTIBLE;
        fail(r, SW_PTRACE_STEP_STOP, -EAGAIN);
        return 0;
    }
    long rc = RAW(SYS_ptrace, PTRACE_SEIZE, c->tid, 0, 0, 0);
    if (rc != 0) {
        fail(r, SW_PTRACE_STEP_SEIZE, rc);
        return 0;
    }
    r->seized = 1;
    uint64_t start = sw_monotonic_ns();
    // CPU time grows no faster than the clock: the figure read before the wake-up, plus the time since, bounds
    // the figure at the interrupt from above, so the in-kernel test (sw_ptrace_stop_hopeless) stays conservative.
    uint64_t run_at_interrupt = c->run_ns == UINT64_MAX ? UINT64_MAX : c->run_ns + (start - c->run_read_at_ns);
    unsigned cpu = 0;
    int other_cpu = RAW(SYS_getcpu, &cpu, 0, 0, 0, 0) == 0 && c->cpu >= 0 && (int)cpu != c->cpu;
    r->tracer_cpu = (int)cpu;
    r->other_cpu = other_cpu;
    rc = RAW(SYS_ptrace, PTRACE_INTERRUPT, c->tid, 0, 0, 0);
    if (rc != 0) {
        fail(r, SW_PTRACE_STEP_INTERRUPT, rc);
        return 1;  // seized but not stopped: not detachable, the helper's exit detaches
    }
    int pending = 0;
    // Spin only for a running thread: a sleeping one, woken by the interrupt, may be placed on this CPU to reach its
    // stop, and must find it free.
    int spin = other_cpu && state_at_seize == 'R';
    int stopped = await_stop(c->parent, c->tid, start, c->timeout_ns, state_at_seize, run_at_interrupt, spin, &pending,
                             &r->unstopped);
    if (stopped != 0) {
        fail(r, SW_PTRACE_STEP_STOP, stopped);
        return stopped == -ETIMEDOUT || stopped == -EAGAIN;  // seized but not stopped: only an exit releases it
    }
    r->stopped_at_ns = sw_monotonic_ns();
    r->stop_wait_ns = r->stopped_at_ns - start;
    struct user_regs_struct regs;
    rc = RAW(SYS_ptrace, PTRACE_GETREGS, c->tid, 0, &regs, 0);
    if (rc != 0) {
        fail(r, SW_PTRACE_STEP_GETREGS, rc);
    } else {
        sw_registers_from_user_regs(&regs, r->registers);
        r->stack_pointer = regs.rsp;
        r->stop_syscall = (long long)regs.orig_rax;
        r->pending_signal = pending;
        // A call the stop alone cut short runs again after the detach: no EINTR (sw_ptrace.h).
        if (sw_ptrace_restart_cut_short_call(regs.orig_rax, &regs.rax, pending) &&
            RAW(SYS_ptrace, PTRACE_SETREGS, c->tid, 0, &regs, 0) == 0)
            r->restarted_call = 1;
        r->registers_at_ns = sw_monotonic_ns();
        uint64_t high = c->stack_high;
        size_t length = c->capacity;
        // From the red zone up (SW_PTRACE_RED_ZONE_BYTES), unless that leaves the known stack.
        uint64_t base = regs.rsp - SW_PTRACE_RED_ZONE_BYTES;
        if (c->stack_low < c->stack_high && regs.rsp >= c->stack_low && regs.rsp < c->stack_high) {
            if (regs.rsp - c->stack_low < SW_PTRACE_RED_ZONE_BYTES) base = regs.rsp;
            if (high - base < length) length = (size_t)(high - base);
            else r->truncated = 1;
            r->stack_low = c->stack_low;
            r->stack_high = c->stack_high;
        }
        struct iovec local = {c->stack, length};
        struct iovec remote = {(void *)(uintptr_t)base, length};
        // process_vm_readv rather than memcpy: it stops at an unmapped page instead of faulting.
        long got = RAW(SYS_process_vm_readv, c->parent, &local, 1, &remote, 1);  // flags 0
        if (got <= 0 && base != regs.rsp) {  // the red zone's page unmapped (bounds unknown): from SP
            base = regs.rsp;
            remote.iov_base = (void *)(uintptr_t)base;
            got = RAW(SYS_process_vm_readv, c->parent, &local, 1, &remote, 1);
        }
        r->stack_pointer = base;
        if (got < 0) fail(r, SW_PTRACE_STEP_READ_STACK, got);
        else r->stack_size = (size_t)got;
        if (r->stack_high == 0 && got > 0) {
            r->stack_low = base;
            r->stack_high = base + (uint64_t)got;
        }
        r->stack_read_at_ns = sw_monotonic_ns();
    }
    rc = RAW(SYS_ptrace, PTRACE_DETACH, c->tid, 0, pending, 0);
    uint64_t detached = sw_monotonic_ns();
    r->pause_ns = detached - start;
    if (rc != 0) {
        fail(r, SW_PTRACE_STEP_DETACH, rc);
        return 1;  // exiting detaches
    }
    r->detached_at_ns = detached;
    return 0;
}

// Closes every descriptor the helper inherited but `keep`, so it holds no socket, pipe or tty of the
// application open (a peer would otherwise never see EOF, a port stay bound).
static void close_inherited_files(int keep) {
    if (keep > 0) RAW(SYS_close_range, 0, keep - 1, 0, 0, 0);
    if (RAW(SYS_close_range, keep + 1, ~0u, 0, 0, 0) == 0) return;
    for (int fd = keep + 1; fd < 65536; fd++) RAW(SYS_close, fd, 0, 0, 0, 0);  // kernels before 5.9
}

// Waits for a request (a byte on the wake-up pipe) or a periodic check. Returns 0 to go on, -1 when the
// parent is gone: EOF (its write end closed on exit or exec: O_CLOEXEC) or getppid() changed.
static int wait_for_request(channel *c) {
    struct pollfd pfd = {.fd = c->wake_read, .events = POLLIN};
    struct timespec period = {0, PARENT_CHECK_NS};
    long ready = RAW(SYS_ppoll, &pfd, 1, &period, 0, 0);
    if (RAW(SYS_getppid, 0, 0, 0, 0, 0) != c->parent) return -1;
    if (ready > 0) {
        char drain[64];
        long got = RAW(SYS_read, c->wake_read, drain, sizeof drain, 0, 0);
        if (got == 0) return -1;
    }
    return 0;
}

// The helper's whole life. It shares the parent's memory (CLONE_VM), so it runs on its own stack, calls
// no libc function that touches errno or TLS (raw system calls, clock_gettime's vDSO, memset), and never
// allocates.
static int helper_main(void *argument) {
    channel *c = argument;
    close_inherited_files(c->wake_read);
    RAW(SYS_prctl, PR_SET_NAME, "stallwatch-cap", 0, 0, 0);
    // Its short sleeps while it waits for a stop end on time (the default slack is 50 us).
    RAW(SYS_prctl, PR_SET_TIMERSLACK, 1, 0, 0, 0);
    // The highest priority the machine allows (root, CAP_SYS_NICE or RLIMIT_NICE; else it stays as it is): on a busy
    // machine it gets its CPU as soon as the thread stops, and releases it.
    for (int nice = -20; nice < 0; nice += 5)
        if (RAW(SYS_setpriority, PRIO_PROCESS, 0, nice, 0, 0) == 0) break;
    uint32_t served = atomic_load(&c->done_seq);
    while (wait_for_request(c) == 0) {
        uint32_t seq = atomic_load_explicit(&c->request_seq, memory_order_acquire);
        if (seq == served) continue;
        int leave = c->command == CMD_EXIT || capture(c);
        if (leave) atomic_store(&c->exiting, 1);
        served = seq;
        atomic_store_explicit(&c->done_seq, seq, memory_order_release);
        sw_futex(&c->done_seq, FUTEX_WAKE, 1, NULL);
        if (leave) break;
    }
    atomic_store(&c->exiting, 1);
    RAW(SYS_exit, 0, 0, 0, 0, 0);
    return 0;
}

// MARK: The parent (called with `lock` held)

static void reap(pid_t pid) {
    int status;
    while (waitpid(pid, &status, __WALL) < 0 && errno == EINTR) {}
}

static void kill_helper(void) {
    pid_t pid = atomic_exchange(&helper, 0);
    if (pid > 0) {
        kill(pid, SIGKILL);
        reap(pid);
    }
}

// In the child of a fork() without exec: the helper, the request channel and the wake-up pipe are the
// parent's. The child's copies are dropped (the channel and helper stack are private copies, the pipe's ends
// duplicates), never the parent's helper itself: it keeps serving the parent, and still sees EOF when the
// parent exits, since the child holds no write end of its pipe any more. The child's first capture clones
// a helper of its own. The lock is re-initialized: a thread of the parent that held it (mid-capture) does
// not exist here. Runs in the child right after fork: close, munmap and plain stores only.
static void forget_parents_helper(void) {
    static const pthread_mutex_t unlocked = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&lock, &unlocked, sizeof lock);
    atomic_store(&helper, 0);
    if (shared) {
        close(shared->wake_read);
        close(shared->wake_write);
        munmap(shared, sizeof(channel) + room);
        shared = NULL;
    }
    if (helper_stack) {
        munmap(helper_stack, HELPER_STACK_BYTES);
        helper_stack = NULL;
    }
}

static void install_fork_handler(void) { pthread_atfork(NULL, NULL, forget_parents_helper); }

static int prepare(size_t stack_bytes) {
    pthread_once(&fork_handler_once, install_fork_handler);
    // Fixed by the first successful start; a forked child keeps its parent's choice.
    if (!room) room = stack_bytes ? stack_bytes : DEFAULT_STACK_BYTES;
    void *p = mmap(NULL, sizeof(channel) + room, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -errno;
    helper_stack = mmap(NULL, HELPER_STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
                        -1, 0);
    if (helper_stack == MAP_FAILED) {
        int err = errno;
        munmap(p, sizeof(channel) + room);
        return -err;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        int err = errno;
        munmap(p, sizeof(channel) + room);
        munmap(helper_stack, HELPER_STACK_BYTES);
        return -err;
    }
    // Every page the helper writes while a thread is stopped is touched now: a first touch is a page fault (tens of
    // microseconds each on a virtual machine whose host has not backed the page yet), which made a new helper's
    // first captures pause the thread for milliseconds.
    memset(p, 0, sizeof(channel) + room);
    memset((char *)helper_stack + HELPER_STACK_BYTES - 16384, 0, 16384);
    shared = p;
    shared->wake_read = fds[0];
    shared->wake_write = fds[1];
    shared->parent = getpid();
    return 0;
}

static int spawn(size_t stack_bytes) {
    if (!shared) {
        int prepared = prepare(stack_bytes);
        if (prepared < 0) return prepared;
    }
    atomic_store(&shared->exiting, 0);
    atomic_store(&shared->done_seq, atomic_load(&shared->request_seq));
    // Every signal blocked across the clone: the child inherits the mask, so no application handler runs
    // in it, ever. SIGKILL still ends it.
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    // CLONE_VM: no copy of the address space (a copy would make every page the service writes afterwards a
    // copy-on-write fault, and keep the old copy alive). No CLONE_THREAD: a separate process, so it may
    // ptrace us. Termination signal 0: no SIGCHLD, invisible to wait() and waitpid(-1).
    int pid = clone(helper_main, (char *)helper_stack + HELPER_STACK_BYTES, CLONE_VM, shared);
    int err = errno;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (pid < 0) return -err;
    prctl(PR_SET_PTRACER, (unsigned long)pid, 0, 0, 0);  // EINVAL without Yama: nothing to allow
    if (sched_getaffinity(pid, sizeof helper_allowed, &helper_allowed) != 0) CPU_ZERO(&helper_allowed);
    helper_avoids = -1;
    atomic_store(&helper, (pid_t)pid);
    return pid;
}

// Reaps a helper that exited on its own (after a stop timeout), so the next request starts a new one.
static void reap_if_exited(void) {
    pid_t pid = atomic_load(&helper);
    if (pid <= 0 || !atomic_load(&shared->exiting)) return;
    atomic_store(&helper, 0);
    reap(pid);
}

int sw_helper_start(size_t stack_bytes) {
    pthread_mutex_lock(&lock);
    if (shared) reap_if_exited();
    int result = atomic_load(&helper);
    if (result <= 0) result = spawn(stack_bytes);
    pthread_mutex_unlock(&lock);
    return result;
}

pid_t sw_helper_pid(void) { return atomic_load(&helper); }

size_t sw_helper_stack_bytes(void) { return room; }

// Sends the prepared request and waits for its answer; returns 0, or -ETIMEDOUT if the helper did not answer in time
// (it is then killed). The requester sleeps meanwhile: its CPU is the helper's or the thread's.
static int exchange(uint64_t timeout_ns) {
    uint32_t seq = atomic_load(&shared->request_seq) + 1;
    atomic_store_explicit(&shared->request_seq, seq, memory_order_release);
    char byte = 1;
    (void)!write(shared->wake_write, &byte, 1);  // EAGAIN (full): the helper's periodic check finds it
    uint64_t deadline = sw_monotonic_ns() + timeout_ns + ANSWER_MARGIN_NS;
    for (;;) {
        uint32_t done = atomic_load_explicit(&shared->done_seq, memory_order_acquire);
        if (done == seq) return 0;
        uint64_t now = sw_monotonic_ns();
        if (now >= deadline) break;
        uint64_t left = deadline - now;
        struct timespec ts = {(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
        sw_futex(&shared->done_seq, FUTEX_WAIT, done, &ts);
    }
    kill_helper();  // a killed tracer leaves its tracee running
    return -ETIMEDOUT;
}

// Keeps the helper off `cpu` (the thread's) when it may run elsewhere; else lets it run on every CPU it may.
static void place_helper(int cpu) {
    pid_t pid = atomic_load(&helper);
    int avoid = cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &helper_allowed) && CPU_COUNT(&helper_allowed) > 1
                    ? cpu
                    : -1;
    if (pid <= 0 || avoid == helper_avoids || CPU_COUNT(&helper_allowed) == 0) return;
    cpu_set_t mask = helper_allowed;
    if (avoid >= 0) CPU_CLR(avoid, &mask);
    if (sched_setaffinity(pid, sizeof mask, &mask) == 0) helper_avoids = avoid;
}

int sw_helper_capture(pid_t tid, uint64_t stack_low, uint64_t stack_high, uint64_t timeout_ns,
                      sw_ptrace_record *record, uint8_t *stack_out, size_t stack_capacity) {
    memset(record, 0, sizeof *record);
    pthread_mutex_lock(&lock);
    if (shared) reap_if_exited();
    int started = atomic_load(&helper) > 0 ? 0 : spawn(0);
    if (started < 0) {
        pthread_mutex_unlock(&lock);
        record->failed_step = SW_PTRACE_STEP_THREAD;
        record->failed_errno = -started;
        return started;
    }
    shared->command = CMD_CAPTURE;
    shared->tid = tid;
    // Read here, before the helper wakes up: on the thread's CPU, everything the helper does is part of the pause.
    shared->state = sw_stop_task_state_cpu(shared->parent, tid, &shared->cpu);
    shared->run_ns = shared->state == 'R' ? sw_stop_task_run_ns(shared->parent, tid) : UINT64_MAX;
    shared->run_read_at_ns = sw_monotonic_ns();
    place_helper(shared->cpu);
    shared->stack_low = stack_low;
    shared->stack_high = stack_high;
    shared->timeout_ns = timeout_ns;
    shared->capacity = stack_capacity < room ? stack_capacity : room;
    int result = exchange(timeout_ns);
    if (result == 0) {
        *record = shared->record;
        if (record->stack_size) memcpy(stack_out, shared->stack, record->stack_size);
        result = record->failed_step == SW_PTRACE_STEP_NONE ? 0 : -record->failed_errno;
    } else {
        record->failed_step = SW_PTRACE_STEP_THREAD;
        record->failed_errno = ETIMEDOUT;
    }
    reap_if_exited();
    pthread_mutex_unlock(&lock);
    return result;
}

void sw_helper_stop(void) {
    pthread_mutex_lock(&lock);
    if (shared && atomic_load(&helper) > 0) {
        shared->command = CMD_EXIT;
        if (exchange(0) == 0) reap_if_exited();
    }
    pthread_mutex_unlock(&lock);
}
#endif
