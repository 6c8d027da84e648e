/* The C side of cgo_service (see service.h). Compiled by cgo with the system C compiler. */
#define _GNU_SOURCE
#include "service.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t held;
static int writer_fd = -1;

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

static void *holder(void *arg) {
    pthread_setname_np(pthread_self(), "lock-holder");
    pthread_mutex_lock(&held_lock);
    pthread_barrier_wait(&held);
    sleep_ms((int)(long)arg);
    pthread_mutex_unlock(&held_lock);
    return NULL;
}

static void *writer(void *arg) {
    pthread_setname_np(pthread_self(), "pipe-writer");
    sleep_ms((int)(long)arg);
    if (write(writer_fd, "x", 1) != 1) {}
    return NULL;
}

__attribute__((noinline)) void cgo_service_lock_held_mutex(int ms) {
    pthread_t t;
    pthread_barrier_init(&held, NULL, 2);
    pthread_create(&t, NULL, holder, (void *)(long)ms);
    pthread_barrier_wait(&held);
    pthread_mutex_lock(&held_lock);
    pthread_mutex_unlock(&held_lock);
    pthread_join(t, NULL);
}

__attribute__((noinline)) void cgo_service_sleep(int ms) { sleep_ms(ms); }

__attribute__((noinline)) void cgo_service_read_pipe(int ms) {
    int p[2];
    char c;
    pthread_t t;
    if (pipe(p) != 0) return;
    writer_fd = p[1];
    pthread_create(&t, NULL, writer, (void *)(long)ms);
    if (read(p[0], &c, 1) != 1) {}
    pthread_join(t, NULL);
    close(p[0]);
    close(p[1]);
}
