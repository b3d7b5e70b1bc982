#include "client/sock.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>

namespace mrc::ipc {

int send_msg(int sock, const void *buf, size_t len, int fd, int fd2) {
    iovec iov{const_cast<void *>(buf), len};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    int fds[2];
    size_t nfds = 0;
    if (fd >= 0) fds[nfds++] = fd;
    if (fd2 >= 0) fds[nfds++] = fd2;
    alignas(cmsghdr) char ctl[CMSG_SPACE(2 * sizeof(int))];
    if (nfds > 0) {
        std::memset(ctl, 0, sizeof ctl);
        m.msg_control = ctl;
        m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        std::memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    for (;;) {
        const ssize_t n = ::sendmsg(sock, &m, MSG_NOSIGNAL);
        if (n >= 0) return n == ssize_t(len) ? 0 : -EIO;
        if (errno != EINTR) return -errno;
    }
}

ssize_t recv_msg(int sock, void *buf, size_t cap, int *fd, int *fd2) {
    if (fd != nullptr) *fd = -1;
    if (fd2 != nullptr) *fd2 = -1;
    iovec iov{buf, cap};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    alignas(cmsghdr) char ctl[CMSG_SPACE(4 * sizeof(int))];
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    ssize_t n;
    for (;;) {
        n = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
        if (n >= 0 || errno != EINTR) break;
    }
    if (n < 0) return -errno;
    for (cmsghdr *c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
            int got;
            std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (fd != nullptr && *fd < 0)
                *fd = got;
            else if (fd2 != nullptr && *fd2 < 0)
                *fd2 = got;
            else
                ::close(got);
        }
    }
    if (m.msg_flags & MSG_TRUNC) {
        for (int *f : {fd, fd2})
            if (f != nullptr && *f >= 0) {
                ::close(*f);
                *f = -1;
            }
        return -EMSGSIZE;
    }
    return n;
}

}  // namespace mrc::ipc
