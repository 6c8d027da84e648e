/* loop_group: a service that runs a group of event loops, as a server library with an event-loop group does.
 *
 * The main thread starts COUNT loop threads named "svc-loop-<i>" (each waits in an epoll of its own on a timerfd
 * ticking every 50 ms), prints READY with their thread ids, then parks on a condition variable until told to
 * stop, as a service's main thread waits for shutdown. At its tenth tick loop 0 gets stuck: it starts a helper thread
 * (which takes the loop's name, as every new thread takes its creator's) that takes a mutex and keeps it, then
 * waits for that mutex itself. The process prints STUCK with the ids once loop 0 waits, and runs until killed.
 *
 * usage: loop_group [COUNT]   (default 3) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cond = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t held, started;

static pid_t tid(void) { return (pid_t)syscall(SYS_gettid); }

static void *hold_cache_lock(void *arg) {
    (void)arg;
    pthread_mutex_lock(&cache_lock);
    printf("HELPER %d\n", tid());
    pthread_barrier_wait(&held);
    for (;;) pause();
    return NULL;
}

/* The handler's blocking call: loop 0 waits for the lock its helper keeps. */
static __attribute__((noinline)) void refresh_cache(void) {
    pthread_t helper;
    pthread_create(&helper, NULL, hold_cache_lock, NULL);
    pthread_barrier_wait(&held);
    printf("STUCK %d\n", tid());
    pthread_mutex_lock(&cache_lock);
}

static void *run_loop(void *arg) {
    int index = (int)(intptr_t)arg;
    char name[16];
    snprintf(name, sizeof name, "svc-loop-%d", index);
    pthread_setname_np(pthread_self(), name);
    int ep = epoll_create1(0), tfd = timerfd_create(CLOCK_MONOTONIC, 0);
    struct itimerspec every = {{0, 50000000}, {0, 50000000}};
    timerfd_settime(tfd, 0, &every, NULL);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = tfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);
    printf("LOOP %d %d\n", index, tid());
    pthread_barrier_wait(&started);
    for (int ticks = 0;;) {
        struct epoll_event got[4];
        int n = epoll_wait(ep, got, 4, -1);
        for (int i = 0; i < n; i++) {
            uint64_t expirations;
            if (read(got[i].data.fd, &expirations, sizeof expirations) != sizeof expirations) continue;
            if (index == 0 && ++ticks == 10) refresh_cache();
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 3;
    setvbuf(stdout, NULL, _IONBF, 0);
    pthread_barrier_init(&held, NULL, 2);
    pthread_barrier_init(&started, NULL, (unsigned)count + 1);
    for (int i = 0; i < count; i++) {
        pthread_t t;
        pthread_create(&t, NULL, run_loop, (void *)(intptr_t)i);
    }
    pthread_barrier_wait(&started);
    printf("READY %d\n", getpid());
    pthread_mutex_lock(&park_lock);
    for (;;) pthread_cond_wait(&park_cond, &park_lock);
}
