// Signal relay (see sw_relay.h): one byte per signal on a pipe; the handler does nothing else.
#ifdef __linux__
#include "sw_relay.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static volatile int relay_fd = -1;

void sw_relay_handler(int signo, void *info, void *context) {
    (void)context;
    int saved = errno;
    const siginfo_t *si = info;
    uint8_t byte = (uint8_t)(signo & 0x7f);
    if (si && si->si_code > 0) byte |= SW_RELAY_FROM_KERNEL;
    int fd = relay_fd;
    if (fd >= 0) {
        ssize_t n;
        do n = write(fd, &byte, 1);
        while (n < 0 && errno == EINTR);
    }
    errno = saved;
}

static void relay_entry(int signo, siginfo_t *info, void *context) { sw_relay_handler(signo, info, context); }

int sw_relay_install(int write_fd, const int *signals, size_t count) {
    relay_fd = write_fd;
    for (size_t i = 0; i < count; i++) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = relay_entry;
        action.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&action.sa_mask);
        if (sigaction(signals[i], &action, NULL) != 0) return -errno;
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, signals[i]);
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    }
    return 0;
}
#endif
