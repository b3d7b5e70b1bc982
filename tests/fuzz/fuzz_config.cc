// libFuzzer target: the TOML configuration readers, on arbitrary text. The
// first byte picks the reader: even, mrcd's (app/mrcd/config.cc); odd,
// mrc-fabric's (lib/fabric/config.cc), whose result is then handed to
// Fabric::create as mrc-fabric does. Neither may crash, throw or accept a
// configuration that breaks what it promises: mrcd's has 1 to kMaxPlanes
// planes, a socket path that fits sockaddr_un and an MTU payload the core
// takes; a fabric configuration either builds a fabric or is refused with
// a message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "config.h"
#include "fabric/config.h"
#include "fabric/fabric.h"

using namespace mrc;

namespace {

void check(bool ok) {
    if (!ok) std::abort();
}

void mrcd_config(const std::string &text) {
    auto c = mrcd::load_config("fuzz.toml", text);
    if (!c) {
        check(!c.error().message.empty());
        return;
    }
    check(!c->plane_ip.empty() && c->plane_ip.size() <= kMaxPlanes);
    check(!c->socket.empty() && c->socket.size() < 108);
}

void fabric_config(const std::string &text) {
    fabric::FabricConfig base;
    base.planes = 2;
    auto c = fabric::parse_config(text, "fuzz.toml", base);
    if (!c) {
        check(!c.error().message.empty());
        return;
    }
    c->delay_slots = 64;  // bound the memory a fuzzed file can ask for
    auto f = fabric::Fabric::create(*c);
    if (!f) check(!f.error().message.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;  // mrcd reads a file when given no text
    const std::string text(reinterpret_cast<const char *>(data + 1), size - 1);
    if (data[0] % 2 == 0)
        mrcd_config(text);
    else
        fabric_config(text);
    return 0;
}
