/* A small C service whose loop gets stuck before anyone watches it, or idles until a late stall: for watching a
 * process that is already stuck when the watcher starts.
 *
 * usage: stuck_service MODE [MS]
 *   Stuck modes (MODE mutex, deadlock, pipe, sleep, spin): the epoll loop turns for a while (20 ms ticks), then
 *   gets stuck for good and prints "STUCK <CLOCK_REALTIME ns> <CPU ns> <run-queue ns>" just before (the last
 *   two: the thread's own schedstat, so a reader can tell how long it still ran or waited for a CPU after the
 *   stamp); it stays stuck until killed.
 *     mutex     a glibc mutex another thread holds forever
 *     deadlock  two glibc mutexes taken in opposite orders by the loop and a worker
 *     pipe      a blocking read of a pipe nobody writes
 *     sleep     a long nanosleep
 *     spin      a CPU spin with no system call
 *     flock     an exclusive flock on a file a child process ("lock-keeper") holds until the service dies
 *   Idle modes (MODE epoll-idle, poll-idle, cond-idle): prints READY, idles for MS ms (its own clock) in an epoll
 *   wait, a poll, or a condition wait fed by a producer thread, then one piece of work sleeps 800 ms (printing
 *   "STUCK <ns>" as it starts and "DONE" after), the loop idles 300 ms more and the program exits 0.
 *   Pipe loop (MODE pipe-loop): the loop's event source is a pipe it reads with a blocking read (a self-pipe its
 *   SIGUSR1 and SIGTERM handlers write to). Prints READY; for each SIGUSR1 it works 20 ms on the CPU, prints
 *   "WORKED", and reads again; on SIGTERM it exits 0.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t first = PTHREAD_MUTEX_INITIALIZER, second = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t both;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_ready = PTHREAD_COND_INITIALIZER;
static int queued = 0;
static int idle_ms = 3000;

static unsigned long long now_ns(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + t.tv_nsec;
}

static void stuck(void) {
    unsigned long long cpu = 0, queued_ns = 0;
    FILE *schedstat = fopen("/proc/thread-self/schedstat", "r");
    if (schedstat) {
        if (fscanf(schedstat, "%llu %llu", &cpu, &queued_ns) != 2) cpu = queued_ns = 0;
        fclose(schedstat);
    }
    printf("STUCK %llu %llu %llu\n", now_ns(CLOCK_REALTIME), cpu, queued_ns);
    fflush(stdout);
}

static void *holder(void *arg) {
    (void)arg;
    pthread_mutex_lock(&first);
    pthread_barrier_wait(&both);
    for (;;) pause();
    return NULL;
}

static void *crosser(void *arg) {
    (void)arg;
    pthread_mutex_lock(&second);
    pthread_barrier_wait(&both);
    pthread_mutex_lock(&first);
    return NULL;
}

static void *producer(void *arg) {
    (void)arg;
    usleep(idle_ms * 1000);
    pthread_mutex_lock(&queue_lock);
    queued = 1;
    pthread_cond_signal(&queue_ready);
    pthread_mutex_unlock(&queue_lock);
    usleep(1100 * 1000);
    pthread_mutex_lock(&queue_lock);
    queued = 2;
    pthread_cond_signal(&queue_ready);
    pthread_mutex_unlock(&queue_lock);
    return NULL;
}

static void get_stuck(const char *mode) {
    pthread_t thread;
    if (!strcmp(mode, "mutex")) {
        pthread_barrier_init(&both, NULL, 2);
        pthread_create(&thread, NULL, holder, NULL);
        pthread_barrier_wait(&both);
        stuck();
        pthread_mutex_lock(&first);
    } else if (!strcmp(mode, "deadlock")) {
        pthread_barrier_init(&both, NULL, 2);
        pthread_create(&thread, NULL, crosser, NULL);
        pthread_mutex_lock(&first);
        pthread_barrier_wait(&both);
        stuck();
        pthread_mutex_lock(&second);
    } else if (!strcmp(mode, "pipe")) {
        int fds[2];
        char byte;
        if (pipe(fds) != 0) exit(2);
        stuck();
        if (read(fds[0], &byte, 1) < 0) exit(2);
    } else if (!strcmp(mode, "sleep")) {
        stuck();
        sleep(3600);
    } else if (!strcmp(mode, "flock")) {
        /* A lock file another process of the service keeps locked; it dies with the service. */
        char path[] = "/tmp/stuck_service_flock_XXXXXX";
        int fd = mkstemp(path), held[2];
        if (fd < 0 || pipe(held) != 0) exit(2);
        pid_t keeper = fork();
        if (keeper < 0) exit(2);
        if (keeper == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            prctl(PR_SET_NAME, "lock-keeper");
            int own = open(path, O_RDWR);
            if (own < 0 || flock(own, LOCK_EX) != 0 || write(held[1], "h", 1) != 1) _exit(2);
            for (;;) pause();
        }
        char byte;
        if (read(held[0], &byte, 1) != 1) exit(2);
        unlink(path);
        stuck();
        flock(fd, LOCK_EX);
    } else if (!strcmp(mode, "spin")) {
        volatile unsigned long x = 0;
        stuck();
        for (;;) x = x * 7 + 3;
    }
    fprintf(stderr, "unexpectedly unstuck\n");
    exit(3);
}

/* One piece of work that takes 800 ms, once the loop has idled for idle_ms. */
static void late_work(void) {
    stuck();
    usleep(800 * 1000);
    printf("DONE\n");
    fflush(stdout);
}

static int epoll_idle(int use_poll) {
    int timer = timerfd_create(CLOCK_MONOTONIC, 0);
    struct itimerspec at = {.it_value = {.tv_sec = idle_ms / 1000, .tv_nsec = (idle_ms % 1000) * 1000000L}};
    timerfd_settime(timer, 0, &at, NULL);
    int ep = epoll_create1(0);
    struct epoll_event watch = {.events = EPOLLIN, .data.fd = timer};
    epoll_ctl(ep, EPOLL_CTL_ADD, timer, &watch);
    printf("READY\n");
    fflush(stdout);
    unsigned long long deadline = 0;
    for (;;) {
        int ready;
        if (use_poll) {
            struct pollfd p = {.fd = timer, .events = POLLIN};
            ready = poll(&p, 1, 1000);
        } else {
            struct epoll_event event;
            ready = epoll_wait(ep, &event, 1, 1000);
        }
        if (ready > 0) {
            unsigned long long expirations;
            if (read(timer, &expirations, sizeof expirations) < 0) return 2;
            late_work();
            deadline = now_ns(CLOCK_MONOTONIC) + 300000000ull;
        }
        if (deadline && now_ns(CLOCK_MONOTONIC) >= deadline) return 0;
    }
}

static int cond_idle(void) {
    pthread_t thread;
    pthread_create(&thread, NULL, producer, NULL);
    printf("READY\n");
    fflush(stdout);
    for (;;) {
        pthread_mutex_lock(&queue_lock);
        while (queued == 0) pthread_cond_wait(&queue_ready, &queue_lock);
        int job = queued;
        queued = 0;
        pthread_mutex_unlock(&queue_lock);
        if (job == 2) break;
        late_work();
    }
    pthread_join(thread, NULL);
    return 0;
}

static int wake_pipe[2];

static void on_signal(int sig) {
    char c = sig == SIGTERM ? 'q' : 'w';
    if (write(wake_pipe[1], &c, 1) < 0) _exit(2);
}

static int pipe_loop(void) {
    if (pipe(wake_pipe) != 0) return 2;
    struct sigaction action = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigemptyset(&action.sa_mask);
    sigaction(SIGUSR1, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    /* Whoever started it may have blocked them (the mask is inherited): this loop runs on them. */
    sigset_t wanted;
    sigemptyset(&wanted);
    sigaddset(&wanted, SIGUSR1);
    sigaddset(&wanted, SIGTERM);
    sigprocmask(SIG_UNBLOCK, &wanted, NULL);
    printf("READY\n");
    fflush(stdout);
    for (;;) {
        char c;
        if (read(wake_pipe[0], &c, 1) != 1) return 2;
        if (c == 'q') return 0;
        volatile unsigned long x = 0;
        unsigned long long until = now_ns(CLOCK_MONOTONIC) + 20000000ull;
        while (now_ns(CLOCK_MONOTONIC) < until) x = x * 7 + 3;
        printf("WORKED\n");
        fflush(stdout);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *mode = argv[1];
    if (argc > 2) idle_ms = atoi(argv[2]);
    if (!strcmp(mode, "epoll-idle")) return epoll_idle(0);
    if (!strcmp(mode, "poll-idle")) return epoll_idle(1);
    if (!strcmp(mode, "cond-idle")) return cond_idle();
    if (!strcmp(mode, "pipe-loop")) return pipe_loop();
    int ep = epoll_create1(0);
    struct epoll_event event;
    printf("READY\n");
    fflush(stdout);
    for (int tick = 0; tick < 25; tick++) epoll_wait(ep, &event, 1, 20);
    get_stuck(mode);
    return 0;
}
