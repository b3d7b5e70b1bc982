// TCP ports for tests' out-of-band channels, asked of the kernel rather
// than derived from the PID (which says nothing about what else is bound).
#pragma once

#include <cstdint>

namespace mrc::test {

// A TCP port that was free on every address a moment ago: the kernel picks
// it (bind to port 0) and the socket is closed again; 0 when none could be
// had. The kernel spreads such picks over its ephemeral range, so the
// program the test starts next can almost always bind it (a small race,
// unlike a port derived from the PID, which may be taken for good).
uint16_t free_tcp_port();

}  // namespace mrc::test
