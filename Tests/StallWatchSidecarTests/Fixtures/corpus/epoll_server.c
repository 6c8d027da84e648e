/* A small epoll service nobody instrumented, for the sidecar's corpus. Built -O2 -fomit-frame-pointer and
 * stripped by the test. It idles in epoll_wait (a timerfd ticks every 100 ms), then one tick handler stalls the
 * loop in the way MODE says, then it idles again and exits 0.
 *
 * usage: epoll_server MODE [STALL_MS]   (prints READY once the loop runs; for fsync, STALL_MS is the MiB written
 * into the page cache before READY, then synced by the one long fsync; busy takes a third argument, the number
 * of ticks, default 12) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/sem.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *mode;
static int stall_ms = 1000;
static pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER, lock_b = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cond = PTHREAD_COND_INITIALIZER;
static int pending, done, dirty_fd = -1;
static pthread_barrier_t held;
static int sem_set = -1, sem_go[2];
static pid_t sem_holder;

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

static void *holder(void *arg) {
    pthread_setname_np(pthread_self(), "lock-holder");
    pthread_mutex_lock(&lock_a);
    pthread_barrier_wait(&held);
    if (arg) pthread_mutex_lock(&lock_b); /* the other half of a deadlock: never returns */
    sleep_ms(stall_ms);
    pthread_mutex_unlock(&lock_a);
    return NULL;
}

static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;

/* For rwlock: a thread rebuilding a table holds its lock for writing while the loop wants to read it. */
static void *table_writer(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "table-writer");
    pthread_rwlock_wrlock(&table_lock);
    pthread_barrier_wait(&held);
    sleep_ms(stall_ms);
    pthread_rwlock_unlock(&table_lock);
    return NULL;
}

static void *sleeper(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "joined");
    sleep_ms(stall_ms);
    return NULL;
}

static void *idler(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "pool-idle");
    pause();
    return NULL;
}

static long spin(long n) {
    volatile long x = 0;
    for (long i = 0; i < n; i++) x += i * 7 % 13;
    return x;
}

/* A healthy handler: a few milliseconds of CPU per tick (thread CPU time, so it means work, not wall time). */
static void handle_tick(int cpu_ms) {
    struct timespec start, now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
    do {
        spin(2000);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < cpu_ms);
}

static void stall(void) {
    pthread_t t;
    if (!strcmp(mode, "cpu")) {
        handle_tick(stall_ms); /* STALL_MS of work (thread CPU time), however long a loaded machine makes it */
    } else if (!strcmp(mode, "nested-poll")) {
        int p[2];
        if (pipe(p) != 0) exit(3);
        struct pollfd fd = {p[0], POLLIN, 0};
        poll(&fd, 1, stall_ms); /* a client waiting for a reply that does not come */
    } else if (!strcmp(mode, "mutex") || !strcmp(mode, "many-threads")) {
        if (!strcmp(mode, "many-threads"))
            for (int i = 0; i < 300; i++) pthread_create(&t, NULL, idler, NULL);
        pthread_barrier_init(&held, NULL, 2);
        pthread_create(&t, NULL, holder, NULL);
        pthread_barrier_wait(&held);
        pthread_mutex_lock(&lock_a);
        pthread_mutex_unlock(&lock_a);
    } else if (!strcmp(mode, "timed-mutex")) {
        pthread_barrier_init(&held, NULL, 2);
        pthread_create(&t, NULL, holder, NULL);
        pthread_barrier_wait(&held);
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 10;
        if (pthread_mutex_timedlock(&lock_a, &deadline) == 0) pthread_mutex_unlock(&lock_a);
    } else if (!strcmp(mode, "deadlock")) {
        pthread_barrier_init(&held, NULL, 2);
        pthread_mutex_lock(&lock_b);
        pthread_create(&t, NULL, holder, (void *)1);
        pthread_barrier_wait(&held);
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += stall_ms / 1000 + 1;
        /* A deadlock that gives up, so the program can still exit: the loop's half times out. */
        if (pthread_mutex_timedlock(&lock_a, &deadline) == 0) pthread_mutex_unlock(&lock_a);
        pthread_mutex_unlock(&lock_b);
    } else if (!strcmp(mode, "rwlock")) {
        pthread_barrier_init(&held, NULL, 2);
        pthread_create(&t, NULL, table_writer, NULL);
        pthread_barrier_wait(&held);
        pthread_rwlock_rdlock(&table_lock);
        pthread_rwlock_unlock(&table_lock);
    } else if (!strcmp(mode, "sysv-sem")) {
        /* The service takes the semaphore a worker process holds (PostgreSQL's style of lock between processes). */
        struct sembuf take = {0, -1, 0}, give = {0, 1, 0};
        if (write(sem_go[1], "g", 1) != 1) exit(3);
        while (semop(sem_set, &take, 1) != 0 && errno == EINTR) {}
        semop(sem_set, &give, 1);
        waitpid(sem_holder, NULL, 0);
        semctl(sem_set, 0, IPC_RMID);
    } else if (!strcmp(mode, "join")) {
        pthread_create(&t, NULL, sleeper, NULL);
        pthread_join(t, NULL);
    } else if (!strcmp(mode, "fsync")) {
        struct timespec before, after;
        clock_gettime(CLOCK_MONOTONIC, &before);
        fsync(dirty_fd); /* one long fsync of the data written before READY */
        clock_gettime(CLOCK_MONOTONIC, &after);
        fprintf(stderr, "fsync %ld ms\n",
                (long)((after.tv_sec - before.tv_sec) * 1000 + (after.tv_nsec - before.tv_nsec) / 1000000));
        close(dirty_fd); /* the file stays (freeing its page cache would be a stall of its own): TMPDIR is the caller's */
    }
}

/* For sysv-sem: a SysV semaphore (value 1, a lock) and a worker process, "sem-holder", that takes it before the
 * loop runs and gives it back STALL_MS after the loop's go. */
static void start_semaphore_holder(void) {
    int held_pipe[2];
    sem_set = semget(IPC_PRIVATE, 1, 0600);
    if (sem_set < 0 || semctl(sem_set, 0, SETVAL, 1) != 0 || pipe(sem_go) != 0 || pipe(held_pipe) != 0) exit(3);
    sem_holder = fork();
    if (sem_holder < 0) exit(3);
    if (sem_holder == 0) {
        struct sembuf take = {0, -1, 0}, give = {0, 1, 0};
        char c;
        prctl(PR_SET_NAME, "sem-holder");
        if (semop(sem_set, &take, 1) != 0 || write(held_pipe[1], "h", 1) != 1) _exit(3);
        if (read(sem_go[0], &c, 1) != 1) _exit(3);
        sleep_ms(stall_ms);
        semop(sem_set, &give, 1);
        _exit(0);
    }
    char c;
    if (read(held_pipe[0], &c, 1) != 1) exit(3);
}

/* For fsync: STALL_MS MiB written into the page cache before the loop runs, so the stall is the sync alone (a
 * write into the page cache can itself block when the machine has much dirty data). */
static void write_dirty_data(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/epoll_server_fsync_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    dirty_fd = mkstemp(path);
    if (dirty_fd < 0) exit(3);
    static char block[1 << 20];
    memset(block, 'x', sizeof block);
    for (int i = 0; i < stall_ms; i++)
        if (write(dirty_fd, block, sizeof block) < 0) exit(3);
}

static void *notifier(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "notifier");
    for (int i = 0; i < 12; i++) {
        sleep_ms(250);
        pthread_mutex_lock(&park_lock);
        pending++;
        pthread_cond_signal(&park_cond);
        pthread_mutex_unlock(&park_lock);
    }
    pthread_mutex_lock(&park_lock);
    done = 1;
    pthread_cond_signal(&park_cond);
    pthread_mutex_unlock(&park_lock);
    return NULL;
}

int main(int argc, char **argv) {
    mode = argc > 1 ? argv[1] : "idle";
    if (argc > 2) stall_ms = atoi(argv[2]);
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!strcmp(mode, "condvar-idle")) { /* a loop that parks on a condition variable */
        pthread_t t;
        pthread_create(&t, NULL, notifier, NULL);
        printf("READY\n");
        pthread_mutex_lock(&park_lock);
        while (!done) {
            while (!pending && !done) pthread_cond_wait(&park_cond, &park_lock);
            pending = 0;
        }
        pthread_mutex_unlock(&park_lock);
        return 0;
    }
    if (!strcmp(mode, "fsync")) write_dirty_data();
    if (!strcmp(mode, "sysv-sem")) start_semaphore_holder();
    int ep = epoll_create1(0), tfd = timerfd_create(CLOCK_MONOTONIC, 0);
    struct itimerspec every = {{0, 100000000}, {0, 100000000}};
    timerfd_settime(tfd, 0, &every, NULL);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = tfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
    printf("READY\n");
    int busy = !strcmp(mode, "busy"), last = busy ? (argc > 3 ? atoi(argv[3]) : 12) : 30;
    for (int ticks = 0; ticks < last;) {
        struct epoll_event got[8];
        int n = epoll_wait(ep, got, 8, -1);
        for (int i = 0; i < n; i++) {
            uint64_t expirations;
            if (read(got[i].data.fd, &expirations, sizeof expirations) != sizeof expirations) continue;
            ++ticks;
            if (busy) handle_tick(stall_ms);
            else if (ticks == 10 && strcmp(mode, "idle") != 0) stall();
        }
    }
    return 0;
}
