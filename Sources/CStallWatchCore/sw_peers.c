// semctl and sock_diag queries: who last operated a SysV semaphore, which Unix socket is connected to which.
#ifdef __linux__
#include "sw_peers.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <string.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

long sw_sem_last_pid(int semid, int semnum, long *waiters) {
    // semctl is variadic (Swift cannot call it); GETPID and GETNCNT take no fourth argument and change nothing.
    int pid = semctl(semid, semnum, GETPID);
    if (pid < 0) return -errno;
    if (waiters) {
        int n = semctl(semid, semnum, GETNCNT);
        *waiters = n < 0 ? -1 : n;
    }
    return pid;
}

long sw_unix_peer_inode(uint32_t inode) {
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) return -errno;
    // The kernel answers a single-socket request at once; the timeout only bounds a kernel that never does.
    struct timeval limit = {0, 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    struct {
        struct nlmsghdr header;
        struct unix_diag_req request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;
    message.request.sdiag_family = AF_UNIX;
    message.request.udiag_states = ~0u;
    message.request.udiag_ino = inode;
    message.request.udiag_show = UDIAG_SHOW_PEER;
    message.request.udiag_cookie[0] = message.request.udiag_cookie[1] = ~0u;  // INET_DIAG_NOCOOKIE: any socket
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(fd, &message, sizeof message, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        int err = errno;
        close(fd);
        return -err;
    }
    long buffer[1024];
    ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    int err = errno;
    close(fd);
    if (n < 0) return -err;
    long result = -ENOENT;
    for (struct nlmsghdr *h = (struct nlmsghdr *)buffer; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
        if (h->nlmsg_type == NLMSG_ERROR) {
            struct nlmsgerr *e = NLMSG_DATA(h);
            if (h->nlmsg_len < NLMSG_LENGTH(sizeof *e)) return -EPROTO;
            return e->error < 0 ? e->error : -ENOENT;
        }
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct unix_diag_msg)))
            continue;
        struct unix_diag_msg *m = NLMSG_DATA(h);
        if (m->udiag_ino != inode) continue;
        result = 0;
        int length = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
        for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, length); a = RTA_NEXT(a, length)) {
            if (a->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
                uint32_t peer;
                memcpy(&peer, RTA_DATA(a), sizeof peer);
                result = peer;
            }
        }
    }
    return result;
}
#endif
