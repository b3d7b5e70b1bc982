// Whole-message I/O on a SOCK_SEQPACKET Unix socket, with up to two file
// descriptors attached (SCM_RIGHTS). Shared by libmrc and mrcd.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace mrc::ipc {

// Sends `len` bytes (and fd, then fd2, those >= 0) as one message. Returns
// 0, or -errno.
int send_msg(int sock, const void *buf, size_t len, int fd = -1, int fd2 = -1);
// Receives one message of at most cap bytes into buf. Returns its length
// (0: the peer closed), or -errno; -EMSGSIZE when it was longer than cap
// (the rest is discarded). The descriptors that came with it go to *fd and
// *fd2 (else -1; fd2 may be null); extra descriptors are closed.
ssize_t recv_msg(int sock, void *buf, size_t cap, int *fd, int *fd2 = nullptr);

}  // namespace mrc::ipc
