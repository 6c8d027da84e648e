// Kernel queries about objects another process shares with the watched one, that Swift cannot make directly.
#ifndef SW_PEERS_H
#define SW_PEERS_H
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The process id the kernel keeps as the last to operate on semaphore `semnum` of SysV set `semid`
/// (semctl GETPID), in the caller's IPC namespace; `waiters` gets the number of processes waiting for its value to
/// grow (GETNCNT; -1 when unreadable). Returns the pid (0: none yet) or -errno. Reads only. Not async-signal-safe.
long sw_sem_last_pid(int semid, int semnum, long *waiters);

/// The inode of the Unix socket connected to the socket with inode `inode` (sock_diag netlink, UNIX_DIAG_PEER), in
/// the caller's network namespace. Returns the peer's inode, 0 when it has none, or -errno (-ENOENT: no such socket;
/// -EPROTONOSUPPORT/-ENOENT when the kernel lacks unix_diag). Not async-signal-safe.
long sw_unix_peer_inode(uint32_t inode);

#ifdef __cplusplus
}
#endif
#endif
