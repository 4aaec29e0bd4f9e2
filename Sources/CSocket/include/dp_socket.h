// The socket and process calls Swift cannot make directly: ancillary data (SCM_RIGHTS)
// and its CMSG_* macros, SO_PEERCRED's struct ucred, variadic prctl, socket timeouts and
// limits (struct timeval, struct rlimit). Only SocketBridge
// imports this module. Every function returns a value >= 0, or -errno on failure.
#ifndef DP_SOCKET_H
#define DP_SOCKET_H

#include <stddef.h>
#include <sys/types.h>

/// The longest path a Unix-domain socket address holds (sun_path less its NUL).
int dp_socket_path_limit(void);
/// A listening stream socket bound at `path` (mode 0600, close-on-exec). A path longer than
/// a socket address holds is bound through its directory (/proc/self/fd/<dir>/<name>).
int dp_socket_listen(const char *path, int backlog);
/// A stream socket connected to `path` (close-on-exec); long paths as for listening.
int dp_socket_connect(const char *path);
/// The next connection on a listening socket (close-on-exec); EINTR retried.
int dp_socket_accept(int listener);
/// The credentials the kernel recorded for the peer at connect time.
int dp_socket_peer(int fd, int *pid, unsigned *uid, unsigned *gid);
/// Sends up to `length` bytes (MSG_NOSIGNAL), with `passed` (when >= 0) as SCM_RIGHTS.
ssize_t dp_socket_send(int fd, const void *bytes, size_t length, int passed);
/// Receives up to `length` bytes; a descriptor sent with them (SCM_RIGHTS, close-on-exec)
/// goes to `*received` (else -1). More than one descriptor, or truncated ancillary data,
/// closes them all and fails with -EPROTO.
ssize_t dp_socket_receive(int fd, void *bytes, size_t length, int *received);
/// A connected pair of stream sockets (close-on-exec).
int dp_socket_pair(int pair[2]);
/// Waits up to `milliseconds` for `fd` to be readable or hung up: 1 if so, 0 on timeout.
int dp_socket_wait_readable(int fd, int milliseconds);
/// Waits up to `milliseconds` for `fd` (a socket, pipe or file) to take a write, or to have
/// hung up or failed (the write then says why): 1 if so, 0 on timeout.
int dp_socket_wait_writable(int fd, int milliseconds);
/// As dp_socket_connect, waiting at most `milliseconds` for room in the listener's queue
/// (-EAGAIN then; negative: as long as it takes); the socket keeps that send timeout.
int dp_socket_connect_within(const char *path, int milliseconds);
/// Sets the send timeout (SO_SNDTIMEO): a send that moves no byte for that long fails with -EAGAIN.
int dp_socket_set_send_timeout(int fd, int milliseconds);
/// Checks that `fd` (inherited, socket activation) is a listening Unix-domain stream socket,
/// sets its close-on-exec flag and writes the path it is bound to into `path` (empty when
/// unnamed or abstract).
int dp_socket_inherited_listener(int fd, char *path, size_t capacity);
/// Raises the soft limit on open descriptors (RLIMIT_NOFILE) to the hard one; returns the limit now.
long long dp_raise_descriptor_limit(void);
/// Makes the process non-dumpable (no ptrace or /proc/<pid>/mem for same-user processes)
/// and sets its core file limit to zero.
int dp_process_harden(void);
/// 1 if the process is dumpable, 0 if not.
int dp_process_is_dumpable(void);
/// From now on every heap block freed (or moved by realloc) is zeroed first (dp_memory.c);
/// -ENOTSUP where free cannot be interposed (sanitizer builds, not glibc).
int dp_process_wipe_freed_memory(void);
/// 1 once dp_process_wipe_freed_memory succeeded, else 0.
int dp_process_wipes_freed_memory(void);

#endif
