// Signal witness (see sw_witness.h): forked, never exec'd; after the fork the child makes system calls only.
#ifdef __linux__
#include "sw_witness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/// Closes descriptors `first` to `last` (close_range, or one by one below 4096 where it is missing).
static void close_span(unsigned first, unsigned last) {
    if (first > last) return;
    if (syscall(SYS_close_range, first, last, 0) == 0) return;
    for (unsigned fd = first; fd <= last && fd < 4096; fd++) close((int)fd);
}

/// Closes every descriptor of the child but `keep_a` and `keep_b`: nothing of the parent's (its terminal, the
/// pipes its output goes to) is held open by the witness.
static void close_all_but(int keep_a, int keep_b) {
    unsigned low = (unsigned)(keep_a < keep_b ? keep_a : keep_b);
    unsigned high = (unsigned)(keep_a < keep_b ? keep_b : keep_a);
    if (low > 0) close_span(0, low - 1);
    close_span(low + 1, high - 1);
    close_span(high + 1, ~0u);
}

static void write_all(int fd, const void *bytes, size_t length) {
    const char *p = bytes;
    while (length > 0) {
        ssize_t n = write(fd, p, length);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) _exit(0);  // the reader is gone: so is the reason to witness
        p += n;
        length -= (size_t)n;
    }
}

/// The witness itself: every signal stays blocked (inherited across the fork); `watched` arrive on a signalfd.
static void witness_main(const sigset_t *watched, int report_fd, int lifeline_fd) {
    close_all_but(report_fd, lifeline_fd);
    int sfd = signalfd(-1, watched, SFD_CLOEXEC);
    if (sfd < 0) _exit(1);
    // Named once set up: a process that bears the name holds its three descriptors and nothing it inherited.
    prctl(PR_SET_NAME, "stallwatch-sigw", 0, 0, 0);
    struct pollfd fds[2] = {{.fd = sfd, .events = POLLIN}, {.fd = lifeline_fd, .events = POLLIN}};
    for (;;) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            _exit(1);
        }
        if (fds[0].revents & POLLIN) {
            struct signalfd_siginfo infos[16];
            ssize_t n = read(sfd, infos, sizeof infos);
            for (ssize_t i = 0; n > 0 && i < n / (ssize_t)sizeof infos[0]; i++) {
                sw_relay_record record = {.signo = (int32_t)infos[i].ssi_signo, .code = infos[i].ssi_code};
                if (infos[i].ssi_code <= 0) {
                    record.pid = (int32_t)infos[i].ssi_pid;
                    record.uid = infos[i].ssi_uid;
                }
                write_all(report_fd, &record, sizeof record);
            }
        }
        // End of file or an error on the lifeline: the parent is gone or wants the witness gone.
        if (fds[1].revents) _exit(0);
    }
}

int sw_witness_start(const int *signals, size_t count, pid_t *pid, int *report_fd, int *lifeline_fd) {
    int report[2], lifeline[2];
    if (pipe2(report, O_CLOEXEC) != 0) return -errno;
    if (pipe2(lifeline, O_CLOEXEC) != 0) {
        int saved = errno;
        close(report[0]);
        close(report[1]);
        return -saved;
    }
    sigset_t watched, all, previous;
    sigemptyset(&watched);
    for (size_t i = 0; i < count; i++) sigaddset(&watched, signals[i]);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    pid_t child = fork();
    if (child == 0) witness_main(&watched, report[1], lifeline[0]);
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    close(report[1]);
    close(lifeline[0]);
    if (child < 0) {
        close(report[0]);
        close(lifeline[1]);
        return -saved;
    }
    fcntl(report[0], F_SETFL, fcntl(report[0], F_GETFL) | O_NONBLOCK);
    *pid = child;
    *report_fd = report[0];
    *lifeline_fd = lifeline[1];
    return 0;
}

void sw_witness_stop(pid_t pid, int lifeline_fd) {
    close(lifeline_fd);
    // Killed, not only left to see the lifeline's end: a process this one forked without exec since (the capture
    // helper) holds a copy of the lifeline until it exits.
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR) {}
}

#endif
