// Signal relay (see sw_relay.h): one record per signal on a pipe, and whether the witness has it pending too.
#ifdef __linux__
#include "sw_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

static volatile int relay_fd = -1;
static volatile int witness_pid = 0;

void sw_relay_set_witness(int pid) { witness_pid = pid; }

int sw_signal_pending(int pid, int signo) {
    char path[32] = "/proc/";
    char digits[12];
    int n = 0;
    for (unsigned v = (unsigned)pid; v > 0 && n < 11; v /= 10) digits[n++] = (char)('0' + v % 10);
    int at = 6;
    while (n > 0) path[at++] = digits[--n];
    const char *tail = "/status";
    for (int i = 0; tail[i]; i++) path[at++] = tail[i];
    path[at] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[4096];
    ssize_t got = read(fd, text, sizeof text - 1);
    close(fd);
    if (got <= 0) return 0;
    text[got] = 0;
    static const char key[] = "\nShdPnd:";
    for (ssize_t i = 0; i + (ssize_t)sizeof key - 1 < got; i++) {
        int match = 1;
        for (size_t k = 0; k < sizeof key - 1; k++) {
            if (text[i + k] != key[k]) {
                match = 0;
                break;
            }
        }
        if (!match) continue;
        unsigned long long mask = 0;
        for (ssize_t j = i + (ssize_t)sizeof key - 1; j < got; j++) {
            char c = text[j];
            if (c == ' ' || c == '\t') continue;
            int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (digit < 0) break;
            mask = mask << 4 | (unsigned)digit;
        }
        return signo >= 1 && signo <= 64 && ((mask >> (signo - 1)) & 1);
    }
    return 0;
}

void sw_relay_handler(int signo, void *info, void *context) {
    (void)context;
    int saved = errno;
    const siginfo_t *si = info;
    sw_relay_record record = {.signo = signo};
    if (si) {
        record.code = si->si_code;
        // si_pid and si_uid are meaningful for signals a process sent; the kernel's own leave them 0.
        if (si->si_code <= 0) {
            record.pid = si->si_pid;
            record.uid = si->si_uid;
        }
    }
    int witness = witness_pid;
    if (witness > 0 && sw_signal_pending(witness, signo)) record.flags |= SW_RELAY_WITNESS_PENDING;
    int fd = relay_fd;
    if (fd >= 0) {
        ssize_t n;
        do n = write(fd, &record, sizeof record);
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
