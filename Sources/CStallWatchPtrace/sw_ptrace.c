// Sidecar capture through ptrace (see sw_ptrace.h): seize, interrupt, registers, one stack read, detach.
#ifdef __linux__
#ifndef __x86_64__
#error "sw_ptrace.c reads x86_64 struct user_regs_struct with PTRACE_GETREGS; a port needs its architecture's register set (PTRACE_GETREGSET with NT_PRSTATUS) mapped to the unwinder's register numbering"
#endif
#include "sw_ptrace.h"
#include "sw_ptrace_stop.h"
#include "sw_registers.h"
#include "sw_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <time.h>
#include <unistd.h>

// Where the tracer waits for the stop: on another CPU than the target's. For a running target it spins there for
// SPIN_NS (a thread running in user space stops on its own CPU within microseconds, and a spinning tracer sees it at
// once, where a sleeping one would first have to be woken), then polls every POLL_SLEEP_NS. For a sleeping target,
// which the interrupt wakes and which may be placed on the tracer's CPU to reach its stop, and on the target's own
// CPU (its only one), it yields between polls for SPIN_NS instead, so that the target gets the CPU it needs. It does
// not sleep there: with 3 us sleeps a target asleep in nanosleep was paused 710 us (median) in half the bench runs,
// against 38-53 us yielding (most likely the sleeping tracer's virtual CPU halting, resumed late by the host).
// Measured from the target's side (a clock-spinning thread), the tracer on the target's CPU paused it 200 us
// (median) against 40-50 us from another CPU: the target then waits for the tracer's wake-ups twice.
#define SPIN_NS 300000ull
#define POLL_SLEEP_NS 20000L

typedef sw_ptrace_range range;

typedef struct job {
    pid_t pid, tid;
    uint64_t timeout_ns;
    uint8_t *stack_out;
    size_t stack_capacity;
    sw_ptrace_record *record;
    const range *maps;
    size_t map_count;
    int result;
    /// /proc/PID/task/TID/schedstat (or -1), and the target's run_delay and CPU time just before the interrupt.
    int stats_fd;
    uint64_t delay_at_interrupt, run_at_interrupt, interrupt_at_ns;
    /// The target's count of timeslices while it was stopped (read by the tracer before the detach), and whether
    /// it was read: its next timeslice is its return to a CPU after the detach.
    uint64_t slices_at_stop;
    int have_slices_at_stop;
    /// The thread's state letter and CPU, read before the tracer starts (on the target's CPU, everything the
    /// tracer does is part of the pause), and when its CPU time was read.
    char state_at_seize;
    int target_cpu;
    uint64_t run_read_at_ns;
    /// Nonzero if the tracer may spin while it waits: it runs on another CPU than the target's.
    int spin;
} job;

// Reads the address ranges of /proc/PID/maps into a malloc'd array. Returns the count, or 0.
size_t sw_ptrace_read_maps(pid_t pid, range **out) {
    *out = NULL;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t size = 0, capacity = 1 << 16;
    char *text = malloc(capacity + 1);
    for (ssize_t n; text; size += (size_t)n) {
        if (size == capacity) {
            char *bigger = realloc(text, (capacity *= 2) + 1);
            if (!bigger) break;
            text = bigger;
        }
        do n = read(fd, text + size, capacity - size);
        while (n < 0 && errno == EINTR);
        if (n <= 0) break;
    }
    close(fd);
    if (!text) return 0;
    text[size] = 0;
    size_t count = 0, lines = 1;
    for (size_t i = 0; i < size; i++) lines += text[i] == '\n';
    range *ranges = malloc(lines * sizeof *ranges);
    for (char *line = text; ranges && line && *line;) {
        char *end;
        uint64_t low = strtoull(line, &end, 16);
        if (*end == '-') ranges[count++] = (range){low, strtoull(end + 1, NULL, 16)};
        line = strchr(line, '\n');
        if (line) line++;
    }
    free(text);
    *out = ranges;
    return ranges ? count : 0;
}

static const range *find_range(const range *ranges, size_t count, uint64_t address) {
    for (size_t i = 0; i < count; i++)
        if (address >= ranges[i].low && address < ranges[i].high) return &ranges[i];
    return NULL;
}

static int fail(job *j, sw_ptrace_step step, int err) {
    j->record->failed_step = step;
    j->record->failed_errno = err;
    return j->result = -err;
}

// Polls PTRACE_GETREGS, which fails with ESRCH until the tracee is in a ptrace-stop. Returns 0 when
// stopped, else -errno (ETIMEDOUT: still running at the deadline; EAGAIN: it cannot stop soon, see
// sw_ptrace_stop_hopeless, with the reason in `record->unstopped`; ESRCH: the thread is gone).
static int await_stop(job *j, uint64_t start, struct user_regs_struct *regs) {
    uint64_t deadline = start + j->timeout_ns;
    for (;;) {
        if (ptrace(PTRACE_GETREGS, j->tid, NULL, regs) == 0) return 0;
        if (errno != ESRCH) return -errno;
        uint64_t now = sw_monotonic_ns();
        int spinning = now - start <= SPIN_NS;
        // GETREGS says ESRCH for a running tracee and for a dead one alike: tell them apart.
        if ((!spinning || now >= deadline) && syscall(SYS_tgkill, j->pid, j->tid, 0) != 0 && errno == ESRCH)
            return -ESRCH;
        if (!spinning) {
            // Past the time any thread in user space takes to stop: one that cannot stop is released now.
            int hopeless = sw_ptrace_stop_hopeless(j->pid, j->tid, j->state_at_seize, j->run_at_interrupt);
            if (hopeless != SW_PTRACE_STOPPED) {
                if (ptrace(PTRACE_GETREGS, j->tid, NULL, regs) == 0) return 0;  // it stopped meanwhile
                j->record->unstopped = hopeless;
                return -EAGAIN;
            }
        }
        if (now >= deadline) {
            j->record->unstopped = SW_PTRACE_UNSTOPPED_TIMEOUT;
            return -ETIMEDOUT;
        }
        // Spin at first for a running target on another CPU; otherwise yield between polls: it may need this CPU.
        if (j->spin && spinning) continue;
        if (spinning) sched_yield();
        else nanosleep(&(struct timespec){0, POLL_SLEEP_NS}, NULL);
    }
}

// The signal a signal-delivery-stop would have delivered (to be passed on at detach), or 0 for our
// interrupt's PTRACE_EVENT_STOP or a group-stop.
static int pending_signal(pid_t tid) {
    siginfo_t si;
    if (ptrace(PTRACE_GETSIGINFO, tid, NULL, &si) != 0) return 0;  // EINVAL: group-stop
    if ((si.si_code >> 8) == PTRACE_EVENT_STOP) return 0;
    return si.si_signo;
}

static void read_stack(job *j) {
    sw_ptrace_record *r = j->record;
    const range *mapping = find_range(j->maps, j->map_count, r->stack_pointer);
    range *fresh = NULL;
    if (!mapping) {  // a mapping newer than our snapshot (a thread created since): look again, stopped
        size_t n = sw_ptrace_read_maps(j->pid, &fresh);
        mapping = find_range(fresh, n, r->stack_pointer);
    }
    if (mapping) {
        r->stack_low = mapping->low;
        r->stack_high = mapping->high;
        // From the red zone up (SW_PTRACE_RED_ZONE_BYTES), unless that leaves the mapping.
        if (r->stack_pointer - mapping->low >= SW_PTRACE_RED_ZONE_BYTES) r->stack_pointer -= SW_PTRACE_RED_ZONE_BYTES;
        size_t length = (size_t)(mapping->high - r->stack_pointer);
        if (length > j->stack_capacity) {
            length = j->stack_capacity;
            r->truncated = 1;
        }
        struct iovec local = {j->stack_out, length};
        struct iovec remote = {(void *)(uintptr_t)r->stack_pointer, length};
        ssize_t got = process_vm_readv(j->pid, &local, 1, &remote, 1, 0);
        if (got < 0) fail(j, SW_PTRACE_STEP_READ_STACK, errno);
        else r->stack_size = (size_t)got;
    } else {
        fail(j, SW_PTRACE_STEP_READ_STACK, EFAULT);
    }
    free(fresh);
}

// /proc/PID/task/TID/schedstat: time on CPU, time runnable but waiting (run_delay), timeslices run.
typedef struct schedstat {
    uint64_t run_ns, delay_ns, slices;
} schedstat;

static int read_schedstat(int fd, schedstat *out) {
    char text[128];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    if (n <= 0) return -1;
    text[n] = 0;
    unsigned long long run, delay, slices;
    if (sscanf(text, "%llu %llu %llu", &run, &delay, &slices) != 3) return -1;
    *out = (schedstat){run, delay, slices};
    return 0;
}

// The tracer. Returning without PTRACE_DETACH is safe only before the stop: this thread's exit makes
// the kernel detach the tracee and clear the pending interrupt.
// The tracer's priority while it holds a thread: the highest the machine allows (root, CAP_SYS_NICE or RLIMIT_NICE),
// so that on a busy machine it gets its CPU as soon as the thread stops, and releases it; back to its own after.
static int raise_priority(void) {
    int before = getpriority(PRIO_PROCESS, 0);
    for (int nice = -20; nice < before; nice += 5)
        if (setpriority(PRIO_PROCESS, 0, nice) == 0) return before;  // this thread only, on Linux
    return 100;
}

static void *tracer_main_steps(job *j) {
    sw_ptrace_record *r = j->record;
    if (ptrace(PTRACE_SEIZE, j->tid, NULL, (void *)0) != 0) {  // no options: no extra stops to handle
        fail(j, SW_PTRACE_STEP_SEIZE, errno);
        return NULL;
    }
    r->seized = 1;
    uint64_t start = sw_monotonic_ns();
    j->interrupt_at_ns = start;
    // CPU time grows no faster than the clock: the figure read before the tracer started, plus the time since,
    // bounds the figure at the interrupt from above, so the in-kernel test (sw_ptrace_stop_hopeless) stays
    // conservative.
    if (j->run_at_interrupt != UINT64_MAX) j->run_at_interrupt += start - j->run_read_at_ns;
    int cpu = sched_getcpu();
    r->tracer_cpu = cpu;
    // Spin only for a running target: a sleeping one, woken by the interrupt, may be placed on this CPU to reach its
    // stop, and must find it free.
    j->spin = j->state_at_seize == 'R' && cpu >= 0 && j->target_cpu >= 0 && cpu != j->target_cpu;
    if (ptrace(PTRACE_INTERRUPT, j->tid, NULL, NULL) != 0) {
        fail(j, SW_PTRACE_STEP_INTERRUPT, errno);
        return NULL;  // not stopped, so not detachable: thread exit detaches
    }
    struct user_regs_struct regs;
    int stopped = await_stop(j, start, &regs);
    if (stopped != 0) {
        int not_stopping = stopped == -ETIMEDOUT || stopped == -EAGAIN || stopped == -ESRCH;
        fail(j, not_stopping ? SW_PTRACE_STEP_STOP : SW_PTRACE_STEP_GETREGS, -stopped);
        return NULL;  // not stopped (or gone): thread exit detaches
    }
    r->stopped_at_ns = sw_monotonic_ns();
    r->stop_wait_ns = r->stopped_at_ns - start;
    r->stop_syscall = (long long)regs.orig_rax;
    sw_registers_from_user_regs(&regs, r->registers);
    r->stack_pointer = regs.rsp;
    r->pending_signal = pending_signal(j->tid);
    // A call the stop alone cut short runs again after the detach: no EINTR (sw_ptrace.h).
    if (sw_ptrace_restart_cut_short_call(regs.orig_rax, &regs.rax, r->pending_signal) &&
        ptrace(PTRACE_SETREGS, j->tid, NULL, &regs) == 0)
        r->restarted_call = 1;
    r->registers_at_ns = sw_monotonic_ns();
    read_stack(j);
    r->stack_read_at_ns = sw_monotonic_ns();
    // Its timeslices so far, read while it is stopped: a wait for a CPU or a preemption between the caller's first
    // reading and the stop added some already, so only a slice past these is its return after the detach.
    schedstat at_stop;
    if (j->stats_fd >= 0 && read_schedstat(j->stats_fd, &at_stop) == 0) {
        j->slices_at_stop = at_stop.slices;
        j->have_slices_at_stop = 1;
    }
    if (ptrace(PTRACE_DETACH, j->tid, NULL, (void *)(intptr_t)r->pending_signal) != 0)
        fail(j, SW_PTRACE_STEP_DETACH, errno);  // thread exit still detaches
    r->detached_at_ns = sw_monotonic_ns();
    r->pause_ns = r->detached_at_ns - start;
    return NULL;
}

static void *tracer_main(void *arg) {
    job *j = arg;
    // Its short sleeps while it waits for the stop end on time (the default slack is 50 us).
    prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
    int own = raise_priority();
    tracer_main_steps(j);
    if (own != 100) setpriority(PRIO_PROCESS, 0, own);
    return NULL;
}

// Reads /proc/PID/task/TID/<file> into text (NUL-terminated); its length, or -1 when it cannot be read.
static ssize_t read_task_file(pid_t pid, pid_t tid, const char *file, char *text, size_t capacity) {
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/%s", (int)pid, (int)tid, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, text, capacity - 1);
    close(fd);
    if (n <= 0) return -1;
    text[n] = 0;
    return n;
}

// Whether /proc/PID/task/TID/status still names a tracer (1), names none (0), or cannot be read (-1).
static int still_traced(pid_t pid, pid_t tid) {
    char text[2048];
    if (read_task_file(pid, tid, "status", text, sizeof text) < 0) return -1;
    const char *field = strstr(text, "TracerPid:");
    return field ? atoi(field + 10) != 0 : -1;
}

// After a stop that never came, the tracer thread's exit detaches the tracee, but pthread_join returns before the
// kernel gets to it (the exit clears the thread id first, then releases its tracees): wait, briefly, until the
// target is seen untraced, so no caller ever sees it traced by us after a capture.
static void await_untraced(pid_t pid, pid_t tid) {
    for (int i = 0; i < 2000 && still_traced(pid, tid) == 1; i++)
        nanosleep(&(struct timespec){0, 100000L}, NULL);
}

// The CPUs the calling thread may run on, but `cpu` (when another one is left): where the tracer runs.
static int other_cpus(int cpu, cpu_set_t *mask) {
    if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof *mask, mask) != 0) return 0;
    if (!CPU_ISSET(cpu, mask) || CPU_COUNT(mask) < 2) return 0;
    CPU_CLR(cpu, mask);
    return 1;
}

int sw_ptrace_capture_with_maps(pid_t pid, pid_t tid, uint64_t timeout_ns, uint8_t *stack_out,
                                size_t stack_capacity, const range *maps, size_t map_count,
                                sw_ptrace_record *record) {
    memset(record, 0, sizeof *record);
    record->stop_syscall = -1;
    job j = {.pid = pid, .tid = tid, .timeout_ns = timeout_ns, .stack_out = stack_out,
             .stack_capacity = stack_capacity, .record = record, .maps = maps, .map_count = map_count,
             .stats_fd = -1};
    // A thread in uninterruptible sleep cannot stop before its call ends: a seize would only make it traced
    // meanwhile (and stop it the moment the call returns). Leave it alone; /proc tells what it is in. Read here,
    // with the CPU it last ran on, before the tracer starts there.
    j.state_at_seize = sw_stop_task_state_cpu(pid, tid, &j.target_cpu);
    if (j.state_at_seize == 'D') {
        record->unstopped = SW_PTRACE_UNSTOPPED_UNINTERRUPTIBLE;
        return fail(&j, SW_PTRACE_STEP_STOP, EAGAIN);
    }
    // The target's run-queue wait is counted from here, so time it waits for a CPU this call holds counts.
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
    int stats = open(path, O_RDONLY | O_CLOEXEC);
    schedstat before = {0}, after = {0};
    int have_before = stats >= 0 && read_schedstat(stats, &before) == 0;
    j.stats_fd = have_before ? stats : -1;
    j.delay_at_interrupt = before.delay_ns;
    j.run_at_interrupt = have_before ? before.run_ns : UINT64_MAX;
    j.run_read_at_ns = sw_monotonic_ns();
    record->target_cpu = j.target_cpu;
    // The copy lands in pages touched now, not while the target is stopped: a first touch is a page fault (tens of
    // microseconds each on a virtual machine whose host has not backed the page yet; 40-80 us per 64 KiB here).
    for (size_t at = 0; at < stack_capacity; at += 4096) ((volatile uint8_t *)stack_out)[at] = 0;
    // The tracer runs on another CPU than the target's, when there is one: see SPIN_NS.
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    cpu_set_t elsewhere;
    record->other_cpu = other_cpus(j.target_cpu, &elsewhere) &&
                        pthread_attr_setaffinity_np(&attributes, sizeof elsewhere, &elsewhere) == 0;
    pthread_t thread;
    int err = pthread_create(&thread, &attributes, tracer_main, &j);
    pthread_attr_destroy(&attributes);
    if (err != 0) {
        if (stats >= 0) close(stats);
        return fail(&j, SW_PTRACE_STEP_THREAD, err);
    }
    pthread_join(thread, NULL);
    if (record->failed_step == SW_PTRACE_STEP_STOP && record->seized) await_untraced(pid, tid);
    if (have_before && record->pause_ns > 0) {
        // Stopped, then woken at the detach: once the target has run again, run_delay holds its wait for a
        // CPU. A remote wake-up (an idle CPU, a virtual CPU the host must schedule) is not in run_delay: the
        // time until the target is seen running again is counted instead when longer.
        uint64_t detached = sw_monotonic_ns(), deadline = detached + 20000000ull, resumed = 0;
        uint64_t stopped_slices = j.have_slices_at_stop ? j.slices_at_stop : before.slices;
        while (read_schedstat(stats, &after) == 0) {
            resumed = sw_monotonic_ns();
            if (after.slices > stopped_slices || resumed >= deadline) break;
            sched_yield();
        }
        if (after.slices > stopped_slices && after.delay_ns >= j.delay_at_interrupt) {
            // run_delay grows when a wait ends, by all of it: a wait that ends during the call counts whole
            // (the conservative side: the figure is never below what the target saw).
            uint64_t before_stop = j.delay_at_interrupt - before.delay_ns;
            uint64_t after_detach = after.delay_ns - j.delay_at_interrupt;
            uint64_t seen_resuming = resumed > detached ? resumed - detached : 0;
            record->run_delay_ns = before_stop + (after_detach > seen_resuming ? after_detach : seen_resuming);
        }
    }
    if (stats >= 0) close(stats);
    record->seen_pause_ns = record->pause_ns + record->run_delay_ns;
    return j.result;
}

int sw_ptrace_capture(pid_t pid, pid_t tid, uint64_t timeout_ns, uint8_t *stack_out, size_t stack_capacity,
                      sw_ptrace_record *record) {
    // Read the maps before stopping anyone: it is the slowest step and must not lengthen the pause.
    range *maps = NULL;
    size_t count = sw_ptrace_read_maps(pid, &maps);
    int result = sw_ptrace_capture_with_maps(pid, tid, timeout_ns, stack_out, stack_capacity, maps, count, record);
    free(maps);
    return result;
}
#endif
