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

// RFC 4291 2.2 text: eight groups of 1-4 hex digits (either case), one
// "::" for a run of zero groups, optionally the last 32 bits as a.b.c.d.
// No zone ("%eth0") and no prefix ("/64").
std::optional<Ipv6Addr> parse_ipv6(std::string_view s);
// RFC 5952: lower case, no leading zeros, the longest run of two or more
// zero groups (the first of equal ones) as "::".
std::string ipv6_string(const Ipv6Addr &a);

// "xx:xx:xx:xx:xx:xx", each part 1-2 hex digits (either case).
std::optional<MacAddr> parse_mac(std::string_view s);
std::string mac_string(const MacAddr &m);

}  // namespace mrc::wire
