// Addresses as text: for configuration files, flags, JSON and logs. The
// parsers take exactly the usual form and nothing around it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "wire/net.h"

namespace mrc::wire {

// "a.b.c.d", each part a decimal number 0-255 of 1-3 digits; host order.
std::optional<uint32_t> parse_ipv4(std::string_view s);
std::string ipv4_string(uint32_t ip);

// "xx:xx:xx:xx:xx:xx", each part 1-2 hex digits (either case).
std::optional<MacAddr> parse_mac(std::string_view s);
std::string mac_string(const MacAddr &m);

}  // namespace mrc::wire
