/* A process whose main thread waits for a mutex another thread holds, for `stallwatch dump`. A third thread
 * keeps timed sleeps and polls going and reports any that fail with EINTR, so a test can tell that a dump left
 * the process running and interrupted nothing.
 *
 * usage: lock_owner   (prints READY once the main thread is about to block; ALIVE N every 100 ms; EINTR …
 * whenever a call is interrupted) */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t ready;

static void __attribute__((noinline)) hold_lock_forever(void) {
    pthread_mutex_lock(&held);
    pthread_barrier_wait(&ready);
    for (;;) {
        struct timespec t = {0, 200 * 1000000L};
        if (nanosleep(&t, NULL) != 0) printf("EINTR nanosleep in lock-holder\n");
    }
}

static void *holder(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "lock-holder");
    hold_lock_forever();
    return NULL;
}

static void *ticker(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "ticker");
    for (long n = 1;; n++) {
        if (poll(NULL, 0, 20) < 0 && errno == EINTR) printf("EINTR poll in ticker\n");
        struct timespec t = {0, 30 * 1000000L};
        if (clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL) == EINTR) printf("EINTR clock_nanosleep in ticker\n");
        if (n % 2 == 0) printf("ALIVE %ld\n", n / 2);
    }
    return NULL;
}

static void __attribute__((noinline)) wait_for_lock(void) {
    pthread_mutex_lock(&held); /* never returns: the holder never lets go */
    pthread_mutex_unlock(&held);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    pthread_t a, b;
    pthread_barrier_init(&ready, NULL, 2);
    pthread_create(&a, NULL, holder, NULL);
    pthread_barrier_wait(&ready);
    pthread_create(&b, NULL, ticker, NULL);
    printf("READY\n");
    wait_for_lock();
    return 0;
}
