#define _GNU_SOURCE
#include "dp_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int dp_socket_path_limit(void) {
    struct sockaddr_un address;
    return (int)sizeof(address.sun_path) - 1;
}

/// Fills `address` with `path`. A path longer than sun_path holds is reached through its
/// directory instead (`/proc/self/fd/<dir>/<name>`, Linux): `*directory` is then an open
/// O_PATH descriptor the caller closes after bind or connect.
static int fill_address(struct sockaddr_un *address, const char *path, int *directory) {
    *directory = -1;
    size_t length = strlen(path);
    if (length == 0) return -EINVAL;
    memset(address, 0, sizeof(*address));
    address->sun_family = AF_UNIX;
    if (length <= sizeof(address->sun_path) - 1) {
        memcpy(address->sun_path, path, length);
        return 0;
    }
    const char *slash = strrchr(path, '/');
    if (!slash || slash[1] == 0) return -ENAMETOOLONG;
    size_t parent = (size_t)(slash - path);
    char *name = strndup(path, parent == 0 ? 1 : parent);
    if (!name) return -ENOMEM;
    int fd = open(name, O_PATH | O_DIRECTORY | O_CLOEXEC);
    int error = errno;
    free(name);
    if (fd < 0) return -error;
    int written = snprintf(address->sun_path, sizeof(address->sun_path), "/proc/self/fd/%d/%s", fd, slash + 1);
    if (written < 0 || (size_t)written >= sizeof(address->sun_path)) {
        close(fd);
        return -ENAMETOOLONG;
    }
    *directory = fd;
    return 0;
}

int dp_socket_listen(const char *path, int backlog) {
    struct sockaddr_un address;
    int directory;
    int status = fill_address(&address, path, &directory);
    if (status < 0) return status;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int error = errno;
        if (directory >= 0) close(directory);
        return -error;
    }
    status = bind(fd, (struct sockaddr *)&address, sizeof(address));
    int error = errno;
    // Then mode 0600 whatever the umask: only its user may connect. (Not by changing the
    // umask around bind: it is process-wide, and other threads create files meanwhile.)
    if (status == 0 && chmod(address.sun_path, 0600) < 0) {
        error = errno;
        unlink(address.sun_path);
        status = -1;
    }
    if (directory >= 0) close(directory);
    if (status < 0) {
        close(fd);
        return -error;
    }
    if (listen(fd, backlog) < 0) {
        int listenError = errno;
        close(fd);
        return -listenError;
    }
    return fd;
}

int dp_socket_connect(const char *path) {
    return dp_socket_connect_within(path, -1);
}

int dp_socket_accept(int listener) {
    for (;;) {
        int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) return fd;
        if (errno != EINTR) return -errno;
    }
}

int dp_socket_peer(int fd, int *pid, unsigned *uid, unsigned *gid) {
    struct ucred credentials;
    socklen_t length = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) < 0) return -errno;
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

ssize_t dp_socket_send(int fd, const void *bytes, size_t length, int passed) {
    struct iovec vector = {.iov_base = (void *)bytes, .iov_len = length};
    struct msghdr message = {0};
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    union {
        char buffer[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    if (passed >= 0) {
        memset(&control, 0, sizeof(control));
        message.msg_control = control.buffer;
        message.msg_controllen = sizeof(control.buffer);
        struct cmsghdr *header = CMSG_FIRSTHDR(&message);
        header->cmsg_level = SOL_SOCKET;
        header->cmsg_type = SCM_RIGHTS;
        header->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(header), &passed, sizeof(int));
    }
    for (;;) {
        ssize_t sent = sendmsg(fd, &message, MSG_NOSIGNAL);
        if (sent >= 0) return sent;
        if (errno != EINTR) return -errno;
    }
}

ssize_t dp_socket_receive(int fd, void *bytes, size_t length, int *received) {
    *received = -1;
    struct iovec vector = {.iov_base = bytes, .iov_len = length};
    struct msghdr message = {0};
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    union {
        char buffer[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } control;
    message.msg_control = control.buffer;
    message.msg_controllen = sizeof(control.buffer);
    ssize_t count;
    for (;;) {
        count = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
        if (count >= 0) break;
        if (errno != EINTR) return -errno;
    }
    int descriptors = 0;
    int first = -1;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
        size_t n = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int passed;
            memcpy(&passed, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
            if (descriptors == 0) first = passed; else close(passed);
            descriptors++;
        }
    }
    if (descriptors > 1 || (message.msg_flags & MSG_CTRUNC)) {
        if (first >= 0) close(first);
        return -EPROTO;
    }
    *received = first;
    return count;
}

int dp_socket_pair(int pair[2]) {
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0) return -errno;
    return 0;
}

// 1 when `fd` is ready for `events` (or hung up or failed) within `milliseconds`, 0 on timeout.
static int wait_for(int fd, short events, int milliseconds) {
    struct pollfd entry = {.fd = fd, .events = events};
    for (;;) {
        int ready = poll(&entry, 1, milliseconds);
        if (ready >= 0) return ready > 0 ? 1 : 0;
        if (errno != EINTR) return -errno;
    }
}

int dp_socket_wait_readable(int fd, int milliseconds) {
    return wait_for(fd, POLLIN, milliseconds);
}

int dp_socket_wait_writable(int fd, int milliseconds) {
    return wait_for(fd, POLLOUT, milliseconds);
}

int dp_process_harden(void) {
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) return -errno;
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) < 0) return -errno;
    return 0;
}

int dp_process_is_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
}

int dp_socket_connect_within(const char *path, int milliseconds) {
    struct sockaddr_un address;
    int directory;
    int status = fill_address(&address, path, &directory);
    if (status < 0) return status;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int error = errno;
    if (fd >= 0 && milliseconds >= 0) {
        // A Unix-domain connect waits for room in the listener's queue for at most the send timeout.
        struct timeval limit = {.tv_sec = milliseconds / 1000, .tv_usec = (milliseconds % 1000) * 1000};
        if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit)) < 0) {
            error = errno;
            close(fd);
            fd = -1;
        }
    }
    if (fd >= 0) {
        while ((status = connect(fd, (struct sockaddr *)&address, sizeof(address))) < 0 && errno == EINTR) {}
        error = errno;
        if (status < 0) {
            close(fd);
            fd = -1;
        }
    }
    if (directory >= 0) close(directory);
    if (fd < 0) return error == EINPROGRESS ? -EAGAIN : -error;
    return fd;
}

int dp_socket_set_send_timeout(int fd, int milliseconds) {
    struct timeval limit = {.tv_sec = milliseconds / 1000, .tv_usec = (milliseconds % 1000) * 1000};
    if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit)) < 0) return -errno;
    return 0;
}

int dp_socket_inherited_listener(int fd, char *path, size_t capacity) {
    int value = 0;
    socklen_t length = sizeof(value);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &value, &length) < 0) return -errno;
    if (value != AF_UNIX) return -EAFNOSUPPORT;
    length = sizeof(value);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &length) < 0) return -errno;
    if (value != SOCK_STREAM) return -EPROTOTYPE;
    length = sizeof(value);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &length) < 0) return -errno;
    if (!value) return -EINVAL;
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0) return -errno;
    struct sockaddr_un address;
    socklen_t addressLength = sizeof(address);
    memset(&address, 0, sizeof(address));
    if (getsockname(fd, (struct sockaddr *)&address, &addressLength) < 0) return -errno;
    size_t name = addressLength > offsetof(struct sockaddr_un, sun_path) ? addressLength - offsetof(struct sockaddr_un, sun_path) : 0;
    if (name == 0 || address.sun_path[0] == 0) {
        if (capacity > 0) path[0] = 0;
        return 0;
    }
    size_t copied = strnlen(address.sun_path, name);
    if (copied >= capacity) return -ENAMETOOLONG;
    memcpy(path, address.sun_path, copied);
    path[copied] = 0;
    return 0;
}

long long dp_raise_descriptor_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) < 0) return -errno;
    if (limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &limit) < 0) return -errno;
    }
    return limit.rlim_cur == RLIM_INFINITY ? (long long)1 << 40 : (long long)limit.rlim_cur;
}
