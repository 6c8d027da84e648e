/* Holds one thread of another process in a ptrace stop until standard input closes, then lets it go: a thread
 * of a tool under test that is stuck while the rest of its process runs on. PTRACE_SEIZE + PTRACE_INTERRUPT
 * stop only that thread; if this program dies the kernel detaches and the thread runs again.
 *
 * usage: freeze_thread TID   (prints FROZEN once the thread is stopped, THAWED after the detach) */
#define _GNU_SOURCE
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    pid_t tid = (pid_t)atoi(argv[1]);
    if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0) { perror("PTRACE_SEIZE"); return 1; }
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) { perror("PTRACE_INTERRUPT"); return 1; }
    int status;
    if (waitpid(tid, &status, __WALL) != tid) { perror("waitpid"); return 1; }
    printf("FROZEN\n");
    fflush(stdout);
    char buffer[64];
    while (read(0, buffer, sizeof buffer) > 0) {}
    /* A signal that arrived during the stop is handed back at the detach. */
    int pending = WIFSTOPPED(status) && (status >> 16) == 0 ? WSTOPSIG(status) : 0;
    if (pending == SIGTRAP || pending == SIGSTOP) pending = 0;
    ptrace(PTRACE_DETACH, tid, 0, (void *)(long)pending);
    printf("THAWED\n");
    fflush(stdout);
    return 0;
}
